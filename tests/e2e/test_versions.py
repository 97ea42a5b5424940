"""The control plane is the Kubernetes release the run asked for (``QOS_GUARD_KUBE_VERSION``, by default
hack/build-tools.sh's), and what differs between minors is said where a user meets it: the chart refuses
``enforcement: policy`` against an API server that does not serve MutatingAdmissionPolicy v1, reading its
discovery as ``helm install`` does."""

from __future__ import annotations

import json
import subprocess

from tests.binaries import binary, kube_version
from tests.e2e.conftest import CHART, Cluster

MAP = ("admissionregistration.k8s.io/v1", "mutatingadmissionpolicies")


def test_the_control_plane_is_the_release_asked_for(cluster: Cluster) -> None:
    assert cluster.version() == kube_version()
    client = json.loads(cluster.kubectl("version", "--client", "-o", "json", check=True).stdout)
    assert client["clientVersion"]["gitVersion"] == kube_version()
    print(f"\nkube-apiserver and kubectl {cluster.version()}")


def test_the_chart_refuses_policy_enforcement_where_the_api_server_does_not_serve_it(cluster: Cluster) -> None:
    """``helm install --dry-run=server`` reads the API server's version and discovery: on 1.33-1.35 (stock
    flags) the chart's refusal names what is missing and the way out; from 1.36 the policies render."""
    proc = subprocess.run([binary("helm"), "install", "qg-versions", str(CHART), "--namespace", "qg-versions",
                           "--dry-run=server", "--set", "enforcement=policy"],
                          capture_output=True, text=True, timeout=120, env=cluster.env)
    print(f"\n$ helm install --dry-run=server --set enforcement=policy  # kube-apiserver {cluster.version()}, "
          f"exit {proc.returncode}\n{proc.stderr.strip()}")
    if cluster.serves(*MAP):
        assert proc.returncode == 0, proc.stderr
        assert "kind: MutatingAdmissionPolicy\n" in proc.stdout
        return
    assert proc.returncode != 0
    assert (f"enforcement: policy needs MutatingAdmissionPolicy in admissionregistration.k8s.io/v1, which "
            f"Kubernetes serves from 1.36; this cluster is {cluster.version()}, where it is ") in proc.stderr
    assert "; the cluster serves no MutatingAdmissionPolicy: keep enforcement: webhook, which works on every " \
           "supported version (1.33 or later)" in proc.stderr
    webhook = subprocess.run([binary("helm"), "install", "qg-versions", str(CHART), "--namespace", "qg-versions",
                              "--dry-run=server"], capture_output=True, text=True, timeout=120, env=cluster.env)
    assert webhook.returncode == 0, webhook.stderr
