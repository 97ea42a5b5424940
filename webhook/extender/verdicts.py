"""Where a Pod fits one NUMA node now: the filter and the scores of kube-scheduler's extender, over the same fit
as ``numa-unfit`` with ``policy.numa: auto`` (``webhook.core.numa.fit_node``: kubelet's Topology Manager, CPU,
Memory and device managers, simulated), each node under its own policy and scope.

The difference from admission: admission asks whether the Pod could ever fit (a NodeResourceTopology zone's
``allocatable``); placement asks whether it fits *now*, against each zone's ``available`` less what the Pods
bound since the NRT last changed will take (``reservations``: NFD publishes on an interval, and a burst of Pods
judged against one stale NRT would all be sent to the last free zone).

Rules, as ``numa: auto``'s: a node without a usable NRT (unknown) is never refused; only ``single-numa-node``
refuses (``restricted``, ``best-effort`` and ``none`` admit a Pod across NUMA nodes: kept, scored 0), save that
full-pcpus-only's SMTAlignmentError refuses under ``restricted`` and ``best-effort`` too, as kubelet's Allocate does.
What is free now is ``reservations``'; the fit is ``core.numa.fit_node``, the score ``scorer``'s. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.core.demands import Demand, Demands
from webhook.core.kubeversion import DEFAULT, Semantics
from webhook.core.numa import Levels, NodeFit, fit_node, levels
from webhook.core.numatopology import NodeTopology
from webhook.core.resourceblock import CPU
from webhook.extender.reservations import BoundPod, NodeState, free_now, pod_demands
from webhook.extender.scorer import amounts, score_node

# ---- the verdicts ----

NOT_EVER = ("qos-guard: {label} needs {need} on one NUMA node, more than any NUMA node of this node has "
            "(single-numa-node would fail it with TopologyAffinityError)")
NOT_NOW = ("qos-guard: {label} needs {need} on one NUMA node; none has that free now "
           "(single-numa-node would fail it with TopologyAffinityError)")
APART = ("qos-guard: {label} needs {need} on one NUMA node; this node has each on some NUMA node, never all on one "
         "(single-numa-node would fail it with TopologyAffinityError)")
IN_ORDER = ("qos-guard: {label} needs {need} on one NUMA node once the containers before it are placed "
            "(single-numa-node would fail it with TopologyAffinityError)")


@dataclass(frozen=True, slots=True)
class Verdict:
    """One node's answer: kept or not, why not, and its score (``node``: a node it was judged on, of its shape; a
    refusal is one object for every node of its empty shape that refuses alike)."""

    node: str
    kept: bool
    reason: str = ""
    unresolvable: bool = False  # not even on the empty node: preempting Pods there would not help
    score: int = 0
    known: bool = True


NO_OPINION = Verdict("", True)
UNKNOWN = Verdict("", True, known=False)
_NO_OPINION, _UNKNOWN = NO_OPINION, UNKNOWN


@dataclass
class Judge:
    """The answers for one Pod over many nodes; nodes of one free shape are judged once."""

    wants: Demands | None
    fitted: dict[tuple[Any, ...], NodeFit] = field(default_factory=dict)  # (empty shape, class) -> fit
    verdicts: dict[Any, Verdict] = field(default_factory=dict)  # shape (and reservations) -> verdict
    refusals: dict[tuple[Any, ...], Verdict] = field(default_factory=dict)  # see ``_judge``
    texts: dict[tuple[Any, ...], str] = field(default_factory=dict)  # a refusal's reason, see ``_refusal``
    classes: Levels | None = field(default=None, init=False)  # what of a zone's amounts the Pod tells apart

    def __post_init__(self) -> None:
        self.classes = levels(self.wants) if self.wants is not None else None

    @classmethod
    def of(cls, pod: Mapping[str, Any], kube: Semantics = DEFAULT) -> Judge:
        return cls(pod_demands(pod, kube))

    def _fit(self, empty: NodeTopology, topo: NodeTopology) -> NodeFit:
        """The fit on ``topo`` (zones free now of a node of the ``empty`` shape), once per class of its amounts
        (``Levels``): nodes whose NRTs count their own Pods are each a free shape of their own, most of them
        alike for the Pod at hand."""
        assert self.wants is not None and self.classes is not None
        shape = empty.shape
        # full-pcpus-only compares a request with the node's free CPUs summed over its zones, which the classes
        # (each zone's amounts apart) do not tell apart: such a node is fitted by its exact amounts.
        # So does kubelet's merge over NUMA masks where restricted and best-effort admit across NUMA nodes.
        cpu = empty.cpu_manager
        exact = (cpu is not None and cpu.full_pcpus_only) or empty.across
        key = (shape, topo.shape if exact else self.classes.of(topo))
        found = self.fitted.get(key)
        if found is None:
            found = self.fitted[key] = fit_node(self.wants, topo, empty)
        return found

    def node(self, name: str, state: NodeState | None, reserved: Sequence[BoundPod] = (),
             free: tuple[NodeTopology, tuple[Any, ...]] | None = None) -> Verdict:
        """The node's verdict (its ``node`` may name another node of its shape: the caller pairs it with ``name``);
        ``free``: its zones free now and the reservations that made them, when the caller has them."""
        if self.wants is None:
            return _NO_OPINION
        if state is None or not state.empty.policy or not state.empty.zones:
            return _UNKNOWN  # unknown topology never refuses a node
        if state.empty.policy == "none":
            return _NO_OPINION
        topo, held_keys = free if free is not None else (free_now(state, reserved), tuple(p.key for p in reserved))
        return self.judged(state, topo, (state.shape, held_keys) if held_keys else state.shape)

    def judged(self, state: NodeState, topo: NodeTopology, key: Any) -> Verdict:
        """The verdict on a node whose zones free now are ``topo``, judged once per ``key`` (its shape, and its
        reservations when it has some); the caller has ruled out unknown and ``none`` nodes."""
        found = self.verdicts.get(key)
        if found is None:
            found = self.verdicts[key] = self._judge(state, topo)
        return found

    def _judge(self, state: NodeState, topo: NodeTopology) -> Verdict:
        assert self.wants is not None
        name = state.empty.name
        fit = self._fit(state.empty, topo)
        if fit.fits:
            # What the Pod takes depends only on where it goes: most free shapes place it alike.
            return Verdict(name, True, score=score_node(self.wants, fit, state.empty, topo))
        if not fit.kubelet_refuses:
            return Verdict(name, True)  # restricted or best-effort: admitted across NUMA nodes, or not known
        assert fit.failed is not None
        if fit.smt_refused or fit.refused:
            # full-pcpus-only's refusal at allocation (under any policy), restricted's TopologyAffinityError or an
            # allocation kubelet fails where its policy admits across NUMA nodes (``core.numa_across``): kubelet's
            # reason, not a NUMA node's size (numa-unfit says the same).
            return self.allocation_refusal(state.empty, fit.failed, fit.reason, fit.alone)
        return self.refusal(state.empty, fit.failed, fit.alone)

    def allocation_refusal(self, empty: NodeTopology, need: Demand, reason: str, alone: bool) -> Verdict:
        """A refusal for kubelet's own ``reason`` (not a NUMA node's size), one object per empty shape, demand
        and reason."""
        why = (empty.key, id(need), reason, alone)
        found = self.refusals.get(why)
        if found is None:
            found = self.refusals[why] = Verdict(empty.name, False, f"qos-guard: {need.label}: {reason}",
                                                 unresolvable=alone)
        return found

    def refusal(self, empty: NodeTopology, need: Demand, alone: bool, ever: tuple[bool, bool] | None = None,
                empty_key: Any = None, named: frozenset[str] | None = None) -> Verdict:
        """The refusal of a node of the ``empty`` shape that ``need`` (one of ``wants``) does not fit now (``alone``:
        nor alone on its zones): one object per empty shape, demand and ``alone``, since a fleet's nodes of one
        machine, each with other zones free now, fail alike (a new Pod shape is judged on thousands of free shapes of
        a few dozen machines). What the caller knows already: ``ever``, whether the empty node holds the Pod, and if
        not whether alone; ``empty_key``, a cheaper key of ``empty`` than its own; ``named``, what it aligns."""
        # ``need`` is one of ``self.wants``, alive as long
        why = (empty.key if empty_key is None else empty_key, id(need), alone)
        found = self.refusals.get(why)
        if found is None:
            text, unresolvable = self._refusal(empty, need, alone, ever, named)
            found = self.refusals[why] = Verdict(empty.name, False, text, unresolvable=unresolvable)
        return found

    def _refusal(self, empty: NodeTopology, need: Demand, alone: bool, ever: tuple[bool, bool] | None,
                 named: frozenset[str] | None) -> tuple[str, bool]:
        """The reason a node of the ``empty`` shape refuses ``need`` now, and whether it is unresolvable (not
        even on the empty node); written once per reason, demand and what the node aligns (``texts``)."""
        if ever is None:
            fit = self._fit(empty, empty)
            ever = (fit.fits, fit.alone)
        fits_ever, alone_ever = ever
        # Only what kubelet aligns here is named: no memory where the node publishes none (Memory Manager None).
        if named is None:
            named = aligned(empty)
        text = ((APART if _apart(need, named, empty) else NOT_EVER) if not fits_ever and alone_ever
                else NOT_NOW if alone else IN_ORDER)
        key = (text, id(need), named)
        said = self.texts.get(key)
        if said is None:
            said = self.texts[key] = text.format(label=need.label, need=need.show(only=named) or "its resources")
        return said, not fits_ever


def aligned(empty: NodeTopology) -> frozenset[str]:
    """What kubelet aligns on a node of the ``empty`` shape, as a refusal names it: CPUs (where its CPU Manager
    gives hints: not ``none``, ``NodeTopology.cpu_hints``), and what some zone has."""
    published = frozenset(empty.published)
    return published | {CPU} if empty.cpu_hints else published - {CPU}


def _apart(need: Demand, named: frozenset[str], topo: NodeTopology) -> bool:
    """Each part of ``need`` (of those named) fits some zone of the empty node, so what fails is that they are on
    different NUMA nodes, not that any part is too large for one."""
    parts = [(k, v) for k, v in amounts(need).items() if k in named]
    return len(parts) > 1 and all(any(z.allocatable.get(k, 0) >= v for z in topo.zones) for k, v in parts)
