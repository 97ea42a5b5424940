"""Who pins each node's CPUs from the agent's NodeResourceTopology (``cpuPinner``), through a real kube-apiserver,
where the kubelets' configz cannot be read (these Nodes have no kubelet, as a cluster whose users may not proxy to
nodes): ``qos-guard nodes`` says it in PINNED BY with ``(NRT)`` and ``pinnedBySource: nrt``, a node whose agent
published nothing stays ``?``; ``check --kubeconfig`` judges ``dra-cpu-pinner-mismatch`` with it and says which
source it used. The NRT objects are written as the agent writes them (``pinner_attributes``: the agent's side is
tests/nodelogic/test_pinner_source.py; on a real kubelet tests/node)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import CHART, Cluster
from webhook.core.cpupinner import pinner_attributes
from webhook.core.numatopology import NRT_GROUP_VERSION

OURS = "qos-guard.io/e2e-pinner"
NODES = {"pin-dra": ("none", True), "pin-both": ("static", True), "pin-silent": (None, True)}
CRD = "noderesourcetopologies.topology.node.k8s.io"


def objects() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for name, (policy, dra) in NODES.items():
        found.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {OURS: "true"}}})
        found.append({"apiVersion": NRT_GROUP_VERSION, "kind": "NodeResourceTopology",
                      "metadata": {"name": name, "labels": {OURS: "true"}}, "topologyPolicies": ["None"],
                      "zones": [], "attributes": [{"name": "topologyManagerPolicy", "value": "none"},
                                                  {"name": "topologyManagerScope", "value": "container"},
                                                  *pinner_attributes(policy, dra)]})
        found.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                      "metadata": {"name": f"{name}-dra.cpu", "labels": {OURS: "true"}},
                      "spec": {"driver": "dra.cpu", "nodeName": name,
                               "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                               "devices": [{"name": "cpudevnuma000", "attributes": {
                                   "dra.net/numaNode": {"int": 0}, "dra.cpu/numaNodeID": {"int": 0}}}]}})
    return found


@pytest.fixture(scope="module")
def published(cluster: Cluster) -> Iterator[Cluster]:
    cluster.require("resource.k8s.io/v1", "resourceslices", "ResourceSlices (resource.k8s.io/v1)")
    had_crd = cluster.kubectl("get", "crd", CRD).returncode == 0
    cluster.kubectl("apply", "-f", str(CHART / "files" / "topology.node.k8s.io_noderesourcetopologies.yaml"),
                    check=True)
    cluster.kubectl("wait", "--for", "condition=Established", f"crd/{CRD}", "--timeout", "30s", check=True)
    cluster.kubectl("apply", "-f", "-", stdin=objects(), check=True)
    try:
        yield cluster
    finally:
        cluster.kubectl("delete", "--ignore-not-found", "--wait=true", "-f", "-", stdin=objects())
        if not had_crd:
            cluster.kubectl("delete", "crd", CRD, "--ignore-not-found", "--wait=true", "--timeout=60s")


def test_nodes_says_who_pins_from_the_agent_s_nrt_and_that_it_did(published: Cluster) -> None:
    proc = published.qos_guard("nodes", *NODES, "--kubeconfig", str(published.kubeconfig))
    print(f"\n$ qos-guard nodes {' '.join(NODES)}  # exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith("pin-")}
    assert " dra.cpu (NRT) " in rows["pin-dra"], rows
    assert " static CPU Manager and dra.cpu (NRT) " in rows["pin-both"], rows
    assert "(NRT)" not in rows["pin-silent"] and " dra.cpu, ? " in rows["pin-silent"], rows  # unknown stays
    doc = json.loads(published.qos_guard("nodes", *NODES, "--kubeconfig", str(published.kubeconfig),
                                         "--format", "json").stdout)
    found = {n["name"]: (n["pinnedBy"], n["pinnedBySource"]) for n in doc["nodes"]}
    assert found == {"pin-dra": ("dra.cpu", "nrt"), "pin-both": ("static CPU Manager and dra.cpu", "nrt"),
                     "pin-silent": ("dra.cpu, ?", "configz+resourceslices")}, found


def test_check_judges_the_pinner_mismatch_with_it_and_says_the_source(published: Cluster, tmp_path: Path) -> None:
    """A Pod whose 2 CPUs come from a dra.cpu template, where pin-both also runs the static CPU Manager (as its
    agent published): refused with policy.dra: deny, the source said on stderr."""
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "cpus-2"},
                "spec": {"spec": {"devices": {"requests": [{"name": "cpus", "exactly": {
                    "deviceClassName": "dra.cpu", "capacity": {"requests": {"dra.cpu/cpu": "2"}}}}]}}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dra-cpus"},
           "spec": {"resourceClaims": [{"name": "cpus", "resourceClaimTemplateName": "cpus-2"}],
                    "containers": [{"name": "app", "image": "app:1", "resources": {
                        "requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"},
                        "claims": [{"name": "cpus"}]}}]}}
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump_all([template, pod]))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"policy": {"dra": "deny", "deviceClasses": True}}))
    proc = published.qos_guard("check", str(tmp_path / "pod.yaml"), "--config", str(tmp_path / "config.yaml"),
                               "--kubeconfig", str(published.kubeconfig))
    print(f"\n$ qos-guard check pod.yaml --kubeconfig ...  # exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "dra-cpu-pinner-mismatch: " in proc.stdout and "pin-both" in proc.stdout, proc.stdout
    (notice,) = [line for line in proc.stdout.splitlines() if ": notice: dra-cpu-pinner-mismatch: " in line]
    assert notice.endswith("who pins is read from the agent's NodeResourceTopology (cpuPinner) for pin-both, "
                           "pin-dra"), notice  # pin-silent's agent published nothing: unknown
