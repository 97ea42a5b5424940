"""The per-container decision, pure: from what kubelet allocated (PodResources), the NUMA layout (sysfs), the
container's cgroup cpuset and the Pod as the API server stores it, say whether the container is pinned
(exclusive CPUs: which, how many, equal to its request?), on which NUMA nodes its CPUs, memory blocks and
devices sit, whether they are all on one (aligned), and, when it is not pinned, why.

Kubelet's own rules are the reference (``pkg/kubelet/cm/cpumanager/policy_static.go``): exclusive CPUs only for
a Guaranteed Pod's container with a whole cpu, never for a Pod with pod-level resources unless the
``PodLevelResourceManagers`` gate is on. What PodResources reports wins over what the spec suggests: a container
that holds exclusive CPUs is pinned, whatever the reason it should not be; but under that gate the cpu_ids of a
container of such a Pod that does not qualify for CPUs of its own are the Pod's shared pool, not pinned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from webhook.core.dracpu import request_base
from webhook.core.podspec import GUARANTEED
from webhook.core.quantity import format_milli
from webhook.node.allocation import (
    Allocatable,
    ContainerAllocation,
    DeviceGroup,
    DraDevice,
    MemoryBlock,
    merged_devices,
)
from webhook.node.cpulist import format_list
from webhook.node.numapages import NumaPages
from webhook.node.podinfo import ContainerSpec, PodInfo
from webhook.node.verdict_text import device_parts, dra_misaligned, nodes_text, unknown_devices, where_text

NOT_PINNED, NUMA_MISALIGNED, NUMA_UNKNOWN = "NotPinned", "NUMAMisaligned", "NUMAUnknown"  # the Event reasons
NUMA_REMOTE_MEMORY = "NUMARemoteMemory"
# kubernetes-sigs/dra-driver-cpu: its claims' CPUs are pinned by its NRI plugin (the container's cgroup cpuset),
# not by kubelet's CPU Manager, whose PodResources cpu_ids stay empty (cpuManagerPolicy none on its nodes).
DRA_CPU_DRIVER = "dra.cpu"


@dataclass(frozen=True, slots=True)
class Problem:
    reason: str  # NOT_PINNED, NUMA_MISALIGNED or NUMA_UNKNOWN
    message: str


@dataclass(frozen=True, slots=True)
class ContainerVerdict:
    """The verdict on one container."""

    namespace: str
    pod: str
    uid: str
    container: str
    pinned: bool
    exclusive_cpus: frozenset[int]
    cpu_request_milli: int | None
    cpu_numa: frozenset[int]
    memory: tuple[MemoryBlock, ...]
    devices: tuple[DeviceGroup, ...]
    aligned: bool | None  # None when not pinned (alignment is promised to pinned containers only) or unknown
    reason: str | None  # why not pinned: node-not-pinning, not-guaranteed, pod-level-resources, pod-shared-pool, ...
    detail: str
    cgroup_cpus: frozenset[int] | None = None
    notes: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = field(default_factory=tuple)
    dra_devices: tuple[DraDevice, ...] = ()
    unknown: tuple[str, ...] = ()  # each device whose NUMA node could not be found, and what was looked for
    pages: NumaPages | None = None  # memory.numa_stat and cpuset.mems, when read (judge_memory)
    memory_pinned: bool | None = None  # pinned containers: Memory Manager Static gave it memory blocks

    @property
    def remote_memory(self) -> bool:
        """judge_memory found more anonymous memory off the CPUs' NUMA node than the threshold allows."""
        return any(x.reason == NUMA_REMOTE_MEMORY for x in self.problems)

    @property
    def state(self) -> str:
        """One word for a pinned container, the worst first (docs/contract.md): misaligned (CPUs and what kubelet
        placed span NUMA nodes), unknown (a device's NUMA node could not be found), memory-not-pinned (Memory
        Manager None), remote-memory (pinned blocks, yet the pages are elsewhere), aligned; not-pinned or
        shared-pool for the rest. The problems list every finding, the state only names the worst."""
        if not self.pinned:
            return "not-pinned" if self.problems else "shared-pool"
        if self.aligned is False:
            return "misaligned"
        if self.aligned is None:
            return "unknown"
        if self.memory_pinned is False:
            return "memory-not-pinned"
        return "remote-memory" if self.remote_memory else "aligned"

    @property
    def matches_request(self) -> bool | None:
        if not self.pinned or self.cpu_request_milli is None:
            return None
        return len(self.exclusive_cpus) * 1000 == self.cpu_request_milli

    def _placed(self) -> tuple[frozenset[int], tuple[frozenset[int], ...]]:
        """(the NUMA nodes its CPUs, memory, DRA devices and single-node devices sit on, the node sets of its
        devices attached to several NUMA nodes)."""
        nodes = set(self.cpu_numa)
        for m in self.memory:
            nodes |= m.numa
        for x in self.dra_devices:
            nodes |= frozenset() if x.admin else x.numa
        for d in self.devices:
            nodes |= d.numa if len(d.numa) == 1 else frozenset()
        return frozenset(nodes), tuple(d.numa for d in self.devices if len(d.numa) > 1)

    @property
    def shared_numa(self) -> frozenset[int] | None:
        """The NUMA nodes every part whose node is known could sit on together (empty: they cannot; None: no
        part's node is known). Each single-node part is a set of one node, a device attached to several NUMA nodes
        the set of them: kubelet's Topology Manager counts it on any of its nodes
        (pkg/kubelet/cm/devicemanager/topology_hints.go:179, ``mask.AnySet``)."""
        rest, multi = self._placed()
        sets = [frozenset({n}) for n in rest] + list(multi)
        return frozenset.intersection(*sets) if sets else None

    @property
    def numa(self) -> frozenset[int]:
        """Every NUMA node the container's CPUs, memory and devices sit on: where they can all share one, the
        nodes they can share; otherwise a device attached to several NUMA nodes counts only on those of them the
        rest sits on, where it shares any, else on all of them."""
        shared = self.shared_numa
        if shared:
            return shared
        rest, multi = self._placed()
        return rest.union(*((d & rest) or d for d in multi))

    @property
    def can_share(self) -> bool:
        """Whether what is known of its NUMA nodes leaves them room on one node: misaligned only when not."""
        return self.shared_numa != frozenset()

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.pod}/{self.container}"


def _context(pod: PodInfo) -> str:
    """Why a Pod qos-guard would not admit runs at all in its namespace."""
    if pod.mode == "warn":
        return "admitted with a warning (namespace in warn mode)"
    if pod.opted_in and pod.created and pod.created < pod.opted_in:
        return f"created {pod.created}, before its namespace opted in ({pod.opted_in}), so never judged"
    return (f"its namespace is in {pod.mode} mode, which refuses such a Pod: it was created before the namespace "
            f"opted in, or while the webhook was bypassed")


def _why_not(pod: PodInfo, spec: ContainerSpec | None, allocatable: Allocatable,
             pool: frozenset[int] = frozenset()) -> tuple[str, str, bool]:
    """(reason, detail, is a problem) for a container without exclusive CPUs. ``pool``: the cpu_ids of a container
    of a Pod with pod-level resources that does not qualify for CPUs of its own (``own_cpus``): under kubelet's
    PodLevelResourceManagers the Pod's shared pool (cpumanager/policy_static.go:498), the Pod's alone and shared by
    its containers (cpu_manager.go:582, ``ResourceIsolationPod``), so not pinned."""
    if pool:
        return ("pod-shared-pool", f"CPUs {format_list(pool)} are its Pod's shared pool (pod-level resources under "
                "kubelet's PodLevelResourceManagers: shared by the Pod's containers that do not qualify for CPUs "
                "of their own); give it cpu and memory requests equal to its limits, the cpu whole, for exclusive "
                "CPUs", not (spec is not None and spec.fractional_allowed))
    if not allocatable.cpus:
        return ("node-not-pinning", "kubelet on this node hands out no exclusive CPUs (cpuManagerPolicy is not "
                "static, or every CPU is reserved); see qos-guard nodes", True)
    if pod.pod_level:
        return ("pod-level-resources", "spec.resources sets cpu, memory or hugepages: kubelet's CPU and Memory "
                f"Managers skip such Pods unless its PodLevelResourceManagers gate is on; {_context(pod)}", True)
    if pod.qos != GUARANTEED:
        return ("not-guaranteed", f"QoS class {pod.qos or 'unknown'}: only Guaranteed Pods get exclusive CPUs; "
                f"{_context(pod)}", True)
    milli = spec.cpu_milli if spec else None
    if milli is None or milli <= 0:
        return "no-cpu", "no cpu request: nothing to pin", True
    if milli % 1000:
        if spec is not None and spec.fractional_allowed:
            return ("fractional-cpu", f"cpu {format_milli(milli)} is not a whole number of CPUs; allowed by "
                    "policy.fractionalCPUContainers (runs in the shared pool)", False)
        return ("fractional-cpu", f"cpu {format_milli(milli)} is not a whole number of CPUs; {_context(pod)}", True)
    return ("not-assigned", f"cpu {format_milli(milli)} qualifies, yet kubelet assigned no exclusive CPUs (a Pod "
            "started before the static CPU Manager keeps the shared pool; recreate it)", True)


def judge_container(pod: PodInfo, alloc: ContainerAllocation, allocatable: Allocatable, cpu_numa: Mapping[int, int],
                    cgroup_cpus: frozenset[int] | None = None) -> ContainerVerdict:
    """The verdict on one container; ``cpu_numa`` maps each CPU id to its NUMA node (sysfs)."""
    spec = next((c for c in pod.containers if c.name == alloc.name), None)
    alloc = replace(alloc, devices=merged_devices(alloc.devices))
    uncertain: tuple[DraDevice, ...] = ()
    if spec is not None and spec.request_claims:
        alloc, uncertain = _own_devices(alloc, spec.request_claims)
    request = spec.cpu_milli if spec else None
    # a device whose request is not known is neither judged nor listed as the container's: it may be another's
    common: dict[str, Any] = {"namespace": pod.namespace, "pod": pod.name, "uid": pod.uid,
                              "container": alloc.name, "cpu_request_milli": request, "memory": alloc.memory,
                              "devices": alloc.devices, "cgroup_cpus": cgroup_cpus, "dra_devices": alloc.dynamic,
                              "unknown": unknown_devices(alloc, None if uncertain else spec)}
    device_text = "".join(f", {t}" for t in device_parts(alloc.devices, alloc.dynamic))
    dra_cpus = any(d.driver == DRA_CPU_DRIVER and not d.admin for d in alloc.dynamic)
    if not alloc.cpus and dra_cpus:
        return _judge_dra_cpus(alloc, cpu_numa, cgroup_cpus, request, common, uncertain)
    if not alloc.cpus and any(d.driver == DRA_CPU_DRIVER and not d.admin for d in uncertain):
        where = (f"CPUs from the DRA driver {DRA_CPU_DRIVER} ({', '.join(d.ref for d in uncertain)}) of a claim it "
                 "names by request")
        return ContainerVerdict(pinned=True, exclusive_cpus=frozenset(), cpu_numa=frozenset(), aligned=None,
                                reason=None, detail=f"{where}: whether they are its own is unknown",
                                problems=(whose_unknown(alloc.name, where, uncertain),), **common)
    # under PodLevelResourceManagers the cpu_ids of a container of such a Pod without CPUs of its own are its pool
    pool = alloc.cpus if pod.pod_level and spec is not None and not spec.own_cpus else frozenset()
    if not alloc.cpus or pool:
        reason, detail, problem = _why_not(pod, spec, allocatable, pool)
        shared_numa = frozenset(cpu_numa[c] for c in pool or cgroup_cpus or () if c in cpu_numa)
        not_pinned = (Problem(NOT_PINNED, f"container {alloc.name}: not pinned: {detail}"),) if problem else ()
        return ContainerVerdict(pinned=False, exclusive_cpus=frozenset(), cpu_numa=shared_numa, aligned=None,
                                reason=reason, detail=detail + device_text, problems=not_pinned, **common)
    cpus = alloc.cpus
    numa = frozenset(cpu_numa[c] for c in cpus if c in cpu_numa)
    notes: list[str] = []
    unknown = frozenset(c for c in cpus if c not in cpu_numa)
    if unknown:
        notes.append(f"CPUs {format_list(unknown)} are on no NUMA node sysfs lists")
    if request is not None and len(cpus) * 1000 != request:
        notes.append(f"{len(cpus)} exclusive CPUs for a request of {format_milli(request)}")
    if cgroup_cpus is not None and cgroup_cpus != cpus:
        notes.append(f"cgroup cpuset {format_list(cgroup_cpus) or 'empty'} differs from kubelet's assignment "
                     f"{format_list(cpus)} (kubelet reconciles every cpuManagerReconcilePeriod)")
    draft = ContainerVerdict(pinned=True, exclusive_cpus=cpus, cpu_numa=numa, aligned=None, reason=None,
                                 detail="", notes=tuple(notes), **common)
    all_numa = draft.numa
    aligned = bool(draft.shared_numa)  # with nothing unknown, the CPUs' node is in every known set or none
    where = where_text(cpus, numa, alloc.memory, alloc.devices, alloc.dynamic)
    if aligned:
        detail = f"{where}: aligned on NUMA node {nodes_text(all_numa)}"
        problems: tuple[Problem, ...] = ()
    else:
        detail = f"{where}: not on one NUMA node"
        problems = (Problem(NUMA_MISALIGNED, f"container {alloc.name}: {detail} (NUMA nodes {nodes_text(all_numa)})"
                            + dra_misaligned(alloc, numa)),)
    verdict: bool | None = aligned
    if (draft.unknown or uncertain or unknown) and draft.can_share:
        verdict, detail = None, f"{where}: NUMA alignment unknown"
        problems = ()
    problems += not_known(alloc.name, where, unknown, draft.unknown, uncertain)
    return ContainerVerdict(pinned=True, exclusive_cpus=cpus, cpu_numa=numa, aligned=verdict, reason=None,
                            detail=detail, notes=tuple(notes), problems=problems, **common)


def not_known(container: str, where: str, cpus: frozenset[int], devices: tuple[str, ...],
              uncertain: tuple[DraDevice, ...]) -> tuple[Problem, ...]:
    """A pinned container's NUMAUnknown problems, in this order: its exclusive CPUs no NUMA node lists, its devices
    whose NUMA node is unknown, its claims' devices not known to be its own."""
    return (*((cpus_unknown(container, where, cpus),) if cpus else ()),
            *((numa_unknown(container, where, devices),) if devices else ()),
            *((whose_unknown(container, where, uncertain),) if uncertain else ()))


def cpus_unknown(container: str, where: str, cpus: frozenset[int]) -> Problem:
    """The NUMAUnknown problem of exclusive CPUs no NUMA node of sysfs lists (offline since, or another sysfs)."""
    return Problem(NUMA_UNKNOWN, f"container {container}: cannot say whether it is on one NUMA node ({where}): CPUs "
                   f"{format_list(cpus)} are on no NUMA node SYS/devices/system/node/node*/cpulist lists (offline "
                   "since kubelet assigned them, or --sys-root is not this node's sysfs)")


def _own_devices(alloc: ContainerAllocation, requests: Mapping[str, tuple[str, ...]]
                 ) -> tuple[ContainerAllocation, tuple[DraDevice, ...]]:
    """The container's DRA devices: of a claim it names by request (``resources.claims[].request``), only those
    requests' (kubelet hands it only theirs, pkg/kubelet/cm/dra/manager.go; PodResources lists the whole claim).
    A device of such a claim whose request is not known (the claim not read, or its allocation does not list the
    device) is returned apart, as uncertain: it may be another container's, so it is neither judged nor listed."""
    own, uncertain = [], []
    for d in alloc.dynamic:
        named = requests.get(d.claim)
        if named is None:
            own.append(d)
        elif d.request is None:
            uncertain.append(d)
        elif request_base(d.request) in {request_base(r) for r in named}:
            own.append(d)
    kept = replace(alloc, dynamic=tuple(own)) if len(own) != len(alloc.dynamic) else alloc
    return kept, tuple(uncertain)


def whose_unknown(container: str, where: str, uncertain: tuple[DraDevice, ...]) -> Problem:
    """The NUMAUnknown problem of a container that names requests of a claim whose devices' requests are not
    known: PodResources lists every device of the claim, so which are the container's cannot be told."""
    claims = sorted({d.claim for d in uncertain})
    return Problem(NUMA_UNKNOWN, f"container {container}: cannot say whether it is on one NUMA node ({where}): it "
                   f"names requests (resources.claims[].request) of claim {', '.join(claims)}, and which request "
                   f"DRA device {', '.join(d.ref for d in uncertain)} answers is unknown (the claim's "
                   "status.allocation.devices.results could not be read or does not list it; kubelet's PodResources "
                   "lists every device of a claim whatever the container names), so it is neither judged nor "
                   "counted as the container's. Grant get on resource.k8s.io resourceclaims to the agent's "
                   "ServiceAccount")


def _judge_dra_cpus(alloc: ContainerAllocation, cpu_numa: Mapping[int, int], cgroup_cpus: frozenset[int] | None,
                    request: int | None, common: dict[str, Any], uncertain: tuple[DraDevice, ...] = ()
                    ) -> ContainerVerdict:
    """A container whose CPUs come from a ``dra.cpu`` claim: its exclusive CPUs are the cgroup cpuset the driver's
    NRI plugin set (nothing else sets it there), judged with its claim's devices as kubelet's are. Without the
    cgroup read, unknown."""
    claimed = [d for d in alloc.dynamic if d.driver == DRA_CPU_DRIVER]
    what = f"CPUs from the DRA driver {DRA_CPU_DRIVER} ({', '.join(d.ref for d in claimed)})"
    if not cgroup_cpus:
        where = f"{what}: cpuset not read"
        return ContainerVerdict(pinned=True, exclusive_cpus=frozenset(), cpu_numa=frozenset(), aligned=None,
                                reason=None, detail=f"{where}: NUMA alignment unknown",
                                problems=(numa_unknown(alloc.name, where, ("its cgroup cpuset (not read)",)),),
                                **common)
    cpus = cgroup_cpus
    numa = frozenset(cpu_numa[c] for c in cpus if c in cpu_numa)
    notes = [f"exclusive CPUs {format_list(cpus)} set by the {DRA_CPU_DRIVER} driver's NRI plugin (its claim), "
             "not by kubelet's CPU Manager"]
    if request is not None and len(cpus) * 1000 != request:
        notes.append(f"{len(cpus)} claimed CPUs for a cpu request of {format_milli(request)} (dra-cpu-not-mirrored)")
    unknown_cpus = sorted(c for c in cpus if c not in cpu_numa)
    if unknown_cpus:
        notes.append(f"CPUs {format_list(frozenset(unknown_cpus))} are on no NUMA node sysfs lists")
    draft = ContainerVerdict(pinned=True, exclusive_cpus=cpus, cpu_numa=numa, aligned=None, reason=None,
                                 detail="", notes=tuple(notes), **common)
    all_numa = draft.numa
    where = where_text(cpus, numa, alloc.memory, alloc.devices, alloc.dynamic)
    problems: tuple[Problem, ...] = ()
    verdict: bool | None = bool(draft.shared_numa)
    if verdict:
        detail = f"{where}: aligned on NUMA node {nodes_text(all_numa)}"
    else:
        detail = f"{where}: not on one NUMA node"
        problems = (Problem(NUMA_MISALIGNED, f"container {alloc.name}: {detail} (NUMA nodes {nodes_text(all_numa)}): "
                            f"its claim's CPUs and devices were allocated without a matchAttribute on their NUMA "
                            "node (qos-guard check: dra-cpu-unpaired)"),)
    if (unknown_cpus or draft.unknown or uncertain) and draft.can_share:
        verdict, detail = None, f"{where}: NUMA alignment unknown"
    problems += not_known(alloc.name, where, frozenset(unknown_cpus), draft.unknown, uncertain)
    return ContainerVerdict(pinned=True, exclusive_cpus=cpus, cpu_numa=numa, aligned=verdict, reason=None,
                            detail=detail, notes=tuple(notes), problems=problems, **common)


def numa_unknown(container: str, where: str, unknown: tuple[str, ...]) -> Problem:
    """The NUMAUnknown problem: which devices' NUMA node is unknown, what was looked for, and the way out."""
    return Problem(NUMA_UNKNOWN, f"container {container}: cannot say whether it is on one NUMA node ({where}): "
                   f"the NUMA node of {'; '.join(unknown)}. Publish resource.kubernetes.io/numaNode (or pciBusID) "
                   "in the driver's ResourceSlice, or have the device plugin report TopologyInfo")


