"""The agent DaemonSet needs Pod Security Admission ``privileged``: a namespace enforcing less fails the install
with that reason (it took the DaemonSet and refused every Pod), and the NOTES say so either way."""

from __future__ import annotations

import subprocess

from tests.binaries import binary
from tests.e2e.conftest import CHART, Cluster

RELEASE, NAMESPACE = "psa", "e2e-agent-psa"


def _helm(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary("helm"), *args, "--namespace", NAMESPACE], capture_output=True, text=True,
                          timeout=180, env=cluster.env)


def _label(cluster: Cluster, level: str) -> None:
    cluster.kubectl("label", "namespace", NAMESPACE, f"pod-security.kubernetes.io/enforce={level}", "--overwrite",
                    check=True)


def test_agent_install_says_it_needs_privileged_pod_security(cluster: Cluster) -> None:
    cluster.namespace(NAMESPACE)
    _label(cluster, "baseline")
    refused = _helm(cluster, "install", RELEASE, str(CHART), "--set", "agent.enabled=true")
    assert refused.returncode != 0
    assert f'agent.enabled: namespace {NAMESPACE} enforces Pod Security "baseline", which refuses the agent\'s ' \
           f"Pods (hostPath volumes for kubelet's pod-resources and /sys, root for kubelet's socket); label it: " \
           f"kubectl label namespace {NAMESPACE} pod-security.kubernetes.io/enforce=privileged --overwrite" in \
           refused.stderr, refused.stderr
    assert cluster.kubectl("get", "daemonset", "-n", NAMESPACE, "-o", "name").stdout == ""

    _label(cluster, "privileged")
    install = _helm(cluster, "install", RELEASE, str(CHART), "--set", "agent.enabled=true")
    try:
        assert install.returncode == 0, install.stderr
        notes = " ".join(install.stdout.split("NOTES:", 1)[1].split())
        assert f'Pod Security Admission must allow "privileged" Pods in {NAMESPACE}' in notes
        assert f"kubectl label namespace {NAMESPACE} pod-security.kubernetes.io/enforce=privileged" in notes
        # The API server's own Pod Security check agrees: the agent's Pod template is not baseline.
        ds = cluster.get("daemonset", f"{RELEASE}-qos-guard-agent", "-n", NAMESPACE)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "agent-probe", "namespace": NAMESPACE},
               "spec": {**ds["spec"]["template"]["spec"], "nodeName": "nowhere"}}
        _label(cluster, "baseline")
        dry = cluster.kubectl("create", "--dry-run=server", "-f", "-", stdin=pod)
        assert dry.returncode != 0 and "violates PodSecurity" in dry.stderr, dry.stderr
    finally:
        _helm(cluster, "uninstall", RELEASE, "--wait")
