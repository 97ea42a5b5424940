"""Where a Pod fits one NUMA node now: the filter and the scores of kube-scheduler's extender, over the same fit
as ``numa-unfit`` with ``policy.numa: auto`` (``webhook.core.numa.fit_node``: kubelet's Topology Manager, CPU,
Memory and device managers, simulated), each node under its own policy and scope.

The difference from admission: admission asks whether the Pod could ever fit (a NodeResourceTopology zone's
``allocatable``); placement asks whether it fits *now*, against each zone's ``available`` less what the Pods
bound since the NRT last changed will take (``reservations``: NFD publishes on an interval, and a burst of Pods
judged against one stale NRT would all be sent to the last free zone).

Rules, as ``numa: auto``'s: a node without a usable NRT (unknown) is never refused; only ``single-numa-node``
refuses (``restricted``, ``best-effort`` and ``none`` admit a Pod across NUMA nodes: kept, scored 0).
No I/O: the caller hands in the parsed NRTs, the bound Pods and the time.
"""

from __future__ import annotations

import calendar
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.core.demands import Demand, Demands, demands, may_align
from webhook.core.kubeversion import DEFAULT, Semantics
from webhook.core.numa import Levels, NodeFit, fit_node, levels
from webhook.core.numatopology import NodeTopology, TopologyError, Zone, parse_nrt
from webhook.core.podspec import CPU, ManifestError, build_pod_spec
from webhook.core.quantity import QuantityError, quantity_from_value
from webhook.extender.fingerprint import ATTRIBUTE, METHOD_ATTRIBUTE, fingerprint
from webhook.extender.scorer import amounts, score_node, usage

RESERVATION_TIMEOUT = 120.0  # seconds a bound Pod is held against a node whose NRT does not say it counts it
_ZONE_NAME = re.compile(r"node-(\d+)")
_TERMINAL = ("Succeeded", "Failed")


# ---- a node's NodeResourceTopology, as placement reads it ----

class Shape:
    """A node's shape (policy, scope, zones: ``empty`` and ``free``) as a dictionary key: its hash taken once.
    Nodes of one shape judge alike; the cache hands equal shapes out as one object, so a lookup is O(1)."""

    __slots__ = ("_hash", "key")

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key
        self._hash = hash(key)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, Shape) and self._hash == other._hash and self.key == other.key)


@dataclass(frozen=True, slots=True)
class NodeState:
    """A node's NRT: ``empty`` (zones with their ``allocatable``: what kubelet hands out on an empty node),
    ``free`` (zones with their ``available``: free now, as the exporter last saw it), and which Pods the exporter
    counted (NFD's pod-set fingerprint and its method; None where it does not publish one)."""

    empty: NodeTopology
    free: NodeTopology
    fingerprint: str | None = None
    method: str = "all"
    shape: Shape = field(default_factory=lambda: Shape(()), compare=False)


def read_nrt(obj: Mapping[str, Any]) -> NodeState | None:
    """The NRT as placement reads it; None for one the model cannot read (its node is then unknown)."""
    try:
        empty = parse_nrt(obj)
    except TopologyError:
        return None
    available: dict[int, dict[str, int]] = {}
    raw_zones = obj.get("zones")
    for i, raw in enumerate(raw_zones if isinstance(raw_zones, list) else []):
        if not isinstance(raw, Mapping) or raw.get("type") != "Node":
            continue
        found = _ZONE_NAME.fullmatch(str(raw.get("name") or ""))
        numa = int(found.group(1)) if found else i
        resources = raw.get("resources")
        for res in resources if isinstance(resources, list) else []:
            if isinstance(res, Mapping) and isinstance(res.get("name"), str) and "available" in res:
                try:
                    available.setdefault(numa, {})[res["name"]] = quantity_from_value(res["available"]).milli
                except (QuantityError, ValueError):
                    return None
    zones = tuple(Zone(z.numa, z.name, z.capacity,
                       {k: min(v, available.get(z.numa, {}).get(k, v)) for k, v in z.allocatable.items()})
                  for z in empty.zones)
    free = empty.with_zones(zones)
    attrs = obj.get("attributes")
    named = {a.get("name"): a.get("value") for a in (attrs if isinstance(attrs, list) else [])
             if isinstance(a, Mapping)}
    pfp = named.get(ATTRIBUTE)
    method = named.get(METHOD_ATTRIBUTE)
    return NodeState(empty, free, pfp if isinstance(pfp, str) and pfp else None,
                     method if isinstance(method, str) and method else "all", Shape((empty.key, free.key)))


# ---- the Pods bound to nodes: what they take, and which are held as reservations ----

@dataclass(frozen=True, slots=True)
class BoundPod:
    """A Pod bound to a node, as far as placement needs it."""

    namespace: str
    name: str
    node: str
    scheduled_at: float  # wall clock: PodScheduled's lastTransitionTime, else creation, else first seen
    terminal: bool = False
    wants: Demands | None = None  # None: it aligns nothing
    uid: str = ""
    seen: int = 0  # the order it was first seen bound in (the order its node's kubelet admits them in)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


def _when(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def pod_demands(pod: Mapping[str, Any], kube: Semantics = DEFAULT) -> Demands | None:
    """What the Pod asks kubelet to align (``Demands``) at ``kube``'s semantics, None when nothing;
    ``ManifestError`` when the Pod cannot be read."""
    spec = build_pod_spec(pod.get("spec"), ("spec",), pod.get("status"), kube=kube, stored=True)
    if not may_align(spec):
        return None
    wants = demands(spec)
    return wants if wants.aligned else None


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def bound_pod(obj: Mapping[str, Any], kube: Semantics = DEFAULT) -> BoundPod | None:
    """A Pod of the watch (``spec.nodeName`` set) as placement keeps it; None for one not bound."""
    meta, spec, status = (_object(obj.get(k)) for k in ("metadata", "spec", "status"))
    node = spec.get("nodeName")
    if not isinstance(node, str) or not node:
        return None
    when = None
    conditions = status.get("conditions")
    for cond in conditions if isinstance(conditions, list) else []:
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            when = _when(cond.get("lastTransitionTime"))
    when = when or _when(meta.get("creationTimestamp")) or time.time()
    try:
        wants = pod_demands(obj, kube)
    except (ManifestError, ValueError, TypeError):
        wants = None
    # Namespaces and node names repeat across 100,000 Pods: one string each.
    return BoundPod(sys.intern(str(meta.get("namespace") or "")), str(meta.get("name") or ""), sys.intern(node),
                    when, status.get("phase") in _TERMINAL, wants, str(meta.get("uid") or ""))


def minus(topo: NodeTopology, taken: Mapping[int, Mapping[str, int]]) -> NodeTopology:
    """``topo`` with ``taken`` (per zone) no longer free."""
    if not taken:
        return topo
    zones = tuple(Zone(z.numa, z.name, z.capacity,
                       {k: max(0, v - taken.get(z.numa, {}).get(k, 0)) for k, v in z.allocatable.items()})
                  for z in topo.zones)
    return topo.with_zones(zones)


def signed_sets(state: NodeState, on_node: Sequence[BoundPod]) -> list[list[BoundPod]]:
    """The sets of the Pods bound to a node that its exporter may have signed (NFD's fingerprint, by its method),
    in their order: the one place that knows what kubelet's PodResources ``List`` (which NFD and
    ``qos-guard agent --publish-topology`` sign) holds.

    Since ``KubeletPodResourcesListUseActivePods`` (v1.34, on by default) ``List`` holds the active Pods only; a
    kubelet before it (v1.33), or one with the gate off, lists every Pod its pod manager has, terminal ones still
    bound to the node (a ``TopologyAffinityError`` Pod a ReplicaSet left) included. The extender knows the API
    server's minor, not each kubelet's (a kubelet may be three minors older, its gates are its own), so both are
    candidates: the active Pods first, then every bound Pod where some are terminal."""
    exclusive = state.method == "with-exclusive-resources"  # "all", "exclude-terminal" or absent: every Pod listed
    listed = [p for p in on_node if p.wants is not None] if exclusive else list(on_node)
    active = [p for p in listed if not p.terminal]
    return [active] if len(active) == len(listed) else [active, listed]


def reflected(state: NodeState, on_node: Iterable[BoundPod]) -> bool:
    """Does the NRT count exactly the Pods bound to its node (NFD's fingerprint over one of ``signed_sets``)?"""
    if state.fingerprint is None:
        return False
    return any(fingerprint(p.key for p in pods) == state.fingerprint for pods in signed_sets(state, list(on_node)))


def held(state: NodeState, on_node: Sequence[BoundPod], now: float,
         timeout: float = RESERVATION_TIMEOUT) -> list[BoundPod]:
    """The Pods bound to this node that its NRT may not count yet, first bound first: aligned, not terminal, bound
    within ``timeout``, and the NRT's fingerprint (where it has one) not that of the Pods bound there."""
    if reflected(state, on_node):
        return []
    waiting = [p for p in on_node if p.wants is not None and not p.terminal and now - p.scheduled_at < timeout]
    return sorted(waiting, key=lambda p: (p.seen, p.scheduled_at, p.key))


def free_now(state: NodeState, reserved: Sequence[BoundPod]) -> NodeTopology:
    """The node's zones free now: ``available`` less what each reserved Pod takes where kubelet would put it
    (in order, each on what the earlier ones left); one that fits nowhere is counted nowhere."""
    topo = state.free
    for pod in reserved:
        if pod.wants is None:
            continue
        fit = fit_node(pod.wants, topo)
        if fit.fits:
            topo = minus(topo, usage(pod.wants, fit, topo))
    return topo


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
        shape = empty.key or NodeTopology.signature(empty.policy, empty.scope, empty.zones, empty.cpu_manager)
        # full-pcpus-only compares a request with the node's free CPUs summed over its zones, which the classes
        # (each zone's amounts apart) do not tell apart: such a node is fitted by its exact amounts.
        cpu = empty.cpu_manager
        exact = cpu is not None and cpu.full_pcpus_only
        key = (shape, (topo.key or NodeTopology.signature(topo.policy, topo.scope, topo.zones)) if exact
               else self.classes.of(topo))
        found = self.fitted.get(key)
        if found is None:
            found = self.fitted[key] = fit_node(self.wants, topo)
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
        if not state.empty.refuses:
            return Verdict(name, True)  # restricted or best-effort: admitted across NUMA nodes
        assert fit.failed is not None
        return self.refusal(state.empty, fit.failed, fit.alone)

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
    """What kubelet aligns on a node of the ``empty`` shape, as a refusal names it: CPUs, and what some zone has."""
    return frozenset({CPU} | empty.published)


def _apart(need: Demand, named: frozenset[str], topo: NodeTopology) -> bool:
    """Each part of ``need`` (of those named) fits some zone of the empty node, so what fails is that they are on
    different NUMA nodes, not that any part is too large for one."""
    parts = [(k, v) for k, v in amounts(need).items() if k in named]
    return len(parts) > 1 and all(any(z.allocatable.get(k, 0) >= v for z in topo.zones) for k, v in parts)
