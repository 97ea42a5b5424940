"""A container whose CPUs come from kubernetes-sigs/dra-driver-cpu (``dra.cpu``): kubelet's PodResources lists no
exclusive CPU for it (cpuManagerPolicy none), its claim's devices instead; the exclusive CPUs are the cgroup
cpuset the driver's NRI plugin set. Aligned, MISALIGNED or unknown as for the CPU Manager's CPUs
(tests/node/test_dra_cpu.py shows it on the real node)."""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily

from webhook.node.agent import VerdictGauges
from webhook.node.allocation import Allocatable, ContainerAllocation, DraDevice
from webhook.node.memory_verdict import judge_memory
from webhook.node.observe import Snapshot
from webhook.node.podinfo import ContainerSpec, PodInfo
from webhook.node.sysfs import NumaLayout
from webhook.node.verdict import DRA_CPU_DRIVER, NUMA_MISALIGNED, NUMA_UNKNOWN, ContainerVerdict, judge_container
from webhook.node.verify import exit_code, render_text, verdict_json

LAYOUT = {0: 0, 1: 1}  # CPU -> NUMA node
INFO = PodInfo("ns", "gpu", "uid-1", "Guaranteed", False, "2026-01-01T00:00:00Z", "enforce", None,
               (ContainerSpec("app", 1000, None),))


def judged(cpu_numa: int, gpu_numa: frozenset[int], cgroup: frozenset[int] | None) -> ContainerVerdict:
    dynamic = (DraDevice("gpu.example.com", "node-1", "gpu-0", "ns/claim", numa=gpu_numa,
                         looked="" if gpu_numa else "no numaNode"),
               DraDevice(DRA_CPU_DRIVER, "node-1", f"cpudevnuma00{cpu_numa}", "ns/claim", numa=frozenset({cpu_numa})))
    alloc = ContainerAllocation("app", frozenset(), dynamic=dynamic)  # PodResources: no cpu_ids
    return judge_memory(judge_container(INFO, alloc, Allocatable(frozenset()), LAYOUT, cgroup), None)


def snap(p: ContainerVerdict) -> Snapshot:
    s = Snapshot("node-1", Allocatable(frozenset()), NumaLayout({0: frozenset({0}), 1: frozenset({1})}), 2)
    s.verdicts.append(p)
    return s


def metric(p: ContainerVerdict, name: str) -> float | None:
    """What the agent's /metrics says of the container."""
    collector = VerdictGauges()
    collector.update([p])
    families: list[GaugeMetricFamily] = list(collector.collect())
    return next((s.value for f in families for s in f.samples if s.name == name), None)


def test_the_agent_reports_the_dra_pinning_as_it_does_the_cpu_managers() -> None:
    aligned, split, unknown = (judged(0, frozenset({0}), frozenset({0})), judged(0, frozenset({1}), frozenset({0})),
                               judged(0, frozenset({0}), None))
    assert [metric(p, "qos_guard_container_pinned") for p in (aligned, split, unknown)] == [1, 1, 1]
    assert [metric(p, "qos_guard_container_numa_aligned") for p in (aligned, split, unknown)] == [1, 0, -1]


def test_the_nri_cpuset_beside_the_gpu_is_aligned_and_exit_0() -> None:
    p = judged(0, frozenset({0}), frozenset({0}))
    # aligned, its memory not pinned (the driver pins CPUs only; Memory Manager None): no problem, exit 0
    assert p.pinned and p.exclusive_cpus == {0} and p.aligned is True and p.state == "memory-not-pinned"
    assert not p.problems and "set by the dra.cpu driver's NRI plugin" in p.notes[0]
    assert verdict_json(p)["exclusiveCPUs"] == [0]
    assert exit_code(snap(p)) == 0


def test_cpus_on_the_other_node_than_the_gpu_are_misaligned_and_exit_1() -> None:
    p = judged(0, frozenset({1}), frozenset({0}))
    assert p.state == "misaligned" and [x.reason for x in p.problems] == [NUMA_MISALIGNED]
    assert "dra-cpu-unpaired" in p.problems[0].message
    assert exit_code(snap(p)) == 1
    line = render_text(snap(p)).splitlines()[1]
    assert line.startswith("ns/gpu/app: MISALIGNED: 1 exclusive CPU, ") and "matchAttribute: dra.net/numaNode" in line
    assert "Topology Manager" not in line  # kubelet aligned nothing here: the claim decided both sides


def test_no_cpuset_read_or_a_gpu_without_numa_is_unknown_never_aligned() -> None:
    for p in (judged(0, frozenset({0}), None), judged(0, frozenset(), frozenset({0}))):
        assert p.aligned is None and p.state == "unknown"
        assert NUMA_UNKNOWN in [x.reason for x in p.problems]
        assert exit_code(snap(p)) == 1
