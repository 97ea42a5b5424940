"""The Kubernetes API, through the ``kubernetes`` client: writing the caBundle into webhook configurations."""

from __future__ import annotations

from typing import Any

from kubernetes import client, config


class ClusterError(RuntimeError):
    """The API could not be reached or refused the change."""


def _api_client(kubeconfig: str | None) -> Any:
    try:
        if kubeconfig:
            return config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
            return client.ApiClient()
        except config.ConfigException:
            return config.new_client_from_config()  # type: ignore[no-untyped-call]
    except (config.ConfigException, OSError) as exc:
        raise ClusterError(f"no usable kubeconfig: {exc}") from None


def patch_ca_bundle(bundle: str, names: list[str], kubeconfig: str | None = None) -> list[str]:
    """Set ``caBundle`` on every webhook of the named Validating/MutatingWebhookConfigurations."""
    api = client.AdmissionregistrationV1Api(_api_client(kubeconfig))
    patched: list[str] = []
    for name in names:
        found = False
        for kind, read, patch in (
            ("ValidatingWebhookConfiguration", api.read_validating_webhook_configuration,
             api.patch_validating_webhook_configuration),
            ("MutatingWebhookConfiguration", api.read_mutating_webhook_configuration,
             api.patch_mutating_webhook_configuration),
        ):
            try:
                current = read(name)
            except client.ApiException as exc:
                if exc.status == 404:
                    continue
                raise ClusterError(f"reading {kind} {name}: {exc.reason}") from None
            body = {"webhooks": [{"name": w.name, "clientConfig": {"caBundle": bundle}}
                                 for w in current.webhooks or []]}
            try:
                patch(name, body)
            except client.ApiException as exc:
                raise ClusterError(f"patching {kind} {name}: {exc.reason}") from None
            patched.append(f"{kind}/{name}")
            found = True
        if not found:
            raise ClusterError(f"no webhook configuration named {name}")
    return patched
