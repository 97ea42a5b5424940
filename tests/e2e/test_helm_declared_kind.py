"""A kind the user declares in the chart's values, judged after a real ``helm upgrade`` on the real API server.

The chart is installed with no declared kinds and none of the built-in kinds' CRDs: it installs, Pods are judged
as ever. A custom resource of a kind the cluster serves (a tiny CRD written here) is admitted with a fractional
CPU, since qos-guard does not know where its Pod template is. ``helm upgrade`` with ``config.workloads`` naming
it: the webhook rules and the audit RBAC the chart generates now include it, and the same object is refused with
its template named. The webhook runs outside the cluster (no kubelet here), started, as the Deployment's
rollout would be (its ``checksum/config`` changes), with the configuration the chart renders, which the test holds
equal to the ConfigMap helm stored."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import waiting
from tests.binaries import binary
from tests.e2e.conftest import CHART, Cluster, compliant_pod, violating_pod
from tests.serving import Server, start_server
from webhook.core.workloads import KINDS

RELEASE, NAMESPACE, APPS = "declared", "e2e-declared", "e2e-declared-apps"
FULLNAME = f"{RELEASE}-qos-guard"
SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{FULLNAME}"
DECLARED = {"group": "serving.example.com", "version": "v1", "kind": "InferencePool", "plural": "inferencepools",
            "templates": ["spec.template.spec"]}
POOL_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "inferencepools.serving.example.com"},
    "spec": {"group": "serving.example.com", "scope": "Namespaced",
             "names": {"plural": "inferencepools", "singular": "inferencepool", "kind": "InferencePool"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def _pool(name: str, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "serving.example.com/v1", "kind": "InferencePool", "metadata": {"name": name},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [
                {"name": "vllm", "image": "registry.invalid/vllm:1",
                 "resources": {"limits": {"cpu": cpu, "memory": "8Gi"}}}]}}}}


def _helm(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary("helm"), *args, "--namespace", NAMESPACE], capture_output=True, text=True,
                          timeout=180, env=cluster.env)


def _rendered_config(cluster: Cluster, pki: Path, *values: str) -> str:
    """The configuration the chart renders for ``values`` (helm template cannot read the Secret: its CA given)."""
    bundle = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
    proc = _helm(cluster, "template", RELEASE, str(CHART), *values, "--set", f"existingSecretCABundle={bundle}",
                 "--show-only", "templates/configmap.yaml")
    assert proc.returncode == 0, proc.stderr
    config: str = yaml.safe_load(proc.stdout)["data"]["config.yaml"]
    return config


def _serve(cluster: Cluster, folder: Path, config: str, pki: Path) -> Server:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(config)
    return start_server(folder / "serve", "--config", str(folder / "config.yaml"), cert_dir=pki)


def _apply(cluster: Cluster, obj: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("apply", "-n", APPS, *extra, "-f", "-", stdin=obj)


def _can_list_pools(cluster: Cluster) -> str:
    return cluster.kubectl("auth", "can-i", "list", "inferencepools.serving.example.com", "--as",
                           SERVICE_ACCOUNT).stdout.strip()


@pytest.fixture()
def release(cluster: Cluster, tmp_path: Path) -> Iterator[Path]:
    """A serving certificate for 127.0.0.1 in the release's Secret (``existingSecret``: helm keeps its CA in the
    webhooks' caBundle across the upgrade); the release, the CRD and the namespaces are removed afterwards."""
    cluster.namespace(NAMESPACE)
    cluster.namespace(APPS, "enforce")
    pki = tmp_path / "pki"
    certs = cluster.qos_guard("certs", "--service", FULLNAME, "--namespace", NAMESPACE, "--extra-san",
                              "127.0.0.1", "--output-dir", str(pki), "--days", "1")
    assert certs.returncode == 0, certs.stderr
    cluster.kubectl("create", "secret", "generic", "declared-tls", "-n", NAMESPACE, "--type", "kubernetes.io/tls",
                    f"--from-file=tls.crt={pki / 'tls.crt'}", f"--from-file=tls.key={pki / 'tls.key'}",
                    f"--from-file=ca.crt={pki / 'ca.crt'}", check=True)
    try:
        yield pki
    finally:
        _helm(cluster, "uninstall", RELEASE, "--wait")
        cluster.kubectl("delete", "crd", POOL_CRD["metadata"]["name"], "--ignore-not-found", "--wait=false")
        cluster.kubectl("delete", "namespace", APPS, NAMESPACE, "--ignore-not-found", "--wait=false")


def test_a_declared_kind_is_judged_after_helm_upgrade(cluster: Cluster, release: Path, tmp_path: Path) -> None:
    base = ["--set", "existingSecret=declared-tls", "--set", "rbac.audit=true"]
    served = set(cluster.kubectl("get", "crd", "-o", "jsonpath={.items[*].spec.group}", check=True).stdout.split())
    assert not served & {k.group for k in KINDS.values() if not k.core}, served  # none of the built-in CRDs

    first = _serve(cluster, tmp_path / "before", _rendered_config(cluster, release, *base), release)
    second: Server | None = None
    try:
        values = [*base, "--set", f"webhook.url=https://127.0.0.1:{first.port}"]
        install = _helm(cluster, "install", RELEASE, str(CHART), *values)
        assert install.returncode == 0, install.stderr
        stored = cluster.get("configmap", FULLNAME, "-n", NAMESPACE)["data"]["config.yaml"]
        assert stored == (tmp_path / "before" / "config.yaml").read_text()
        # without the built-in kinds' CRDs: installed, and Pods judged as ever
        waiting.eventually("the webhook", lambda: _apply(cluster, violating_pod("p"), "--dry-run=server").returncode
                           != 0, 30, every=0.5)
        refused = _apply(cluster, violating_pod("p"), "--dry-run=server")
        assert "cpu-not-integer" in refused.stderr, refused.stderr
        assert _apply(cluster, compliant_pod("p"), "--dry-run=server").returncode == 0

        cluster.kubectl("apply", "-f", "-", stdin=POOL_CRD, check=True)
        cluster.kubectl("wait", "--for", "condition=Established", f"crd/{POOL_CRD['metadata']['name']}",
                        "--timeout=60s", check=True)
        assert _can_list_pools(cluster) == "no"
        admitted = _apply(cluster, _pool("llama", "1500m"))
        assert admitted.returncode == 0, admitted.stderr  # not declared: its template is not known, not judged
        rules = {r for h in cluster.get("validatingwebhookconfiguration", FULLNAME)["webhooks"]
                 for rule in h["rules"] for r in rule["resources"]}
        assert "inferencepools" not in rules
        checksum = cluster.get("deployment", FULLNAME, "-n", NAMESPACE)["spec"]["template"]["metadata"][
            "annotations"]["checksum/config"]

        declared = tmp_path / "declared.yaml"
        declared.write_text(yaml.safe_dump({"config": {"workloads": [DECLARED]}}))
        after = _rendered_config(cluster, release, *base, "-f", str(declared))
        second = _serve(cluster, tmp_path / "after", after, release)
        upgrade = _helm(cluster, "upgrade", RELEASE, str(CHART), *base, "-f", str(declared), "--set",
                        f"webhook.url=https://127.0.0.1:{second.port}")
        assert upgrade.returncode == 0, upgrade.stderr
        stored = cluster.get("configmap", FULLNAME, "-n", NAMESPACE)["data"]["config.yaml"]
        assert stored == (tmp_path / "after" / "config.yaml").read_text() and "InferencePool" in stored
        deploy = cluster.get("deployment", FULLNAME, "-n", NAMESPACE)
        assert deploy["spec"]["template"]["metadata"]["annotations"]["checksum/config"] != checksum  # it rolls
        first.stop()
        hooks = cluster.get("validatingwebhookconfiguration", FULLNAME)["webhooks"]
        assert any(r["apiGroups"] == ["serving.example.com"] and r["resources"] == ["inferencepools"]
                   and r["apiVersions"] == ["v1"] for h in hooks for r in h["rules"]), hooks
        assert _can_list_pools(cluster) == "yes"  # the audit ClusterRole lists the declared kind too

        out: list[str] = []

        def judged() -> bool:
            # server-side: always sent (a client-side apply of an unchanged object sends nothing)
            proc = _apply(cluster, _pool("llama", "1500m"), "--server-side")
            out[:] = [proc.stderr]
            return proc.returncode != 0

        waiting.eventually("the same InferencePool refused", judged, 30, every=0.5)
        assert 'admission webhook "validate.qos-guard.io" denied the request' in out[0], out[0]
        assert 'cpu-not-integer: container "vllm" (spec.template.spec.containers[0]): cpu limit 1500m' in out[0]
        created = _apply(cluster, _pool("mistral", "1500m"), "--dry-run=server")
        assert created.returncode != 0 and "spec.template.spec.containers[0]" in created.stderr
        assert _apply(cluster, _pool("llama", "2"), "--server-side").returncode == 0
    finally:
        first.stop()
        if second is not None:
            second.stop()
