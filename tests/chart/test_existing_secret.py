"""``existingSecret`` (a TLS Secret the user brings) rendered by the real helm: without its CA the render is refused
with the way out (``helm template`` cannot read the Secret, and webhooks without a caBundle refuse every judged
request), with it every webhook gets that caBundle, and it never goes together with cert-manager."""

from __future__ import annotations

import base64

from tests.chart.conftest import CHART, Render, by_kind, one, run_helm

NAMESPACE = "qos-guard"


def test_existing_secret_without_a_readable_ca_is_refused_with_the_way_out(helm: str) -> None:
    """`helm template` (GitOps) cannot read the Secret: the webhooks were rendered without a caBundle, and with
    failurePolicy Fail every judged request was then refused, without a word."""
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--namespace", NAMESPACE,
                    "--set", "existingSecret=my-tls")
    assert proc.returncode != 0
    assert f"existingSecret: cannot read Secret {NAMESPACE}/my-tls here (helm template and --dry-run do not read " \
           "the cluster), so the webhooks would get no caBundle; pass its CA: --set existingSecretCABundle=" \
           "$(base64 -w0 certs/ca.crt)" in proc.stderr


def test_existing_secret_with_its_ca_given_renders_every_caBundle(render: Render) -> None:
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()
    objects = render("--set", f"existingSecret=my-tls,existingSecretCABundle={ca}")
    assert not by_kind(objects, "Secret")
    hooks = [h for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
             for h in one(objects, kind)["webhooks"]]
    assert len(hooks) == 5 and all(h["clientConfig"]["caBundle"] == ca for h in hooks)
    volumes = one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "my-tls"}} in volumes


def test_cert_manager_with_existing_secret_is_refused(helm: str) -> None:
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "existingSecret=my-tls",
                    "--set", "certManager.enabled=true", "--set", "existingSecretCABundle=QUJD")
    assert proc.returncode != 0
    assert "existingSecret (my-tls) and certManager.enabled exclude each other: cert-manager would write its " \
           "certificate into your Secret" in proc.stderr
    alone = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "existingSecretCABundle=QUJD")
    assert alone.returncode != 0 and "existingSecretCABundle is the CA of existingSecret, which is not set" in \
        alone.stderr
