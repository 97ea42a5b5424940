"""What is free on a node now, as the scheduler extender reads it: its NodeResourceTopology (``NodeState``: each
zone's ``allocatable`` and ``available``), the Pods bound to it (``BoundPod``), and of those the ones its NRT may not
count yet (``held``: NFD publishes on an interval, and a burst of Pods judged against one stale NRT would all be
sent to the last free zone), taken off where kubelet would put them (``free_now``). No I/O: the caller hands in the
parsed NRTs, the bound Pods and the time.
"""

from __future__ import annotations

import calendar
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from webhook.core.demands import Demands, demands, may_align
from webhook.core.kubeversion import DEFAULT, Semantics
from webhook.core.numa import fit_node
from webhook.core.numatopology import NodeTopology, TopologyError, Zone, parse_nrt
from webhook.core.podspec import build_pod_spec
from webhook.core.quantity import QuantityError, quantity_from_value
from webhook.core.resourceblock import ManifestError
from webhook.extender.fingerprint import ATTRIBUTE, METHOD_ATTRIBUTE, fingerprint
from webhook.extender.scorer import usage

RESERVATION_TIMEOUT = 120.0  # seconds a bound Pod is held against a node whose NRT does not say it counts it
_ZONE_NAME = re.compile(r"node-(\d{1,9})")  # as numatopology's (int() refuses 4,300 digits)
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
                       {k: min(v, available.get(z.numa, {}).get(k, v)) for k, v in z.allocatable.items()}, z.socket)
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
                       {k: max(0, v - taken.get(z.numa, {}).get(k, 0)) for k, v in z.allocatable.items()}, z.socket)
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
    (in order, each on what the earlier ones left); one that fits nowhere is counted nowhere. Each step is
    remembered by the zones it starts from and what the Pod asks (``_LEFT``): a node's Pods are held again each
    time one is bound there, and only the new one is fitted."""
    topo = state.free
    for pod in reserved:
        if pod.wants is None:
            continue
        key = (topo.key, pod.wants.key) if topo.key else None
        left = _LEFT.get(key) if key is not None else None
        if left is None:
            fit = fit_node(pod.wants, topo)
            left = minus(topo, usage(pod.wants, fit, topo)) if fit.fits else topo
            if key is not None:
                if len(_LEFT) >= 4096:
                    _LEFT.clear()
                _LEFT[key] = left
        # Remembered by zones, not by node: another node's zones of that shape may have made it.
        topo = left if left.name == topo.name else replace(left, name=topo.name)
    return topo


_LEFT: dict[tuple[Any, ...], NodeTopology] = {}  # (zones free, what a Pod asks) -> its zones free once it runs
