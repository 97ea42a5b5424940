"""The per-container decision (pure): pinned or not and why, NUMA nodes of CPUs, memory and devices, aligned."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.node.allocation import Allocatable, ContainerAllocation, DeviceGroup, MemoryBlock
from webhook.node.podinfo import ContainerSpec, PodInfo, opted_in_at, pod_info
from webhook.node.verdict import NOT_PINNED, NUMA_MISALIGNED, judge_container

TWO_NODES = {0: 0, 1: 1}  # the node tests' fake topology: CPU 0 on NUMA 0, CPU 1 on NUMA 1
FOUR_NODES = {cpu: cpu // 4 for cpu in range(16)}
NODE = Allocatable(frozenset({1}))


def info(cpu_milli: int | None = 1000, qos: str = "Guaranteed", mode: str = "enforce", pod_level: bool = False,
         created: str = "2026-01-02T00:00:00Z", opted_in: str | None = None, allowed: bool = False) -> PodInfo:
    return PodInfo("ns", "p", "uid-1", qos, pod_level, created, mode, opted_in,
                   (ContainerSpec("app", cpu_milli, "containerd://" + "a" * 64, allowed),))


def gpu(*numa: int, ids: tuple[str, ...] = ("gpu-0",)) -> DeviceGroup:
    return DeviceGroup("example.com/gpu", ids, frozenset(numa))


def test_pinned_and_aligned_with_its_device() -> None:
    p = judge_container(info(), ContainerAllocation("app", frozenset({1}), (), (gpu(1),)), NODE, TWO_NODES,
                        frozenset({1}))
    assert p.pinned and p.aligned and not p.problems and not p.notes
    assert p.exclusive_cpus == {1} and p.cpu_numa == {1} and p.numa == {1} and p.matches_request
    assert "aligned on NUMA node 1" in p.detail and "example.com/gpu gpu-0 on NUMA 1" in p.detail


def test_device_on_another_numa_node_is_misaligned() -> None:
    """The article's failure: an exclusive CPU on NUMA 1, the GPU on NUMA 0 (best-effort admits it)."""
    p = judge_container(info(), ContainerAllocation("app", frozenset({1}), (), (gpu(0),)), NODE, TWO_NODES)
    assert p.pinned and p.aligned is False and p.numa == {0, 1}
    (problem,) = p.problems
    assert problem.reason == NUMA_MISALIGNED
    assert "CPUs 1 on NUMA 1" in problem.message and "example.com/gpu gpu-0 on NUMA 0" in problem.message
    assert "NUMA nodes 0-1" in problem.message


@pytest.mark.parametrize(("cpus", "memory", "aligned"), [
    ({0, 1, 2, 3}, [0], True),
    ({3, 4}, [0], False),  # CPUs over two nodes
    ({4, 5}, [1, 2], False),  # memory over two nodes
    ({12, 13, 14, 15}, [3], True),
])
def test_four_nodes(cpus: set[int], memory: list[int], aligned: bool) -> None:
    block = MemoryBlock("memory", 2**30, frozenset(memory))
    p = judge_container(info(cpu_milli=1000 * len(cpus)), ContainerAllocation("app", frozenset(cpus), (block,)),
                        Allocatable(frozenset(range(16))), FOUR_NODES)
    assert p.aligned is aligned and bool(p.problems) is not aligned


def test_memory_is_shown_as_in_a_pod_spec() -> None:
    block = MemoryBlock("memory", 64 * 2**20, frozenset({1}))
    p = judge_container(info(), ContainerAllocation("app", frozenset({1}), (block,)), NODE, TWO_NODES)
    assert "memory 64Mi on NUMA 1" in p.detail


def test_exclusive_count_differs_from_request_is_noted() -> None:
    p = judge_container(info(cpu_milli=2000), ContainerAllocation("app", frozenset({1})), NODE, TWO_NODES)
    assert p.matches_request is False and any("for a request of 2" in n for n in p.notes)


def test_cgroup_that_differs_is_noted() -> None:
    p = judge_container(info(), ContainerAllocation("app", frozenset({1})), NODE, TWO_NODES, frozenset({0, 1}))
    assert any("cgroup cpuset 0-1 differs from kubelet's assignment 1" in n for n in p.notes)


def test_unknown_cpu_is_noted() -> None:
    p = judge_container(info(), ContainerAllocation("app", frozenset({7})), Allocatable(frozenset({7})), TWO_NODES)
    assert any("on no NUMA node" in n for n in p.notes)


@pytest.mark.parametrize(("kwargs", "allocatable", "reason", "words"), [
    ({}, Allocatable(frozenset()), "node-not-pinning", "hands out no exclusive CPUs"),
    ({"qos": "Burstable", "mode": "warn"}, NODE, "not-guaranteed", "admitted with a warning"),
    ({"pod_level": True}, NODE, "pod-level-resources", "PodLevelResourceManagers"),
    ({"cpu_milli": 200, "mode": "warn"}, NODE, "fractional-cpu", "cpu 200m is not a whole number"),
    ({"cpu_milli": 1500, "opted_in": "2026-03-01T00:00:00Z"}, NODE, "fractional-cpu",
     "before its namespace opted in (2026-03-01T00:00:00Z)"),
    ({"cpu_milli": 1500}, NODE, "fractional-cpu", "created before the namespace opted in, or while the webhook"),
    ({}, NODE, "not-assigned", "kubelet assigned no exclusive CPUs"),
])
def test_not_pinned_says_why(kwargs: dict[str, Any], allocatable: Allocatable, reason: str, words: str) -> None:
    p = judge_container(info(**kwargs), ContainerAllocation("app", frozenset()), allocatable, TWO_NODES,
                        frozenset({0, 1}))
    assert not p.pinned and p.aligned is None and p.reason == reason and words in p.detail
    (problem,) = p.problems
    assert problem.reason == NOT_PINNED and words in problem.message
    assert p.cpu_numa == {0, 1}  # the shared pool's NUMA nodes, from the cgroup


def test_fractional_allowed_by_policy_is_no_problem() -> None:
    p = judge_container(info(cpu_milli=500, allowed=True), ContainerAllocation("app", frozenset()), NODE, TWO_NODES)
    assert not p.pinned and not p.problems and "policy.fractionalCPUContainers" in p.detail


def test_exclusive_cpus_win_over_the_spec() -> None:
    """PodResources is the truth: a container holding exclusive CPUs is pinned (e.g. PodLevelResourceManagers)."""
    p = judge_container(info(pod_level=True), ContainerAllocation("app", frozenset({1})), NODE, TWO_NODES)
    assert p.pinned and p.aligned


def pod_object(**over: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"namespace": "ns", "name": "p", "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"initContainers": [{"name": "proxy", "restartPolicy": "Always",
                                     "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}}}],
                 "containers": [{"name": "app", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]},
        "status": {"qosClass": "Guaranteed",
                   "containerStatuses": [{"name": "app", "containerID": "containerd://" + "c" * 64}]},
    }
    obj.update(over)
    return obj


def test_pod_info_from_the_api_object() -> None:
    got = pod_info(pod_object(), "enforce", None, ["proxy"])
    assert got.qos == "Guaranteed" and not got.pod_level and got.created == "2026-01-01T00:00:00Z"
    by_name = {c.name: c for c in got.containers}
    assert by_name["app"].cpu_milli == 2000 and by_name["app"].container_id == "containerd://" + "c" * 64
    assert by_name["proxy"].cpu_milli == 500 and by_name["proxy"].fractional_allowed
    assert by_name["proxy"].container_id is None


def test_pod_info_pod_level_and_computed_qos() -> None:
    obj = pod_object(status={})
    obj["spec"]["resources"] = {"requests": {"cpu": "3", "memory": "2Gi"}, "limits": {"cpu": "3", "memory": "2Gi"}}
    got = pod_info(obj, "warn", None)
    assert got.pod_level and got.qos == "Guaranteed"


def test_opted_in_at_reads_managed_fields() -> None:
    ns = {"metadata": {"managedFields": [
        {"manager": "kubectl-create", "time": "2026-01-01T00:00:00Z", "fieldsV1": {"f:metadata": {}}},
        {"manager": "kubectl-label", "time": "2026-02-01T00:00:00Z",
         "fieldsV1": {"f:metadata": {"f:labels": {"f:qos-guard.io/mode": {}}}}},
        {"manager": "weird", "time": 5, "fieldsV1": "x"},
    ]}}
    assert opted_in_at(ns, "qos-guard.io/mode") == "2026-02-01T00:00:00Z"
    assert opted_in_at({"metadata": {}}, "qos-guard.io/mode") is None
