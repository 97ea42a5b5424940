"""The agent's NodeResourceTopology (``--publish-topology``): the object built as NFD's topology-updater builds it,
read back by what judges it (``parse_nrt`` for ``numa: auto``, the extender's ``read_nrt`` and fingerprint), and
the publisher applying it only when it changed, over a real gRPC PodResources socket."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.nodelogic.fakes import Kubelet, container, serve, topology
from webhook.cluster.client import ClusterError, Reply
from webhook.core.numatopology import parse_nrt
from webhook.extender.fingerprint import ATTRIBUTE, fingerprint
from webhook.extender.reservations import BoundPod, read_nrt, reflected
from webhook.node.allocation import Allocatable, ContainerAllocation, DeviceGroup, MemoryBlock, PodAllocation
from webhook.node.kubelet import PodResourcesClient
from webhook.node.podresources import api_pb2
from webhook.node.sysfs import NodeFacts, Sockets, SysfsError, hugepages_name, read_node_facts, read_sockets
from webhook.node.topology_publisher import REREAD, TopologyPublisher
from webhook.node.topology_report import Owner, build_topology, decimal_quantity

GPU = "example.com/gpu"
GI = 1 << 30
FACTS = NodeFacts({0: frozenset({0, 1}), 1: frozenset({2, 3})},
                  {0: {"memory": 8 * GI}, 1: {"memory": 8 * GI}}, {0: {0: 10, 1: 20}, 1: {0: 20, 1: 10}})
ALLOCATABLE = Allocatable(frozenset({1, 2, 3}),  # CPU 0 reserved
                          (MemoryBlock("memory", 7 * GI, frozenset({0})),
                           MemoryBlock("memory", 8 * GI, frozenset({1}))),
                          (DeviceGroup(GPU, ("gpu-0",), frozenset({0})), DeviceGroup(GPU, ("gpu-1",), frozenset({1})),
                           DeviceGroup(GPU, ("gpu-x",), frozenset())))
PINNED = PodAllocation("ns", "pinned", (ContainerAllocation(
    "app", frozenset({2}), (MemoryBlock("memory", GI, frozenset({1})),),
    (DeviceGroup(GPU, ("gpu-1",), frozenset({1})),)),))
SHARED = PodAllocation("ns", "shared", (ContainerAllocation("app", frozenset()),))
FAILED = PodAllocation("ns", "failed", (ContainerAllocation("app", frozenset()),))  # kubelet 1.33 lists it: terminal


def resources(obj: dict[str, Any]) -> dict[str, dict[str, tuple[str, str, str]]]:
    return {z["name"]: {r["name"]: (r["capacity"], r["allocatable"], r["available"]) for r in z["resources"]}
            for z in obj["zones"] if z["type"] == "Node"}


def test_zones_as_nfd_aggregates_them() -> None:
    obj = build_topology("n1", FACTS, ALLOCATABLE, [PINNED, SHARED], "single-numa-node", "container",
                         Owner("n1", "uid-1"))
    assert obj["apiVersion"] == "topology.node.k8s.io/v1alpha2" and obj["kind"] == "NodeResourceTopology"
    assert obj["metadata"] == {"name": "n1", "ownerReferences": [
        {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-1"}]}
    assert [z["type"] for z in obj["zones"]] == ["Node", "Node"]
    # cpu: capacity = allocatable + reserved; the pinned container's CPU 2 off NUMA 1; the shared one takes none.
    # memory: capacity from sysfs meminfo; the device without TopologyInfo (gpu-x) is in no zone.
    assert resources(obj) == {
        "node-0": {"cpu": ("2", "1", "1"), "memory": ("8589934592", "7516192768", "7516192768"),
                   GPU: ("1", "1", "1")},
        "node-1": {"cpu": ("2", "2", "1"), "memory": ("8589934592", "8589934592", "7516192768"),
                   GPU: ("1", "1", "0")}}
    assert obj["zones"][0]["costs"] == [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 20}]
    assert [z["attributes"] for z in obj["zones"]] == [[{"name": "cpus", "value": "2"}]] * 2  # reserved included
    assert obj["topologyPolicies"] == ["SingleNUMANodeContainerLevel"]
    assert obj["attributes"] == [
        {"name": "topologyManagerPolicy", "value": "single-numa-node"},
        {"name": "topologyManagerScope", "value": "container"},
        {"name": ATTRIBUTE, "value": fingerprint([("ns", "pinned"), ("ns", "shared")])}]


def test_what_numa_auto_and_the_extender_read_of_it() -> None:
    obj = build_topology("n1", FACTS, ALLOCATABLE, [PINNED, SHARED], "single-numa-node", "pod")
    topo = parse_nrt(obj)
    assert (topo.policy, topo.scope) == ("single-numa-node", "pod")
    assert [(z.numa, z.allocatable["cpu"], z.allocatable[GPU]) for z in topo.zones] == [
        (0, 1000, 1000), (1, 2000, 1000)]
    state = read_nrt(obj)
    assert state is not None
    assert [(z.allocatable["cpu"], z.allocatable[GPU]) for z in state.free.zones] == [(1000, 1000), (1000, 0)]
    # The extender lets a reservation go when the NRT counts exactly the Pods bound to the node.
    bound = [BoundPod("ns", "pinned", "n1", 0.0), BoundPod("ns", "shared", "n1", 0.0)]
    assert reflected(state, bound)
    assert not reflected(state, [*bound, BoundPod("ns", "new", "n1", 0.0)])
    # A terminal Pod still bound there is not in kubelet 1.36's List (active Pods only): not signed, not counted.
    assert reflected(state, [*bound, BoundPod("ns", "failed", "n1", 0.0, terminal=True)])
    # Kubelet 1.33's List holds it (no KubeletPodResourcesListUseActivePods yet), and so does the fingerprint:
    # that NRT counts the Pods bound there too, and one more active Pod is still not counted.
    failed = BoundPod("ns", "failed", "n1", 0.0, terminal=True)
    listed = read_nrt(build_topology("n1", FACTS, ALLOCATABLE, [PINNED, SHARED, FAILED], "single-numa-node", "pod"))
    assert listed is not None and reflected(listed, [*bound, failed])
    assert not reflected(listed, [*bound, failed, BoundPod("ns", "new", "n1", 0.0)])
    assert not reflected(listed, bound)  # a Pod it signed is gone: it counts something no longer bound


def test_unknown_policy_is_left_out_never_guessed() -> None:
    obj = build_topology("n1", FACTS, ALLOCATABLE, [], None, None)
    assert obj["attributes"] == [] and "topologyPolicies" not in obj  # no Pods: NFD signs nothing either
    assert "ownerReferences" not in obj["metadata"]
    assert parse_nrt(obj).policy == ""  # an unknown node: numa: auto and the extender keep it


def test_a_numa_node_with_nothing_allocatable_and_memory_across_nodes() -> None:
    facts = NodeFacts({0: frozenset({0}), 1: frozenset({1})})
    alloc = Allocatable(frozenset({1}), (MemoryBlock("hugepages-2Mi", 4 << 20, frozenset({0})),
                                         MemoryBlock("hugepages-2Mi", 4 << 20, frozenset({1}))))
    # A block spanning both NUMA nodes is taken from the lowest first, as the Memory Manager fills them.
    pod = PodAllocation("ns", "p", (ContainerAllocation(
        "app", frozenset({1}), (MemoryBlock("hugepages-2Mi", 6 << 20, frozenset({0, 1})),)),))
    got = resources(build_topology("n", facts, alloc, [pod], "none", "container"))
    # NUMA 0 has hugepages but no allocatable CPU: NFD then lists no cpu there (only a zone with nothing
    # allocatable at all gets its reserved CPUs as a cpu capacity).
    assert got["node-0"] == {"hugepages-2Mi": ("4194304", "4194304", "0")}
    assert got["node-1"] == {"cpu": ("1", "1", "0"), "hugepages-2Mi": ("4194304", "4194304", "2097152")}
    # The zone's cpus attribute says NUMA 0's one CPU is there (reserved): numa: auto reads it as its capacity.
    zones = parse_nrt(build_topology("n", facts, alloc, [pod], "none", "container")).zones
    assert [(z.capacity.get("cpu"), z.allocatable.get("cpu")) for z in zones] == [(1000, None), (1000, 1000)]
    facts_none = NodeFacts({0: frozenset({0}), 1: frozenset({1})})
    assert resources(build_topology("n", facts_none, Allocatable(frozenset({1})), [], None, None))["node-0"] == {
        "cpu": ("1", "0", "0")}


@pytest.mark.parametrize(("value", "text"), [(0, "0"), (2, "2"), (1000, "1k"), (1500, "1500"), (2 * 10**9, "2G"),
                                             (GI, "1073741824"), (128 << 20, "134217728"), (-3000, "-3k")])
def test_quantities_as_client_go_writes_them(value: int, text: str) -> None:
    assert decimal_quantity(value) == text


def sysfs(root: Path, distance: str = "10 20") -> Path:
    for numa, cpus in ((0, "0"), (1, "1")):
        d = root / "devices" / "system" / "node" / f"node{numa}"
        (d / "hugepages" / "hugepages-2048kB").mkdir(parents=True)
        (d / "cpulist").write_text(f"{cpus}\n")
        (d / "meminfo").write_text(f"Node {numa} MemTotal:       16384 kB\nNode {numa} MemFree:  1 kB\n")
        (d / "hugepages" / "hugepages-2048kB" / "nr_hugepages").write_text("3\n")
        (d / "distance").write_text(f"{distance}\n")
    return root


def test_node_facts_from_sysfs(tmp_path: Path) -> None:
    facts = read_node_facts(sysfs(tmp_path))
    assert facts.cpus == {0: frozenset({0}), 1: frozenset({1})}
    assert facts.memory[1] == {"memory": 16384 * 1024, "hugepages-2Mi": 3 * 2048 * 1024}
    assert facts.distances[1] == {0: 10, 1: 20}
    assert (hugepages_name(2048), hugepages_name(1 << 20), hugepages_name(64)) == (
        "hugepages-2Mi", "hugepages-1Gi", "hugepages-64Ki")
    with pytest.raises(SysfsError, match=r"node0/distance: not 2 distances"):
        read_node_facts(sysfs(tmp_path / "bad", "10"))


def packages(root: Path, ids: dict[int, str]) -> Path:
    """``physical_package_id`` of each CPU (CPU -> the file's text), under the NUMA node of ``sysfs`` that lists
    it (node0: CPU 0, node1: CPU 1), where cadvisor reads it: ``nodeN/cpuM/topology``."""
    for cpu, text in ids.items():
        d = root / "devices" / "system" / "node" / f"node{cpu}" / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True, exist_ok=True)
        (d / "physical_package_id").write_text(text)
    return root


def test_each_numa_nodes_socket_from_sysfs(tmp_path: Path) -> None:
    facts = read_node_facts(packages(sysfs(tmp_path / "one"), {0: "0\n", 1: "0\n"}))
    assert (facts.sockets, facts.sockets_unknown) == ({0: 0, 1: 0}, "")
    assert read_node_facts(packages(sysfs(tmp_path / "two"), {0: "1\n", 1: "0\n"})).sockets == {0: 1, 1: 0}
    # Two CPUs of one NUMA node on one package: one socket.
    root = packages(sysfs(tmp_path / "shared"), {0: "3\n", 1: "3\n"})
    (root / "devices" / "system" / "node" / "node0" / "cpulist").write_text("0,2\n")
    (root / "devices" / "system" / "node" / "node1" / "cpulist").write_text("1\n")
    d = root / "devices" / "system" / "node" / "node0" / "cpu2" / "topology"
    d.mkdir(parents=True)
    (d / "physical_package_id").write_text("3\n")
    assert read_node_facts(root).sockets == {0: 3, 1: 3}
    (d / "physical_package_id").write_text("4\n")  # now node0's CPUs name two packages
    assert read_sockets(root, {0: {0, 2}, 1: {1}}) == Sockets({}, f"{root}/devices/system/node/node0: its CPUs are "
                                                                "on more than one package (CPU 0 on 3, CPU 2 on 4)")


@pytest.mark.parametrize(("text", "why"), [
    (None, "node1/cpu1/topology/physical_package_id: cannot read (No such file or directory)"),
    ("-1\n", "node1/cpu1/topology/physical_package_id: is -1: the kernel knows no package"),
    ("one\n", "node1/cpu1/topology/physical_package_id: holds 'one', not a package id"),
    ("70000\n", "node1/cpu1/topology/physical_package_id: holds '70000', not a package id"),
    ("\n", "node1/cpu1/topology/physical_package_id: holds '', not a package id"),
    ("0" * 100, "node1/cpu1/topology/physical_package_id: longer than 16 bytes"),
    ("\xff\n", "node1/cpu1/topology/physical_package_id: not ASCII text"),
])
def test_a_socket_not_known_leaves_every_socket_out(tmp_path: Path, text: str | None, why: str) -> None:
    """Partial knowledge is not published: the NUMA node whose CPU says no package, and every other with it."""
    root = packages(sysfs(tmp_path), {0: "0\n"} | ({1: text} if text is not None else {}))
    facts = read_node_facts(root)  # never a SysfsError: the rest of the object is still worth publishing
    assert facts.sockets == {} and facts.sockets_unknown.endswith(why), facts.sockets_unknown
    obj = build_topology("n1", facts, Allocatable(frozenset({0, 1})), [], "restricted", "container")
    assert [z["type"] for z in obj["zones"]] == ["Node", "Node"] and not any("parent" in z for z in obj["zones"])
    assert parse_nrt(obj).sockets is None


def test_a_numa_node_without_cpus_has_no_socket(tmp_path: Path) -> None:
    root = packages(sysfs(tmp_path), {0: "0\n", 1: "0\n"})
    (root / "devices" / "system" / "node" / "node1" / "cpulist").write_text("\n")
    assert read_sockets(root, {0: {0}, 1: set()}) == Sockets(
        {}, f"{root}/devices/system/node/node1: no CPU, so no package")


@pytest.mark.parametrize(("sockets", "zones", "parents"), [
    ({0: 0, 1: 0}, ["node-0", "node-1", "socket-0"], ["socket-0", "socket-0"]),
    ({0: 1, 1: 0}, ["node-0", "node-1", "socket-0", "socket-1"], ["socket-1", "socket-0"]),
    ({0: 0}, ["node-0", "node-1"], [None, None]),  # NUMA 1's socket not known: none published
    ({}, ["node-0", "node-1"], [None, None]),
])
def test_socket_zones_and_parents(sockets: dict[int, int], zones: list[str], parents: list[str | None]) -> None:
    facts = NodeFacts(FACTS.cpus, FACTS.memory, FACTS.distances, sockets)
    obj = build_topology("n1", facts, ALLOCATABLE, [PINNED], "restricted", "container")
    assert [z["name"] for z in obj["zones"]] == zones
    assert [z.get("parent") for z in obj["zones"] if z["type"] == "Node"] == parents
    # a Socket zone is its name and type only (v1alpha2: resources, costs, attributes are optional)
    assert all(z == {"name": z["name"], "type": "Socket"} for z in obj["zones"] if z["type"] != "Node")
    # the Node zones are what they were without sockets; what numa: auto and the extender read of them too
    plain = build_topology("n1", FACTS, ALLOCATABLE, [PINNED], "restricted", "container")
    assert resources(obj) == resources(plain)
    topo = parse_nrt(obj)
    assert topo.sockets == ((sockets[0], sockets[1]) if len(sockets) == 2 else None)
    state = read_nrt(obj)
    assert state is not None and state.free.sockets == topo.sockets
    assert [z.allocatable["cpu"] for z in state.free.zones] == [1000, 1000]  # CPU 2 is the pinned Pod's


class API:
    """The two requests the publisher makes: GET the Node, PATCH (apply) the object."""

    def __init__(self, apply_status: int = 200) -> None:
        self.applied: list[str] = []
        self.apply_status = apply_status

    def request(self, method: str, path: str, query: list[tuple[str, str]], body: Any,
                content_type: str | None) -> Reply:
        """``Lister.request``: ``send``'s answer (no Retry-After)."""
        return Reply(*self.send(method, path, query, body, content_type))

    def send(self, method: str, path: str, query: list[tuple[str, str]], body: Any,
             content_type: str | None) -> tuple[int, dict[str, Any]]:
        if method == "GET":
            return 200, {"metadata": {"name": "n1", "uid": "uid-1"}}
        assert (method, content_type) == ("PATCH", "application/apply-patch+yaml")
        assert dict(query) == {"fieldManager": "qos-guard-agent", "force": "true"}
        assert path == "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/n1"
        self.applied.append(body)
        return self.apply_status, {"message": "noderesourcetopologies is forbidden"}


class DeviceKubelet(Kubelet):
    def GetAllocatableResources(self, request: Any, context: Any) -> api_pb2.AllocatableResourcesResponse:
        return api_pb2.AllocatableResourcesResponse(cpu_ids=[1], devices=[api_pb2.ContainerDevices(
            resource_name=GPU, device_ids=["gpu-1"], topology=topology(1))])


def test_publisher_applies_only_changes(tmp_path: Path) -> None:
    root, socket = sysfs(tmp_path / "sys"), tmp_path / "kubelet.sock"
    fake = DeviceKubelet()
    server = serve(socket, fake)
    api = API()
    logged: list[str] = []
    try:
        publisher = TopologyPublisher(api, "n1", socket, root, logged.append,
                                      configz=lambda: ("single-numa-node", "container"))
        with PodResourcesClient(socket) as kubelet:
            assert publisher.step(kubelet, 100.0) and not publisher.step(kubelet, 100.5)
            fake.pods = [api_pb2.PodResources(name="p", namespace="ns",
                                              containers=[container("app", [1], [(GPU, ["gpu-1"], [1])])])]
            assert publisher.step(kubelet, 101.0)
            assert publisher.step(kubelet, 200.0)  # unchanged, applied again after RESYNC
        first, second = api.applied[0], api.applied[1]
        assert '"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-1"}]' in first
        assert '"available": "1"' in first and '"available": "0"' in second and ATTRIBUTE in second
        assert any("topologyManagerPolicy single-numa-node" in line for line in logged)
    finally:
        server.stop(None)


def test_publisher_says_once_why_sockets_are_not_known(tmp_path: Path) -> None:
    root, socket = sysfs(tmp_path / "sys"), tmp_path / "kubelet.sock"  # no physical_package_id at all
    server = serve(socket, DeviceKubelet())
    api = API()
    logged: list[str] = []
    try:
        publisher = TopologyPublisher(api, "n1", socket, root, logged.append, policy="restricted", scope="pod")
        with PodResourcesClient(socket) as kubelet:
            assert publisher.step(kubelet, 0.0)
            assert publisher.step(kubelet, REREAD + 1.0)  # read again (and applied again: RESYNC passed)
            said = [line for line in logged if "sockets are not known" in line]
            assert len(said) == 1 and said[0].endswith(
                "node0/cpu0/topology/physical_package_id: cannot read (No such file or directory)"), logged
            assert '"parent"' not in api.applied[-1] and '"Socket"' not in api.applied[-1]
            packages(root, {0: "0\n", 1: "1\n"})  # now known: at the next read
            assert publisher.step(kubelet, 2 * REREAD + 2.0)
        obj = json.loads(api.applied[-1])
        assert [(z["name"], z["type"], z.get("parent")) for z in obj["zones"]] == [
            ("node-0", "Node", "socket-0"), ("node-1", "Node", "socket-1"), ("socket-0", "Socket", None),
            ("socket-1", "Socket", None)]
        assert len([line for line in logged if "sockets are not known" in line]) == 1
    finally:
        server.stop(None)


def test_publisher_errors_are_named_and_logged_once(tmp_path: Path) -> None:
    # every NUMA node's socket known: the one line logged is the failure's
    root, socket = packages(sysfs(tmp_path / "sys"), {0: "0\n", 1: "0\n"}), tmp_path / "kubelet.sock"
    server = serve(socket, DeviceKubelet())
    try:
        publisher = TopologyPublisher(API(403), "n1", socket, root, print,
                                      policy="none", scope="container")
        with PodResourcesClient(socket) as kubelet, pytest.raises(ClusterError, match="grant create and patch"):
            publisher.step(kubelet, 0.0)
    finally:
        server.stop(None)
    # A socket answering garbage: one named line in the log, the thread goes on, no traceback.
    server = serve(socket, raw=b"\xff\xff\xff\xff")
    logged: list[str] = []
    stop = threading.Event()
    try:
        publisher = TopologyPublisher(API(), "n1", socket, root, logged.append,
                                      poll=0.05, policy="none", scope="container")
        publisher.start(stop)
        threading.Event().wait(0.5)
        stop.set()
        publisher.join(5)
    finally:
        server.stop(None)
    assert len(logged) == 1 and "is not a PodResources v1 message" in logged[0], logged


def test_a_pod_level_pods_shared_pool_is_taken_once() -> None:
    """PodLevelResourceManagers: two containers of one Pod share its pool (CPUs 2-3), each reporting it as its
    cpu_ids (pkg/kubelet/cm/cpumanager/policy_static.go:498): the pool's 2 CPUs are taken once, not once each."""
    facts = NodeFacts({0: frozenset({0, 1}), 1: frozenset({2, 3, 4, 5})}, {}, {})
    pool = frozenset({2, 3})
    pod = PodAllocation("ns", "pod-level", (ContainerAllocation("a", pool), ContainerAllocation("b", pool)))
    obj = build_topology("n1", facts, Allocatable(frozenset({1, 2, 3, 4, 5})), [pod], "single-numa-node", "pod")
    assert resources(obj)["node-1"]["cpu"] == ("4", "4", "2")
