"""The verdict read against kubelet's own code (v1.36): what PodResources reports, and what it means.

- a CPU no NUMA node lists (offline, another machine's sysfs) leaves alignment unknown, never aligned or misaligned;
- a device attached to several NUMA nodes is reported once per node (pkg/kubelet/cm/container_manager.go:303),
  and kubelet counts it on any of them (devicemanager/topology_hints.go:179, ``mask.AnySet``);
- with PodLevelResourceManagers, a container of a Pod with pod-level resources that does not qualify for its own
  CPUs is given the Pod's shared pool, which PodResources reports as its cpu_ids (cpumanager/policy_static.go:498,
  cpu_manager.go:582 ``ResourceIsolationPod``): not pinned;
- ``IsPodLevelResourcesSet`` counts hugepages too (component-helpers resource/helpers.go:76)."""

from __future__ import annotations

from typing import Any

from webhook.node.allocation import Allocatable, ContainerAllocation, DeviceGroup, DraDevice
from webhook.node.memory_verdict import judge_memory
from webhook.node.podinfo import pod_info
from webhook.node.verdict import NOT_PINNED, NUMA_MISALIGNED, NUMA_UNKNOWN, judge_container

TWO_NODES = {0: 0, 1: 0, 2: 1, 3: 1}  # CPUs 0-1 on NUMA 0, 2-3 on NUMA 1
NODE = Allocatable(frozenset(range(4)))


def _pod(containers: list[dict[str, Any]], pod_resources: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if pod_resources is not None:
        spec["resources"] = pod_resources
    return {"metadata": {"namespace": "ns", "name": "p", "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": spec, "status": {"qosClass": "Guaranteed"}}


def _whole(cpu: str = "1", memory: str = "1Gi") -> dict[str, Any]:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}


APP = pod_info(_pod([{"name": "app", "resources": _whole()}]), "enforce", None)


def test_a_cpu_no_numa_node_lists_is_unknown_not_aligned() -> None:
    """CPU 9 is on no NUMA node of the layout: the known CPU alone must not make the container aligned."""
    p = judge_container(APP, ContainerAllocation("app", frozenset({0, 9})), NODE, TWO_NODES)
    assert p.pinned and p.aligned is None and p.state == "unknown"
    assert [x.reason for x in p.problems] == [NUMA_UNKNOWN]
    assert "CPUs 9" in p.problems[0].message and "aligned on" not in p.detail


def test_cpus_no_numa_node_lists_are_unknown_not_misaligned() -> None:
    p = judge_container(APP, ContainerAllocation("app", frozenset({8, 9})), NODE, TWO_NODES)
    assert p.aligned is None and [x.reason for x in p.problems] == [NUMA_UNKNOWN]


def test_known_cpus_on_two_nodes_stay_misaligned_beside_an_unknown_one() -> None:
    p = judge_container(APP, ContainerAllocation("app", frozenset({0, 2, 9})), NODE, TWO_NODES)
    assert p.aligned is False and NUMA_MISALIGNED in [x.reason for x in p.problems]


def _split(resource: str, device: str, *nodes: int) -> tuple[DeviceGroup, ...]:
    """A device as PodResources reports it: one entry per NUMA node of its TopologyInfo."""
    return tuple(DeviceGroup(resource, (device,), frozenset({n})) for n in nodes)


def test_a_device_on_two_numa_nodes_is_aligned_with_cpus_on_either() -> None:
    alloc = ContainerAllocation("app", frozenset({0}), (), _split("example.com/nic", "vf-0", 0, 1))
    p = judge_container(APP, alloc, NODE, TWO_NODES)
    assert p.aligned is True and not p.problems and p.numa == {0}
    assert "aligned on NUMA node 0" in p.detail and "example.com/nic vf-0 on NUMA 0-1" in p.detail
    assert judge_memory(p, None).state == "memory-not-pinned"  # not aligned on memory: it is not pinned
    assert "on NUMA node 0;" in judge_memory(p, None).detail


def test_a_device_on_two_numa_nodes_neither_of_them_the_cpus_is_misaligned() -> None:
    alloc = ContainerAllocation("app", frozenset({0}), (), _split("example.com/nic", "vf-0", 1, 2))
    p = judge_container(APP, alloc, NODE, {**TWO_NODES, 4: 2})
    assert p.aligned is False and [x.reason for x in p.problems] == [NUMA_MISALIGNED]


def test_two_devices_on_one_node_each_are_still_misaligned() -> None:
    alloc = ContainerAllocation("app", frozenset({0}), (), _split("example.com/gpu", "gpu-0", 0)
                                + _split("example.com/gpu", "gpu-1", 1))
    p = judge_container(APP, alloc, NODE, TWO_NODES)
    assert p.aligned is False


FOUR_NODES = {**TWO_NODES, 4: 2, 5: 3}  # and CPU 4 on NUMA 2, 5 on NUMA 3


def _unknown_cpu_with(*devices: tuple[DeviceGroup, ...], cpus: frozenset[int] = frozenset({9})) -> Any:
    alloc = ContainerAllocation("app", cpus, (), tuple(g for d in devices for g in d))
    return judge_container(APP, alloc, NODE, FOUR_NODES)


def test_a_device_on_two_numa_nodes_beside_a_cpu_no_node_lists_is_unknown() -> None:
    """Kubelet counts the device on either node, the CPU's node is unknown: nothing known conflicts."""
    p = _unknown_cpu_with(_split("example.com/nic", "vf-0", 0, 1))
    assert p.aligned is None and p.state == "unknown" and [x.reason for x in p.problems] == [NUMA_UNKNOWN]
    assert "NUMA alignment unknown" in p.detail


def test_two_multi_node_devices_sharing_a_node_beside_an_unknown_cpu_are_unknown() -> None:
    p = _unknown_cpu_with(_split("example.com/nic", "vf-0", 0, 1), _split("example.com/gpu", "g-0", 1, 2))
    assert p.aligned is None and [x.reason for x in p.problems] == [NUMA_UNKNOWN] and p.numa == {1}


def test_two_multi_node_devices_sharing_no_node_are_misaligned_whatever_the_cpu() -> None:
    p = _unknown_cpu_with(_split("example.com/nic", "vf-0", 0, 1), _split("example.com/gpu", "g-0", 2, 3))
    assert p.aligned is False and p.state == "misaligned"
    assert [x.reason for x in p.problems] == [NUMA_MISALIGNED, NUMA_UNKNOWN]


def test_two_multi_node_devices_and_known_cpus_on_their_shared_node_are_aligned_there() -> None:
    p = _unknown_cpu_with(_split("example.com/nic", "vf-0", 0, 1), _split("example.com/gpu", "g-0", 1, 2),
                          cpus=frozenset({2, 3}))
    assert p.aligned is True and not p.problems and p.numa == {1}
    assert "aligned on NUMA node 1" in p.detail


def test_dra_cpu_claimed_cpus_on_two_known_nodes_are_misaligned_beside_an_unknown_one() -> None:
    """The same rule on the dra.cpu path: its known CPUs already span NUMA nodes 0 and 1."""
    cpu = DraDevice("dra.cpu", "pool", "cpu-0", "ns/c", numa=frozenset({0}))
    p = judge_container(APP, ContainerAllocation("app", frozenset(), dynamic=(cpu,)), NODE, TWO_NODES,
                        frozenset({0, 2, 9}))
    assert p.aligned is False and [x.reason for x in p.problems] == [NUMA_MISALIGNED, NUMA_UNKNOWN]


POD_LEVEL = {"requests": {"cpu": "4", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "4Gi"}}


def test_a_pod_level_containers_share_of_the_pod_pool_is_not_pinned() -> None:
    """policy_static.go AllocatePod: 'app' takes 2 exclusive CPUs of the Pod's 4, 'side' (no resources of its own)
    gets the Pod's shared pool, which PodResources reports as its cpu_ids."""
    info = pod_info(_pod([{"name": "app", "resources": _whole("2")}, {"name": "side"}], POD_LEVEL), "enforce", None)
    app = judge_container(info, ContainerAllocation("app", frozenset({0, 1})), NODE, TWO_NODES)
    side = judge_container(info, ContainerAllocation("side", frozenset({2, 3})), NODE, TWO_NODES, frozenset({2, 3}))
    assert app.pinned and app.aligned
    assert not side.pinned and side.reason == "pod-shared-pool" and side.exclusive_cpus == frozenset()
    assert side.cpu_numa == {1} and side.aligned is None and side.matches_request is None
    assert "shared pool" in side.detail and "2-3" in side.detail
    assert [x.reason for x in side.problems] == [NOT_PINNED]


def test_a_pod_level_container_with_requests_below_limits_shares_the_pod_pool() -> None:
    """IsContainerEquivalentQOSGuaranteed (pkg/kubelet/cm/qos/helpers.go:27): requests equal to limits, both."""
    resources = {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    info = pod_info(_pod([{"name": "app", "resources": resources}], POD_LEVEL), "enforce", None)
    p = judge_container(info, ContainerAllocation("app", frozenset({0, 1, 2, 3})), NODE, TWO_NODES)
    assert not p.pinned and p.reason == "pod-shared-pool"


def test_hugepages_alone_in_the_pod_level_block_make_kubelet_skip_the_pod() -> None:
    """IsPodLevelResourcesSet counts hugepages-*: the CPU Manager skipped the Pod, recreating it changes nothing."""
    info = pod_info(_pod([{"name": "app", "resources": _whole()}], {"limits": {"hugepages-2Mi": "4Mi"}}),
                    "enforce", None)
    assert info.pod_level
    p = judge_container(info, ContainerAllocation("app", frozenset()), NODE, TWO_NODES)
    assert p.reason == "pod-level-resources" and "hugepages" in p.detail


def test_dra_cpu_claimed_cpus_no_numa_node_lists_are_a_problem() -> None:
    """The dra.cpu path was already unknown; an unknown without a problem would exit 0 and send no Event."""
    cpu = DraDevice("dra.cpu", "pool", "cpu-9", "ns/c", numa=frozenset({0}))
    p = judge_container(APP, ContainerAllocation("app", frozenset(), dynamic=(cpu,)), NODE, TWO_NODES,
                        frozenset({0, 9}))
    assert p.aligned is None and NUMA_UNKNOWN in [x.reason for x in p.problems]
