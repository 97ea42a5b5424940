"""``helm install`` and ``helm upgrade`` of the chart into the real API server (no kubelet: the objects are
stored and validated by the API server, the Pods are not run)."""

from __future__ import annotations

import subprocess

from tests.binaries import binary
from tests.e2e.conftest import CHART, Cluster

RELEASE, NAMESPACE = "helm-e2e", "e2e-helm"
FULLNAME = f"{RELEASE}-qos-guard"


def _helm(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary("helm"), *args, "--namespace", NAMESPACE], capture_output=True, text=True,
                          timeout=180, env=cluster.env)


def test_install_shows_notes_and_upgrade_keeps_the_generated_certificate(cluster: Cluster) -> None:
    install = _helm(cluster, "install", RELEASE, str(CHART), "--create-namespace")
    try:
        assert install.returncode == 0, install.stderr
        notes = install.stdout.split("NOTES:", 1)[1]
        assert "kubectl label namespace NAME qos-guard.io/mode=enforce" in notes
        assert f"kube-system and {NAMESPACE} are never selected" in notes
        secret = cluster.get("secret", f"{FULLNAME}-tls", "-n", NAMESPACE)["data"]
        bundle = cluster.get("validatingwebhookconfiguration", FULLNAME)["webhooks"][0]["clientConfig"]["caBundle"]
        assert bundle == secret["ca.crt"]
        deploy = cluster.get("deployment", FULLNAME, "-n", NAMESPACE)
        assert deploy["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "250m"

        upgrade = _helm(cluster, "upgrade", RELEASE, str(CHART), "--set", "config.policy.smtAlignment=2")
        assert upgrade.returncode == 0, upgrade.stderr
        # The pair is read back with `lookup`, not regenerated: running Pods and caBundle stay in step.
        assert cluster.get("secret", f"{FULLNAME}-tls", "-n", NAMESPACE)["data"] == secret
        after = cluster.get("mutatingwebhookconfiguration", FULLNAME)["webhooks"][0]["clientConfig"]["caBundle"]
        assert after == bundle
        config = cluster.get("configmap", FULLNAME, "-n", NAMESPACE)["data"]["config.yaml"]
        assert "smtAlignment: 2" in config
    finally:
        _helm(cluster, "uninstall", RELEASE, "--wait")
    assert cluster.kubectl("get", "validatingwebhookconfiguration", FULLNAME).returncode != 0


def test_install_refuses_a_bad_value_before_applying_anything(cluster: Cluster) -> None:
    proc = _helm(cluster, "install", "bad", str(CHART), "--create-namespace", "--set", "resources.limits.cpu=0m")
    assert proc.returncode != 0
    assert "values don't meet the specifications of the schema" in proc.stderr
    assert cluster.kubectl("get", "deployment", "bad-qos-guard", "-n", NAMESPACE).returncode != 0
