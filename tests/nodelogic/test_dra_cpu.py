"""A container whose CPUs come from kubernetes-sigs/dra-driver-cpu (``dra.cpu``): kubelet's PodResources lists no
exclusive CPU for it (cpuManagerPolicy none), its claim's devices instead; the exclusive CPUs are the cgroup
cpuset the driver's NRI plugin set. Aligned, MISALIGNED or unknown as for the CPU Manager's CPUs
(tests/node/test_dra_cpu.py shows it on the real node)."""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily

from webhook.node.agent import VerdictGauges
from webhook.node.allocation import Allocatable, ContainerAllocation, DraDevice, MemoryBlock
from webhook.node.dra_locality import device_requests, mark_requests
from webhook.node.memory_verdict import judge_memory
from webhook.node.observe import Snapshot
from webhook.node.podinfo import ContainerSpec, PodInfo, request_claims
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


def split_claim(named: str, request: str | None) -> ContainerVerdict:
    """One claim with a GPU (request gpu) and the driver's CPUs (request cpus), both on NUMA node 0; the container
    names only ``named`` of it; PodResources lists both devices whatever it names (``request``: what the claim's
    allocation says the CPU device answers, None: the claim not read)."""
    info = PodInfo("ns", "split", "uid-1", "Guaranteed", False, "2026-01-01T00:00:00Z", "enforce", None,
                   (ContainerSpec("feeder", 1000, None, request_claims={"ns/claim": (named,)}),))
    dynamic = (DraDevice("gpu.example.com", "node-1", "gpu-0", "ns/claim", numa=frozenset({0}), request="gpu"),
               DraDevice(DRA_CPU_DRIVER, "node-1", "cpudevnuma000", "ns/claim", numa=frozenset({0}), request=request))
    alloc = ContainerAllocation("feeder", frozenset(), dynamic=dynamic)
    return judge_container(info, alloc, Allocatable(frozenset()), LAYOUT, frozenset({0, 1}))


def test_a_container_naming_only_the_gpu_request_is_not_judged_on_the_claims_cpus() -> None:
    # kubelet gives it only the GPU; its cgroup cpuset {0, 1} is the shared pool, not the driver's pinning
    p = split_claim("gpu", "cpus")
    assert not p.pinned and p.exclusive_cpus == frozenset()
    assert [d.device for d in p.dra_devices] == ["gpu-0"]
    # naming the CPU request, the cpuset is the driver's (here {0, 1}: two NUMA nodes beside a GPU on 0)
    q = split_claim("cpus", "cpus")
    assert q.pinned and q.exclusive_cpus == {0, 1} and q.state == "misaligned"
    assert [d.device for d in q.dra_devices] == ["cpudevnuma000"]


def test_a_claim_not_read_leaves_a_request_naming_container_unknown() -> None:
    p = split_claim("gpu", None)
    assert p.state == "unknown" and p.aligned is None
    assert [x.reason for x in p.problems] == [NUMA_UNKNOWN] and "names by request" in p.problems[0].message


def test_the_pod_spec_names_the_requests_and_the_claim_says_which_device_answers_which() -> None:
    obj = {"metadata": {"namespace": "ns", "name": "split"},
           "spec": {"resourceClaims": [{"name": "both", "resourceClaimTemplateName": "t"},
                                       {"name": "shared", "resourceClaimName": "c"}],
                    "containers": [{"name": "app", "resources": {"claims": [{"name": "both", "request": "cpus"},
                                                                            {"name": "shared"}]}},
                                   {"name": "feeder", "resources": {"claims": [{"name": "both", "request": "gpu"},
                                                                               {"name": "both", "request": "x"}]}}]},
           "status": {"resourceClaimStatuses": [{"name": "both", "resourceClaimName": "split-both-abc"}]}}
    assert request_claims(obj) == {"app": {"ns/split-both-abc": ("cpus",)},
                                   "feeder": {"ns/split-both-abc": ("gpu", "x")}}
    claim = {"status": {"allocation": {"devices": {"results": [
        {"driver": "dra.cpu", "pool": "node-1", "device": "cpudevnuma000", "request": "cpus"},
        {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0", "request": "gpu"}]}}}}
    marked = mark_requests([DraDevice("dra.cpu", "node-1", "cpudevnuma000", "ns/c"),
                            DraDevice("other", "node-1", "d", "ns/c")], lambda c: device_requests(claim))
    assert [d.request for d in marked] == ["cpus", None]


def unread_claim(cpus: frozenset[int], memory_numa: int | None = None) -> ContainerVerdict:
    """A container with kubelet's exclusive ``cpus`` naming only request gpu of claim ns/claim, whose allocation
    was not read: PodResources lists both of the claim's devices (gpu-0 on NUMA 0, nic-0 on NUMA 1)."""
    info = PodInfo("ns", "split", "uid-1", "Guaranteed", False, "2026-01-01T00:00:00Z", "enforce", None,
                   (ContainerSpec("app", 1000, None, request_claims={"ns/claim": ("gpu",)}),))
    dynamic = (DraDevice("gpu.example.com", "node-1", "gpu-0", "ns/claim", numa=frozenset({0})),
               DraDevice("nic.example.com", "node-1", "nic-0", "ns/claim", numa=frozenset({1})))
    memory = (MemoryBlock("memory", 1 << 30, frozenset({memory_numa})),) if memory_numa is not None else ()
    alloc = ContainerAllocation("app", cpus, memory=memory, dynamic=dynamic)
    return judge_container(info, alloc, Allocatable(frozenset({0, 1})), LAYOUT, cpus)


def test_an_unread_claim_leaves_a_request_naming_pinned_container_unknown_not_misaligned() -> None:
    # nic-0 may answer another container's request: blaming it (misaligned) or trusting gpu-0 (aligned) is a guess
    p = unread_claim(frozenset({0}))
    assert p.pinned and p.aligned is None and p.state == "unknown"
    assert [x.reason for x in p.problems] == [NUMA_UNKNOWN]
    message = p.problems[0].message
    assert "nic-0" in message and "gpu-0" in message and "claim ns/claim" in message and "resourceclaims" in message
    assert p.dra_devices == () and p.numa == frozenset({0})  # neither device counted as the container's


def test_an_unread_claim_does_not_hide_what_is_misaligned_without_its_devices() -> None:
    # CPUs on NUMA 0, its memory block on NUMA 1: misaligned whatever the claim's devices are, none of them blamed
    p = unread_claim(frozenset({0}), memory_numa=1)
    assert p.aligned is False and p.state == "misaligned"
    assert [x.reason for x in p.problems] == [NUMA_MISALIGNED, NUMA_UNKNOWN]
    assert "nic-0" not in p.problems[0].message


def test_an_unread_claim_with_the_drivers_cpus_from_another_claim_is_unknown() -> None:
    info = PodInfo("ns", "split", "uid-1", "Guaranteed", False, "2026-01-01T00:00:00Z", "enforce", None,
                   (ContainerSpec("app", 1000, None, request_claims={"ns/claim": ("gpu",)}),))
    dynamic = (DraDevice(DRA_CPU_DRIVER, "node-1", "cpudevnuma000", "ns/cpus", numa=frozenset({0})),
               DraDevice("gpu.example.com", "node-1", "gpu-0", "ns/claim", numa=frozenset({0})),
               DraDevice("nic.example.com", "node-1", "nic-0", "ns/claim", numa=frozenset({1})))
    p = judge_container(info, ContainerAllocation("app", frozenset(), dynamic=dynamic), Allocatable(frozenset()),
                        LAYOUT, frozenset({0}))
    assert p.pinned and p.aligned is None and p.state == "unknown"
    assert [d.device for d in p.dra_devices] == ["cpudevnuma000"]
