"""The extender's Flask app: ``POST /filter``, ``/prioritize`` and ``/bind``, ``GET /readyz`` and ``/metrics``
over the view (``webhook.serving.extender_cache``); the verdicts of one Pod shape reused (``Judges``).
"""

from __future__ import annotations

import json
import logging
import operator
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from webhook.core.kubeversion import DEFAULT, Semantics
from webhook.core.resourceblock import ManifestError
from webhook.extender.protocol import BadArgs, encode, filter_result, parse_args, parse_binding, priority_json
from webhook.extender.verdicts import Judge, Verdict
from webhook.extender.view import View
from webhook.serving.body import BadBody, BodyBudget, Busy, TooLarge, read_bounded
from webhook.serving.decisionlog import bound_line
from webhook.serving.extender_cache import ExtenderCache

LOG = logging.getLogger("qos_guard.extender")
VIEW_HEADER = "X-Qos-Guard-View"
SAYS = {"stale": "judged on what was last seen", "starting": "not judged, retry",
        "partial": "every node kept", "complete": ""}


class Judges:
    """The last ``size`` Judges by what their Pod aligns: a verdict depends only on that, the node's empty
    zones and its zones free now, so the Pods of one ReplicaSet (and a Pod's prioritize after its filter) reuse
    the verdicts of the one before: a call is then a lookup per candidate node."""

    def __init__(self, size: int = 32, kube: Semantics = DEFAULT) -> None:
        self.size = size
        self.kube = kube
        self.found: OrderedDict[str, Judge] = OrderedDict()

    def of(self, pod: Mapping[str, Any]) -> Judge:
        judge = Judge.of(pod, self.kube)
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
    return Response(encode(body), status=status, mimetype="application/json")


def create_extender_app(view: Callable[[], View], clock: Callable[[], float] = time.time,
                        cache: ExtenderCache | None = None) -> Flask:
    """``POST /filter``, ``/prioritize`` and ``/bind`` over ``view()``, read once per call; with ``cache``, a
    filter waits for the Pods kept before it to be bound, ``/bind`` binds, and an incomplete view keeps every
    node (see the module docstring); ``GET /readyz`` and ``/metrics`` say how the view is."""
    app = Flask("qos-guard-extender")
    budget = BodyBudget()
    judges = Judges(kube=cache.kube if cache is not None else DEFAULT)

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
        LOG.info(bound_line(json.dumps(line)))  # the Pod's name is the client's: bounded as decision lines are

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
        LOG.info(bound_line(json.dumps({"verb": "bind", "pod": f"{binding.namespace}/{binding.name}",
                                        "node": binding.node, "error": error,
                                        "durationMs": round((time.perf_counter() - started) * 1000, 3)})))
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

