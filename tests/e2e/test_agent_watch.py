"""The node agent's watched view (webhook/node/watched.py) against a real API server, reading with the chart's
own agent RBAC (its ServiceAccount's token, nothing more): a namespace opting in and out, a Pod bound to the
node (``spec.nodeName`` set directly: the API server's view needs no kubelet) and the node's ResourceSlice
(resource.k8s.io/v1, where DRA devices' NUMA attributes are) appearing and going, each within seconds, through
the watches; answering the agent's cycles makes no request; stopping ends the watches at once. ``verify``'s
listed view reads the same slices with the same grant."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import waiting
from tests.binaries import binary
from tests.builders import container, pod, resource_slice
from tests.e2e.conftest import CHART, RELEASE_NAMESPACE, Cluster
from webhook.cluster.client import Lister
from webhook.cluster.watch import ApiTransport
from webhook.node.observe import ListedView
from webhook.node.watched import SLICES_NOT_SERVED, WatchedView

RELEASE = "qos-guard-watch"
AGENT = f"{RELEASE}-agent"  # the chart's agent ServiceAccount, ClusterRole and binding
NODE = "e2e-watch-node"
NAMESPACE = "e2e-agent-watch"
SEEN_WITHIN = 10.0


class Counting:
    """The real transport, counting the lists (GETs) and watches made through it."""

    def __init__(self, inner: ApiTransport) -> None:
        self.inner = inner
        self.lists = 0
        self.watches = 0

    def get(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Any]:
        self.lists += 1
        return self.inner.get(path, query, accept)

    def stream(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Iterator[bytes], Any]:
        self.watches += 1
        return self.inner.stream(path, query, accept)


def eventually(what: str, check: Callable[[], bool], within: float = SEEN_WITHIN) -> float:
    return waiting.eventually(what, check, within)


def gpu_slice(name: str, node: str) -> dict[str, Any]:
    """A ResourceSlice as a DRA driver's kubeletplugin publishes it: one device with the standard attributes."""
    return resource_slice(name, "gpu.e2e.example.com", {"gpu-0": {
        "resource.kubernetes.io/numaNode": {"int": 1}, "resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.0"},
        "model": {"string": "E2E-GPU"}}}, node=node)


def per_device_slice(name: str) -> dict[str, Any]:
    """A slice with perDeviceNodeSelection (resource.k8s.io/v1, DRAPartitionableDevices, beta and on since 1.36):
    no spec.nodeName, each device names its node."""
    return resource_slice(name, "gpu.e2e.example.com", [
        {"name": "gpu-8", "nodeName": NODE, "attributes": {"resource.kubernetes.io/numaNode": {"int": 0}}},
        {"name": "gpu-9", "nodeName": "another-node", "attributes": {"resource.kubernetes.io/numaNode": {"int": 1}}}],
        node=None, pool="shared", perDeviceNodeSelection=True)


def bound_pod(name: str, node: str) -> dict[str, Any]:
    """A Pod already bound to ``node`` (no kubelet runs it)."""
    return pod(container("app", limits={"cpu": "1", "memory": "64Mi"}, image="registry.invalid/app:1"), name=name,
               namespace=NAMESPACE, nodeName=node)


@pytest.fixture(scope="module")
def agent_kubeconfig(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A kubeconfig with the token of the chart's agent ServiceAccount, bound to the chart's agent ClusterRole."""
    proc = subprocess.run([binary("helm"), "template", RELEASE, str(CHART), "--namespace", RELEASE_NAMESPACE,
                           "--set", "agent.enabled=true", "--show-only", "templates/agent.yaml"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rbac = [d for d in yaml.safe_load_all(proc.stdout)
            if d and d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")]
    assert len(rbac) == 3
    cluster.namespace(RELEASE_NAMESPACE)
    cluster.kubectl("apply", "-f", "-", stdin=rbac, check=True)
    path = cluster.kubeconfig_as(AGENT, RELEASE_NAMESPACE, tmp_path_factory.mktemp("agent-watch") / "kubeconfig")
    try:
        yield path
    finally:
        cluster.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false")
        cluster.kubectl("delete", "clusterrole,clusterrolebinding", AGENT, "--ignore-not-found")


def test_the_watched_view_sees_opt_in_and_a_bound_pod_come_and_go(cluster: Cluster, agent_kubeconfig: Path) -> None:
    cluster.require("resource.k8s.io/v1", "resourceslices", "the node's ResourceSlices through the agent's watch")
    said: list[str] = []
    transport = Counting(ApiTransport(str(agent_kubeconfig)))
    view = WatchedView(transport, NODE, said.append)
    # The namespace exists but has not opted in; the Pod is created before it does, so no webhook judges it.
    cluster.namespace(NAMESPACE)
    view.start()
    try:
        assert view.wait_synced(30), said
        assert NAMESPACE not in view.opted_in() and not view.pods(NODE, [])
        cluster.kubectl("apply", "-f", "-", stdin=[bound_pod("bound", NODE), bound_pod("elsewhere", "another-node")],
                        check=True)
        bound = eventually("a Pod bound to the node", lambda: (NAMESPACE, "bound") in view.pods(NODE, []))
        assert list(view.pods(NODE, [])) == [(NAMESPACE, "bound")]  # not the Pod bound to another node
        kept = view.pods(NODE, [])[(NAMESPACE, "bound")]
        assert kept["spec"]["nodeName"] == NODE and "managedFields" not in kept["metadata"]

        cluster.kubectl("label", "namespace", NAMESPACE, "qos-guard.io/mode=warn", check=True)
        opted = eventually("a namespace opting in", lambda: NAMESPACE in view.opted_in())
        assert view.opted_in()[NAMESPACE].mode == "warn"
        assert view.opted_in()[NAMESPACE].since is not None  # from its managedFields, read before they go

        # The node's ResourceSlice, not another node's: kept with its attributes qualified by the driver's domain.
        # A perDeviceNodeSelection slice (no spec.nodeName): read through spec.nodeName=, only this node's device.
        # DRAPartitionableDevices is alpha and off up to 1.35: the API server drops the fields and refuses it.
        shared_slice = per_device_slice("e2e-shared-gpus")
        partitionable = cluster.kubectl("apply", "--dry-run=server", "-f", "-", stdin=shared_slice).returncode == 0
        print(f"\nperDeviceNodeSelection served ({cluster.version()}): {partitionable}")
        expected = ["e2e-shared-gpus", "e2e-watch-gpus"] if partitionable else ["e2e-watch-gpus"]
        cluster.kubectl("apply", "-f", "-", stdin=[gpu_slice("e2e-watch-gpus", NODE),
                                                   gpu_slice("e2e-other-gpus", "another-node"),
                                                   *([shared_slice] if partitionable else [])], check=True)
        sliced = eventually("the node's ResourceSlices", lambda: len(view.slices(NODE)[0]) == len(expected))
        kept_slices, problem = view.slices(NODE)
        assert problem is None and sorted(k["name"] for k in kept_slices) == expected
        if partitionable:
            (shared,) = [k for k in kept_slices if k["name"] == "e2e-shared-gpus"]
            assert [(d["name"], d["nodeName"]) for d in shared["devices"]] == [("gpu-8", NODE)]
        kept_slices = [k for k in kept_slices if k["name"] == "e2e-watch-gpus"]
        assert kept_slices[0]["devices"][0]["attributes"] == {
            "resource.kubernetes.io/numaNode": {"int": 1},
            "resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.0"},
            "gpu.e2e.example.com/model": {"string": "E2E-GPU"}}
        # verify's view lists the same, with the same grant and field selector.
        listed, problem = ListedView(Lister(str(agent_kubeconfig))).slices(NODE)
        assert problem is None and sorted(k["name"] for k in listed) == expected

        # The agent's cycles read the caches: not one request.
        lists, watches = transport.lists, transport.watches
        for _ in range(50):
            view.opted_in()
            view.pods(NODE, [NAMESPACE])
            view.slices(NODE)
        assert (transport.lists, transport.watches) == (lists, watches) == (4, 4)

        # No kubelet confirms a graceful deletion here: delete at once, as a kubelet would in the end.
        cluster.kubectl("delete", "pod", "bound", "-n", NAMESPACE, "--grace-period=0", "--force", check=True)
        gone = eventually("a deleted Pod going", lambda: (NAMESPACE, "bound") not in view.pods(NODE, []))
        cluster.kubectl("label", "namespace", NAMESPACE, "qos-guard.io/mode-", check=True)
        out = eventually("a namespace opting out", lambda: NAMESPACE not in view.opted_in())
        cluster.kubectl("delete", "resourceslice", "e2e-watch-gpus", "e2e-other-gpus", "e2e-shared-gpus",
                        "--ignore-not-found", check=True)
        unsliced = eventually("a deleted ResourceSlice going", lambda: not view.slices(NODE)[0])
        assert transport.lists == 4, "a relist where watching was enough"
        cluster.kubectl("delete", "pod", "elsewhere", "-n", NAMESPACE, "--grace-period=0", "--force", check=True)
        assert not any("not allowed" in s for s in said), said  # the chart's RBAC grants what the view needs
    finally:
        started = time.monotonic()
        view.stop()
        stopped = time.monotonic() - started
    assert stopped < 3, f"stopping took {stopped:.1f} s: the watches were not ended"
    assert not any(t.is_alive() for t in view._threads)
    print(f"\nagent watch: a bound Pod seen in {bound:.2f} s, an opt-in in {opted:.2f} s, a deletion in "
          f"{gone:.2f} s, an opt-out in {out:.2f} s, the node's ResourceSlice in {sliced:.2f} s and its deletion "
          f"in {unsliced:.2f} s; stopped in {stopped:.2f} s")


def test_without_dra_served_the_view_says_so_once_and_judges_the_pods(cluster: Cluster,
                                                                    agent_kubeconfig: Path) -> None:
    """Where the API server serves no resource.k8s.io/v1 (Kubernetes 1.33), the agent says once that DRA devices
    are not visible on its node, and its view of the Pods and opted-in namespaces works as anywhere."""
    if cluster.serves("resource.k8s.io/v1", "resourceslices"):
        pytest.skip(f"kube-apiserver {cluster.version()} serves resource.k8s.io/v1 resourceslices: the view reads "
                    "them (test_the_watched_view_sees_opt_in_and_a_bound_pod_come_and_go)")
    said: list[str] = []
    view = WatchedView(ApiTransport(str(agent_kubeconfig)), NODE, said.append)
    cluster.namespace(NAMESPACE, "warn")
    cluster.kubectl("apply", "-f", "-", stdin=bound_pod("bound-no-dra", NODE), check=True)
    view.start()
    try:
        assert view.wait_synced(30), said
        eventually("a Pod bound to the node", lambda: (NAMESPACE, "bound-no-dra") in view.pods(NODE, []))
        assert NAMESPACE in view.opted_in()
        kept, problem = view.slices(NODE)
    finally:
        view.stop()
        cluster.kubectl("delete", "pod", "bound-no-dra", "-n", NAMESPACE, "--grace-period=0", "--force")
    dra = [s for s in said if "resourceslices" in s]
    assert len(dra) == 1 and dra[0].startswith(SLICES_NOT_SERVED + " (listing them: HTTP 404"), said
    assert kept == [] and problem == dra[0]
    print(f"\nagent on kube-apiserver {cluster.version()}: {dra[0]}")


def test_without_watch_granted_the_refusal_names_the_grant(cluster: Cluster, agent_kubeconfig: Path) -> None:
    """A role with list but not watch (the chart before it granted watch): said once, with the grant needed."""
    cluster.kubectl("apply", "-f", "-", stdin={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": AGENT},
        "rules": [{"apiGroups": [""], "resources": ["namespaces", "pods"], "verbs": ["list"]}]}, check=True)
    said: list[str] = []
    view = WatchedView(ApiTransport(str(agent_kubeconfig)), NODE, said.append)
    view.start()
    try:
        eventually("the refusal said", lambda: any("watching pods is not allowed" in s for s in said), within=30)
    finally:
        view.stop()
    refused = [s for s in said if s.startswith("watching pods")]
    assert len(refused) == 1 and "grant list and watch on pods (the chart's agent ClusterRole" in refused[0], said
