"""One container's verdict from its devices (DRA, device plugin) and its memory (memory.numa_stat) together:
every finding is its own problem, the state names the worst (docs/contract.md, "One verdict from devices and
memory"): misaligned > unknown > memory-not-pinned / remote-memory > aligned."""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily

from webhook.node.agent import VerdictGauges
from webhook.node.allocation import Allocatable, ContainerAllocation, DraDevice, MemoryBlock
from webhook.node.memory_verdict import judge_memory
from webhook.node.numapages import NumaPages
from webhook.node.observe import Snapshot
from webhook.node.podinfo import ContainerSpec, PodInfo
from webhook.node.sysfs import NumaLayout
from webhook.node.verdict import NUMA_MISALIGNED, NUMA_REMOTE_MEMORY, NUMA_UNKNOWN, ContainerVerdict, judge_container
from webhook.node.verify import render_text, summary, verdict_json

DRIVER = "gpu.example.com"
MIB = 1 << 20
STATIC_1 = (MemoryBlock("memory", 64 * MIB, frozenset({1})),)  # a Memory Manager block on the CPUs' node


def pages(on0: int, on1: int) -> NumaPages:
    """Anonymous MiB on NUMA 0 and 1 (the CPUs are on NUMA 1)."""
    return NumaPages(((0, on0 * MIB), (1, on1 * MIB)), ((0, 0), (1, 0)), "/sys/fs/cgroup/x", 2)


def verdict(dra_numa: frozenset[int] | None, memory: tuple[MemoryBlock, ...], held: NumaPages) -> ContainerVerdict:
    info = PodInfo("ns", "gpu", "uid-1", "Guaranteed", False, "2026-01-01T00:00:00Z", "enforce", None,
                   (ContainerSpec("app", 1000, None),))
    dynamic: tuple[DraDevice, ...] = ()
    if dra_numa is not None:
        looked = "" if dra_numa else "ResourceSlice s: looked for resource.kubernetes.io/numaNode: none is set"
        dynamic = (DraDevice(DRIVER, "node-1", "gpu-0", "ns/claim", numa=dra_numa, looked=looked),)
    alloc = ContainerAllocation("app", frozenset({1}), memory=memory, dynamic=dynamic)
    p = judge_container(info, alloc, Allocatable(frozenset({0, 1})), {0: 0, 1: 1})
    return judge_memory(p, held, 0.10, node_static=False)


def metric(p: ContainerVerdict, name: str) -> float | None:
    collector = VerdictGauges()
    collector.update([p])
    families: list[GaugeMetricFamily] = list(collector.collect())
    return next((s.value for f in families for s in f.samples if s.name == name), None)


def test_an_unknown_device_and_remote_memory_say_both_and_the_state_is_unknown() -> None:
    p = verdict(frozenset(), STATIC_1, pages(90, 10))
    assert [x.reason for x in p.problems] == [NUMA_UNKNOWN, NUMA_REMOTE_MEMORY]
    assert p.state == "unknown" and p.aligned is None
    assert p.detail.startswith(f"CPUs 1 on NUMA 1, memory 64Mi on NUMA 1, DRA {DRIVER}/node-1/gpu-0 (claim "
                               "ns/claim) on NUMA unknown: NUMA alignment unknown; pages: ")
    assert "aligned on" not in p.detail
    assert metric(p, "qos_guard_container_numa_aligned") == -1
    assert metric(p, "qos_guard_container_memory_remote_ratio") == 0.9
    body = verdict_json(p)
    assert body["state"] == "unknown" and body["memoryPinned"] is True
    assert [x["reason"] for x in body["problems"]] == [NUMA_UNKNOWN, NUMA_REMOTE_MEMORY]
    text = render_text(snap(p))
    assert "ns/gpu/app: NUMA UNKNOWN, REMOTE MEMORY: 1 exclusive CPU, " in text


def test_an_unknown_device_with_memory_not_pinned_stays_unknown() -> None:
    p = verdict(frozenset(), (), pages(0, 10))
    assert p.state == "unknown" and p.memory_pinned is False
    assert p.detail.endswith("NUMA alignment unknown; memory not pinned (Memory Manager None): "
                             "100 % of 10 MiB anonymous on NUMA 1")
    assert [x.reason for x in p.problems] == [NUMA_UNKNOWN]
    s = summary(snap(p))
    assert (s["unknown"], s["memoryNotPinned"], s["pinnedAligned"]) == (1, 0, 0)


def test_misaligned_wins_over_unknown_and_remote_memory() -> None:
    p = verdict(frozenset({0}), (), pages(90, 10))
    assert p.state == "misaligned" and p.aligned is False
    assert [x.reason for x in p.problems] == [NUMA_MISALIGNED, NUMA_REMOTE_MEMORY]
    assert metric(p, "qos_guard_container_numa_aligned") == 0


def test_aligned_devices_with_memory_not_pinned_or_remote_are_never_plain_aligned() -> None:
    none = verdict(frozenset({1}), (), pages(0, 10))
    assert none.state == "memory-not-pinned" and not none.problems
    assert summary(snap(none))["memoryNotPinned"] == 1 and summary(snap(none))["pinnedAligned"] == 0
    remote = verdict(frozenset({1}), STATIC_1, pages(5, 5))
    assert remote.state == "remote-memory" and [x.reason for x in remote.problems] == [NUMA_REMOTE_MEMORY]
    aligned = verdict(frozenset({1}), STATIC_1, pages(0, 10))
    assert aligned.state == "aligned" and not aligned.problems
    assert metric(aligned, "qos_guard_container_numa_aligned") == 1


def snap(p: ContainerVerdict) -> Snapshot:
    s = Snapshot(None, Allocatable(frozenset({0, 1})), NumaLayout({0: frozenset({0}), 1: frozenset({1})}), 2)
    s.verdicts.append(p)
    return s
