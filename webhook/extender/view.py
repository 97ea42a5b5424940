"""The extender's view of the cluster, kept up to date event by event: each node's NRT and the Pods bound to it,
and, cached per node, its zones free now (``Freed``). A watch event touches one node (O(1) for the event, the
node's Pods for its next recomputation); a filter or prioritize call reads one cached ``Freed`` per candidate node,
so its cost is the candidates', not the cluster's.

What a node holds as reservations (``reservations.held``'s rule, with the fingerprint read more closely):

- its NRT's fingerprint (NFD's ``nodeTopologyPodsFingerprint``) is that of the Pods bound there (one of
  ``reservations.signed_sets``: the active ones, or with the terminal ones as kubelet 1.33's List has them): the NRT
  counts them all, nothing is held;
- it is that of the Pods bound first (in the order they were seen bound, the order kubelet admits them in): the
  NRT counts those, and only the ones after them are held: a stale NRT must not have the Pods it already counts
  subtracted again;
- it matches no such set (a Pod this view never saw, one it still has that is gone): only the Pods seen bound
  since the NRT last changed are held, the ones its numbers cannot count yet;
- no fingerprint: every Pod bound within the reservation timeout is held (the exporter says nothing of which
  Pods it counted).

A held Pod is let go when its time is up: a node's cached ``Freed`` says until when it holds (``until``), so time
alone expires reservations, without a pass over all Pods. No I/O, no clock of its own: the caller passes ``now``.
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast

from webhook.core.numatopology import NodeTopology
from webhook.extender.fingerprint import pod_hash, sign
from webhook.extender.fleet_rows import Columns
from webhook.extender.fleet_verdicts import judge_rows
from webhook.extender.reservations import RESERVATION_TIMEOUT, BoundPod, NodeState, Shape, free_now, signed_sets
from webhook.extender.verdicts import NO_OPINION, UNKNOWN, Judge, Verdict

Key = tuple[str, str]
MAX_IDS = 50_000  # distinct free shapes remembered
BATCH = 32  # free shapes of a new Pod shape from which they are judged over arrays (fewer cost under 1.5 ms in Python)
LISTED_LAG = 32  # of a List with terminal Pods, the latest Pods a fingerprint may not count yet (prefixes tried)
# One table for every View of the process: a Judge's verdicts are keyed by these ids, whichever View it reads.
_IDS: dict[Shape, int] = {}
_NEXT_ID = itertools.count()


@dataclass(frozen=True, slots=True)
class Freed:
    """A node's zones free now (``topo``) and the reservations that made them (``held``, their keys), valid for
    its node's ``version`` from ``since`` until ``until`` (the first held Pod's time is up); ``key``: what its
    verdicts are cached by (the shape, with the reservations when there are some)."""

    state: NodeState
    topo: NodeTopology
    held: tuple[Key, ...]
    key: int
    version: int
    since: float
    until: float
    opinion: bool  # False: unknown topology or policy none (kept, no score)


class _Node:
    __slots__ = ("counted", "freed", "hashes", "nrt_seen", "pods", "state", "version")

    def __init__(self) -> None:
        self.state: NodeState | None = None
        self.pods: dict[Key, BoundPod] = {}
        self.hashes: dict[Key, int] = {}  # pod_hash, taken once per Pod while it is on the node
        self.nrt_seen = -1  # the view's order when the NRT last changed
        self.version = 0
        self.freed: Freed | None = None
        # (version, (which of reservations.signed_sets, how many of its Pods) the fingerprint counts)
        self.counted: tuple[int, tuple[int, int] | None] | None = None


class View:
    """NRTs by node name and bound Pods by key, kept incrementally (``set_nrt``, ``put_pod``, ``drop_pod``), with
    each node's ``Freed`` cached. ``states`` and ``pods`` (node -> Pods, in the order seen) build one at once."""

    def __init__(self, states: Mapping[str, NodeState] | None = None,
                 pods: Mapping[str, Iterable[BoundPod]] | None = None,
                 timeout: float = RESERVATION_TIMEOUT) -> None:
        self.timeout = timeout
        self.nodes: dict[str, _Node] = {}
        self.where: dict[Key, str] = {}  # Pod key -> its node
        self._order = itertools.count()
        self.nrt_count = 0
        self.unmatched = 0  # recomputations whose fingerprint matched no set of the Pods seen there
        # Node name -> the verdict key of its cached ``Freed``, for the nodes whose ``Freed`` is current: a call
        # reads them all with one ``map`` (C speed), and only the others one by one. An event on a node drops it
        # (after its version is bumped); time drops it when its first held Pod's time is up (``_expiries``).
        self.fresh: dict[str, int] = {}
        self._expiries: list[tuple[float, str]] = []
        # A ``Freed`` per verdict key, the last one computed: all of one key judge alike (the same empty and free
        # zones), so a shape not judged before is judged on it, once per key, whichever node it came from.
        self.by_key: dict[int, Freed] = {}
        self._latest = -math.inf  # the latest ``now`` a call was judged at (a clock set back voids ``fresh``)
        self.columns = Columns()  # the free shapes as rows, for a Pod shape judged on many at once
        for name, state in (states or {}).items():
            self.set_nrt(name, state)
        for on_node in (pods or {}).values():
            for pod in on_node:
                self.put_pod(pod)

    # ---- what the watches say ----

    def _node(self, name: str) -> _Node:
        node = self.nodes.get(name)
        if node is None:
            node = self.nodes[name] = _Node()
        return node

    def _gone_if_empty(self, name: str, node: _Node) -> None:
        if node.state is None and not node.pods:
            del self.nodes[name]

    def set_nrt(self, name: str, state: NodeState | None) -> None:
        """The node's NRT changed (None: deleted, or one the model cannot read)."""
        node = self.nodes.get(name) if state is None else self._node(name)
        if node is None:
            return
        self.nrt_count += (state is not None) - (node.state is not None)
        node.state = state
        node.nrt_seen = next(self._order)
        node.version += 1
        self.fresh.pop(name, None)
        self._gone_if_empty(name, node)

    def put_pod(self, pod: BoundPod) -> None:
        """A Pod is bound to ``pod.node`` (added or changed): it keeps the order it was first seen bound in."""
        key = pod.key
        was = self.where.get(key)
        old = self.nodes[was].pods.get(key) if was is not None else None
        if old is not None and was == pod.node:
            pod = replace(pod, seen=old.seen)
            if pod == old:
                return  # nothing placement reads changed (a status update)
        else:
            if old is not None and was is not None:
                self.drop_pod(key)
            pod = replace(pod, seen=next(self._order))
        node = self._node(pod.node)
        node.pods[key] = pod
        if key not in node.hashes:  # hashed as it comes (tens of microseconds), not all at the first call after a list
            node.hashes[key] = pod_hash(*key)
        node.version += 1
        self.fresh.pop(pod.node, None)
        self.where[key] = pod.node

    def drop_pod(self, key: Key) -> BoundPod | None:
        """The Pod is gone (deleted, or no longer bound); what it was, if it was here."""
        name = self.where.pop(key, None)
        if name is None:
            return None
        node = self.nodes[name]
        pod = node.pods.pop(key, None)
        node.hashes.pop(key, None)
        node.version += 1
        self.fresh.pop(name, None)
        self._gone_if_empty(name, node)
        return pod

    def pod(self, key: Key) -> BoundPod | None:
        name = self.where.get(key)
        return None if name is None else self.nodes[name].pods.get(key)

    # ---- what a call reads ----

    @property
    def states(self) -> dict[str, NodeState]:
        """The NRTs by node name (a copy: for callers that want them all, not for each call)."""
        return {name: n.state for name, n in self.nodes.items() if n.state is not None}

    @property
    def pods(self) -> dict[str, list[BoundPod]]:
        """The bound Pods by node name, in the order seen (a copy)."""
        return {name: sorted(n.pods.values(), key=_order) for name, n in self.nodes.items() if n.pods}

    def __len__(self) -> int:
        return len(self.where)

    def freed(self, name: str, now: float) -> Freed | None:
        """The node's ``Freed`` (None: no NRT, unknown), from the cache while its Pods, NRT and held set are
        unchanged. Written back only if no event came in between (a judge in another thread stays consistent)."""
        node = self.nodes.get(name)
        if node is None or node.state is None:
            return None
        found = node.freed
        if found is not None and found.version == node.version and found.since <= now < found.until:
            return found
        version, state = node.version, node.state
        opinion = bool(state.empty.policy and state.empty.zones and state.empty.policy != "none")
        if not node.pods or not opinion:
            found = Freed(state, state.free, (), self._id(state.shape), version, -math.inf, math.inf, opinion)
        else:
            held = self.held(name, now)
            keys = tuple(p.key for p in held)
            until = min((p.scheduled_at + self.timeout for p in held), default=math.inf)
            since = max((p.scheduled_at + self.timeout for p in node.pods.values()
                         if p.scheduled_at + self.timeout <= now), default=-math.inf)
            topo = free_now(state, held)
            # Nodes of one shape whose reservations leave the same zones free judge alike: one verdict for them.
            key = self._id(Shape((state.empty.key, topo.key))) if keys else self._id(state.shape)
            found = Freed(state, topo, keys, key, version, since, until, opinion)
        if len(self.by_key) >= MAX_IDS:
            self.by_key.clear()
        self.by_key[found.key] = found
        if node.version == version:
            node.freed = found
            self.fresh[name] = found.key
            if found.until < math.inf:
                heapq.heappush(self._expiries, (found.until, name))
            if node.version != version:  # an event in between (a judge in another thread): not current after all
                self.fresh.pop(name, None)
        return found

    def _expire(self, now: float) -> None:
        """Drop from ``fresh`` the nodes whose cached ``Freed`` is no longer valid at ``now``: a held Pod's time
        is up (the heap's first entries), or the clock went back before a ``Freed``'s start (all of them)."""
        if now < self._latest:
            self.fresh.clear()
            self._expiries.clear()
        self._latest = now
        expiries, fresh, nodes = self._expiries, self.fresh, self.nodes
        while expiries and expiries[0][0] <= now:
            _, name = heapq.heappop(expiries)
            node = nodes.get(name)
            if node is None or node.freed is None or node.freed.until <= now:
                fresh.pop(name, None)

    def _id(self, shape: Shape) -> int:
        """A small int for a shape (what verdicts are cached by: an int hashes and compares at once). Ids are
        never reused: when the table is cleared (past ``MAX_IDS``) equal shapes get new ids, judged again."""
        found = _IDS.get(shape)
        if found is None:
            if len(_IDS) >= MAX_IDS:
                _IDS.clear()
            found = _IDS[shape] = next(_NEXT_ID)
        return found

    def free(self, name: str, now: float) -> tuple[NodeTopology, tuple[Key, ...]] | None:
        found = self.freed(name, now)
        return None if found is None else (found.topo, found.held)

    def held(self, name: str, now: float) -> list[BoundPod]:
        """The node's reservations now, first seen first (see the module docstring)."""
        node = self.nodes.get(name)
        if node is None or node.state is None or not node.pods:
            return []
        state = node.state
        pods = sorted(node.pods.values(), key=_order)
        if state.fingerprint is not None:
            found = self._counted(node, signed_sets(state, pods))
            if found is not None and found[1] == len(found[0]):
                return []
            if found is not None:
                later = {p.key for p in found[0][found[1]:]}
                pods = [p for p in pods if p.key in later]
            else:
                self.unmatched += 1
                pods = [p for p in pods if p.seen > node.nrt_seen]
        return [p for p in pods if p.wants is not None and not p.terminal and now - p.scheduled_at < self.timeout]

    def _counted(self, node: _Node, sets: Sequence[list[BoundPod]]) -> tuple[list[BoundPod], int] | None:
        """The set of ``reservations.signed_sets`` (first seen first) the NRT's fingerprint signs a prefix of, and
        how many of its Pods that prefix holds; None: no such prefix in any. Cached per version of the node (as
        which set and how many): the fingerprint does not change with time."""
        if node.counted is not None and node.counted[0] == node.version:
            cached = node.counted[1]
            return None if cached is None else (sets[cached[0]], cached[1])
        assert node.state is not None and node.state.fingerprint is not None
        found: tuple[int, int] | None = None
        for i, signed in enumerate(sets):
            hashes = []
            for p in signed:
                h = node.hashes.get(p.key)
                if h is None:
                    h = node.hashes[p.key] = pod_hash(*p.key)
                hashes.append(h)
            # Every prefix of the active Pods (at most kubelet's maxPods); of every bound Pod (the terminal ones
            # are not bounded so: Jobs leave thousands) only those leaving out the ``LISTED_LAG`` last.
            shortest = 0 if i == 0 else max(0, len(hashes) - LISTED_LAG)
            for k in range(len(hashes), shortest - 1, -1):
                if sign(hashes[:k]) == node.state.fingerprint:
                    found = (i, k)
                    break
            if found is not None:
                break
        node.counted = (node.version, found)
        return None if found is None else (sets[found[0]], found[1])

    def verdicts(self, judge: Judge, names: Sequence[str], now: float) -> list[Verdict]:
        """One verdict per name: unknown nodes (no NRT) kept, the others judged once per free shape. Over
        thousands of nodes this is the call's whole cost: the current nodes' verdict keys are read with one
        ``map`` over ``fresh`` and their verdicts with one over the Judge's cache, so a call of a shape judged
        before runs no Python per node; only nodes changed since (or not judged yet) are read one by one. A
        shape not judged before is judged once per distinct key (on its ``by_key`` entry), not once per node, and
        from ``BATCH`` keys on all at once over arrays (``fleet_verdicts.judge_rows``)."""
        if judge.wants is None:
            return [NO_OPINION] * len(names)
        self._expire(now)
        cache = judge.verdicts
        keys = list(map(self.fresh.get, names))
        out: list[Verdict | None] = list(map(cache.get, keys))
        if not any(map(operator.is_, out, itertools.repeat(None))):  # by identity: no Verdict.__eq__ per node
            return cast(list[Verdict], out)
        # Nodes not current (changed since, or never read): their ``Freed`` recomputed, one by one.
        for i in itertools.compress(range(len(keys)), map(operator.is_, keys, itertools.repeat(None))):
            found = self.freed(names[i], now)
            if found is not None:
                keys[i] = found.key
        # Each key not judged yet: judged once, on its ``Freed`` in ``by_key`` (the distinct keys found in C); many of
        # them at once over arrays (``fleet_verdicts``), the rest (and what the arrays do not model) one by one.
        by_key = self.by_key
        missing = set(keys).difference(cache)
        missing.discard(None)
        unjudged = cast(list[int], list(missing))
        if len(unjudged) >= BATCH:
            unjudged = judge_rows(judge, unjudged, by_key, self.columns)
        for key in unjudged:
            found = by_key.get(key)
            if found is not None and found.key == key:
                self._judged(judge, found)
        out = list(map(cache.get, keys))
        if not any(map(operator.is_, out, itertools.repeat(None))):
            return cast(list[Verdict], out)
        for i in list(itertools.compress(range(len(out)), map(operator.is_, out, itertools.repeat(None)))):
            # Unknown (no NRT), or changed while judged: one by one.
            found = self.freed(names[i], now) if keys[i] is not None else None
            out[i] = UNKNOWN if found is None else self._judged(judge, found)
        return cast(list[Verdict], out)

    @staticmethod
    def _judged(judge: Judge, found: Freed) -> Verdict:
        """The verdict on a node whose zones free now are ``found``, cached under its key in the Judge."""
        verdict = judge.verdicts.get(found.key)
        if verdict is None:
            if not found.opinion:
                # A verdict of the node's shape alone (its policy): kept under its key like a judged one.
                verdict = judge.verdicts[found.key] = UNKNOWN if found.state.empty.policy != "none" else NO_OPINION
            else:
                verdict = judge.judged(found.state, found.topo, found.key)
        return verdict


def _order(p: BoundPod) -> tuple[int, float, Key]:
    return (p.seen, p.scheduled_at, p.key)
