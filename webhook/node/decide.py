"""The per-container decision, pure: from what kubelet allocated (PodResources), the NUMA layout (sysfs), the
container's cgroup cpuset and the Pod as the API server stores it, say whether the container is pinned
(exclusive CPUs: which, how many, equal to its request?), on which NUMA nodes its CPUs, memory blocks and
devices sit, whether they are all on one (aligned), and, when it is not pinned, why.

Kubelet's own rules are the reference (``pkg/kubelet/cm/cpumanager/policy_static.go``): exclusive CPUs only for
a Guaranteed Pod's container with a whole cpu, never for a Pod with pod-level resources unless the
``PodLevelResourceManagers`` gate is on. What PodResources reports wins over what the spec suggests: a container
that holds exclusive CPUs is pinned, whatever the reason it should not be.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from webhook.core.podspec import GUARANTEED, ManifestError, build_pod_spec, qos_class
from webhook.core.quantity import format_milli
from webhook.node.cpulist import format_list
from webhook.node.numapages import NumaPages, distribution, percent

NOT_PINNED, NUMA_MISALIGNED = "NotPinned", "NUMAMisaligned"  # the Event reasons
NUMA_REMOTE_MEMORY = "NUMARemoteMemory"
REMOTE_SHARE = 0.10  # default: more anonymous memory than this share off the CPUs' NUMA node is a problem


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    """One memory (or hugepages) block kubelet's Memory Manager gave a container, and its NUMA nodes."""

    kind: str
    size: int
    numa: frozenset[int]


@dataclass(frozen=True, slots=True)
class DeviceGroup:
    """Devices of one resource kubelet's device manager gave a container, with their NUMA nodes (as the
    device plugin reported them in ``TopologyInfo``; empty when it reported none)."""

    resource: str
    ids: tuple[str, ...]
    numa: frozenset[int]


@dataclass(frozen=True, slots=True)
class ContainerAllocation:
    name: str
    cpus: frozenset[int]  # exclusive CPUs (kubelet's CPU Manager assignment); empty in the shared pool
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[DeviceGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAllocation:
    namespace: str
    name: str
    containers: tuple[ContainerAllocation, ...]


@dataclass(frozen=True, slots=True)
class Allocatable:
    """What kubelet can hand out exclusively (``GetAllocatableResources``): no CPU means no static CPU Manager."""

    cpus: frozenset[int]
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[DeviceGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    name: str
    cpu_milli: int | None  # the request kubelet sizes by (after the API server's defaulting)
    container_id: str | None  # status.containerStatuses[].containerID, for the cgroup
    fractional_allowed: bool = False  # listed in policy.fractionalCPUContainers


@dataclass(frozen=True, slots=True)
class PodInfo:
    """The Pod as the API server stores it, and how its namespace opted in."""

    namespace: str
    name: str
    uid: str
    qos: str
    pod_level: bool  # spec.resources sets cpu or memory
    created: str
    mode: str  # the namespace's qos-guard.io/mode
    opted_in: str | None  # when the namespace's label was last written (managedFields), if known
    containers: tuple[ContainerSpec, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    reason: str  # NOT_PINNED or NUMA_MISALIGNED
    message: str


@dataclass(frozen=True, slots=True)
class Placement:
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
    aligned: bool | None  # None when not pinned: alignment is the promise made to pinned containers only
    reason: str | None  # why not pinned: node-not-pinning, not-guaranteed, pod-level-resources, fractional-cpu, ...
    detail: str
    cgroup_cpus: frozenset[int] | None = None
    notes: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = field(default_factory=tuple)
    pages: NumaPages | None = None  # memory.numa_stat and cpuset.mems, when read (judge_memory)
    memory_pinned: bool | None = None  # pinned containers: Memory Manager Static gave it memory blocks

    @property
    def matches_request(self) -> bool | None:
        if not self.pinned or self.cpu_request_milli is None:
            return None
        return len(self.exclusive_cpus) * 1000 == self.cpu_request_milli

    @property
    def numa(self) -> frozenset[int]:
        """Every NUMA node the container's CPUs, memory and devices sit on."""
        nodes = set(self.cpu_numa)
        for m in self.memory:
            nodes |= m.numa
        for d in self.devices:
            nodes |= d.numa
        return frozenset(nodes)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.pod}/{self.container}"


def size_text(n: int) -> str:
    """Bytes as people write them in a Pod spec: 67108864 -> 64Mi (exact binary units only, else bytes)."""
    for unit, shift in (("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def _nodes(nodes: frozenset[int]) -> str:
    return format_list(nodes) if nodes else "none"


def _context(pod: PodInfo) -> str:
    """Why a Pod qos-guard would not admit runs at all in its namespace."""
    if pod.mode == "warn":
        return "admitted with a warning (namespace in warn mode)"
    if pod.opted_in and pod.created and pod.created < pod.opted_in:
        return f"created {pod.created}, before its namespace opted in ({pod.opted_in}), so never judged"
    return (f"its namespace is in {pod.mode} mode, which refuses such a Pod: it was created before the namespace "
            f"opted in, or while the webhook was bypassed")


def _why_not(pod: PodInfo, spec: ContainerSpec | None, allocatable: Allocatable) -> tuple[str, str, bool]:
    """(reason, detail, is a problem) for a container without exclusive CPUs."""
    if not allocatable.cpus:
        return ("node-not-pinning", "kubelet on this node hands out no exclusive CPUs (cpuManagerPolicy is not "
                "static, or every CPU is reserved); see qos-guard nodes", True)
    if pod.pod_level:
        return ("pod-level-resources", "spec.resources sets cpu or memory: kubelet's CPU and Memory Managers skip "
                f"such Pods unless its PodLevelResourceManagers gate is on; {_context(pod)}", True)
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


def decide(pod: PodInfo, alloc: ContainerAllocation, allocatable: Allocatable, cpu_numa: Mapping[int, int],
           cgroup_cpus: frozenset[int] | None = None) -> Placement:
    """The verdict on one container; ``cpu_numa`` maps each CPU id to its NUMA node (sysfs)."""
    spec = next((c for c in pod.containers if c.name == alloc.name), None)
    request = spec.cpu_milli if spec else None
    common: dict[str, Any] = {"namespace": pod.namespace, "pod": pod.name, "uid": pod.uid,
                              "container": alloc.name, "cpu_request_milli": request, "memory": alloc.memory,
                              "devices": alloc.devices, "cgroup_cpus": cgroup_cpus}
    device_text = "".join(f", {d.resource} {','.join(d.ids)} on NUMA {_nodes(d.numa)}" for d in alloc.devices)
    if not alloc.cpus:
        reason, detail, problem = _why_not(pod, spec, allocatable)
        shared_numa = frozenset(cpu_numa[c] for c in cgroup_cpus or () if c in cpu_numa)
        not_pinned = (Problem(NOT_PINNED, f"container {alloc.name}: not pinned: {detail}"),) if problem else ()
        return Placement(pinned=False, exclusive_cpus=frozenset(), cpu_numa=shared_numa, aligned=None,
                         reason=reason, detail=detail + device_text, problems=not_pinned, **common)
    cpus = alloc.cpus
    numa = frozenset(cpu_numa[c] for c in cpus if c in cpu_numa)
    notes: list[str] = []
    unknown = sorted(c for c in cpus if c not in cpu_numa)
    if unknown:
        notes.append(f"CPUs {format_list(frozenset(unknown))} are on no NUMA node sysfs lists")
    if request is not None and len(cpus) * 1000 != request:
        notes.append(f"{len(cpus)} exclusive CPUs for a request of {format_milli(request)}")
    if cgroup_cpus is not None and cgroup_cpus != cpus:
        notes.append(f"cgroup cpuset {format_list(cgroup_cpus) or 'empty'} differs from kubelet's assignment "
                     f"{format_list(cpus)} (kubelet reconciles every cpuManagerReconcilePeriod)")
    placement = Placement(pinned=True, exclusive_cpus=cpus, cpu_numa=numa, aligned=None, reason=None, detail="",
                          notes=tuple(notes), **common)
    all_numa = placement.numa
    aligned = len(all_numa) == 1
    parts = [f"CPUs {format_list(cpus)} on NUMA {_nodes(numa)}"]
    parts += [f"{m.kind} {size_text(m.size)} on NUMA {_nodes(m.numa)}" for m in alloc.memory]
    parts += [f"{d.resource} {','.join(d.ids)} on NUMA {_nodes(d.numa)}" for d in alloc.devices]
    where = ", ".join(parts)
    if aligned:
        detail = f"{where}: aligned on NUMA node {_nodes(all_numa)}"
        problems: tuple[Problem, ...] = ()
    else:
        detail = f"{where}: not on one NUMA node"
        problems = (Problem(NUMA_MISALIGNED, f"container {alloc.name}: {detail} (NUMA nodes {_nodes(all_numa)})"),)
    return Placement(pinned=True, exclusive_cpus=cpus, cpu_numa=numa, aligned=aligned, reason=None, detail=detail,
                     notes=tuple(notes), problems=problems, **common)


# --- where the memory really is (memory.numa_stat), beside what the Memory Manager says ---

_MEMORY_FIX = ("the fix: memoryManagerPolicy Static with reservedMemory on each NUMA node (then Guaranteed Pods get "
               "memory blocks on their CPUs' node); the cost: the node drained and kubelet's memory_manager_state "
               "file removed before kubelet restarts with it")


def judge_memory(p: Placement, pages: NumaPages | None, threshold: float = REMOTE_SHARE,
                 node_static: bool = False) -> Placement:
    """``p`` with where its memory is: for a pinned container, whether the Memory Manager pinned it (Static: its
    blocks, cross-checked with ``cpuset.mems`` and the pages; None: not pinned, and the answer says where the
    kernel put it, never a plain "aligned"), and ``NUMARemoteMemory`` when more than ``threshold`` of its
    anonymous memory is off the CPUs' NUMA node. ``node_static``: kubelet reports allocatable memory (its Memory
    Manager is Static) although this container got no blocks. A container in the shared pool only gets the
    figures."""
    if not p.pinned:
        return replace(p, pages=pages)
    blocks = frozenset().union(*(m.numa for m in p.memory)) if p.memory else frozenset()
    pinned = bool(p.memory)
    parts = [f"CPUs {format_list(p.exclusive_cpus)} on NUMA {_nodes(p.cpu_numa)}"]
    parts += [f"{m.kind} {size_text(m.size)} on NUMA {_nodes(m.numa)}" for m in p.memory]
    parts += [f"{d.resource} {','.join(d.ids)} on NUMA {_nodes(d.numa)}" for d in p.devices]
    where = ", ".join(parts)
    placed = p.numa
    one = len(placed) == 1
    policy = "no Memory Manager blocks" if node_static else "Memory Manager None"
    notes = list(p.notes)
    problems = list(p.problems)
    if pages is None:
        memory = "memory placement unknown (no memory cgroup read)"
    else:
        memory = distribution(pages)
        if pinned and pages.mems is not None and pages.mems != blocks:
            notes.append(f"cgroup cpuset.mems {format_list(pages.mems) or 'empty'} differs from the Memory "
                         f"Manager's blocks on NUMA {_nodes(blocks)}")
    if pinned:
        head = f"{where}: aligned on NUMA node {_nodes(placed)}" if one else f"{where}: not on one NUMA node"
        detail = f"{head}; pages: {memory}"
    else:
        mems = f", cpuset.mems {format_list(pages.mems)}" if pages is not None and pages.mems is not None else ""
        head = f"{where}: on NUMA node {_nodes(placed)}" if one else f"{where}: not on one NUMA node"
        detail = f"{head}; memory not pinned ({policy}{mems}): {memory}"
    share = pages.remote_share(p.cpu_numa) if pages is not None else None
    if pages is not None and share is not None and share > threshold:
        off = frozenset(pages.anon_nodes() - p.cpu_numa)
        why = (f"Memory Manager Static gave it NUMA {_nodes(blocks)}, yet the kernel placed the pages elsewhere"
               if pinned else f"memory not pinned ({policy}), the kernel placed it; {_MEMORY_FIX}")
        problems.append(Problem(NUMA_REMOTE_MEMORY, (
            f"container {p.container}: {percent(share)} of its anonymous memory is off its CPUs' NUMA node "
            f"{_nodes(p.cpu_numa)} (on NUMA {_nodes(off)}; more than {percent(threshold)}): {memory}; {why}")))
    return replace(p, pages=pages, memory_pinned=pinned, detail=detail, notes=tuple(notes),
                    problems=tuple(problems))


# --- the Pod and its namespace, from the API server's JSON ---

def opted_in_at(namespace: Mapping[str, Any], label: str) -> str | None:
    """When ``label`` was last written on the namespace: the latest managedFields entry that owns it."""
    latest: str | None = None
    for entry in (namespace.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, Mapping):
            continue
        fields = entry.get("fieldsV1") or {}
        labels = ((fields.get("f:metadata") or {}) if isinstance(fields, Mapping) else {}).get("f:labels") or {}
        when = entry.get("time")
        if isinstance(labels, Mapping) and f"f:{label}" in labels and isinstance(when, str):
            latest = max(latest or when, when)
    return latest


def pod_info(obj: Mapping[str, Any], mode: str, opted_in: str | None,
             fractional_allowed: Iterable[str] = ()) -> PodInfo:
    """The facts the decision needs from a Pod object; ``ManifestError`` when its spec cannot be read."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    spec = build_pod_spec(obj.get("spec"), ("spec",), status)
    qos = status.get("qosClass") if isinstance(status.get("qosClass"), str) else None
    pod_level = spec.pod_level is not None and spec.pod_level.sets_compute()
    ids = {s.get("name"): s.get("containerID") for key in ("containerStatuses", "initContainerStatuses")
           for s in status.get(key) or [] if isinstance(s, Mapping)}
    allowed = set(fractional_allowed)
    containers = []
    for c in (*spec.init_containers, *spec.containers):
        sizing = c.resources.requests.get("cpu")
        if sizing is None or sizing.invalid:
            found = c.resources.sizing_cpu()
            sizing = found[1] if found else None
        cid = ids.get(c.name)
        containers.append(ContainerSpec(c.name, sizing.milli if sizing is not None and not sizing.invalid else None,
                                        cid if isinstance(cid, str) and cid else None, c.name in allowed))
    return PodInfo(namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")),
                   uid=str(meta.get("uid", "")), qos=qos or qos_class(spec), pod_level=pod_level,
                   created=str(meta.get("creationTimestamp", "")), mode=mode, opted_in=opted_in,
                   containers=tuple(containers))


__all__ = ["NOT_PINNED", "NUMA_MISALIGNED", "NUMA_REMOTE_MEMORY", "REMOTE_SHARE", "Allocatable", "ContainerAllocation",
           "ContainerSpec", "DeviceGroup", "ManifestError", "MemoryBlock", "Placement", "PodAllocation", "PodInfo",
           "Problem", "decide", "judge_memory", "opted_in_at", "pod_info"]
