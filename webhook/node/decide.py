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
from webhook.core.quantity import format_bytes, format_milli
from webhook.node.cpulist import format_list
from webhook.node.numapages import NumaPages, distribution, percent

NOT_PINNED, NUMA_MISALIGNED, NUMA_UNKNOWN = "NotPinned", "NUMAMisaligned", "NUMAUnknown"  # the Event reasons
NUMA_REMOTE_MEMORY = "NUMARemoteMemory"
REMOTE_SHARE = 0.10  # default: more anonymous memory than this share off the CPUs' NUMA node is a problem
DRA_REASON = "kubelet's Topology Manager does not align devices allocated through DRA"
DRA_WAY_OUT = ("serve this device with its device plugin on pinned nodes (the Topology Manager aligns those), or keep "
               "a claim's devices together with a matchAttribute constraint on resource.kubernetes.io/numaNode and "
               "verify with qos-guard agent")


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
class DraDevice:
    """One device a container got through DRA (PodResources ``dynamic_resources``), and its NUMA nodes as its
    ResourceSlice or sysfs says (``webhook/node/dra.py``): empty when unknown, ``looked`` then saying what was
    looked for and why nothing answered (beside a known answer: the sources before it that gave nothing)."""

    driver: str
    pool: str
    device: str
    claim: str  # namespace/name of the ResourceClaim
    cdi: tuple[str, ...] = ()
    numa: frozenset[int] = frozenset()
    source: str = ""  # the attribute that answered: resource.kubernetes.io/numaNode, a driver's, pciBusID, pcieRoot
    path: str = ""  # the sysfs file read (pciBusID, pcieRoot)
    looked: str = ""
    admin: bool = False  # allocated with adminAccess (a monitoring Pod's): not the workload's, not judged

    @property
    def ref(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class ContainerAllocation:
    name: str
    cpus: frozenset[int]  # exclusive CPUs (kubelet's CPU Manager assignment); empty in the shared pool
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[DeviceGroup, ...] = ()
    dynamic: tuple[DraDevice, ...] = ()  # DRA devices


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
    claims: tuple[str, ...] = ()  # the DRA claims the spec gives it (resources.claims, DRA extended resources)


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
    reason: str  # NOT_PINNED, NUMA_MISALIGNED or NUMA_UNKNOWN
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
    aligned: bool | None  # None when not pinned (alignment is promised to pinned containers only) or unknown
    reason: str | None  # why not pinned: node-not-pinning, not-guaranteed, pod-level-resources, fractional-cpu, ...
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

    @property
    def numa(self) -> frozenset[int]:
        """Every NUMA node the container's CPUs, memory and devices sit on."""
        nodes = set(self.cpu_numa)
        for m in self.memory:
            nodes |= m.numa
        for d in self.devices:
            nodes |= d.numa
        for x in self.dra_devices:
            nodes |= frozenset() if x.admin else x.numa
        return frozenset(nodes)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.pod}/{self.container}"


size_text = format_bytes  # one byte formatter (webhook.core.quantity); the name stays for its callers


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


def judge_container(pod: PodInfo, alloc: ContainerAllocation, allocatable: Allocatable, cpu_numa: Mapping[int, int],
                    cgroup_cpus: frozenset[int] | None = None) -> Placement:
    """The verdict on one container; ``cpu_numa`` maps each CPU id to its NUMA node (sysfs)."""
    spec = next((c for c in pod.containers if c.name == alloc.name), None)
    request = spec.cpu_milli if spec else None
    common: dict[str, Any] = {"namespace": pod.namespace, "pod": pod.name, "uid": pod.uid,
                              "container": alloc.name, "cpu_request_milli": request, "memory": alloc.memory,
                              "devices": alloc.devices, "cgroup_cpus": cgroup_cpus, "dra_devices": alloc.dynamic,
                              "unknown": unknown_devices(alloc, spec)}
    device_text = "".join(f", {t}" for t in device_parts(alloc.devices, alloc.dynamic))
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
    where = where_text(cpus, numa, alloc.memory, alloc.devices, alloc.dynamic)
    if aligned:
        detail = f"{where}: aligned on NUMA node {_nodes(all_numa)}"
        problems: tuple[Problem, ...] = ()
    else:
        detail = f"{where}: not on one NUMA node"
        problems = (Problem(NUMA_MISALIGNED, f"container {alloc.name}: {detail} (NUMA nodes {_nodes(all_numa)})"
                            + dra_misaligned(alloc, numa)),)
    verdict: bool | None = aligned
    if placement.unknown and len(all_numa) <= 1:
        verdict, detail = None, f"{where}: NUMA alignment unknown"
    if placement.unknown:
        problems += (numa_unknown(alloc.name, where, placement.unknown),)
    return Placement(pinned=True, exclusive_cpus=cpus, cpu_numa=numa, aligned=verdict, reason=None, detail=detail,
                     notes=tuple(notes), problems=problems, **common)


# --- devices whose NUMA node is unknown, and DRA devices (kubelet aligns none of them) ---

def device_parts(devices: Iterable[DeviceGroup], dra: Iterable[DraDevice]) -> list[str]:
    """Each device plugin group and DRA device with its NUMA node (``unknown`` when it could not be found)."""
    return [f"{d.resource} {','.join(d.ids)} on NUMA {_nodes(d.numa) if d.numa else 'unknown'}" for d in devices] \
        + [dra_text(x) for x in dra]


def where_text(cpus: frozenset[int], cpu_numa: frozenset[int], memory: Iterable[MemoryBlock],
               devices: Iterable[DeviceGroup], dra: Iterable[DraDevice]) -> str:
    """Where a pinned container's CPUs, memory blocks and devices are, as its verdict's detail begins."""
    parts = [f"CPUs {format_list(cpus)} on NUMA {_nodes(cpu_numa)}"]
    parts += [f"{m.kind} {size_text(m.size)} on NUMA {_nodes(m.numa)}" for m in memory]
    return ", ".join(parts + device_parts(devices, dra))


def dra_text(x: DraDevice) -> str:
    """``DRA gpu.example.com/pool/gpu-0 (claim ns/c) on NUMA 0`` (``unknown`` when it could not be found); a
    device given with adminAccess is a monitoring Pod's view of a device another Pod may use: not judged."""
    if x.admin:
        return f"DRA {x.ref} (claim {x.claim}) with monitoring access (adminAccess): no alignment needed"
    return f"DRA {x.ref} (claim {x.claim}) on NUMA {_nodes(x.numa) if x.numa else 'unknown'}"


def unknown_devices(alloc: ContainerAllocation, spec: ContainerSpec | None = None) -> tuple[str, ...]:
    """Each device of ``alloc`` whose NUMA node is not known, and what was looked for: a device plugin's device
    without ``TopologyInfo``, a DRA device whose slice and sysfs did not say, or DRA claims the spec gives the
    container of which PodResources reported no device (so nothing can be looked up)."""
    found = [f"{d.resource} {','.join(d.ids)}: the device plugin reported no TopologyInfo (NUMA node) for it"
             for d in alloc.devices if not d.numa]
    found += [f"DRA device {x.ref} (claim {x.claim}): {x.looked or 'no NUMA node found'}"
              for x in alloc.dynamic if not x.numa and not x.admin]
    if spec is not None and spec.claims and not alloc.dynamic:
        found.append(f"the DRA devices of {', '.join(spec.claims)}: the Pod gives them to this container, yet "
                     "kubelet's PodResources reported no DRA device for it (is kubelet's "
                     "KubeletPodResourcesDynamicResources feature gate off?)")
    return tuple(found)


def spec_claims(obj: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Container name -> the DRA claims its spec gives it: ``resources.claims`` (by the Pod's claim name) and the
    extended resources the scheduler served through DRA (``status.extendedResourceClaimStatus``)."""
    found: dict[str, list[str]] = {}
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or [] if isinstance(spec, Mapping) else []:
            resources = c.get("resources") if isinstance(c, Mapping) else None
            claims = resources.get("claims") if isinstance(resources, Mapping) else None
            for claim in claims if isinstance(claims, list) else []:
                if isinstance(claim, Mapping) and isinstance(claim.get("name"), str):
                    request = claim.get("request")
                    found.setdefault(str(c.get("name")), []).append(
                        f"claim {claim['name']}" + (f" (request {request})" if isinstance(request, str) else ""))
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    extended = status.get("extendedResourceClaimStatus") if isinstance(status, Mapping) else None
    if isinstance(extended, Mapping):
        name = extended.get("resourceClaimName")
        for m in extended.get("requestMappings") or [] if isinstance(extended.get("requestMappings"), list) else []:
            if isinstance(m, Mapping) and isinstance(m.get("containerName"), str):
                found.setdefault(m["containerName"], []).append(
                    f"extended resource {m.get('resourceName')} (claim {name})")
    return {k: tuple(v[:16]) for k, v in found.items()}


def numa_unknown(container: str, where: str, unknown: tuple[str, ...]) -> Problem:
    return Problem(NUMA_UNKNOWN, f"container {container}: cannot say whether it is on one NUMA node ({where}): "
                   f"the NUMA node of {'; '.join(unknown)}. Publish resource.kubernetes.io/numaNode (or pciBusID) "
                   "in the driver's ResourceSlice, or have the device plugin report TopologyInfo")


def dra_misaligned(alloc: ContainerAllocation, cpu_nodes: frozenset[int]) -> str:
    """Why, when a DRA device sits off the CPUs' NUMA nodes: kubelet never aligned it, and the way out."""
    off = [x for x in alloc.dynamic if x.numa and not x.admin and not x.numa <= cpu_nodes]
    if not off:
        return ""
    named = "; ".join(f"DRA device {x.ref} (claim {x.claim}) on NUMA {_nodes(x.numa)}"
                      f"{f' (from {x.source})' if x.source else ''}" for x in off)
    return f": {named}, the CPUs on NUMA {_nodes(cpu_nodes)}: {DRA_REASON}; {DRA_WAY_OUT}"


# --- where the memory really is (memory.numa_stat), beside what the Memory Manager says ---

_MEMORY_FIX = ("the fix: memoryManagerPolicy Static with reservedMemory on each NUMA node (then Guaranteed Pods get "
               "memory blocks on their CPUs' node); the cost: the node drained and kubelet's memory_manager_state "
               "file removed before kubelet restarts with it")


def _head(p: Placement, where: str) -> str:
    """What judge_container said of the CPUs and devices: unknown (a device's NUMA node), aligned or not on one node."""
    if p.aligned is None:
        return f"{where}: NUMA alignment unknown"
    return f"{where}: aligned on NUMA node {_nodes(p.numa)}" if p.aligned else f"{where}: not on one NUMA node"


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
    where = where_text(p.exclusive_cpus, p.cpu_numa, p.memory, p.devices, p.dra_devices)
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
        head = _head(p, where)
        detail = f"{head}; pages: {memory}"
    else:
        mems = f", cpuset.mems {format_list(pages.mems)}" if pages is not None and pages.mems is not None else ""
        head = (f"{where}: NUMA alignment unknown" if p.aligned is None else f"{where}: on NUMA node "
                f"{_nodes(placed)}" if one else f"{where}: not on one NUMA node")
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
    claims = spec_claims(obj)
    containers = []
    for c in (*spec.init_containers, *spec.containers):
        sizing = c.resources.requests.get("cpu")
        if sizing is None or sizing.invalid:
            found = c.resources.sizing_cpu()
            sizing = found[1] if found else None
        cid = ids.get(c.name)
        containers.append(ContainerSpec(c.name, sizing.milli if sizing is not None and not sizing.invalid else None,
                                        cid if isinstance(cid, str) and cid else None, c.name in allowed,
                                        claims.get(c.name, ())))
    return PodInfo(namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")),
                   uid=str(meta.get("uid", "")), qos=qos or qos_class(spec), pod_level=pod_level,
                   created=str(meta.get("creationTimestamp", "")), mode=mode, opted_in=opted_in,
                   containers=tuple(containers))


__all__ = ["DRA_REASON", "NOT_PINNED", "NUMA_MISALIGNED", "NUMA_REMOTE_MEMORY", "NUMA_UNKNOWN", "REMOTE_SHARE",
           "Allocatable", "ContainerAllocation", "ContainerSpec", "DeviceGroup", "DraDevice", "ManifestError",
           "MemoryBlock", "Placement", "PodAllocation", "PodInfo", "Problem", "judge_container", "judge_memory",
           "opted_in_at", "pod_info"]
