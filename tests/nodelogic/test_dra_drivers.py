"""DRA slices as the drivers users run publish them (webhook/node/dra_locality.py), each shape from the driver's own
code, named with its repository, file and the commit read; the v1 API's per-device node selection
(``perDeviceNodeSelection``: k8s.io/api v0.36.3 resource/v1 types.go, ``Device.NodeName``/``NodeSelector``/
``AllNodes``), pool generations (an out-dated slice set aside, as k8s.io/dynamic-resource-allocation's
``GatherPools``/``addSlice`` do), the list form of ``resource.kubernetes.io/numaNode`` (DRAListTypeAttributes),
and devices given with ``adminAccess`` (a monitoring Pod's: not judged as the workload's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.nodelogic.fakes import SLICES, FakeAPI, Kubelet, container, serve
from tests.nodelogic.test_dra import GPU_POD, NoSysfs, pci_tree
from tests.nodelogic.trees import sysfs
from webhook.node.allocation import Allocatable, ContainerAllocation, DraDevice
from webhook.node.dra_locality import (
    DEFAULT_DRIVER_ATTRIBUTES,
    NUMA_NODE,
    PCI_BUS_ID,
    PCIE_ROOT,
    SliceIndex,
    admin_devices,
    claim_path,
    kept_for,
    mark_admin,
    resolve,
    slice_kept,
)
from webhook.node.kubelet import PodResourcesClient
from webhook.node.observe import ListedView, observe
from webhook.node.podinfo import ContainerSpec, PodInfo
from webhook.node.podresources import api_pb2
from webhook.node.sysfs import SysfsLocality
from webhook.node.verdict import NUMA_MISALIGNED, judge_container
from webhook.node.verify import render_json
from webhook.node.watched import WatchedView

NODE = "node-1"


def published(driver: str, devices: list[dict[str, Any]], name: str = "s", pool: str = NODE, generation: int = 1,
              **placement: Any) -> dict[str, Any]:
    """A resource.k8s.io/v1 ResourceSlice as a driver's kubeletplugin (k8s.io/dynamic-resource-allocation
    resourceslice controller) writes it: pool named after the node, ``spec.nodeName`` unless ``placement``
    says otherwise (``perDeviceNodeSelection=True``, ``allNodes=True``)."""
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool, "generation": generation,
                                                       "resourceSliceCount": 1}, "devices": devices}
    spec.update(placement or {"nodeName": NODE})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "resourceVersion": "1"}, "spec": spec}


def one(obj: dict[str, Any], device: str, locality: Any = None, node: str | None = NODE,
        driver: str | None = None, pool: str = NODE) -> DraDevice:
    kept = slice_kept(obj)
    assert kept is not None
    return resolve(DraDevice(driver or kept["driver"], pool, device, "ns/claim"),
                   SliceIndex.build([kept], node), locality or NoSysfs())


# --- each driver, as it publishes ---

def dranet_nic(standard: dict[str, Any] | None) -> dict[str, Any]:
    """kubernetes-sigs/dranet pkg/inventory/db.go (f258477, addPCIAttributes) and pkg/apis/attributes.go:
    dra.net/numaNode a scalar from ghw's PCI node, resource.kubernetes.io/numaNode from deviceattribute (scalar,
    or with WithListNUMAAttributes the list: own node first), pciAddress and pcieRoot."""
    attrs: dict[str, Any] = {"dra.net/ifName": {"string": "eth1"}, "dra.net/pciAddress": {"string": "0000:8a:00.0"},
                             "dra.net/numaNode": {"int": 1}, "dra.net/sriov": {"bool": True},
                             PCIE_ROOT: {"string": "pci0000:80"}}
    if standard is not None:
        attrs[NUMA_NODE] = standard
    return published("dra.net", [{"name": "pci-0000-8a-00-0", "attributes": attrs}])


def test_dranet_scalar_list_and_legacy_forms() -> None:
    got = one(dranet_nic({"ints": [1, 0]}), "pci-0000-8a-00-0")  # WithListNUMAAttributes
    assert (got.numa, got.source) == (frozenset({1}), NUMA_NODE)
    got = one(dranet_nic({"int": 1}), "pci-0000-8a-00-0")
    assert (got.numa, got.source) == (frozenset({1}), NUMA_NODE)
    got = one(dranet_nic(None), "pci-0000-8a-00-0")  # a dranet before the standard attribute
    assert (got.numa, got.source) == (frozenset({1}), "dra.net/numaNode")


def sriov_vf(numa: int) -> dict[str, Any]:
    """k8snetworkplumbingwg/dra-driver-sriov pkg/devicestate/discovery.go (cd9404f) with pkg/consts/consts.go:
    driver sriovnetwork.k8snetworkplumbingwg.io; dra.net/numaNode (the "DraNetCompatPrefix") an int, -1 when
    the kernel knows no node; the standard pciBusID and pcieRoot; no resource.kubernetes.io/numaNode."""
    driver = "sriovnetwork.k8snetworkplumbingwg.io"
    return published(driver, [{"name": "0000-3b-02-1", "attributes": {
        f"{driver}/vendor": {"string": "8086"}, f"{driver}/pciAddress": {"string": "0000:3b:02.1"},
        f"{driver}/PFName": {"string": "ens1f0"}, f"{driver}/vfID": {"int": 1},
        PCIE_ROOT: {"string": "pci0000:3a"}, PCI_BUS_ID: {"string": "0000:3b:02.1"},
        "dra.net/numaNode": {"int": numa}}}])


def test_sriov_vf_from_its_dranet_compatible_attribute_and_minus_one_falls_to_sysfs(tmp_path: Path) -> None:
    got = one(sriov_vf(1), "0000-3b-02-1")
    assert (got.numa, got.source) == (frozenset({1}), "dra.net/numaNode")
    sys_root = pci_tree(tmp_path / "sys", {"0000:3b:02.1": "0"}, bus_root="pci0000:3a")
    got = one(sriov_vf(-1), "0000-3b-02-1", SysfsLocality(sys_root))
    assert (got.numa, got.source) == (frozenset({0}), PCI_BUS_ID)
    assert "dra.net/numaNode is int -1, not a NUMA node" in got.looked


def amd_gpu(with_numa: bool) -> dict[str, Any]:
    """bhatnitish/k8s-gpu-dra-driver cmd/gpu-kubeletplugin/deviceinfo.go (218ca4c), a fork of
    ROCm/k8s-gpu-dra-driver: attributes named without a domain (so gpu.amd.com/...), numaNode an int from sysfs
    numa_node; ROCm/k8s-gpu-dra-driver's own main (c2b31bd) publishes no numaNode, only pciAddr and pcieRoot."""
    attrs: dict[str, Any] = {"type": {"string": "amdgpu"}, "pciAddr": {"string": "0003:00:02.0"},
                             "cardIndex": {"int": 40}, "renderIndex": {"int": 168},
                             "productName": {"string": "AMD_Instinct_MI300X_OAM"},
                             PCIE_ROOT: {"string": "pci0003:00"}}
    if with_numa:
        attrs["numaNode"] = {"int": 1}
    return published("gpu.amd.com", [{"name": "gpu-40-168", "attributes": attrs}])


def test_amd_gpu_bare_numa_node_and_rocm_main_by_pcie_root(tmp_path: Path) -> None:
    got = one(amd_gpu(True), "gpu-40-168")
    assert (got.numa, got.source) == (frozenset({1}), "gpu.amd.com/numaNode")
    sys_root = pci_tree(tmp_path / "sys", {"0003:00:02.0": "1"}, bus_root="pci0003:00")
    got = one(amd_gpu(False), "gpu-40-168", SysfsLocality(sys_root))
    assert (got.numa, got.source) == (frozenset({1}), PCIE_ROOT)


def memory_span(own_name: bool) -> dict[str, Any]:
    """ffromani/dra-driver-memory pkg/sysinfo/rslice.go, MakeAttributes: at 0a06934 the standard numaNode,
    dra.cpu/numaNode, dra.net/numaNode and its own dra.memory/numaNode; at 1b0d668 (HEAD read) the standard,
    dra.cpu/numaNodeID and dra.net/numaNode. Driver dra.memory, devices with allowMultipleAllocations."""
    attrs: dict[str, Any] = {NUMA_NODE: {"int": 1}, "dra.net/numaNode": {"int": 1}}
    if own_name:
        attrs.update({"dra.cpu/numaNode": {"int": 1}, "dra.memory/numaNode": {"int": 1},
                      "dra.memory/pageSize": {"string": "2Mi"}, "dra.memory/hugeTLB": {"bool": True}})
    else:
        attrs.update({"dra.cpu/numaNodeID": {"int": 1}, "resource.kubernetes.io/pageSize": {"string": "2Mi"}})
    return published("dra.memory", [{"name": "hugepages-2m-x7k2q9", "attributes": attrs,
                                     "allowMultipleAllocations": True}])


def test_memory_driver_both_versions_and_its_own_name() -> None:
    for own in (True, False):
        got = one(memory_span(own), "hugepages-2m-x7k2q9")
        assert (got.numa, got.source) == (frozenset({1}), NUMA_NODE)
    only_own = memory_span(True)
    only_own["spec"]["devices"][0]["attributes"] = {"dra.memory/numaNode": {"int": 0}}
    got = one(only_own, "hugepages-2m-x7k2q9")
    assert (got.numa, got.source) == (frozenset({0}), "dra.memory/numaNode")


def nvidia_vfio(tmp_numa: int) -> dict[str, Any]:
    """NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/deviceinfo.go (2240711), VfioDeviceInfo.GetDevice: a bare
    numa (gpu.nvidia.com/numa) for VFIO devices only; the standard pciBusID and pcieRoot when known."""
    return published("gpu.nvidia.com", [{"name": "gpu-vfio-0", "attributes": {
        "type": {"string": "vfio"}, "uuid": {"string": "GPU-0b0c"}, "deviceID": {"string": "0x2330"},
        "vendorID": {"string": "0x10de"}, "numa": {"int": tmp_numa}, "productName": {"string": "H100"},
        "iommuFDEnabled": {"bool": False}, PCI_BUS_ID: {"string": "0000:1b:00.0"},
        PCIE_ROOT: {"string": "pci0000:17"}}}])


def test_nvidia_vfio_numa_before_sysfs() -> None:
    got = one(nvidia_vfio(1), "gpu-vfio-0")
    assert (got.numa, got.source) == (frozenset({1}), "gpu.nvidia.com/numa")


def test_the_defaults_cover_those_drivers_in_order() -> None:
    assert DEFAULT_DRIVER_ATTRIBUTES == ("dra.net/numaNode", "gpu.amd.com/numaNode", "dra.memory/numaNode",
                                         "gpu.nvidia.com/numa", "numaNode")


# --- perDeviceNodeSelection, pool generations ---

def per_device(generation: int = 1, name: str = "shared") -> dict[str, Any]:
    """k8s.io/api v0.36.3 resource/v1 types.go: spec.perDeviceNodeSelection true, no spec.nodeName; each device
    sets exactly one of nodeName, nodeSelector, allNodes."""
    return published("gpu.example.com", [
        {"name": "gpu-0", "nodeName": NODE, "attributes": {NUMA_NODE: {"int": 1}}},
        {"name": "gpu-1", "nodeName": "node-2", "attributes": {NUMA_NODE: {"int": 0}}},
        {"name": "fabric-0", "allNodes": True, "attributes": {"model": {"string": "x"}}},
        {"name": "rack-0", "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "rack", "operator": "In", "values": ["a"]}]}]}, "attributes": {NUMA_NODE: {"int": 0}}},
    ], name=name, pool="shared-pool", generation=generation, perDeviceNodeSelection=True)


def test_per_device_node_selection_is_read_for_this_node() -> None:
    """Before, only spec.nodeName slices were read: gpu-0 stayed unknown, 'no ResourceSlice publishes it'."""
    got = one(per_device(), "gpu-0", pool="shared-pool")
    assert (got.numa, got.source) == (frozenset({1}), NUMA_NODE)
    other = one(per_device(), "gpu-1", pool="shared-pool")
    assert not other.numa and other.looked.startswith("no ResourceSlice of node node-1 publishes device gpu-1")
    fabric = one(per_device(), "fabric-0", pool="shared-pool")
    assert not fabric.numa and "(it gives the device allNodes, not to this node alone)" in fabric.looked
    assert one(per_device(), "rack-0", pool="shared-pool").numa == {0}
    # verify without --node: any node's device, each device on its own node.
    assert one(per_device(), "gpu-1", node=None, pool="shared-pool").numa == {0}


def test_the_agent_keeps_of_a_shared_slice_only_its_nodes_devices() -> None:
    kept = kept_for(NODE)(per_device())
    assert kept is not None and [d["name"] for d in kept["devices"]] == ["gpu-0", "fabric-0", "rack-0"]
    assert kept_for("node-3")(published("gpu.example.com", [{"name": "g", "nodeName": "node-2"}],
                                        perDeviceNodeSelection=True)) is None


def test_an_older_pool_generation_is_set_aside_and_said() -> None:
    """GatherPools/addSlice: of a pool (driver, pool name) only the newest generation's slices count."""
    old, new = per_device(1, "old"), per_device(2, "new")
    new["spec"]["devices"] = [{"name": "gpu-0", "nodeName": NODE, "attributes": {NUMA_NODE: {"int": 0}}}]
    idx = SliceIndex.build([k for s in (old, new) if (k := slice_kept(s))], NODE)
    assert resolve(DraDevice("gpu.example.com", "shared-pool", "gpu-0", "ns/c"), idx, NoSysfs()).numa == {0}
    gone = resolve(DraDevice("gpu.example.com", "shared-pool", "rack-0", "ns/c"), idx, NoSysfs())
    assert not gone.numa and gone.looked == (
        "only ResourceSlice old publishes device rack-0 in pool shared-pool of driver gpu.example.com, of pool "
        "generation 1: the pool's newest is 2, so it is out-dated and set aside, as the scheduler does (the driver "
        "is republishing the pool)")


def test_verify_lists_the_nodes_slices_and_those_of_no_node(tmp_path: Path) -> None:
    api = FakeAPI()
    api.slices = [per_device(), amd_gpu(True), published("x", [], name="elsewhere", nodeName="node-2")]
    kept, problem = ListedView(api).slices(NODE)
    assert problem is None and sorted(k["name"] for k in kept) == ["s", "shared"]
    assert [q["fieldSelector"] for p, q in api.listed if p == SLICES] == ["spec.nodeName=node-1", "spec.nodeName="]


# --- adminAccess ---

def claim(results: list[dict[str, Any]]) -> dict[str, Any]:
    """A ResourceClaim (resource.k8s.io/v1) allocated: status.allocation.devices.results[]."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "monitor", "namespace": "ns"},
            "status": {"allocation": {"devices": {"results": results}}}}


def test_admin_devices_of_a_claim() -> None:
    found = claim([{"request": "gpus", "driver": "d", "pool": "p", "device": "g0", "adminAccess": True},
                   {"request": "own", "driver": "d", "pool": "p", "device": "g1"}])
    assert admin_devices(found) == {("d", "p", "g0")}
    assert admin_devices({"status": "garbage"}) == frozenset() and admin_devices(None) == frozenset()
    marked = mark_admin([DraDevice("d", "p", "g0", "ns/monitor"), DraDevice("d", "p", "g1", "ns/monitor")],
                        lambda c: admin_devices(found))
    assert [d.admin for d in marked] == [True, False]


def judged(*devices: DraDevice) -> Any:
    pod = PodInfo("ns", "mon", "u", "Guaranteed", False, "", "enforce", None,
                  (ContainerSpec("app", 1000, "containerd://x"),))
    return judge_container(pod, ContainerAllocation("app", frozenset({0}), (), (), devices),
                           Allocatable(frozenset({0, 1})), {0: 0, 1: 1})


def test_a_monitoring_device_is_not_judged_as_the_workloads() -> None:
    """Before: a monitoring Pod's adminAccess device on the other node was NUMAMisaligned (or, unknown, made the
    container unknown); now it is said to need no alignment."""
    admin = DraDevice("d", "p", "g0", "ns/monitor", numa=frozenset({1}), source=NUMA_NODE, admin=True)
    p = judged(admin)
    assert p.aligned is True and p.problems == ()
    assert "DRA d/p/g0 (claim ns/monitor) with monitoring access (adminAccess): no alignment needed" in p.detail
    unknown = DraDevice("d", "p", "g2", "ns/monitor", looked="none of them is set", admin=True)
    assert judged(unknown).aligned is True and judged(unknown).unknown == ()
    p = judged(admin, DraDevice("d", "p", "g1", "ns/monitor", numa=frozenset({1}), source=NUMA_NODE))
    assert p.aligned is False and [x.reason for x in p.problems] == [NUMA_MISALIGNED]
    assert "g1" in p.problems[0].message and "d/p/g0 (claim ns/monitor) on NUMA" not in p.problems[0].message


def test_verify_reads_the_claim_and_reports_monitoring_access(tmp_path: Path) -> None:
    sys_root = sysfs(tmp_path / "sys", {0: "0", 1: "1"})
    kubelet = Kubelet()
    kubelet.allocatable_cpus = [0, 1]
    api = FakeAPI()
    api.namespaces = [{"metadata": {"name": "ns", "labels": {"qos-guard.io/mode": "enforce"}}}]
    api.pods = [GPU_POD]
    api.slices = [published("gpu.example.com", [{"name": "gpu-0", "attributes": {NUMA_NODE: {"int": 0}}}])]
    api.claims[claim_path("ns/monitor")] = claim([{"request": "r", "driver": "gpu.example.com", "pool": NODE,
                                                   "device": "gpu-0", "adminAccess": True}])
    kubelet.pods = [api_pb2.PodResources(name="gpu", namespace="ns", containers=[
        container("app", [1], dra=[("ns", "monitor", [("gpu.example.com", NODE, "gpu-0")])])])]
    server = serve(tmp_path / "kubelet.sock", kubelet)
    try:
        with PodResourcesClient(tmp_path / "kubelet.sock") as client:
            snap = observe(client, ListedView(api), sys_root, sys_root / "fs" / "cgroup", NODE)
    finally:
        server.stop(None)
    (c,) = json.loads(render_json(snap))["containers"]
    assert c["aligned"] is True and c["draDevices"][0]["adminAccess"] is True and c["problems"] == []
    assert ("GET", claim_path("ns/monitor"), None) in api.sent


def test_the_agent_says_once_when_claims_cannot_be_read() -> None:
    said: list[str] = []
    api = FakeAPI()
    api.refuse[claim_path("ns/a")] = api.refuse[claim_path("ns/b")] = 403
    view = WatchedView(api, NODE, said.append)
    assert view.admin_devices("ns/a") == frozenset() and view.admin_devices("ns/b") == frozenset()
    assert len(said) == 1 and "HTTP 403" in said[0] and "grant get on resource.k8s.io resourceclaims" in said[0]
    api.claims[claim_path("ns/c")] = claim([{"driver": "d", "pool": "p", "device": "g", "adminAccess": True}])
    assert view.admin_devices("ns/c") == {("d", "p", "g")} and said[-1] == "resourceclaims: read again"
