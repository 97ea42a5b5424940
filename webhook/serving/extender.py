"""``qos-guard extender``: kube-scheduler's extender (``filterVerb: filter``, ``prioritizeVerb: prioritize``,
``bindVerb: bind``, ``nodeCacheCapable: true``) served by gunicorn with the webhook's worker (deadlines, TLS
reloaded from disk), or over plain HTTP on loopback (``--plain``).

Who may call it: the verbs change what the extender holds (the Pods a filter kept nodes for are waited for), so
they answer only a client that sent a certificate ``--client-ca-file`` verifies (kube-scheduler's
``extenders[].tlsConfig`` ``certFile``/``keyFile``), or, without a client CA, only on a loopback ``--bind``; other
requests get 403 naming the way out. ``GET /healthz`` and ``GET /readyz`` answer anyone (kubelet's probes send
no certificate): 200 while the worker is up, unless the app serves a ``/readyz`` of its own.

Every body is judged in the worker's hub (``HubWorker``), large ones too: the watches are greenlets of the same
worker that change the stores between calls, and a call judged in an OS thread (as the webhook's worker judges
bodies over 64 KiB, which a filter over a few thousand node names is) would read them while they change.

One worker: the reservations (Pods bound since their node's NRT last changed, ``webhook.extender.view``) live in
its memory, and every call must see the same ones. The worker watches NodeResourceTopology objects and bound Pods
(``spec.nodeName!=``) through the API server (``webhook.cluster.watch``'s reflectors), each event applied to the
view as it comes (one node touched), so a call costs what its candidate nodes cost, not the cluster.

Reservations are made at the moment of decision, as kube-scheduler's own assume does: with ``bindVerb``, the
scheduler hands the binding to ``POST /bind``, which records the Pod on its node (what the filter call read of
it) before it POSTs the Binding to the API server; a Binding the API server refuses is forgotten again. Between a
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
import operator
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from webhook import interpreter
from webhook.core.demands import Demands
from webhook.core.podspec import ManifestError
from webhook.extender.placement import (
    RESERVATION_TIMEOUT,
    BoundPod,
    Judge,
    NodeState,
    Shape,
    Verdict,
    bound_pod,
    read_nrt,
)
from webhook.extender.protocol import BadArgs, filter_result, parse_args, parse_binding, priority_json
from webhook.extender.view import View
from webhook.serving.body import BadBody, BodyBudget, Busy, TooLarge, read_bounded
from webhook.serving.options import ServeError, check_port_free, split_bind

LOG = logging.getLogger("qos_guard.extender")
PODS_PATH = "/api/v1/pods"
BOUND = "spec.nodeName!="
SETTLE = 1.0  # seconds a filter call waits for the Pods kept before it to be bound
STARTING = 60.0  # seconds after the start while an unlisted view answers filter with an error (retried)
VIEW_HEADER = "X-Qos-Guard-View"
SAYS = {"stale": "judged on what was last seen", "starting": "not judged, retry",
        "partial": "every node kept", "complete": ""}
HUB_WORKER = "webhook.serving.worker.HubWorker"  # every body judged in the hub: see the module docstring

__all__ = ["ExtenderCache", "View", "create_extender_app"]


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
        from webhook.cluster.watch import key_of

        seen: set[str] = set()
        truncated = False
        for obj in objects:
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
                 assumed: Mapping[tuple[str, str], str]) -> None:
        super().__init__(limit)
        self.view = view
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
        pod = bound_pod(obj)
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


class ExtenderCache:
    """The view, filled by two reflectors (NRTs, bound Pods); the Pods kept by a filter and not yet bound; the
    reservations ``bind`` made; what is missing from the view (``incomplete``); counters for ``/metrics``."""

    def __init__(self, transport: Any, timeout: float = RESERVATION_TIMEOUT,
                 binder: Callable[[str, str, str, str], str] | None = None) -> None:
        from webhook.cluster.nrt import JSON
        from webhook.cluster.watch import MAX_OBJECTS, Reflector
        from webhook.core.numatopology import NRT_PATH

        self.timeout = timeout
        self.stop = threading.Event()
        self.started = time.monotonic()
        self.current = View(timeout=timeout)
        self.assumed: dict[tuple[str, str], str] = {}  # key -> uid: reserved by bind, not yet seen bound
        self.nrts = NrtSink(self.current, MAX_OBJECTS)
        self.pods = PodSink(self.current, MAX_OBJECTS, self._seen_bound, self.assumed)
        self.binder = binder
        self.problems: dict[str, str] = {}
        self.said: dict[str, str] = {}  # the incompleteness last logged, per resource
        self.flying: dict[str, Pending] = {}  # uid -> Pending
        self.settled = threading.Condition()
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
        pending = self.flying.pop(uid, None)
        known = self.current.pod(key)
        if known is None or known.node != node:
            wants = pending.wants if pending is not None else None
            self.current.put_pod(BoundPod(namespace, name, node, time.time(), wants=wants, uid=uid))
            self.assumed[key] = uid
        self._notify()
        error = self.binder(namespace, name, uid, node) if self.binder is not None else \
            "qos-guard extender: no API server to bind with"
        if error:
            self.counters["bind_error"] += 1
            if self.assumed.pop(key, None) is not None:
                self.current.drop_pod(key)
            LOG.warning(json.dumps({"extender": "binding refused", "pod": f"{namespace}/{name}", "node": node,
                                    "error": error}))
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


class Judges:
    """The last ``size`` Judges by what their Pod aligns: a verdict depends only on that, the node's empty
    zones and its zones free now, so the Pods of one ReplicaSet (and a Pod's prioritize after its filter) reuse
    the verdicts of the one before: a call is then a lookup per candidate node."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self.found: OrderedDict[str, Judge] = OrderedDict()

    def of(self, pod: Mapping[str, Any]) -> Judge:
        judge = Judge.of(pod)
        if judge.wants is None:
            return judge
        key = repr(judge.wants)
        known = self.found.get(key)
        if known is not None:
            self.found.move_to_end(key)
            return known
        self.found[key] = judge
        if len(self.found) > self.size:
            self.found.popitem(last=False)
        return judge


_KEPT = operator.attrgetter("kept")


def _json(status: int, body: Any) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


def create_extender_app(view: Callable[[], View], clock: Callable[[], float] = time.time,
                        cache: ExtenderCache | None = None) -> Flask:
    """``POST /filter``, ``/prioritize`` and ``/bind`` over ``view()``, read once per call; with ``cache``, a
    filter waits for the Pods kept before it to be bound, ``/bind`` binds, and an incomplete view keeps every
    node (see the module docstring); ``GET /readyz`` and ``/metrics`` say how the view is."""
    app = Flask("qos-guard-extender")
    budget = BodyBudget()
    judges = Judges()

    def judged(verb: str) -> tuple[Any, Judge, list[Verdict], float, float, str, list[str]]:
        started = time.perf_counter()
        args = parse_args(read_bounded(request.environ, budget))
        try:
            judge = judges.of(args.pod)
        except ManifestError as exc:
            raise BadArgs(f"Pod.{exc}") from None
        mode, missing = cache.mode() if cache is not None else ("complete", [])
        waited = 0.0
        if cache is not None and verb == "filter" and judge.wants is not None and mode != "starting":
            before = time.perf_counter()
            cache.settle(args.uid)
            waited = time.perf_counter() - before
        verdicts = view().verdicts(judge, args.names, clock())
        if mode == "partial" and judge.wants is not None:
            # Unknown never refuses: what is judged on a partial view is a score, not a refusal.
            verdicts = [v if v.kept else replace(v, kept=True, reason="", unresolvable=False) for v in verdicts]
        return args, judge, verdicts, started, waited, mode, missing

    def said(verb: str, args: Any, verdicts: list[Verdict], started: float, waited: float, mode: str,
             missing: list[str]) -> None:
        """One line per call: ``durationMs`` from the first byte read to the answer, ``waitedMs`` of it spent
        waiting for the Pods kept before to be bound, ``view`` and ``incomplete``: how the view was, and why."""
        line: dict[str, Any] = {"verb": verb, "pod": args.pod_name, "nodes": len(args.names),
                                "kept": sum(map(_KEPT, verdicts)),
                                "durationMs": round((time.perf_counter() - started) * 1000, 3),
                                "waitedMs": round(waited * 1000, 3)}
        if missing:
            line.update(view=mode, incomplete=missing)
        LOG.info(json.dumps(line))

    def answer(body: Any, mode: str, missing: list[str]) -> Response:
        out = _json(200, body)
        out.headers[VIEW_HEADER] = mode if not missing else f"{mode} ({SAYS[mode]}): " + "; ".join(missing)
        return out

    @app.post("/filter")
    def filter_nodes() -> Response:
        args, judge, verdicts, started, waited, mode, missing = judged("filter")
        if mode == "starting" and judge.wants is not None:
            said("filter", args, verdicts, started, waited, mode, missing)
            return answer({"NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {},
                           "Error": "qos-guard extender: starting, its view is not listed yet ("
                                    + "; ".join(missing) + "); the Pod is scheduled again once it is"},
                          mode, missing)
        if cache is not None and judge.wants is not None and any(v.kept for v in verdicts):
            meta = args.pod.get("metadata")
            meta = meta if isinstance(meta, Mapping) else {}
            cache.kept(args.uid, (str(meta.get("namespace") or ""), str(meta.get("name") or "")), judge.wants)
        said("filter", args, verdicts, started, waited, mode, missing)
        return answer(filter_result(args, verdicts), mode, missing)

    @app.post("/prioritize")
    def prioritize() -> Response:
        args, _judge, verdicts, started, waited, mode, missing = judged("prioritize")
        said("prioritize", args, verdicts, started, waited, mode, missing)
        out = answer([], mode, missing)
        out.set_data(priority_json(args, verdicts))
        return out

    @app.post("/bind")
    def bind() -> Response:
        started = time.perf_counter()
        binding = parse_binding(read_bounded(request.environ, budget))
        if cache is None:
            error = "qos-guard extender: this server does not bind (no API server)"
        else:
            error = cache.bind(binding.namespace, binding.name, binding.uid, binding.node)
        LOG.info(json.dumps({"verb": "bind", "pod": f"{binding.namespace}/{binding.name}", "node": binding.node,
                             "error": error, "durationMs": round((time.perf_counter() - started) * 1000, 3)}))
        return _json(200, {"Error": error})

    @app.get("/readyz")
    def ready() -> Response:
        missing = cache.incomplete() if cache is not None else []
        if missing:
            return Response("not ready: " + "; ".join(missing) + "\n", status=503, mimetype="text/plain")
        return Response("ok\n", mimetype="text/plain")

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(cache.metrics() if cache is not None else "", mimetype="text/plain; version=0.0.4")

    @app.errorhandler(BadArgs)
    def bad_args(exc: BadArgs) -> Response:
        return _json(400, {"error": "bad ExtenderArgs", "reason": str(exc)})

    @app.errorhandler(BadBody)
    def bad_body(exc: BadBody) -> Response:
        return _json(400, {"error": "bad request body", "reason": str(exc)})

    @app.errorhandler(TooLarge)
    def too_large(exc: TooLarge) -> Response:
        return _json(413, {"error": "request body too large",
                           "reason": "set nodeCacheCapable: true (node names, not whole Nodes)"})

    @app.errorhandler(Busy)
    def busy(exc: Busy) -> Response:
        answer = _json(503, {"error": "busy", "reason": "too many large requests in flight; retry"})
        answer.headers["Retry-After"] = "1"
        return answer

    @app.errorhandler(RecursionError)
    def too_deep(exc: RecursionError) -> Response:
        return _json(400, {"error": "bad ExtenderArgs", "reason": "Pod is nested too deeply"})

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        return _json(exc.code or 500, {"error": exc.name, "reason": exc.description})

    return app


class ApiBinder:
    """The Binding POST (``pods/binding``), as kube-scheduler's DefaultBinder makes it; its error text, or ""."""

    def __init__(self, kubeconfig: str | None) -> None:
        from webhook.cluster.client import _api_client

        self._api = _api_client(kubeconfig)

    def __call__(self, namespace: str, name: str, uid: str, node: str) -> str:
        from webhook.cluster.client import ClusterError, call, decode_body

        path = f"/api/v1/namespaces/{namespace}/pods/{name}/binding"
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace,
                                                                    **({"uid": uid} if uid else {})},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        try:
            response = call(self._api, "POST", path, [], {"Content-Type": "application/json",
                                                          "Accept": "application/json"}, (10, 30), body)
            try:
                data = response.response.read(1 << 20)
            finally:
                response.response.release_conn()
            if response.status in (200, 201):
                return ""
            decoded = decode_body("POST", path, response.status, data)
            message = decoded.get("message", "") if isinstance(decoded, Mapping) else ""
            return f"binding {namespace}/{name} to {node}: HTTP {response.status} {message}".strip()
        except ClusterError as exc:
            return f"binding {namespace}/{name} to {node}: {exc}"
PROBES = frozenset({"/healthz", "/readyz"})
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class ExtenderOptions:
    bind: str = "0.0.0.0:8444"
    plain: bool = False  # HTTP, for a scheduler on the same host (loopback) only
    cert_file: str | None = None
    key_file: str | None = None
    kubeconfig: str | None = None
    reservation_timeout: float = RESERVATION_TIMEOUT
    client_ca_file: str | None = None  # verifies the scheduler's client certificate; the verbs then need one


def guarded(app: Callable[..., Any], client_auth: bool, own_readyz: bool) -> Callable[..., Any]:
    """WSGI middleware: ``GET /readyz`` answers 200 (unless ``own_readyz``: the app serves it), and with
    ``client_auth`` every other path but the probes answers 403 to a client without a verified certificate."""
    from webhook.serving.tls import PEER_VERIFIED

    refusal = json.dumps({"error": "client certificate required", "reason": (
        "the extender's verbs answer only a client certificate --client-ca-file verifies: give the scheduler's "
        "extenders[].tlsConfig a certFile and keyFile that CA signed")}).encode()

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path, method = environ.get("PATH_INFO"), environ.get("REQUEST_METHOD")
        if path in PROBES and method in ("GET", "HEAD"):
            if path == "/readyz" and not own_readyz:
                start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "3")])
                return [b"ok\n"]
            return app(environ, start_response)
        if client_auth and environ.get(PEER_VERIFIED) is not True:
            start_response("403 Forbidden", [("Content-Type", "application/json"),
                                              ("Content-Length", str(len(refusal)))])
            return [refusal]
        return app(environ, start_response)

    return wrapped


def check_options(opts: ExtenderOptions) -> None:
    """What is wrong before anything listens: exit 2 with the flag named."""
    host, _ = split_bind(opts.bind)
    if opts.plain and host not in LOOPBACK:
        raise ServeError(f"--plain serves without TLS: bind it to loopback (127.0.0.1), not {host}; or drop "
                         "--plain and give --cert-file and --key-file")
    if not opts.plain and not (opts.cert_file and opts.key_file):
        raise ServeError("--cert-file and --key-file are required (the scheduler's tlsConfig.caData names their "
                         "CA), or --plain on loopback")
    if opts.client_ca_file and opts.plain:
        raise ServeError("--client-ca-file verifies client certificates over TLS: drop --plain and give "
                         "--cert-file and --key-file, or drop --client-ca-file (--plain answers loopback only)")
    if not opts.client_ca_file and host not in LOOPBACK:
        raise ServeError(f"--bind {opts.bind}: filter would answer any client that reaches {host}; give "
                         "--client-ca-file (the CA of the scheduler's extenders[].tlsConfig certFile) so that only "
                         "the scheduler is answered, or bind to loopback (127.0.0.1) beside it")
    if opts.client_ca_file:
        import ssl

        try:
            ssl.create_default_context(cafile=opts.client_ca_file)
        except (OSError, ValueError, ssl.SSLError) as exc:
            raise ServeError(f"cannot use --client-ca-file {opts.client_ca_file}: {exc}") from None
    if opts.reservation_timeout <= 0:
        raise ServeError(f"--reservation-timeout {opts.reservation_timeout}: must be over 0 seconds")
    from webhook.cluster.kubeconfig import unusable  # imports no Kubernetes client: the workers import it first

    problem = unusable(opts.kubeconfig)  # before it says it serves: the worker would only fail to boot (exit 3)
    if problem is not None:
        raise ServeError(f"extender: it watches NodeResourceTopology objects and Pods: {problem}")
    if opts.cert_file and opts.key_file:
        from webhook.serving.tls import server_context

        try:
            server_context(opts.cert_file, opts.key_file)
        except (OSError, ValueError) as exc:
            raise ServeError(f"cannot use --cert-file {opts.cert_file} / --key-file {opts.key_file}: {exc}") from None
    check_port_free(opts.bind, "--bind")


def worker_app(opts: ExtenderOptions) -> Any:
    """In the worker (after gevent patched ssl, before the Kubernetes client is imported): the cache, started."""
    from webhook.cluster.watch import ApiTransport
    from webhook.serving.health import probe_route

    cache = ExtenderCache(ApiTransport(opts.kubeconfig), opts.reservation_timeout, ApiBinder(opts.kubeconfig))
    cache.start()
    app = create_extender_app(cache.view, cache=cache)
    own_readyz = any(rule.rule == "/readyz" for rule in app.url_map.iter_rules())
    return probe_route(guarded(app, client_auth=bool(opts.client_ca_file), own_readyz=own_readyz))


def serve_extender(opts: ExtenderOptions) -> int:
    """Run until SIGTERM (gunicorn's graceful stop)."""
    interpreter.configure(batch=False)  # once, before the worker forks: it inherits it
    check_options(opts)
    from webhook.serving.server import _Gunicorn
    from webhook.serving.worker import hold_stop_signals_across_fork

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    # urllib3 logs each of its retries ("Retrying (Retry(total=2 ...") and the caller logs the failure once
    # anyway, with the server's address: three lines per attempt said nothing more.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    options: dict[str, Any] = {
        "bind": [opts.bind], "workers": 1, "worker_class": HUB_WORKER, "worker_connections": 1000,
        "keepalive": 75, "graceful_timeout": 10, "timeout": 30, "accesslog": None, "errorlog": "-",
        "loglevel": "warning", "proc_name": "qos-guard-extender",
        "when_ready": lambda server: print(f"qos-guard extender: serving {'http' if opts.plain else 'https'}://"
                                           f"{opts.bind} (filter, prioritize, bind; "
                                           f"{'client certificates required' if opts.client_ca_file else 'loopback'})",
                                           file=sys.stderr, flush=True),
    }
    if not opts.plain:
        from webhook.serving.tls import ReloadingContext

        options.update(certfile=opts.cert_file, keyfile=opts.key_file,
                       ssl_context=ReloadingContext(opts.cert_file or "", opts.key_file or "",
                                                    client_ca=opts.client_ca_file))
        if opts.client_ca_file:
            options["ca_certs"] = opts.client_ca_file
    hold_stop_signals_across_fork()
    _Gunicorn(options, lambda: worker_app(opts)).run()
    return 0
