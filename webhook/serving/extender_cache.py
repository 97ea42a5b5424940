"""One worker: the reservations (Pods bound since their node's NRT last changed, ``webhook.extender.view``) live in
its memory, and every call must see the same ones. The worker watches NodeResourceTopology objects and bound Pods
(``spec.nodeName!=``) through the API server (``webhook.cluster.watch``'s reflectors), each event applied to the
view as it comes (one node touched), so a call costs what its candidate nodes cost, not the cluster.

Reservations are made at the moment of decision, as kube-scheduler's own assume does: with ``bindVerb``, the
scheduler hands the binding to ``POST /bind``, which records the Pod on its node (what the filter call read of
it) before it POSTs the Binding to the API server (per node in the order reserved, each after the one before:
kubelet admits the Pods of separate watch events in the order they come, though one batch in creation order); a
Binding the API server refuses is forgotten again. Between a
filter that kept nodes and that Pod's bind, kube-scheduler's next scheduling cycle may already ask about the next
Pod (binding is asynchronous): that filter call waits (on an event, never polling; the watches go on) until the
Pods kept before it are bound, or ``SETTLE`` seconds; a wait that runs out is counted
(``qos_guard_extender_unsettled_total``), as is every bind. Without ``bindVerb`` the watch showing the Pod bound
ends the wait.

Never a silent partial view: a store not listed yet, truncated (``MAX_OBJECTS``) or not watching makes
``GET /readyz`` fail with the reason, is logged, is a metric (``qos_guard_extender_view_incomplete``), and each
answer says so in the ``X-Qos-Guard-View`` header. What a call does then (``ExtenderCache.mode``): not listed yet
after a start, the filter answers an error (kube-scheduler retries the Pod, or with ``ignorable: true`` places it
without the extender); a watch broken after the list, it judges on what it last saw (which holds every binding it
made itself: nothing it handed out is handed out again); truncated, or still not listed after ``STARTING``
seconds, every node is kept (unknown never refuses).
"""

from __future__ import annotations

import gc
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from webhook.core.demands import Demands
from webhook.core.kubeversion import DEFAULT, Semantics
from webhook.extender.reservations import RESERVATION_TIMEOUT, BoundPod, NodeState, Shape, bound_pod, read_nrt
from webhook.extender.view import View
from webhook.serving.decisionlog import bound_line

if TYPE_CHECKING:
    from webhook.cluster.pager import Page

LOG = logging.getLogger("qos_guard.extender")
PODS_PATH = "/api/v1/pods"
BOUND = "spec.nodeName!="
SETTLE = 1.0  # seconds a filter call waits for the Pods kept before it to be bound
STARTING = 60.0  # seconds after the start while an unlisted view answers filter with an error (retried)
BIND_STRIPES = 64  # queues the Bindings of one node are POSTed in, one after the other (nodes share by hash)


class Sink:
    """What a reflector fills (``replace`` after a list, ``apply`` per event; ``listed``, ``truncated``): the
    narrow interface between the watches and the view, so the view never holds a store of its own. ``limit``:
    at most that many objects (``webhook.cluster.watch.MAX_OBJECTS``); past it, ``truncated``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.listed = False
        self.truncated = False
        self.lock = threading.Lock()

    def keys(self) -> Iterable[str]:
        raise NotImplementedError

    def count(self) -> int:
        raise NotImplementedError

    def put(self, key: str, obj: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def drop(self, key: str) -> None:
        raise NotImplementedError

    def has(self, key: str) -> bool:
        raise NotImplementedError

    def replace(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """A list: each object applied as it is read (the old objects go as the new come, never two stores at
        once), then those not listed dropped; truncated past ``limit`` (nothing dropped then: unknown)."""
        from webhook.cluster.pager import Page  # the Kubernetes client only in the worker (gevent first)

        self.rebuild([Page(list(objects), "", restart=False)])

    def rebuild(self, listed: Iterable[Page]) -> None:
        """A list read page by page (``webhook.cluster.watch.Listing``, the one pager): each object applied as it
        is read, and at the end every object the last whole list did not hold dropped. A page that restarts the
        list (an expired continue token) voids what was seen before it, so nothing deleted meanwhile stays."""
        from webhook.cluster.watch import key_of

        seen: set[str] = set()
        truncated = False
        for obj in self._objects(listed, seen):
            key = key_of(obj)
            if not key:
                continue
            with self.lock:
                if not self.has(key) and self.count() >= self.limit:
                    truncated = True
                    continue
                self.put(key, obj)
            seen.add(key)
        with self.lock:
            if not truncated:
                for key in [k for k in self.keys() if k not in seen]:
                    self.drop(key)
            self.listed, self.truncated = True, truncated

    @staticmethod
    def _objects(listed: Iterable[Page], seen: set[str]) -> Iterator[Mapping[str, Any]]:
        for page in listed:
            if page.restart:
                seen.clear()
            yield from page.items

    def apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        from webhook.cluster.watch import key_of

        key = key_of(obj)
        if not key:
            return
        with self.lock:
            if kind == "DELETED":
                self.drop(key)
            elif kind in ("ADDED", "MODIFIED"):
                if not self.has(key) and self.count() >= self.limit:
                    self.truncated = True
                    return
                self.put(key, obj)


class NrtSink(Sink):
    """NodeResourceTopology objects into ``view.set_nrt``; equal shapes interned (one object, O(1) lookups)."""

    def __init__(self, view: View, limit: int) -> None:
        super().__init__(limit)
        self.view = view
        self._shapes: dict[Shape, Shape] = {}

    def read(self, obj: Mapping[str, Any]) -> NodeState | None:
        state = read_nrt(obj)
        if state is None:
            return None
        if len(self._shapes) > 20_000:
            self._shapes.clear()
        shape = self._shapes.setdefault(state.shape, state.shape)
        return state if shape is state.shape else replace(state, shape=shape)

    def keys(self) -> Iterable[str]:
        return [name for name, n in self.view.nodes.items() if n.state is not None]

    def count(self) -> int:
        return self.view.nrt_count

    def has(self, key: str) -> bool:
        node = self.view.nodes.get(key)
        return node is not None and node.state is not None

    def put(self, key: str, obj: Mapping[str, Any]) -> None:
        self.view.set_nrt(key, self.read(obj))

    def drop(self, key: str) -> None:
        self.view.set_nrt(key, None)


class PodSink(Sink):
    """Bound Pods into ``view.put_pod`` / ``drop_pod`` (keys ``namespace/name``); ``bound(uid)`` is told of each
    Pod seen bound (a filter waiting for it goes on). Equal demands are kept as one object."""

    def __init__(self, view: View, limit: int, bound: Callable[[str, tuple[str, str]], None],
                 assumed: Mapping[tuple[str, str], str], kube: Semantics = DEFAULT) -> None:
        super().__init__(limit)
        self.view = view
        self.kube = kube
        self.bound = bound
        self.assumed = assumed  # reservations of bind's not seen yet: a list from before them keeps them
        self._wants: dict[str, Demands] = {}

    @staticmethod
    def _key(key: str) -> tuple[str, str]:
        namespace, _, name = key.partition("/")
        return (namespace, name)

    def keys(self) -> Iterable[str]:
        return [f"{ns}/{name}" for ns, name in self.view.where if (ns, name) not in self.assumed]

    def count(self) -> int:
        return len(self.view)

    def has(self, key: str) -> bool:
        return self._key(key) in self.view.where

    def put(self, key: str, obj: Mapping[str, Any]) -> None:
        pod = bound_pod(obj, self.kube)
        if pod is None:
            self.view.drop_pod(self._key(key))
            return
        if pod.wants is not None:
            shared = repr(pod.wants)
            if len(self._wants) > 10_000:
                self._wants.clear()
            pod = replace(pod, wants=self._wants.setdefault(shared, pod.wants))
        self.view.put_pod(pod)
        self.bound(pod.uid, pod.key)

    def drop(self, key: str) -> None:
        pod = self.view.drop_pod(self._key(key))
        if pod is not None:
            self.bound(pod.uid, pod.key)


@dataclass
class Pending:
    """A Pod a filter kept nodes for: what it aligns, until when a later filter waits for it."""

    key: tuple[str, str]
    wants: Demands | None
    until: float


def stripe(node: str) -> int:
    """Which of the ``BIND_STRIPES`` queues a node's Bindings go through (nodes share one by hash)."""
    return hash(node) % BIND_STRIPES


class BindQueue:
    """The Bindings of one stripe, POSTed one after the other in the order their tickets were taken (a ticket
    lock: ``take`` under the lock that records the reservation, ``wait`` for its turn, ``done`` after the POST)."""

    def __init__(self) -> None:
        self.turn = threading.Condition()
        self.taken = 0  # the next ticket
        self.serving = 0  # the ticket whose Binding may go out now

    def take(self) -> int:
        ticket, self.taken = self.taken, self.taken + 1
        return ticket

    def wait(self, ticket: int) -> None:
        with self.turn:
            self.turn.wait_for(lambda: self.serving == ticket)

    def done(self) -> None:
        with self.turn:
            self.serving += 1
            self.turn.notify_all()


class ExtenderCache:
    """The view, filled by two reflectors (NRTs, bound Pods); the Pods kept by a filter and not yet bound; the
    reservations ``bind`` made; what is missing from the view (``incomplete``); counters for ``/metrics``."""

    def __init__(self, transport: Any, timeout: float = RESERVATION_TIMEOUT,
                 binder: Callable[[str, str, str, str], str] | None = None, kube: Semantics = DEFAULT) -> None:
        from webhook.cluster.nrt import JSON
        from webhook.cluster.watch import MAX_OBJECTS, Reflector
        from webhook.core.numatopology import NRT_PATH

        self.timeout = timeout
        self.kube = kube  # the cluster's minor: what the Pods are judged with (webhook.cluster.version)
        self.stop = threading.Event()
        self.started = time.monotonic()
        self.current = View(timeout=timeout)
        self.assumed: dict[tuple[str, str], str] = {}  # key -> uid: reserved by bind, not yet seen bound
        self.nrts = NrtSink(self.current, MAX_OBJECTS)
        self.pods = PodSink(self.current, MAX_OBJECTS, self._seen_bound, self.assumed, kube)
        self.binder = binder
        self.problems: dict[str, str] = {}
        self.said: dict[str, str] = {}  # the incompleteness last logged, per resource
        self.flying: dict[str, Pending] = {}  # uid -> Pending
        self.settled = threading.Condition()
        # Two binds to one node in flight at once could reach the API server, and so kubelet, in the opposite
        # order to the one the view reserved them in; admitted in that order (kubelet takes separate watch
        # events as they come: HandlePodAdditions sorts only within one batch, by creation time) the second may
        # no longer fit one NUMA node. Per node, a Binding waits for the one reserved before it: a ticket taken
        # with the reservation (so the view holds the Pod at once), served in turn.
        self.reserving = threading.Lock()
        self.queues = tuple(BindQueue() for _ in range(BIND_STRIPES))
        self.counters: dict[str, int] = {"unsettled": 0, "bind_ok": 0, "bind_error": 0, "events": 0}
        # A reflector fills a Sink as it would its own Store (replace, apply, listed, truncated): typed as the
        # Store it names, which is all it calls of it.
        nrts, pods = cast(Any, self.nrts), cast(Any, self.pods)
        self.reflectors = (
            Reflector("noderesourcetopologies", transport, NRT_PATH, JSON, nrts, self._changed, self.stop),
            Reflector("pods", transport, PODS_PATH, JSON, pods, self._changed, self.stop, field_selector=BOUND),
        )

    def _changed(self, resource: str, problem: str | None) -> None:
        self.counters["events"] += 1
        if problem is None:
            self.problems.pop(resource, None)
        elif self.problems.get(resource) != problem:
            self.problems[resource] = problem
        self.incomplete()

    def incomplete(self) -> list[str]:
        """Why the view is partial, one reason per store (empty: complete); a new reason is logged once."""
        reasons = {}
        for name, sink in (("noderesourcetopologies", self.nrts), ("pods", self.pods)):
            if name in self.problems:
                reasons[name] = f"{name}: not watching ({self.problems[name]})"
            elif not sink.listed:
                reasons[name] = f"{name}: not listed yet"
            elif sink.truncated:
                reasons[name] = (f"{name}: truncated at {sink.limit} objects (the objects past it are unknown; "
                                 "fewer objects, or a selector, make it whole)")
        for name in ("noderesourcetopologies", "pods"):
            now, before = reasons.get(name), self.said.get(name)
            if now != before:
                if now is None:
                    self.said.pop(name, None)
                    LOG.info(json.dumps({"extender": "complete", "store": name}))
                    # The view's objects live until their events: kept out of the cyclic collector's passes, whose
                    # full collections over 100,000 Pods would otherwise stall a call now and then.
                    gc.freeze()
                else:
                    self.said[name] = now
                    LOG.warning(json.dumps({"extender": "incomplete: every node is kept until it is whole",
                                            "problem": now}))
        return list(reasons.values())

    def mode(self) -> tuple[str, list[str]]:
        """How a call treats the view, and why: ``complete``; ``stale`` (listed, a watch broken: judged on what
        was last seen, which holds every binding this extender made itself, so a Pod is never sent to a zone it
        handed out; deletions not seen only hold zones longer); ``starting`` (not listed yet, for at most
        ``STARTING`` seconds after the start: the filter answers an error, which kube-scheduler retries with
        ``ignorable: false`` and skips with ``true``); ``partial`` (truncated, or not listed long after the
        start: every node kept, unknown never refuses)."""
        reasons = self.incomplete()
        if not reasons:
            return "complete", reasons
        if self.pods.truncated or self.nrts.truncated:
            return "partial", reasons
        if not (self.pods.listed and self.nrts.listed):
            return ("starting" if time.monotonic() - self.started < STARTING else "partial"), reasons
        return "stale", reasons

    def start(self) -> None:
        self.started = time.monotonic()
        for reflector in self.reflectors:
            threading.Thread(target=reflector.run, name=f"qos-guard-extender-{reflector.name}", daemon=True).start()

    def view(self) -> View:
        return self.current

    # ---- the Pods between filter and bind ----

    def _seen_bound(self, uid: str, key: tuple[str, str]) -> None:
        """The watch shows the Pod bound (or gone): no filter waits for it, and a reservation of ``bind``'s is
        now the watch's."""
        self.assumed.pop(key, None)
        if uid and self.flying.pop(uid, None) is not None:
            self._notify()

    def _notify(self) -> None:
        with self.settled:
            self.settled.notify_all()

    def kept(self, uid: str, key: tuple[str, str], wants: Demands | None) -> None:
        """A filter kept nodes for this Pod: the scheduler is about to bind it to one of them."""
        if uid:
            self.flying[uid] = Pending(key, wants, time.monotonic() + SETTLE)

    def settle(self, uid: str) -> bool:
        """Wait until every other Pod kept before is bound, or its time is up (``SETTLE``; counted): on a
        condition that ``bind`` and the watch notify, so the watches go on meanwhile. Whether none ran out."""
        ok = True
        with self.settled:
            while True:
                now = time.monotonic()
                waiting = [u for u, p in self.flying.items() if u != uid]
                late = [u for u in waiting if self.flying[u].until <= now]
                for other in late:
                    del self.flying[other]
                    self.counters["unsettled"] += 1
                    ok = False
                    LOG.warning(json.dumps({"extender": "a Pod kept by a filter was not bound within "
                                            f"{SETTLE}s: the next Pod is judged without it", "uid": other}))
                rest = [self.flying[u].until for u in waiting if u in self.flying]
                if not rest:
                    return ok
                self.settled.wait(max(0.0, min(rest) - now))

    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """kube-scheduler's bind, delegated: the reservation recorded first (as its assume does), then the
        Binding POSTed; a refused Binding forgets the reservation. The error for ``ExtenderBindingResult``."""
        key = (namespace, name)
        queue = self.queues[stripe(node)]
        with self.reserving:
            pending = self.flying.pop(uid, None)
            known = self.current.pod(key)
            if known is None or known.node != node:
                wants = pending.wants if pending is not None else None
                self.current.put_pod(BoundPod(namespace, name, node, time.time(), wants=wants, uid=uid))
                self.assumed[key] = uid
            ticket = queue.take()
        self._notify()
        queue.wait(ticket)
        try:
            error = self.binder(namespace, name, uid, node) if self.binder is not None else \
                "qos-guard extender: no API server to bind with"
        finally:
            queue.done()
        if error:
            self.counters["bind_error"] += 1
            if self.assumed.pop(key, None) is not None:
                self.current.drop_pod(key)
            LOG.warning(bound_line(json.dumps({"extender": "binding refused", "pod": f"{namespace}/{name}",
                                               "node": node, "error": error})))
        else:
            self.counters["bind_ok"] += 1
        return error

    def metrics(self) -> str:
        """Prometheus text: what ``/metrics`` on the extender's port answers."""
        incomplete = {r.split(":", 1)[0] for r in self.incomplete()}
        lines = ["# HELP qos_guard_extender_view_incomplete 1 while a store is not listed, truncated or not "
                 "watching (every node is kept then)", "# TYPE qos_guard_extender_view_incomplete gauge"]
        lines += [f'qos_guard_extender_view_incomplete{{store="{s}"}} {int(s in incomplete)}'
                  for s in ("noderesourcetopologies", "pods")]
        lines += ["# HELP qos_guard_extender_unsettled_total Filters that judged without a Pod kept before "
                  "it, whose bind did not come within the settle time", "# TYPE qos_guard_extender_unsettled_total "
                  "counter", f"qos_guard_extender_unsettled_total {self.counters['unsettled']}",
                  "# HELP qos_guard_extender_binds_total Bindings made for the scheduler, by result",
                  "# TYPE qos_guard_extender_binds_total counter",
                  f'qos_guard_extender_binds_total{{result="ok"}} {self.counters["bind_ok"]}',
                  f'qos_guard_extender_binds_total{{result="error"}} {self.counters["bind_error"]}',
                  "# HELP qos_guard_extender_fingerprint_unmatched_total Node recomputations whose NRT "
                  "fingerprint matched no set of the Pods seen there", "# TYPE "
                  "qos_guard_extender_fingerprint_unmatched_total counter",
                  f"qos_guard_extender_fingerprint_unmatched_total {self.current.unmatched}",
                  "# HELP qos_guard_extender_pods Bound Pods in the view", "# TYPE qos_guard_extender_pods gauge",
                  f"qos_guard_extender_pods {len(self.current)}",
                  "# HELP qos_guard_extender_nodes Nodes in the view", "# TYPE qos_guard_extender_nodes gauge",
                  f"qos_guard_extender_nodes {len(self.current.nodes)}"]
        return "\n".join(lines) + "\n"
