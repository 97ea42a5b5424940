"""``qos-guard extender``: kube-scheduler's extender (``filterVerb: filter``, ``prioritizeVerb: prioritize``,
``nodeCacheCapable: true``) served by gunicorn with the webhook's worker (deadlines, TLS reloaded from disk), or
over plain HTTP on loopback (``--plain``).

Who may call it: the verbs change what the extender holds (the Pods a filter kept nodes for are waited for), so
they answer only a client that sent a certificate ``--client-ca-file`` verifies (kube-scheduler's
``extenders[].tlsConfig`` ``certFile``/``keyFile``), or, without a client CA, only on a loopback ``--bind``; other
requests get 403 naming the way out. ``GET /healthz`` and ``GET /readyz`` answer anyone (kubelet's probes send
no certificate): 200 while the worker is up, unless the app serves a ``/readyz`` of its own.

Every body is judged in the worker's hub (``HubWorker``), large ones too: the watches are greenlets of the same
worker that change the stores between calls, and a call judged in an OS thread (as the webhook's worker judges
bodies over 64 KiB, which a filter over a few thousand node names is) would read them while they change.

One worker: the reservations (Pods bound since their node's NRT last changed, ``webhook.extender.placement``)
live in its memory, and every call must see the same ones. The worker watches NodeResourceTopology objects and
bound Pods (``spec.nodeName!=``) through the API server (``webhook.cluster.watch``'s reflectors); until both are
listed, every node is kept (unknown never refuses).

kube-scheduler binds asynchronously: the next Pod's filter call comes while the last one's binding is on its way
to the API server, before the watch can show it. So a filter call first waits (at most ``SETTLE`` seconds) until
every other Pod it kept nodes for is seen bound: the scheduler binds such a Pod to one of them, and the
reservation it becomes must be counted before the next Pod is judged.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from webhook import interpreter
from webhook.core.numatopology import NodeTopology
from webhook.core.podspec import ManifestError
from webhook.extender.placement import (
    RESERVATION_TIMEOUT,
    BoundPod,
    Judge,
    NodeState,
    Shape,
    bound_pod,
    free_now,
    held,
    read_nrt,
)
from webhook.extender.protocol import BadArgs, filter_result, parse_args, priority_list
from webhook.serving.body import BadBody, BodyBudget, Busy, TooLarge, read_bounded
from webhook.serving.options import ServeError, check_port_free, split_bind

LOG = logging.getLogger("qos_guard.extender")
PODS_PATH = "/api/v1/pods"
BOUND = "spec.nodeName!="
SETTLE = 1.0  # seconds a filter call waits for the Pods kept before it to be seen bound
HUB_WORKER = "webhook.serving.worker.HubWorker"  # every body judged in the hub: see the module docstring


@dataclass
class View:
    """What one call judges against: NRTs by node name, bound Pods by node name, and whether both were listed."""

    states: Mapping[str, NodeState] = field(default_factory=dict)
    pods: Mapping[str, list[BoundPod]] = field(default_factory=dict)
    synced: bool = True
    timeout: float = RESERVATION_TIMEOUT
    uids: frozenset[str] = frozenset()  # of the bound Pods

    freed: dict[str, tuple[NodeTopology, tuple[Any, ...]]] = field(default_factory=dict)

    def free(self, node: str, state: NodeState | None, now: float) -> tuple[NodeTopology, tuple[Any, ...]] | None:
        """The node's zones free now (its NRT's ``available`` less its reservations) and the reservations' keys,
        remembered for this view while its reservations stay the same."""
        if state is None:
            return None
        on_node = self.pods.get(node)
        if not on_node:
            return (state.free, ())
        reserved = held(state, on_node, now, self.timeout)
        keys = tuple(p.key for p in reserved)
        found = self.freed.get(node)
        if found is None or found[1] != keys:
            found = self.freed[node] = (free_now(state, reserved), keys)
        return found


class ExtenderCache:
    """NRTs and bound Pods, listed then watched; ``view()`` is the current ``View`` (rebuilt after a change)."""

    def __init__(self, transport: Any, timeout: float = RESERVATION_TIMEOUT) -> None:
        from webhook.cluster.nrt import JSON
        from webhook.cluster.watch import Reflector, Store
        from webhook.core.numatopology import NRT_PATH

        self.timeout = timeout
        self.stop = threading.Event()
        self.nrts = Store(self._nrt)
        self._shapes: dict[Shape, Shape] = {}  # equal shapes as one object (bounded)
        self.pods = Store(self._bound)
        self._first_seen: dict[str, int] = {}  # uid -> order first seen bound (pruned as Pods go)
        self._order = itertools.count()
        self.problems: dict[str, str] = {}
        self._version = 0
        self._built: tuple[int, View] | None = None
        self.flying: dict[str, float] = {}  # uid -> until when: Pods kept by a filter, not yet seen bound
        self.reflectors = (
            Reflector("noderesourcetopologies", transport, NRT_PATH, JSON, self.nrts, self._changed, self.stop),
            Reflector("pods", transport, PODS_PATH, JSON, self.pods, self._changed, self.stop,
                      field_selector=BOUND),
        )

    def _nrt(self, obj: Mapping[str, Any]) -> NodeState | None:
        state = read_nrt(obj)
        if state is None:
            return None
        if len(self._shapes) > 20_000:
            self._shapes.clear()
        shape = self._shapes.setdefault(state.shape, state.shape)
        return state if shape is state.shape else replace(state, shape=shape)

    def _bound(self, obj: Mapping[str, Any]) -> BoundPod | None:
        pod = bound_pod(obj)
        if pod is None or not pod.uid:
            return pod
        seen = self._first_seen.get(pod.uid)
        if seen is None:
            seen = self._first_seen[pod.uid] = next(self._order)
        return replace(pod, seen=seen)

    def _changed(self, resource: str, problem: str | None) -> None:
        if problem is None:
            self.problems.pop(resource, None)
        elif self.problems.get(resource) != problem:
            self.problems[resource] = problem
            LOG.warning(json.dumps({"extender": "incomplete: nodes it cannot see are kept", "problem": problem}))
        self._version += 1

    def start(self) -> None:
        for reflector in self.reflectors:
            threading.Thread(target=reflector.run, name=f"qos-guard-extender-{reflector.name}", daemon=True).start()

    def view(self) -> View:
        version = self._version
        if self._built is not None and self._built[0] == version:
            return self._built[1]
        by_node: dict[str, list[BoundPod]] = {}
        for pod in self.pods.snapshot().values():
            by_node.setdefault(pod.node, []).append(pod)
        live = {p.uid for pods in by_node.values() for p in pods}
        if len(self._first_seen) > 2 * len(live) + 1000:
            self._first_seen = {u: s for u, s in self._first_seen.items() if u in live}
        built = View(self.nrts.snapshot(), by_node, self.nrts.listed and self.pods.listed, self.timeout,
                     frozenset(p.uid for pods in by_node.values() for p in pods))
        self._built = (version, built)
        return built

    def kept(self, uid: str) -> None:
        """A filter kept nodes for this Pod: the scheduler is about to bind it."""
        if uid:
            self.flying[uid] = time.monotonic() + SETTLE

    def settle(self, uid: str) -> None:
        """Wait until every other Pod kept before is seen bound, or its time is up (``SETTLE``)."""
        while True:
            now = time.monotonic()
            uids = self.view().uids
            for other in [u for u, until in self.flying.items() if u in uids or until <= now or u == uid]:
                self.flying.pop(other, None)
            if not self.flying:
                return
            self.stop.wait(0.005)


def _json(status: int, body: Any) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


def create_extender_app(view: Callable[[], View], clock: Callable[[], float] = time.time,
                        cache: ExtenderCache | None = None) -> Flask:
    """``POST /filter`` and ``POST /prioritize`` over ``view()``, read once per call; with ``cache``, a filter
    waits for the Pods kept before it to be seen bound (see the module docstring)."""
    app = Flask("qos-guard-extender")
    budget = BodyBudget()

    def judged(verb: str) -> tuple[Any, list[Any], float, float]:
        started = time.perf_counter()
        args = parse_args(read_bounded(request.environ, budget))
        try:
            judge = Judge.of(args.pod)
        except ManifestError as exc:
            raise BadArgs(f"Pod.{exc}") from None
        waited = 0.0
        if cache is not None and verb == "filter" and judge.wants is not None:
            before = time.perf_counter()
            cache.settle(args.uid)
            waited = time.perf_counter() - before
        current = view()
        now = clock()
        verdicts = []
        states, free, node = current.states, current.free, judge.node
        for name in args.names:
            state = states.get(name)
            verdicts.append(node(name, state, free=free(name, state, now)))
        return args, verdicts, started, waited

    def said(verb: str, args: Any, verdicts: list[Any], started: float, waited: float) -> None:
        """One line per call: ``durationMs`` from the first byte read to the answer, ``waitedMs`` of it spent
        waiting for the Pods kept before to be seen bound."""
        LOG.info(json.dumps({"verb": verb, "pod": args.pod_name, "nodes": len(args.names),
                             "kept": sum(v.kept for v in verdicts),
                             "durationMs": round((time.perf_counter() - started) * 1000, 3),
                             "waitedMs": round(waited * 1000, 3)}))

    @app.post("/filter")
    def filter_nodes() -> Response:
        args, verdicts, started, waited = judged("filter")
        if cache is not None and any(v.kept for v in verdicts):
            cache.kept(args.uid)
        said("filter", args, verdicts, started, waited)
        return _json(200, filter_result(args, verdicts))

    @app.post("/prioritize")
    def prioritize() -> Response:
        args, verdicts, started, waited = judged("prioritize")
        said("prioritize", args, verdicts, started, waited)
        return _json(200, priority_list(args, verdicts))

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
    if opts.kubeconfig is not None and not os.path.isfile(opts.kubeconfig):
        raise ServeError(f"--kubeconfig {opts.kubeconfig}: no such file")
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

    cache = ExtenderCache(ApiTransport(opts.kubeconfig), opts.reservation_timeout)
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
    options: dict[str, Any] = {
        "bind": [opts.bind], "workers": 1, "worker_class": HUB_WORKER, "worker_connections": 1000,
        "keepalive": 75, "graceful_timeout": 10, "timeout": 30, "accesslog": None, "errorlog": "-",
        "loglevel": "warning", "proc_name": "qos-guard-extender",
        "when_ready": lambda server: print(f"qos-guard extender: serving {'http' if opts.plain else 'https'}://"
                                           f"{opts.bind} (filter, prioritize; "
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
