"""NUMA fit against the cluster's real topology: would kubelet's Topology Manager admit this Pod on a node
described by a ``NodeResourceTopology`` object (``topology.node.k8s.io/v1alpha2``), and if not, why.

Pure: the caller hands in a ``Topology`` snapshot (``webhook.core.numatopology``: nodes with their labels, and each
node's NUMA zones with their allocatable resources and the node's ``topologyManagerPolicy``/
``topologyManagerScope``). The model (``numafit.fit_rows``, written once: one node is one row of it, a fleet's free
shapes are many) is kubelet's own admission on an empty node, provider by provider, as pkg/kubelet/cm builds it
(v1.36):

- the static CPU Manager policy aligns a container's CPUs when the Pod is Guaranteed and the container asks a
  whole number of them (``guaranteedCPUs``); a single NUMA node qualifies when its free CPUs, plus the CPUs
  init containers left for reuse, hold the request, and no reusable CPU lies outside it
  (``generateCPUTopologyHints``);
- the ``none`` CPU Manager policy (a node whose NodeResourceTopology says so: the agent's ``cpuPinner``,
  ``NodeTopology.cpu_hints``) gives no hint and pins nothing (policy_none.go): there only memory and devices are
  aligned; a node that does not say it is judged as ``static``;
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
from dataclasses import dataclass, replace

from webhook.core.demands import Demand, Demands, demands, is_device, may_align
from webhook.core.memo import Memo, remember
from webhook.core.numa_row import node_row
from webhook.core.numafit import NOT_PLACED, POD, fit_rows
from webhook.core.numatopology import (
    SINGLE_NUMA_NODE,
    SMT_ALIGNMENT_ERROR,
    NodeTopology,
    Shapes,
    Topology,
    shapes_of,
)
from webhook.core.podspec import PodSpec
from webhook.core.resourceblock import CPU
from webhook.core.scheduling import NodeConstraints

# ---- one node ----

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
    # On a node whose policy admits across NUMA nodes: kubelet refuses it there all the same (``reason``), or
    # whether it does is not known (why).
    refused: bool = False
    unknown: str = ""

    @property
    def fits(self) -> bool:
        return self.failed is None

    @property
    def names(self) -> tuple[str, ...]:
        return self.nodes or (self.node,)

    @property
    def smt_refused(self) -> bool:
        """The CPU Manager's full-pcpus-only refuses it at allocation (SMTAlignmentError), under any policy."""
        return self.reason.startswith(SMT_ALIGNMENT_ERROR)

    @property
    def kubelet_refuses(self) -> bool:
        """kubelet fails the Pod on this node (``TopologyAffinityError``, ``SMTAlignmentError``, an allocation)."""
        return not self.fits and not self.unknown and (self.policy == SINGLE_NUMA_NODE or self.refused
                                                       or self.smt_refused)

    def named(self, names: tuple[str, ...]) -> NodeFit:
        """This answer for the nodes ``names`` (a shape's), the first named."""
        return replace(self, node=names[0], nodes=names)


def fit_node(pod: PodSpec | Demands, topo: NodeTopology, empty: NodeTopology | None = None) -> NodeFit:
    """kubelet's Topology Manager admission of the Pod on ``topo`` (an empty node; or what is free now of the node
    ``empty``, whose allocatable the Memory Manager counts): ``fit_rows`` with the node as its one row."""
    wants = pod if isinstance(pod, Demands) else demands(pod)
    if not topo.cpu_hints:
        wants = wants.without_cpus()  # CPU Manager none: its CPUs are aligned nowhere (``NodeTopology.cpu_hints``)
    if wants.fractional_memory:
        return NodeFit(topo.name, topo.policy, topo.scope, {}, wants.containers[0], True,
                       "a fractional byte count of memory, which the Memory Manager cannot allocate")
    row = node_row(topo, empty)
    fits = fit_rows(wants, row.free, row.machine, row.column, row,
                    across=(topo.policy if topo.allocates else None,))
    numas = row.numas
    failed = int(fits.failed[0])
    if topo.scope == "pod":
        zone = int(fits.pod_zone[0])
        placed = {} if zone == NOT_PLACED else {"": numas[zone]}
    else:
        placed = {d.container or "": numas[p] for d, p in zip(wants.containers, fits.placed[0].tolist(), strict=True)
                  if p != NOT_PLACED}
    if failed == NOT_PLACED:
        return NodeFit(topo.name, topo.policy, topo.scope, placed)
    reason = fits.reason.get(0, "")
    if topo.scope == "pod" and failed != POD and not reason and "" in placed:
        reason = f"the Pod's NUMA node (node-{placed['']}) does not hold its memory"
    return NodeFit(topo.name, topo.policy, topo.scope, placed,
                   wants.pod if failed == POD else wants.containers[failed], bool(fits.alone[0]), reason,
                   refused=0 in fits.refused, unknown=fits.unknown.get(0, ""))


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

    ``refused``: nodes where kubelet would refuse it (``NodeFit.kubelet_refuses``); ``spread``: nodes with
    another policy where no zone holds it and kubelet admits it across NUMA nodes; ``fits``: nodes that hold it;
    ``unknown``: matching nodes without a usable NodeResourceTopology object; ``unsure``: nodes where no zone holds
    it and whether kubelet admits it is not known (``NodeFit.unknown`` says why).
    """

    constraints: NodeConstraints
    matching: int
    fits: tuple[NodeFit, ...] = ()
    refused: tuple[NodeFit, ...] = ()
    spread: tuple[NodeFit, ...] = ()
    unknown: tuple[str, ...] = ()
    unsure: tuple[NodeFit, ...] = ()

    @property
    def unfit(self) -> bool:
        """Refused on every node it can land on: no node fits, none is unknown, at least one matches."""
        return bool(self.refused) and not (self.fits or self.spread or self.unknown or self.unsure)


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
    unsure: list[NodeFit] = []
    for where, names in groups:
        # ``none`` aligns nothing: only full-pcpus-only, the Memory Manager and too few on the node refuse there.
        answer = _fit(index, where, wants, memo).named(names)
        (fits if answer.fits else unsure if answer.unknown else refused if answer.kubelet_refuses
         else spread).append(answer)
        if fits and not exhaustive:
            break
    return ClusterFit(constraints, matching, tuple(fits), tuple(refused), tuple(spread), tuple(sorted(unknown)),
                      tuple(unsure))


def _fit(index: Shapes, where: int, wants: Demands, memo: Memo | None) -> NodeFit:
    """The shape's answer for what the Pod asks, remembered in ``memo`` (bounded)."""
    return remember(memo, "numa.fitted", (where, wants.key), lambda: fit_node(wants, index.shapes[where].topology))
