"""DRA devices on the node (webhook/node/dra_locality.py, judge_container, observe, verify, the agent's metric and
Events): each device's NUMA node from its ResourceSlice and sysfs fixture trees, in the documented order; bad values; a
device whose NUMA node cannot be found makes the container unknown, never aligned (a device plugin's device
without TopologyInfo too); a DRA device off the CPUs' NUMA node is misaligned and says why."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.nodelogic.fakes import SLICES, FakeAPI, Kubelet, container, serve
from tests.nodelogic.trees import sysfs
from webhook.cli import main
from webhook.node.agent import Events, VerdictGauges
from webhook.node.allocation import Allocatable, ContainerAllocation, DeviceGroup, DraDevice
from webhook.node.dra_locality import (
    NUMA_NODE,
    PCI_BUS_ID,
    PCIE_ROOT,
    SliceIndex,
    check_attribute_names,
    resolve,
    slice_kept,
)
from webhook.node.kubelet import PodResourcesClient
from webhook.node.observe import ListedView, observe
from webhook.node.podinfo import ContainerSpec, PodInfo
from webhook.node.podresources import api_pb2
from webhook.node.sysfs import Answer, SysfsLocality
from webhook.node.verdict import NUMA_MISALIGNED, NUMA_UNKNOWN, judge_container
from webhook.node.verdict_text import DRA_REASON
from webhook.node.verify import render_json, render_text, summary_line
from webhook.node.watched import SHARED_SLICES, WatchedView

DRIVER = "gpu.example.com"
DEFAULT_NAMES = "dra.net/numaNode, gpu.amd.com/numaNode, dra.memory/numaNode, gpu.nvidia.com/numa"
TWO_NODES = {0: 0, 1: 1}  # CPU -> NUMA node
UID = "00000001-0000-4000-8000-000000000000"


def rslice(name: str, devices: dict[str, dict[str, Any]], driver: str = DRIVER, node: str = "node-1",
           pool: str = "node-1", generation: int = 1) -> dict[str, Any]:
    """A resource.k8s.io/v1 ResourceSlice as the API server stores it."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "resourceVersion": "1"},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
                     "devices": [{"name": n, "attributes": a} for n, a in devices.items()]}}


def index(*slices: dict[str, Any], node: str | None = "node-1") -> SliceIndex:
    return SliceIndex.build([k for s in slices if (k := slice_kept(s)) is not None], node)


def dev(name: str = "gpu-0", driver: str = DRIVER, pool: str = "node-1") -> DraDevice:
    return DraDevice(driver, pool, name, "ns/claim")


def pci_tree(root: Path, devices: dict[str, str], bus_root: str = "pci0000:00") -> Path:
    """sysfs as the kernel lays out PCI: SYS/devices/<root>/<BDF>/numa_node, and SYS/bus/pci/devices/<BDF> a
    relative symlink to it."""
    bus = root / "bus" / "pci" / "devices"
    bus.mkdir(parents=True, exist_ok=True)
    for bdf, numa in devices.items():
        folder = root / "devices" / bus_root / bdf
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "numa_node").write_text(numa + "\n")
        (folder / "vendor").write_text("0x10de\n")
        os.symlink(f"../../../devices/{bus_root}/{bdf}", bus / bdf)
    return root


class NoSysfs:
    """A Locality that must not be asked: the slice answers before sysfs is read."""

    def pci_device(self, bdf: str) -> Answer:
        raise AssertionError(f"sysfs read for {bdf}")

    def pcie_root(self, root: str) -> Answer:
        raise AssertionError(f"sysfs read for {root}")


# --- each source, and the order ---

def test_the_standard_numa_node_attribute() -> None:
    got = resolve(dev(), index(rslice("s", {"gpu-0": {NUMA_NODE: {"int": 1}}})), NoSysfs())
    assert (got.numa, got.source, got.path, got.looked) == (frozenset({1}), NUMA_NODE, "", "")


def test_a_list_valued_numa_node_is_the_devices_own_node_first() -> None:
    """DRAListTypeAttributes (1.37): the list is the device's own node, then the nodes of its socket equally near
    (k8s.io/dynamic-resource-allocation v0.37.2 deviceattribute/numa_linux.go, makeNUMANodeListAttribute). The
    device sits on the first only: before, every node listed counted, so a GPU on node 1 listed [1, 0] passed
    as aligned with CPUs on node 0."""
    got = resolve(dev(), index(rslice("s", {"gpu-0": {NUMA_NODE: {"ints": [1, 0]}}})), NoSysfs())
    assert got.numa == {1} and got.source == NUMA_NODE
    assert resolve(dev(), index(rslice("s", {"gpu-0": {NUMA_NODE: {"ints": [2]}}})), NoSysfs()).numa == {2}
    bad = resolve(dev(), index(rslice("s", {"gpu-0": {NUMA_NODE: {"ints": [1, -1]}}})), NoSysfs())
    assert not bad.numa and "not a NUMA node" in bad.looked


def test_driver_attributes_qualified_and_bare_in_the_drivers_domain() -> None:
    dranet = index(rslice("s", {"eth0": {"dra.net/numaNode": {"int": 1}}}, driver="dra.net"))
    got = resolve(dev("eth0", driver="dra.net"), dranet, NoSysfs())
    assert got.numa == {1} and got.source == "dra.net/numaNode"
    # AMD's driver writes numaNode without a domain: it is gpu.amd.com/numaNode.
    amd = index(rslice("s", {"gpu-0": {"numaNode": {"int": 0}}}, driver="gpu.amd.com"))
    got = resolve(dev(driver="gpu.amd.com"), amd, NoSysfs())
    assert got.numa == {0} and got.source == "gpu.amd.com/numaNode"
    # The same name written qualified is the same attribute.
    amd = index(rslice("s", {"gpu-0": {"gpu.amd.com/numaNode": {"int": 1}}}, driver="gpu.amd.com"))
    assert resolve(dev(driver="gpu.amd.com"), amd, NoSysfs()).numa == {1}
    # Another driver's bare numaNode is not AMD's: the default names read it under its own domain.
    assert resolve(dev(), index(rslice("s", {"gpu-0": {"numaNode": {"int": 1}}})), NoSysfs()).source == \
        f"{DRIVER}/numaNode"


def test_configured_names_replace_the_defaults_in_their_order() -> None:
    attrs = {"dra.net/numaNode": {"int": 0}, "vendor.example/socket": {"int": 1}, "node": {"int": 0}}
    idx = index(rslice("s", {"gpu-0": attrs}))
    assert resolve(dev(), idx, NoSysfs()).source == "dra.net/numaNode"
    got = resolve(dev(), idx, NoSysfs(), ["vendor.example/socket", "node"])
    assert got.numa == {1} and got.source == "vendor.example/socket"
    got = resolve(dev(), idx, NoSysfs(), ["node"])
    assert got.numa == {0} and got.source == f"{DRIVER}/node"


def test_pci_bus_id_reads_sysfs(tmp_path: Path) -> None:
    sys_root = pci_tree(tmp_path / "sys", {"0000:3b:00.0": "1", "0000:3c:00.0": "0"})
    got = resolve(dev(), index(rslice("s", {"gpu-0": {PCI_BUS_ID: {"string": "0000:3b:00.0"}}})),
                  SysfsLocality(sys_root))
    assert got.numa == {1} and got.source == PCI_BUS_ID
    assert got.path == str(sys_root / "bus/pci/devices/0000:3b:00.0/numa_node")


def test_pcie_root_reads_the_devices_on_the_root_bus(tmp_path: Path) -> None:
    sys_root = pci_tree(tmp_path / "sys", {"0000:00:01.0": "0", "0000:00:02.0": "0"})
    pci_tree(sys_root, {"0000:80:01.0": "1"}, bus_root="pci0000:80")
    locality = SysfsLocality(sys_root)
    got = resolve(dev(), index(rslice("s", {"gpu-0": {PCIE_ROOT: {"string": "pci0000:80"}}})), locality)
    assert got.numa == {1} and got.source == PCIE_ROOT
    assert got.path == str(sys_root / "devices/pci0000:80/0000:80:01.0/numa_node")
    # A root with its own numa_node file: that file.
    (sys_root / "devices" / "pci0000:00" / "numa_node").write_text("1\n")
    assert locality.pcie_root("pci0000:00") == Answer(frozenset({1}), str(sys_root / "devices/pci0000:00/numa_node"))


def test_the_order_numa_node_driver_attribute_pci_bus_id_pcie_root(tmp_path: Path) -> None:
    sys_root = pci_tree(tmp_path / "sys", {"0000:3b:00.0": "1"})
    pci_tree(sys_root, {"0000:80:00.0": "0"}, bus_root="pci0000:80")
    locality = SysfsLocality(sys_root)
    everything = {NUMA_NODE: {"int": 0}, "dra.net/numaNode": {"int": 1}, PCI_BUS_ID: {"string": "0000:3b:00.0"},
                  PCIE_ROOT: {"string": "pci0000:80"}}
    expected = [(NUMA_NODE, frozenset({0})), ("dra.net/numaNode", frozenset({1})), (PCI_BUS_ID, frozenset({1})),
                (PCIE_ROOT, frozenset({0}))]
    for name, numa in expected:
        got = resolve(dev(), index(rslice("s", {"gpu-0": everything})), locality)
        assert (got.source, got.numa) == (name, numa)
        everything = {k: v for k, v in everything.items() if k != name}


# --- bad values: the next source, and unknown when none answers ---

def test_a_string_numa_node_is_not_a_node_and_the_next_source_answers() -> None:
    idx = index(rslice("s", {"gpu-0": {NUMA_NODE: {"string": "0"}, "dra.net/numaNode": {"int": 1}}}))
    got = resolve(dev(), idx, NoSysfs())
    assert got.numa == {1} and got.source == "dra.net/numaNode"
    assert got.looked == f"{NUMA_NODE} is string '0', not an int"  # said beside the answer


@pytest.mark.parametrize(("value", "why"), [
    ({"string": "0"}, "is string '0', not an int"),
    ({"int": -1}, "is int -1, not a NUMA node (0-65535)"),
    ({"int": 70000}, "is int 70000, not a NUMA node (0-65535)"),
    ({"bool": True}, "is bool True, not an int"),
    ({"ints": [0, -2]}, "is ints [0, -2], not a NUMA node (0-65535)"),
])
def test_bad_numa_node_values_are_unknown_naming_the_value(value: dict[str, Any], why: str) -> None:
    got = resolve(dev(), index(rslice("gpus", {"gpu-0": {NUMA_NODE: value}})), NoSysfs())
    assert not got.numa and not got.source
    assert got.looked == (f"ResourceSlice gpus: looked for {NUMA_NODE}, {DEFAULT_NAMES}, {DRIVER}/numaNode, "
                          f"{PCI_BUS_ID}, {PCIE_ROOT}: {NUMA_NODE} {why}")


def test_a_bdf_sysfs_lacks_and_a_minus_one_numa_node_are_unknown(tmp_path: Path) -> None:
    sys_root = pci_tree(tmp_path / "sys", {"0000:3b:00.0": "-1"})
    locality = SysfsLocality(sys_root)
    got = resolve(dev(), index(rslice("s", {"gpu-0": {PCI_BUS_ID: {"string": "0000:3b:00.0"}}})), locality)
    path = sys_root / "bus/pci/devices/0000:3b:00.0/numa_node"
    assert not got.numa
    assert got.looked.endswith(f"{PCI_BUS_ID} 0000:3b:00.0: {path} is -1: the kernel knows no NUMA node for it")
    got = resolve(dev(), index(rslice("s", {"gpu-0": {PCI_BUS_ID: {"string": "0000:99:00.0"}}})), locality)
    missing = sys_root / "bus/pci/devices/0000:99:00.0/numa_node"
    assert not got.numa and f"{PCI_BUS_ID} 0000:99:00.0: {missing} cannot read (No such file or directory)" in \
        got.looked
    # A malformed BDF is never turned into a path (upstream's extended BDF form, lower-case hex).
    for bad in ("0000:3B:00.0", "3b:00.0", "../../../etc/passwd"):
        got = resolve(dev(), index(rslice("s", {"gpu-0": {PCI_BUS_ID: {"string": bad}}})), NoSysfs())
        assert not got.numa and f"{PCI_BUS_ID} is {bad!r}, not a PCI address in extended BDF form" in got.looked
    # The next source after a BDF without an answer.
    pci_tree(sys_root, {"0000:80:00.0": "1"}, bus_root="pci0000:80")
    both = {PCI_BUS_ID: {"string": "0000:99:00.0"}, PCIE_ROOT: {"string": "pci0000:80"}}
    got = resolve(dev(), index(rslice("s", {"gpu-0": both})), locality)
    assert got.numa == {1} and got.source == PCIE_ROOT and "0000:99:00.0" in got.looked


def test_pcie_root_unknown_when_missing_minus_one_or_disagreeing(tmp_path: Path) -> None:
    sys_root = pci_tree(tmp_path / "sys", {"0000:00:01.0": "-1"})
    locality = SysfsLocality(sys_root)
    assert locality.pcie_root("pci0000:00").why == "is -1: the kernel knows no NUMA node for it"
    assert locality.pcie_root("pci0000:40") == Answer(frozenset(), str(sys_root / "devices/pci0000:40"),
                                                      "no such folder")
    pci_tree(sys_root, {"0000:80:01.0": "0", "0000:80:02.0": "1"}, bus_root="pci0000:80")
    assert locality.pcie_root("pci0000:80").why == \
        "the devices on it disagree (0000:80:01.0 on 0, 0000:80:02.0 on 1)"
    got = resolve(dev(), index(rslice("s", {"gpu-0": {PCIE_ROOT: {"string": "0000:80"}}})), NoSysfs())
    assert "is '0000:80', not a PCIe root pci<domain>:<bus> (pci0000:00)" in got.looked


def test_no_locality_attribute_at_all_says_what_was_looked_for() -> None:
    got = resolve(dev(), index(rslice("gpus", {"gpu-0": {"model": {"string": "LATEST-GPU"}}})), NoSysfs())
    assert got.looked == (f"ResourceSlice gpus: looked for {NUMA_NODE}, {DEFAULT_NAMES}, {DRIVER}/numaNode, "
                          f"{PCI_BUS_ID}, {PCIE_ROOT}: none of them is set")


# --- which slices count ---

def test_only_this_nodes_slices_of_the_newest_pool_generation() -> None:
    old = rslice("old", {"gpu-0": {NUMA_NODE: {"int": 0}}}, generation=1)
    new = rslice("new", {"gpu-0": {NUMA_NODE: {"int": 1}}}, generation=2)
    other = rslice("other", {"gpu-9": {NUMA_NODE: {"int": 0}}}, node="node-2")
    idx = index(old, new, other)
    assert resolve(dev(), idx, NoSysfs()).numa == {1}
    got = resolve(dev("gpu-9"), idx, NoSysfs())
    assert got.looked.startswith("no ResourceSlice of node node-1 publishes device gpu-9 in pool node-1 of "
                                 f"driver {DRIVER} (read: slices with spec.nodeName, devices[].nodeName of "
                                 "perDeviceNodeSelection slices, and devices given to allNodes or by a "
                                 f"nodeSelector; looked for {NUMA_NODE}, ")
    # Without a node name (verify without --node): any node's slice, unless several publish the device.
    assert resolve(dev("gpu-9"), index(old, other, node=None), NoSysfs()).numa == {0}
    twin = rslice("twin", {"gpu-0": {NUMA_NODE: {"int": 1}}}, node="node-2")
    got = resolve(dev(), index(old, twin, node=None), NoSysfs())
    assert not got.numa and "several nodes (node-1, node-2)" in got.looked and "--node" in got.looked


def test_slices_that_could_not_be_read_make_every_dra_device_unknown() -> None:
    idx = SliceIndex.build([], "node-1", "listing ResourceSlices: HTTP 403")
    assert resolve(dev(), idx, NoSysfs()).looked == "the ResourceSlices could not be read (listing ResourceSlices: " \
        "HTTP 403)"


def test_what_is_kept_of_a_slice() -> None:
    kept = slice_kept(rslice("s", {"gpu-0": {"numaNode": {"int": 0}, NUMA_NODE: {"int": 0}}}))
    assert kept == {"name": "s", "driver": DRIVER, "pool": "node-1", "generation": 1, "nodeName": "node-1",
                    "devices": [{"name": "gpu-0", "attributes": {f"{DRIVER}/numaNode": {"int": 0},
                                                                 NUMA_NODE: {"int": 0}}}]}
    assert slice_kept({"metadata": {"name": "x"}, "spec": "garbage"}) is None
    assert slice_kept({"metadata": {"name": "x"}, "spec": {"driver": DRIVER, "pool": {}, "devices": "x"}}) == {
        "name": "x", "driver": DRIVER, "pool": "", "generation": 0, "nodeName": "", "devices": []}


def test_configured_names_are_checked() -> None:
    assert check_attribute_names(["dra.net/numaNode", "numaNode"]) is None
    assert "not a device attribute name" in str(check_attribute_names(["dra.net/numa-node"]))
    assert "not a device attribute name" in str(check_attribute_names(["Bad_Domain/numaNode"]))


# --- the verdict ---

def pod_info() -> PodInfo:
    return PodInfo("ns", "gpu", UID, "Guaranteed", False, "2026-01-01T00:00:00Z", "enforce", None,
                   (ContainerSpec("app", 1000, None),))


def judge(**alloc: Any) -> Any:
    return judge_container(pod_info(), ContainerAllocation("app", frozenset({1}), **alloc),
                           Allocatable(frozenset({0, 1})), TWO_NODES)


def test_a_device_plugin_device_without_topology_is_unknown_never_aligned() -> None:
    p = judge(devices=(DeviceGroup("example.com/gpu", ("gpu-0",), frozenset()),))
    assert p.pinned and p.aligned is None and p.state == "unknown"
    assert [x.reason for x in p.problems] == [NUMA_UNKNOWN]
    assert p.problems[0].message == (
        "container app: cannot say whether it is on one NUMA node (CPUs 1 on NUMA 1, example.com/gpu gpu-0 on NUMA "
        "unknown): the NUMA node of example.com/gpu gpu-0: the device plugin reported no TopologyInfo (NUMA node) for "
        "it. Publish resource.kubernetes.io/numaNode (or pciBusID) in the driver's ResourceSlice, or have the "
        "device plugin report TopologyInfo")


def test_an_unknown_dra_device_names_the_device_and_what_was_looked_for() -> None:
    looked = "ResourceSlice s: looked for resource.kubernetes.io/numaNode: none of them is set"
    p = judge(dynamic=(DraDevice(DRIVER, "node-1", "gpu-0", "ns/claim", looked=looked),))
    assert p.aligned is None and p.state == "unknown" and p.detail.endswith(": NUMA alignment unknown")
    assert p.unknown == (f"DRA device {DRIVER}/node-1/gpu-0 (claim ns/claim): {looked}",)
    assert p.problems[0].reason == NUMA_UNKNOWN and f"DRA device {DRIVER}/node-1/gpu-0" in p.problems[0].message


def test_a_misaligned_dra_device_says_kubelet_does_not_align_it_and_the_way_out() -> None:
    gpu = DraDevice(DRIVER, "node-1", "gpu-0", "ns/claim", numa=frozenset({0}), source=NUMA_NODE)
    p = judge(dynamic=(gpu,))
    assert p.aligned is False and p.state == "misaligned" and p.numa == {0, 1}
    (problem,) = p.problems
    assert problem.reason == NUMA_MISALIGNED
    assert problem.message == (
        f"container app: CPUs 1 on NUMA 1, DRA {DRIVER}/node-1/gpu-0 (claim ns/claim) on NUMA 0: not on one NUMA "
        f"node (NUMA nodes 0-1): DRA device {DRIVER}/node-1/gpu-0 (claim ns/claim) on NUMA 0 (from {NUMA_NODE}), "
        f"the CPUs on NUMA 1: {DRA_REASON}; serve this device with its device plugin on pinned nodes (the Topology "
        "Manager aligns those), or keep a claim's devices together with a matchAttribute constraint on "
        "resource.kubernetes.io/numaNode and verify with qos-guard agent")


def test_an_aligned_dra_device() -> None:
    p = judge(dynamic=(DraDevice(DRIVER, "node-1", "gpu-1", "ns/claim", numa=frozenset({1}), source=NUMA_NODE),))
    assert p.aligned is True and p.state == "aligned" and not p.problems
    assert p.detail == f"CPUs 1 on NUMA 1, DRA {DRIVER}/node-1/gpu-1 (claim ns/claim) on NUMA 1: aligned on NUMA " \
        "node 1"


def test_misaligned_and_unknown_together_is_misaligned_with_both_problems() -> None:
    p = judge(dynamic=(DraDevice(DRIVER, "p", "gpu-0", "ns/c", numa=frozenset({0})),
                       DraDevice(DRIVER, "p", "gpu-x", "ns/c", looked="none of them is set")))
    assert p.aligned is False and p.state == "misaligned"
    assert [x.reason for x in p.problems] == [NUMA_MISALIGNED, NUMA_UNKNOWN]


# --- end to end in process: PodResources over gRPC, slices from the API, sysfs trees; verify and the agent ---

GPU_POD: dict[str, Any] = {
    "metadata": {"name": "gpu", "namespace": "ns", "uid": UID, "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "1", "memory": "64Mi"}}}]},
    "status": {"phase": "Running", "qosClass": "Guaranteed"}}


@pytest.fixture
def node(tmp_path: Path) -> Any:
    sys_root = sysfs(tmp_path / "sys", {0: "0", 1: "1"})
    pci_tree(sys_root, {"0000:3b:00.0": "0"})
    kubelet = Kubelet()
    kubelet.allocatable_cpus = [0, 1]
    api = FakeAPI()
    api.namespaces = [{"metadata": {"name": "ns", "labels": {"qos-guard.io/mode": "enforce"}}}]
    api.pods = [GPU_POD]
    api.slices = [rslice("node-1-gpus", {"gpu-0": {PCI_BUS_ID: {"string": "0000:3b:00.0"}},
                                         "gpu-1": {NUMA_NODE: {"int": 1}}, "gpu-2": {}}),
                  rslice("node-2-gpus", {"gpu-0": {NUMA_NODE: {"int": 1}}}, node="node-2", pool="node-2")]
    socket = tmp_path / "kubelet.sock"
    server = serve(socket, kubelet)
    yield kubelet, api, socket, sys_root
    server.stop(None)


STATIC_1 = [("memory", 64 << 20, [1])]  # a Memory Manager Static block on NUMA 1, the CPUs' node


def claim_pod(kubelet: Kubelet, *devices: str, memory: list[tuple[str, int, list[int]]] = ()) -> None:  # type: ignore[assignment]
    """``memory``: the Memory Manager's blocks (none: its policy None, so memory is not pinned)."""
    kubelet.pods = [api_pb2.PodResources(name="gpu", namespace="ns", containers=[
        container("app", [1], memory=memory, dra=[("ns", "gpu-claim", [(DRIVER, "node-1", d) for d in devices])])])]


def look(node: Any, name: str | None = "node-1") -> Any:
    _, api, socket, sys_root = node
    with PodResourcesClient(socket) as client:
        return observe(client, ListedView(api), sys_root, sys_root / "fs" / "cgroup", name)


def test_kubelet_dynamic_resources_reach_the_verdict(node: Any) -> None:
    kubelet, api, _, sys_root = node
    claim_pod(kubelet, "gpu-0")
    snap = look(node)
    (p,) = snap.verdicts
    assert p.dra_devices == (DraDevice(DRIVER, "node-1", "gpu-0", "ns/gpu-claim", (f"{DRIVER}/gpu=gpu-0",),
                                       frozenset({0}), PCI_BUS_ID,
                                       str(sys_root / "bus/pci/devices/0000:3b:00.0/numa_node")),)
    assert p.state == "misaligned"
    assert (SLICES, {"labelSelector": "", "fieldSelector": "spec.nodeName=node-1"}) in api.listed
    body = json.loads(render_json(snap))
    (c,) = body["containers"]
    assert c["state"] == "misaligned" and c["aligned"] is False and c["numaNodes"] == [0, 1]
    assert c["draDevices"] == [{
        "driver": DRIVER, "pool": "node-1", "device": "gpu-0", "claim": {"namespace": "ns", "name": "gpu-claim"},
        "cdiDevices": [f"{DRIVER}/gpu=gpu-0"], "numaNodes": [0], "numaSource": PCI_BUS_ID,
        "numaPath": str(sys_root / "bus/pci/devices/0000:3b:00.0/numa_node"), "unknown": None, "notes": None,
        "adminAccess": False}]
    assert c["problems"][0]["reason"] == "NUMAMisaligned" and DRA_REASON in c["problems"][0]["message"]
    assert body["summary"] == {"containers": 1, "pinnedAligned": 0, "memoryNotPinned": 0, "misaligned": 1,
                               "unknown": 0, "notPinned": 0, "problems": 1, "errors": 0}
    text = render_text(snap)
    assert f"ns/gpu/app: MISALIGNED: 1 exclusive CPU, CPUs 1 on NUMA 1, DRA {DRIVER}/node-1/gpu-0 (claim " \
           f"ns/gpu-claim) on NUMA 0: not on one NUMA node; memory not pinned (Memory Manager None): memory " \
           f"placement unknown (no memory cgroup read); {DRIVER}/node-1/gpu-0: {DRA_REASON}; serve this " in text


def test_verify_aligned_and_unknown_dra_devices(node: Any) -> None:
    kubelet = node[0]
    claim_pod(kubelet, "gpu-1", memory=STATIC_1)
    (c,) = json.loads(render_json(look(node)))["containers"]
    assert c["state"] == "aligned" and c["aligned"] is True and c["problems"] == []
    claim_pod(kubelet, "gpu-1")  # Memory Manager None: the device is aligned, the memory is not pinned
    (c,) = json.loads(render_json(look(node)))["containers"]
    assert c["state"] == "memory-not-pinned" and c["aligned"] is True and c["memoryPinned"] is False
    assert c["draDevices"][0]["numaNodes"] == [1] and c["draDevices"][0]["numaSource"] == NUMA_NODE
    claim_pod(kubelet, "gpu-2")
    snap = look(node)
    (c,) = json.loads(render_json(snap))["containers"]
    assert c["state"] == "unknown" and c["aligned"] is None and [x["reason"] for x in c["problems"]] == [NUMA_UNKNOWN]
    assert c["draDevices"][0]["numaNodes"] == [] and c["draDevices"][0]["numaSource"] is None
    assert c["draDevices"][0]["unknown"].startswith("ResourceSlice node-1-gpus: looked for resource.kubernetes.io/")
    assert c["unknown"] == [f"DRA device {DRIVER}/node-1/gpu-2 (claim ns/gpu-claim): "
                            f"{c['draDevices'][0]['unknown']}"]
    assert "ns/gpu/app: NUMA UNKNOWN: 1 exclusive CPU, " in render_text(snap)
    assert "0 misaligned, 1 with NUMA alignment unknown" in summary_line(snap)


def test_verify_without_access_to_slices_calls_dra_devices_unknown(node: Any) -> None:
    kubelet, api = node[0], node[1]
    claim_pod(kubelet, "gpu-1")
    api.refuse[SLICES] = 403
    (p,) = look(node).verdicts
    assert p.state == "unknown"
    assert p.dra_devices[0].looked.startswith(f"the ResourceSlices could not be read (listing ResourceSlices: GET "
                                              f"{SLICES}: HTTP 403")
    assert "grant list on resourceslices (apiGroup resource.k8s.io)" in p.dra_devices[0].looked


def test_verify_lists_no_slices_without_dra_devices(node: Any) -> None:
    kubelet, api = node[0], node[1]
    kubelet.pods = [api_pb2.PodResources(name="gpu", namespace="ns", containers=[container("app", [1],
                                                                                        memory=STATIC_1)])]
    assert look(node).verdicts[0].state == "aligned"
    assert not [p for p, _ in api.listed if p == SLICES]


def test_the_agents_metric_and_events_for_unknown_and_misaligned(node: Any) -> None:
    kubelet, api = node[0], node[1]
    claim_pod(kubelet, "gpu-0", "gpu-2")
    (misaligned,) = look(node).verdicts
    claim_pod(kubelet, "gpu-2")
    (unknown,) = look(node).verdicts
    unknown = type(unknown)(**{**{f: getattr(unknown, f) for f in unknown.__slots__}, "pod": "other"})
    collector = VerdictGauges()
    collector.update([misaligned, unknown])
    values = {(f.name, s.labels["pod"]): s.value for f in collector.collect() for s in f.samples}
    assert values[("qos_guard_container_numa_aligned", "gpu")] == 0
    assert values[("qos_guard_container_numa_aligned", "other")] == -1
    created, errors = Events(api, "node-1").emit([misaligned, unknown], datetime(2026, 1, 1, tzinfo=UTC))
    assert errors == [] and created == 3
    sent = [(b["involvedObject"]["name"], b["reason"], b["message"]) for _, _, b in api.sent if b]
    assert [(pod, reason) for pod, reason, _ in sent] == [("gpu", "NUMAMisaligned"), ("gpu", "NUMAUnknown"),
                                                           ("other", "NUMAUnknown")]
    assert f"DRA device {DRIVER}/node-1/gpu-0 (claim ns/gpu-claim) on NUMA 0 (from {PCI_BUS_ID})" in sent[0][2]
    assert f"the NUMA node of DRA device {DRIVER}/node-1/gpu-2 (claim ns/gpu-claim): ResourceSlice" in sent[2][2]


def test_the_watched_view_keeps_the_nodes_slices_and_judges_without_them() -> None:
    view = WatchedView(FakeAPI(), "node-1", lambda _: None)
    view.namespaces.replace([])
    view.pod_store.replace([])
    assert view.synced() and view.opted_in() == {}  # judging does not wait for the slices
    assert view.slices("node-1") == ([], "not listed yet")
    view._changed("resourceslices", "listing resourceslices is not allowed (HTTP 403)")
    assert not view.slices_answered()  # the slices that name no node are not answered yet
    view._changed(SHARED_SLICES, "listing resourceslices of no node is not allowed (HTTP 403)")
    assert view.slices_answered() and view.slices("node-1")[1] == "listing resourceslices is not allowed (HTTP 403)"
    assert view.pods("node-1", []) == {}  # a slices problem never stops the judging
    view.slice_store.replace([rslice("s", {"gpu-0": {NUMA_NODE: {"int": 0}}})])
    view._changed("resourceslices", None)
    assert view.slices("node-1")[1] == "listing resourceslices of no node is not allowed (HTTP 403)"
    view.shared_slice_store.replace([])
    view._changed(SHARED_SLICES, None)
    kept, problem = view.slices("node-1")
    assert problem is None and [k["name"] for k in kept] == ["s"]
    (reflector,) = [r for r in view.reflectors if r.name == "resourceslices"]
    assert (reflector.path, reflector.selectors) == (SLICES, (None, "spec.nodeName=node-1"))
    (shared,) = [r for r in view.reflectors if r.name == SHARED_SLICES]
    assert (shared.path, shared.selectors) == (SLICES, (None, "spec.nodeName="))


def test_dra_numa_attribute_names_are_checked_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--dra-numa-attribute", "not a name"]) == 2
    assert "verify: --dra-numa-attribute 'not a name' is not a device attribute name" in capsys.readouterr().err


def test_claims_in_the_spec_without_dra_devices_in_podresources_are_unknown() -> None:
    """Kubelet without KubeletPodResourcesDynamicResources reports no dynamic_resources: the claims the Pod gives
    the container still make it unknown, not aligned."""
    from webhook.node.podinfo import pod_info as info_of

    obj = {**GPU_POD, "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                               "containers": [{"name": "app", "resources": {
                                   "limits": {"cpu": "1", "memory": "64Mi"}, "claims": [{"name": "gpu"}]}}]},
           "status": {**GPU_POD["status"], "extendedResourceClaimStatus": {
               "resourceClaimName": "gpu-extended-resources-x7k2p",
               "requestMappings": [{"containerName": "app", "resourceName": "example.com/dra-gpu",
                                    "requestName": "container-0-request-0"}]}}}
    info = info_of(obj, "enforce", None)
    assert info.containers[0].claims == ("claim gpu", "extended resource example.com/dra-gpu (claim "
                                         "gpu-extended-resources-x7k2p)")
    p = judge_container(info, ContainerAllocation("app", frozenset({1})), Allocatable(frozenset({0, 1})), TWO_NODES)
    assert p.state == "unknown" and [x.reason for x in p.problems] == [NUMA_UNKNOWN]
    assert p.unknown == ("the DRA devices of claim gpu, extended resource example.com/dra-gpu (claim "
                         "gpu-extended-resources-x7k2p): the Pod gives them to this container, yet kubelet's "
                         "PodResources reported no DRA device for it (is kubelet's KubeletPodResourcesDynamicResources "
                         "feature gate off?)",)
    # With the devices reported, they are judged instead.
    gpu = DraDevice(DRIVER, "node-1", "gpu-1", "ns/gpu-claim", numa=frozenset({1}), source=NUMA_NODE)
    p = judge_container(info, ContainerAllocation("app", frozenset({1}), dynamic=(gpu,)),
                        Allocatable(frozenset({0, 1})), TWO_NODES)
    assert p.state == "aligned" and not p.unknown
