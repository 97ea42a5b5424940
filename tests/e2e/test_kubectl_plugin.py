"""``kubectl qos-guard``: the real kubectl finds the ``kubectl-qos_guard`` console script on PATH (kubectl
maps the dash of a plugin command to an underscore in the file name) and runs it against the cluster."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.binaries import binary
from tests.e2e.conftest import Cluster, violating_pod

SCRIPTS = Path(sys.executable).parent


def _kubectl(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    # PATH holds the installed console scripts and nothing else of the project; KUBECONFIG reaches the
    # plugin through the environment, as kubectl passes it on.
    env = dict(cluster.env, PATH=f"{SCRIPTS}:/usr/bin:/bin")
    return subprocess.run([binary("kubectl"), *args], capture_output=True, text=True, timeout=120, env=env)


def test_kubectl_finds_the_plugin(cluster: Cluster) -> None:
    assert (SCRIPTS / "kubectl-qos_guard").exists(), "the console script comes with the install (make install)"
    listed = _kubectl(cluster, "plugin", "list")
    assert str(SCRIPTS / "kubectl-qos_guard") in listed.stdout, listed.stdout + listed.stderr
    version = _kubectl(cluster, "qos-guard", "--version")
    assert version.returncode == 0 and version.stdout.startswith("qos-guard "), version.stderr


def test_kubectl_qos_guard_audit_all_namespaces(cluster: Cluster) -> None:
    ns = cluster.namespace("e2e-plugin")
    cluster.kubectl("apply", "-n", ns, "-f", "-", stdin=violating_pod("via-plugin"), check=True)
    proc = _kubectl(cluster, "qos-guard", "audit", "-A")
    assert proc.returncode == 1, proc.stderr
    assert f"{ns}: Pod/via-plugin: cpu-not-integer: " in proc.stdout
    assert "in all namespaces" in proc.stderr
    direct = cluster.qos_guard("audit", "-A")
    assert direct.stdout == proc.stdout
