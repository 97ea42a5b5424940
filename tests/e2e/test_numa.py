"""``policy.numa: auto`` against a real API server: the NodeResourceTopology CRD as vendored in the chart,
NodeResourceTopology objects for the article's machine (two sockets with 32 CPUs, 256Gi and 4 GPUs per NUMA
node) and a small node, and a qos-guard webhook registered through the chart's own webhook configurations,
reading the cluster with the chart's own RBAC (a ServiceAccount token, nothing more).

The webhook starts before the CRD exists (it says so, admits, and keeps looking), then sees the objects, then
every change to them within seconds, through its watch, without a restart.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests import waiting
from tests.builders import container, nrt, pod
from tests.e2e.conftest import CHART, Cluster, chart_identity, chart_objects, webhook_outside
from tests.serving import Server

RELEASE = "qos-guard-numa"  # the chart's full name (and ServiceAccount) for this release
NAMESPACE = "e2e-numa"
GPU = "nvidia.com/gpu"
SOCKET = {"cpu": "32", "memory": "256Gi", GPU: "4"}
SEEN_WITHIN = 15.0  # seconds for a change to reach the running webhook (the watch, then a 0.2 s publish)


NUMA_AUTO = ("--set", "config.policy.numa=auto")
NUMA_LABEL = "e2e.qos-guard.io/numa"  # the namespaces this module's webhook judges


def helm_template(*args: str) -> list[dict[str, Any]]:
    return chart_objects(RELEASE, *NUMA_AUTO, *args)


OURS = "e2e.qos-guard.io/numa-node"  # every Node this module makes, deleted with its webhook


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {**labels, OURS: "true"}}}


def vllm(name: str, cpu: str, gpu: str = "0", **spec: Any) -> dict[str, Any]:
    """This file's workload: a Guaranteed vLLM Pod of ``cpu`` CPUs (and ``gpu`` GPUs); ``spec``: more of its spec."""
    amounts = {"cpu": cpu, "memory": "8Gi"} | ({GPU: gpu} if gpu != "0" else {})
    return pod(container("vllm", amounts, amounts, image="registry.invalid/vllm:1"), name=name, namespace=None,
               **spec)


def admit(cluster: Cluster, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """Server-side dry run in the numa namespace: the whole admission chain, nothing stored."""
    return cluster.kubectl("apply", "--dry-run=server", "-n", NAMESPACE, "-f", "-", stdin=obj)


def eventually(what: str, check: Callable[[], bool], within: float = SEEN_WITHIN) -> float:
    """Seconds until ``check`` holds, polled every 0.25 s (each poll is a kubectl dry run)."""
    return waiting.eventually(what, check, within, every=0.25)


def metric(server: Server, name: str) -> float | None:
    text = requests.get(server.metrics + "/metrics", timeout=5).text
    found = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def said(server: Server) -> list[dict[str, Any]]:
    """The topology lines of the server's log."""
    out = []
    for line in (server.folder / "server.log").read_text().splitlines():
        if line.startswith("{") and '"topology"' in line:
            out.append(json.loads(line))
    return out


@pytest.fixture(scope="module")
def numa_webhook(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("numa-webhook")
    # The chart's ServiceAccount and RBAC for numa: auto, and a token for them: the webhook reads with that.
    kubeconfig = chart_identity(cluster, folder, RELEASE, *NUMA_AUTO)
    try:
        with webhook_outside(cluster, folder, RELEASE, NUMA_LABEL, {"policy": {"numa": "auto"}}, *NUMA_AUTO,
                             kubeconfig=kubeconfig) as server:
            cluster.kubectl("apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": NAMESPACE, "labels": {"qos-guard.io/mode": "enforce", NUMA_LABEL: "true"}}}, check=True)
            eventually("the webhook reachable through the API server",
                       lambda: admit(cluster, vllm("probe", "2")).returncode == 0, within=30)
            yield server
    finally:
        # Other modules of the session count the cluster's nodes (the scheduler's "0/3 nodes are available").
        cluster.kubectl("delete", "nodes", "-l", OURS, "--ignore-not-found", "--wait=false", check=True)


def test_without_the_crd_it_says_so_once_and_never_refuses(cluster: Cluster, numa_webhook: Server) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=[node("gpu-1", pool="gpu"), node("small-1", pool="small")],
                    check=True)
    assert admit(cluster, vllm("huge", "48", "5")).returncode == 0  # nothing known: nothing refused
    assert metric(numa_webhook, "qos_guard_numa_topology_available") == 0
    lines = [s for s in said(numa_webhook) if s.get("problem")]
    assert lines and all("the NodeResourceTopology CRD (topology.node.k8s.io/v1alpha2) is not installed"
                         in s["problem"] for s in lines)
    for _ in range(3):
        admit(cluster, vllm("again", "48"))
    assert len([s for s in said(numa_webhook) if s.get("problem")]) == len(lines)  # once per worker, not per Pod


def test_the_articles_machine(cluster: Cluster, numa_webhook: Server) -> None:
    crd = CHART / "files" / "topology.node.k8s.io_noderesourcetopologies.yaml"
    cluster.kubectl("apply", "-f", str(crd), check=True)
    cluster.kubectl("wait", "--for", "condition=Established", "crd/noderesourcetopologies.topology.node.k8s.io",
                    "--timeout", "30s", check=True)
    cluster.kubectl("apply", "-f", "-", stdin=[nrt("gpu-1", [SOCKET, SOCKET]),
                                               nrt("small-1", [{"cpu": "8", "memory": "32Gi"}])],
                    check=True)
    # The CRD is listed again within 10 s (RETRY_MISSING), then watched.
    eventually("the objects", lambda: admit(cluster, vllm("big", "48")).returncode != 0, within=30)
    # The gauge is the least over the live workers: each lists the CRD again on its own 10 s timer.
    eventually("every worker's topology", lambda: metric(numa_webhook, "qos_guard_numa_topology_available") == 1,
               within=30)
    assert metric(numa_webhook, "qos_guard_numa_topology_objects") == 2

    assert admit(cluster, vllm("fits", "16", "2")).returncode == 0
    both = admit(cluster, vllm("vllm", "48", "5"))  # the NUMA page's example, as kubectl prints it
    assert ("needs 48 CPUs and 5 nvidia.com/gpu on one NUMA node; the largest zone of any matching node has 32 "
            "CPUs and 4; single-numa-node refuses it on node gpu-1 (TopologyAffinityError); ask for at most 32 "
            "CPUs and 4 nvidia.com/gpu") in both.stderr, both.stderr
    print(f"\nnuma: auto, kubectl apply of a Pod asking 48 CPUs and 5 GPUs:\n{both.stderr}")
    for name, cpu, gpu, need, have in (("cpus", "48", "2", "48 CPUs", "32 CPUs"),
                                       ("gpus", "16", "5", "5 nvidia.com/gpu", "4")):
        proc = admit(cluster, vllm(name, cpu, gpu))
        assert proc.returncode != 0
        assert 'admission webhook "validate.qos-guard.io" denied the request' in proc.stderr
        assert (f'numa-unfit: container "vllm" (spec.containers[0]): needs {need} on one NUMA node; the largest zone '
                f"of any matching node has {have}; single-numa-node refuses it on node") in proc.stderr, proc.stderr
        assert "(TopologyAffinityError)" in proc.stderr


def test_a_node_selector_changes_the_answer(cluster: Cluster, numa_webhook: Server) -> None:
    assert admit(cluster, vllm("anywhere", "16")).returncode == 0
    proc = admit(cluster, vllm("small", "16", nodeSelector={"pool": "small"}))
    assert proc.returncode != 0
    assert ("needs 16 CPUs on one NUMA node; the largest zone of any matching node has 8 CPUs; single-numa-node "
            "refuses it on node small-1") in proc.stderr, proc.stderr


def test_a_new_node_and_a_changed_zone_are_seen_without_a_restart(cluster: Cluster, numa_webhook: Server) -> None:
    pid = numa_webhook.proc.pid
    on_gpu2 = vllm("gpu2", "48", nodeSelector={"pool": "gpu2"})
    assert admit(cluster, on_gpu2).returncode == 0  # no node gpu2: not ours to say
    cluster.kubectl("apply", "-f", "-", stdin=node("gpu-2", pool="gpu2"), check=True)
    assert admit(cluster, on_gpu2).returncode == 0  # gpu-2 publishes no topology yet: unknown, not unfit
    cluster.kubectl("apply", "-f", "-", stdin=nrt("gpu-2", [SOCKET, SOCKET]), check=True)
    new = eventually("a new node's topology", lambda: admit(cluster, on_gpu2).returncode != 0)
    bigger = nrt("gpu-2", [{"cpu": "64", "memory": "512Gi", GPU: "8"}, SOCKET])
    cluster.kubectl("apply", "-f", "-", stdin=bigger, check=True)
    changed = eventually("a zone's new amounts", lambda: admit(cluster, on_gpu2).returncode == 0)
    cluster.kubectl("apply", "-f", "-", stdin=nrt("gpu-2", [SOCKET, SOCKET]), check=True)
    eventually("the zone back as it was", lambda: admit(cluster, on_gpu2).returncode != 0)
    cluster.kubectl("delete", "noderesourcetopology", "gpu-2", check=True)
    eventually("a deleted topology", lambda: admit(cluster, on_gpu2).returncode == 0)  # unknown again
    assert numa_webhook.proc.pid == pid and numa_webhook.proc.poll() is None  # the same process throughout
    print(f"\nnuma: auto: a new node's topology seen in {new:.1f} s, a changed zone in {changed:.1f} s")


def test_a_taint_the_pod_does_not_tolerate_keeps_it_off_a_node(cluster: Cluster, numa_webhook: Server) -> None:
    """A dedicated GPU pool: with gpu-1 tainted, a Pod that does not tolerate it can only go to small-1, whose
    zones are too small; one that tolerates it fits. A taint that says how the node is now (not ready) does not
    count."""
    in_pools = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu", "small"]}]}]}}}
    plain = vllm("plain", "16", affinity=in_pools)
    tolerant = vllm("tolerant", "16", affinity=in_pools,
                   tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    assert admit(cluster, plain).returncode == 0
    cluster.kubectl("taint", "nodes", "gpu-1", "nvidia.com/gpu=present:NoSchedule",
                    "node.kubernetes.io/not-ready:NoExecute", check=True)
    try:
        seen = eventually("the node's taint", lambda: admit(cluster, plain).returncode != 0)
        proc = admit(cluster, plain)
        assert ("needs 16 CPUs on one NUMA node; the largest zone of any matching node has 8 CPUs; single-numa-node "
                "refuses it on node small-1") in proc.stderr, proc.stderr
        assert admit(cluster, tolerant).returncode == 0  # the not-ready taint is not held against gpu-1
        print(f"\nnuma: auto: a node's new taint seen in {seen:.1f} s")
    finally:
        cluster.kubectl("taint", "nodes", "gpu-1", "nvidia.com/gpu-", "node.kubernetes.io/not-ready-", check=True)
    eventually("the taint gone", lambda: admit(cluster, plain).returncode == 0)


def test_restricted_nodes_refuse_what_kubelet_refuses_and_warn_otherwise(cluster: Cluster,
                                                                          numa_webhook: Server) -> None:
    """48 CPUs prefer both NUMA nodes of lax-1, 8Gi of memory one: kubelet's restricted policy fails the Pod
    (TopologyAffinityError), and so does the webhook; with 300Gi (both NUMA nodes' memory) every resource prefers
    both, kubelet admits it across them, and the webhook warns."""
    cluster.kubectl("apply", "-f", "-", stdin=[node("lax-1", pool="lax"),
                                               nrt("lax-1", [SOCKET, SOCKET], policy="restricted")],
                    check=True)
    on_lax = vllm("lax", "48", nodeSelector={"pool": "lax"})
    eventually("the restricted node", lambda: "restricted refuses it on node lax-1 (TopologyAffinityError"
               in admit(cluster, on_lax).stderr)
    assert admit(cluster, on_lax).returncode != 0
    wide = {"cpu": "48", "memory": "300Gi"}
    spread = pod(container("vllm", wide, wide, image="registry.invalid/vllm:1"), name="lax-wide", namespace=None,
                 nodeSelector={"pool": "lax"})
    proc = admit(cluster, spread)
    assert proc.returncode == 0 and "Warning: numa-unfit:" in proc.stderr, proc.stderr
    assert "restricted on node lax-1 would admit it across NUMA nodes" in proc.stderr, proc.stderr


def test_check_and_audit_read_the_cluster(cluster: Cluster, numa_webhook: Server, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"policy": {"numa": "auto"}}))
    manifest = tmp_path / "pod.yaml"
    on_gpu = vllm("cpus", "48", "2", nodeSelector={"pool": "gpu"})
    manifest.write_text(yaml.safe_dump(on_gpu))
    offline = cluster.qos_guard("check", str(manifest), "--config", str(config))
    # fail-open, but a counted notice on stdout (not a line on stderr only): a CI job sees it
    assert offline.returncode == 0 and "notice: numa-unfit:" in offline.stdout and "pass --kubeconfig" in \
        offline.stdout and "1 notice" in offline.stderr, offline.stdout + offline.stderr
    online = cluster.qos_guard("check", str(manifest), "--config", str(config), "--kubeconfig",
                               str(cluster.kubeconfig))
    assert online.returncode == 1, online.stdout + online.stderr
    assert "numa-unfit: container \"vllm\" (spec.containers[0]): needs 48 CPUs on one NUMA node" in online.stdout
    cluster.kubectl("apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "e2e-numa-audit", "labels": {"qos-guard.io/mode": "warn"}}}, check=True)
    # Created where no webhook judges it (warn namespaces are the session webhook's, if any: it only warns).
    cluster.kubectl("apply", "-n", "e2e-numa-audit", "-f", "-", stdin=on_gpu, check=True)
    audit = cluster.qos_guard("audit", "-n", "e2e-numa-audit", "--config", str(config), "--kubeconfig",
                              str(cluster.kubeconfig))
    assert audit.returncode == 1, audit.stderr
    assert "Pod/cpus: numa-unfit:" in audit.stdout
