"""NUMA fit against the cluster's real topology: would kubelet's Topology Manager admit this Pod on a node
described by a ``NodeResourceTopology`` object (``topology.node.k8s.io/v1alpha2``), and if not, why.

Pure: the caller hands in a ``Topology`` snapshot (``webhook.core.numatopology``: nodes with their labels, and each
node's NUMA zones with their allocatable resources and the node's ``topologyManagerPolicy``/
``topologyManagerScope``). The model is kubelet's own admission on an empty node, provider by provider, as
pkg/kubelet/cm builds it (v1.36):

- the static CPU Manager policy aligns a container's CPUs when the Pod is Guaranteed and the container asks a
  whole number of them (``guaranteedCPUs``); a single NUMA node qualifies when its free CPUs, plus the CPUs
  init containers left for reuse, hold the request, and no reusable CPU lies outside it
  (``generateCPUTopologyHints``);
- the static Memory Manager policy aligns memory and hugepages of Guaranteed Pods (``calculateHints``), with
  the memory of init containers reusable on the same NUMA node;
- the device manager aligns every device plugin resource in a container's limits, whatever the QoS class
  (``generateDeviceTopologyHints``): only NUMA nodes that have such devices qualify, reusable devices first;
  from 1.36 even for a request of 0 (its hints cover only ``deviceNUMANodes``); before, a zero request is
  no constraint (``Semantics.zero_device_request_aligned``);
- ``single-numa-node`` admits a container (``container`` scope) or the Pod (``pod`` scope) on the lowest
  numbered NUMA node every provider accepts (``HintMerger``), and refuses it (``TopologyAffinityError``)
  when there is none. Containers are placed in order, init containers first, each on what the earlier ones
  left (``containerScope.Admit``).

Only what a NodeResourceTopology object says is known: which CPUs are reserved or share a core is not, so
where kubelet's choice of CPUs decides (an init container's reusable CPUs on SMT cores) the model takes the
reusable ones first, as kubelet does on cores of one thread. The differential test
(tests/fidelity/test_topology.py) holds this model to the real Topology Manager and counts what it excuses.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass

from webhook.core.demands import Demand, Demands, demands, is_device, may_align
from webhook.core.memo import Memo, remember
from webhook.core.numatopology import HUGEPAGES, NodeTopology, Shapes, Topology, shapes_of
from webhook.core.podspec import CPU, PodSpec
from webhook.core.scheduling import NodeConstraints

# ---- one node: kubelet's admission, simulated ----

# What ``_Node.start`` reads of a topology, by its key: never written after (``place`` copies what it changes).
_Read = tuple[dict[int, int], dict[int, dict[str, int]], dict[int, dict[str, int]], dict[str, set[int]], bool,
              dict[int, dict[str, int]], tuple[int, ...]]
_STARTS: dict[tuple[object, ...], _Read] = {}


class _Node:
    """Free amounts per NUMA node, and what init containers left for reuse, during one admission.

    A plain slotted class, not a dataclass: the scheduler extender starts one per Pod shape and node shape
    (hundreds per call), and starting it was about an eighth of a fit in cProfile."""

    __slots__ = ("cpu_free", "dev_free", "dev_numa", "mem_allocatable", "mem_free", "memory_hints", "order", "owned",
                 "reuse_cpu", "reuse_dev", "reuse_mem", "zero_devices_aligned")

    def __init__(self, read: _Read, zero_devices_aligned: bool = True) -> None:
        (self.cpu_free, self.mem_free, self.dev_free, self.dev_numa, self.memory_hints, self.mem_allocatable,
         self.order) = read
        # NUMA nodes that have devices of a resource (allocatable or not): ``dev_numa``. The Memory Manager gives
        # hints when some zone publishes memory or hugepages: with memoryManagerPolicy None kubelet's
        # GetAllocatableResources has no memory blocks and NFD (or the agent) publishes none; then memory is no
        # hint and no constraint, as on that kubelet (``memory_hints``). ``zero_devices_aligned``: whether a zero
        # device request needs a NUMA node with the devices (``Demands.zero_devices_aligned``).
        self.zero_devices_aligned = zero_devices_aligned
        self.reuse_cpu: tuple[int | None, int] = (None, 0)
        self.reuse_mem: dict[int, dict[str, int]] = {}
        self.reuse_dev: dict[str, tuple[int | None, int]] = {}
        self.owned = False  # the free amounts are this admission's own copies (see ``start``)

    @classmethod
    def start(cls, topo: NodeTopology, zero_devices_aligned: bool) -> _Node:
        """The free amounts of an empty ``topo``: read once per node shape (``topo.key``), shared until the first
        ``place`` copies them (the scheduler extender admits each Pod on every shape of a fleet, most of them
        refused or placed once); ``zero_devices_aligned``: the admitted Pod's minor's rule for a request of 0
        devices (``Demands.zero_devices_aligned``)."""
        read = _STARTS.get(topo.key) if topo.key else None
        if read is None:
            read = cls._read(topo)
            if topo.key:
                if len(_STARTS) >= 4096:
                    _STARTS.clear()
                _STARTS[topo.key] = read
        return cls(read, zero_devices_aligned)

    def _own(self) -> None:
        """Copy the shared free amounts before the first change."""
        if not self.owned:
            self.cpu_free = dict(self.cpu_free)
            self.mem_free = {k: dict(v) for k, v in self.mem_free.items()}
            self.dev_free = {k: dict(v) for k, v in self.dev_free.items()}
            self.owned = True

    @staticmethod
    def _read(topo: NodeTopology) -> _Read:
        cpu_free: dict[int, int] = {}
        mem_free: dict[int, dict[str, int]] = {}
        dev_free: dict[int, dict[str, int]] = {}
        dev_numa: dict[str, set[int]] = {}
        mem_allocatable: dict[int, dict[str, int]] = {}
        for z in topo.zones:  # one pass over each zone's amounts: a fleet's free shapes are read by the thousand
            cpu = 0
            memory: dict[str, int] = {}
            devices: dict[str, int] = {}
            for k, v in z.allocatable.items():
                if k == CPU:
                    cpu = v // 1000
                elif is_device(k):
                    devices[k] = v // 1000
                else:
                    memory[k] = v // 1000
            cpu_free[z.numa], mem_free[z.numa], dev_free[z.numa] = cpu, memory, devices
            # The first zone of a NUMA node's number, as ``holds_memory`` reads it (memory types only: all it asks).
            mem_allocatable.setdefault(z.numa, memory)
            for k, v in z.capacity.items():
                if is_device(k) and (v > 0 or z.allocatable.get(k, 0) > 0):
                    dev_numa.setdefault(k, set()).add(z.numa)
        return (cpu_free, mem_free, dev_free, dev_numa, memory_hinted(topo), mem_allocatable,
                tuple(z.numa for z in topo.zones))

    def accepts(self, d: Demand, numa: int) -> bool:
        """Would every provider give ``d`` a preferred hint for this NUMA node alone?"""
        if d.cpus:
            where, count = self.reuse_cpu
            if count and where != numa:
                return False
            if self.cpu_free[numa] + (count if where == numa else 0) < d.cpus:
                return False
        if d.memory and not self.holds_memory(d, numa):
            return False
        for res, req in d.devices.items():
            numas = self.dev_numa.get(res)
            if numas is None:
                continue  # not a device plugin resource on this node: no hint
            where, count = self.reuse_dev.get(res, (None, 0))
            if not req and not self.zero_devices_aligned:
                # Before 1.36 every NUMA node holds 0 devices, a preferred hint on each, except that
                # generateDeviceTopologyHints drops a mask missing a device an init container left for reuse.
                if count and where != numa:
                    return False
                continue
            if numa not in numas:
                return False
            if count and where != numa:
                return False
            if self.dev_free[numa].get(res, 0) + (count if where == numa else 0) < req:
                return False
        return True

    def holds_memory(self, d: Demand, numa: int) -> bool:
        """The Memory Manager's single-NUMA hint: each type fits the node's allocatable, and its free memory
        plus what init containers left there for reuse (always, without a Memory Manager: ``memory_hints``)."""
        if not self.memory_hints:
            return True
        allocatable = self.mem_allocatable.get(numa, {})
        free = self.mem_free[numa]
        reuse = self.reuse_mem.get(numa)
        for kind, req in d.memory.items():
            if allocatable.get(kind, 0) < req or free.get(kind, 0) + (reuse.get(kind, 0) if reuse else 0) < req:
                return False
        return True

    def constrained(self, d: Demand) -> bool:
        """Does any provider have a hint for ``d`` (else the Topology Manager admits it as it is)?"""
        if d.cpus or (d.memory and self.memory_hints):
            return True
        return any(res in self.dev_numa and (req or self.zero_devices_aligned or self.reuse_dev.get(res, (0, 0))[1])
                   for res, req in d.devices.items())

    def place(self, d: Demand, numa: int) -> None:
        """Allocate ``d`` on ``numa`` as the providers' Allocate does, reusable resources first."""
        self._own()
        regular_init = d.kind == "init"
        if d.cpus:
            where, count = self.reuse_cpu
            from_reuse = min(d.cpus, count) if where == numa else 0
            self.cpu_free[numa] -= d.cpus - from_reuse
            if regular_init:
                self.reuse_cpu = (numa, count + d.cpus - from_reuse)
            else:
                self.reuse_cpu = (where, count - from_reuse)
        reuse_mem = self.reuse_mem.setdefault(numa, {})
        for kind, req in d.memory.items() if self.memory_hints else ():
            self.mem_free[numa][kind] = self.mem_free[numa].get(kind, 0) - max(0, req - reuse_mem.get(kind, 0))
            if regular_init:
                reuse_mem[kind] = max(reuse_mem.get(kind, 0), req)
            elif reuse_mem.get(kind, 0):
                reuse_mem[kind] = max(0, reuse_mem[kind] - req)
        for res, req in d.devices.items():
            if res not in self.dev_numa:
                continue
            where, count = self.reuse_dev.get(res, (None, 0))
            from_reuse = min(req, count)
            self.dev_free[numa][res] = self.dev_free[numa].get(res, 0) - (req - from_reuse)
            if regular_init:
                self.reuse_dev[res] = (numa if req - from_reuse else where, count + req - from_reuse)
            else:
                self.reuse_dev[res] = (where, count - from_reuse)


def memory_hinted(topo: NodeTopology) -> bool:
    """Does the Memory Manager give hints on this node: some zone publishes memory or hugepages (with
    memoryManagerPolicy None kubelet has no memory blocks, and NFD or the agent publish none)."""
    return any(k == "memory" or k.startswith(HUGEPAGES) for z in topo.zones for k in (*z.capacity, *z.allocatable))


@dataclass(frozen=True, slots=True)
class NodeFit:
    """One node's answer (or one shape's, for all its ``nodes``): where each container (or the Pod) went, or
    the one that did not fit."""

    node: str
    policy: str
    scope: str
    placed: Mapping[str, int]  # container name (or "" for the Pod) -> NUMA node
    failed: Demand | None = None
    alone: bool = True  # the failed demand does not fit any zone even on an empty node
    reason: str = ""
    nodes: tuple[str, ...] = ()  # every node this answer stands for (a shape's); empty: ``node`` alone

    @property
    def fits(self) -> bool:
        return self.failed is None

    @property
    def names(self) -> tuple[str, ...]:
        return self.nodes or (self.node,)


def fit_node(pod: PodSpec | Demands, topo: NodeTopology) -> NodeFit:
    """kubelet's Topology Manager admission of the Pod on an empty ``topo`` under ``single-numa-node``
    rules (the node's own policy decides what a failure means: see ``NodeTopology.refuses``)."""
    wants = pod if isinstance(pod, Demands) else demands(pod)
    if wants.fractional_memory:
        return NodeFit(topo.name, topo.policy, topo.scope, {}, wants.containers[0], True,
                       "a fractional byte count of memory, which the Memory Manager cannot allocate")
    node = _Node.start(topo, wants.zero_devices_aligned)
    order = node.order
    placed: dict[str, int] = {}
    if topo.scope == "pod":
        pod_demand = wants.pod
        if node.constrained(pod_demand):
            chosen = _first(node, pod_demand)
            if chosen is None:
                return NodeFit(topo.name, topo.policy, topo.scope, {}, pod_demand, True)
            placed[""] = chosen
            # Each container is then allocated on the Pod's NUMA node. Up to 1.37 the Pod's memory hint counts
            # only the types its app containers ask (getPodRequestedResources), so an init container's hugepages
            # can still miss that node: its Allocate then fails (extendTopologyManagerHint finds no preferred
            # hint); from 1.38 it counts every container's (``Semantics.pod_memory_hint_all_containers``).
            for d in wants.containers:
                if d.memory and not node.holds_memory(d, chosen):
                    return NodeFit(topo.name, topo.policy, topo.scope, placed, d, False,
                                   f"the Pod's NUMA node (node-{chosen}) does not hold its memory")
                if (refused := _smt_refusal(topo, node, d, placed)) is not None:
                    return refused
                node.place(d, chosen)
        return NodeFit(topo.name, topo.policy, topo.scope, placed)
    for d in wants.containers:
        if not node.constrained(d):
            continue
        chosen = _first(node, d)
        if chosen is None:
            # Alone on the empty node: with nothing placed yet the node is the empty one, and no NUMA node took it.
            empty = _Node.start(topo, wants.zero_devices_aligned) if placed else None
            alone = empty is None or not any(empty.accepts(d, n) for n in order)
            return NodeFit(topo.name, topo.policy, topo.scope, placed, d, alone)
        # Admitted by the Topology Manager, the container is then allocated: there full-pcpus-only may refuse it.
        if (refused := _smt_refusal(topo, node, d, placed)) is not None:
            return refused
        node.place(d, chosen)
        placed[d.container or ""] = chosen
    return NodeFit(topo.name, topo.policy, topo.scope, placed)


def _smt_refusal(topo: NodeTopology, node: _Node, d: Demand, placed: Mapping[str, int] | None = None) -> NodeFit | None:
    """The CPU Manager's Allocate of ``d`` under ``full-pcpus-only`` (``CPUManager.smt_refusal``), against the
    CPUs no container holds now (the default set: an init container's stay held, though reusable); None when the
    node does not run it (or does not say) or it allows ``d``."""
    cpu = topo.cpu_manager
    if cpu is None or not cpu.full_pcpus_only or not d.cpus:
        return None
    why = cpu.smt_refusal(d.cpus, sum(node.cpu_free.values()))
    if why is None:
        return None
    empty = sum(z.allocatable.get(CPU, 0) // 1000 for z in topo.zones)
    alone = cpu.smt_refusal(d.cpus, empty) is not None  # refused even on the empty node
    return NodeFit(topo.name, topo.policy, topo.scope, dict(placed or {}), d, alone, why)


def _first(node: _Node, d: Demand) -> int | None:
    """The lowest numbered NUMA node (in the zones' order) every provider accepts ``d`` on alone."""
    accepts = node.accepts
    for numa in node.order:
        if accepts(d, numa):
            return numa
    return None


# ---- equal answers: the amounts a fit turns on ----

_MAX_LEVELS = 256  # sums of one resource's requests kept per Pod; past it, only the caps (see ``Levels``)


@dataclass(frozen=True, slots=True)
class Levels:
    """The amounts of a zone's allocatable (milli-units) that ``fit_node``'s answer for one Pod turns on: two
    topologies of one shape (the empty node's ``NodeTopology.key``) whose zones fall between the same levels
    get the same fit, so the scheduler extender fits each class of a fleet's free shapes once (a fleet whose
    NRTs count their Pods has about one free shape per node).

    Every comparison ``fit_node`` makes is a zone's amount against one container's request (or the Pod's total,
    in ``pod`` scope). What init containers take is reused by the containers after them (kubelet's reuse, per
    provider): on each zone what is free plus what is left for reuse falls only by what app containers and
    sidecars placed there take, so a zone's initial amount is compared with a request plus a sum of theirs.
    ``levels`` holds every such sum, and a zone is known by how many of them its amount reaches; a device's level
    1 (milli) tells a zone with none of it from one with some (the device manager's NUMA nodes). Past
    ``_MAX_LEVELS`` sums, only ``caps``: a zone with all the Pod asks of a resource compares as one with exactly
    that."""

    levels: tuple[tuple[str, tuple[int, ...]], ...] | None
    caps: tuple[tuple[str, int], ...]

    def of(self, topo: NodeTopology) -> tuple[int, ...]:
        """The class of ``topo``'s amounts, zone by zone and resource by resource (the resources the Pod asks):
        ``fit_node`` answers two topologies of one empty shape with equal classes alike."""
        if self.levels is not None:
            return tuple([bisect_right(cut, z.allocatable.get(k, 0)) for z in topo.zones for k, cut in self.levels])
        return tuple([min(z.allocatable.get(k, 0), cap) for z in topo.zones for k, cap in self.caps])


def levels(wants: Demands) -> Levels:
    """The ``Levels`` of ``wants``: per resource it asks, in a zone's milli-units."""
    requests = [(d.kind == "init", _milli(d)) for d in wants.containers]
    total = _milli(wants.pod)
    names = sorted({k for _, r in requests for k in r} | set(total))
    caps = tuple((k, max(sum(r.get(k, 0) for _, r in requests) + total.get(k, 0), 1 if is_device(k) else 0))
                 for k in names)
    cuts = []
    for k in names:
        # What the app containers and sidecars placed on a zone before may have taken; with a request after
        # them, every amount compared (the Pod's total in ``pod`` scope too: an init container's peak with the
        # sidecars before it, or the app containers' and sidecars' sum).
        placed = {0}
        for init, r in requests:
            if r.get(k) and not init:
                placed |= {s + r[k] for s in placed}
                if len(placed) > _MAX_LEVELS:
                    return Levels(None, caps)
        sums = set(placed)
        for init, r in requests:
            if r.get(k) and init:
                sums |= {s + r[k] for s in placed}
        if is_device(k):
            sums.add(1)
        if len(sums) > _MAX_LEVELS:
            return Levels(None, caps)
        cuts.append((k, tuple(sorted(sums))))
    return Levels(tuple(cuts), caps)


def _milli(d: Demand) -> dict[str, int]:
    """What ``d`` asks, in a zone's milli-units."""
    out = {CPU: d.cpus * 1000} if d.cpus else {}
    out.update({k: v * 1000 for k, v in (*d.memory.items(), *d.devices.items())})
    return out


# ---- the cluster: every node the Pod can land on ----

@dataclass(frozen=True, slots=True)
class ClusterFit:
    """The verdict over the nodes the Pod can land on.

    ``refused``: single-numa-node nodes where kubelet would refuse it; ``spread``: nodes with another policy
    where no zone holds it (admitted across NUMA nodes); ``fits``: nodes that hold it; ``unknown``: matching
    nodes without a usable NodeResourceTopology object.
    """

    constraints: NodeConstraints
    matching: int
    fits: tuple[NodeFit, ...] = ()
    refused: tuple[NodeFit, ...] = ()
    spread: tuple[NodeFit, ...] = ()
    unknown: tuple[str, ...] = ()

    @property
    def unfit(self) -> bool:
        """Refused on every node it can land on: no node fits, none is unknown, at least one matches."""
        return bool(self.refused) and not (self.fits or self.spread or self.unknown)


def fit_cluster(pod: PodSpec, topology: Topology, exhaustive: bool = False,
                wants: Demands | None = None, memo: Memo | None = None,
                dra: frozenset[str] = frozenset()) -> ClusterFit:
    """The Pod against every node it can land on (``PodSpec.node_constraints``), judged once per shape of node
    (``shapes_of``; with ``memo``, each shape's answer is remembered for the snapshot). Unless ``exhaustive``,
    it stops at the first shape that holds the Pod, or as soon as a matching node is unknown: either way the rule
    has nothing to say. ``dra``: the extended resources DRA serves the Pod (see below)."""
    constraints = pod.node_constraints
    if topology.nodes is None:
        return ClusterFit(constraints, 0)
    if wants is None:
        if not may_align(pod):
            return ClusterFit(constraints, 0)  # nothing to align (no exclusive CPUs or memory, no device)
        wants = demands(pod)
    if not wants.aligned:
        return ClusterFit(constraints, 0)
    index = shapes_of(topology, memo)
    # ``dra``: the extended resources DRA serves this Pod (a DeviceClass maps them): a node that publishes none
    # of them per NUMA node can still serve them (its DRA driver), so they keep the Pod off no node. Where a node
    # does publish one, its device plugin serves it there and kubelet aligns it: fitted as any device.
    devices = {k for d in wants.containers for k, v in d.devices.items() if v > 0 and k not in dra}
    if constraints.constrained or topology.taints:
        chosen, unknown = index.matching(constraints, topology, memo)
        groups = [(i, tuple(names)) for i, names in sorted(chosen.items())]
    else:
        unknown = list(index.unknown)
        groups = [(i, shape.nodes) for i, shape in enumerate(index.shapes)]
    # A device it asks for that a node does not have at all: the scheduler does not put it there.
    groups = [(i, names) for i, names in groups if not devices or devices <= index.shapes[i].published]
    matching = len(unknown) + sum(len(names) for _, names in groups)
    if unknown and not exhaustive:
        return ClusterFit(constraints, matching, unknown=tuple(sorted(unknown)))
    fits: list[NodeFit] = []
    refused: list[NodeFit] = []
    spread: list[NodeFit] = []
    for where, names in groups:
        topo = index.shapes[where].topology
        # ``none`` asks no alignment and refuses nothing.
        answer = (NodeFit(names[0], topo.policy, topo.scope, {}) if topo.policy == "none"
                  else _fit(index, where, wants, memo))
        answer = NodeFit(names[0], answer.policy, answer.scope, answer.placed, answer.failed, answer.alone,
                         answer.reason, names)
        (fits if answer.fits else refused if topo.refuses else spread).append(answer)
        if fits and not exhaustive:
            break
    return ClusterFit(constraints, matching, tuple(fits), tuple(refused), tuple(spread), tuple(sorted(unknown)))


def _fit(index: Shapes, where: int, wants: Demands, memo: Memo | None) -> NodeFit:
    """The shape's answer for what the Pod asks, remembered in ``memo`` (bounded)."""
    return remember(memo, "numa.fitted", (where, wants.key), lambda: fit_node(wants, index.shapes[where].topology))
