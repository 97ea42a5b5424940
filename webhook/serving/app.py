"""Flask application factories: the admission routes on the TLS port, and metrics plus health on the
plain port. No policy logic lives here: requests go to ``admission``, which asks the engine."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask, Response, request
from prometheus_client import CollectorRegistry, Counter, Histogram, multiprocess
from werkzeug.exceptions import HTTPException

from webhook.admission.review import (
    ENDPOINTS,
    NOOP,
    BadReview,
    Decision,
    Endpoint,
    Review,
    decide,
    object_name,
    parse_review,
    response,
)
from webhook.core.config import Config
from webhook.core.rules import RULE_IDS
from webhook.core.workloads import KINDS
from webhook.serving.body import MAX_BODY, Busy, TooLarge, read_bounded

LOG = logging.getLogger("qos_guard.decisions")


@dataclass(frozen=True)
class Metrics:
    """Bounded-cardinality metrics: labels are paths, kinds, operations, decisions and rule ids only."""

    requests: Counter
    violations: Counter
    latency: Histogram

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> Metrics:
        kw: dict[str, Any] = {"registry": registry} if registry is not None else {}
        return cls(
            Counter("qos_guard_admission_requests", "Admission requests answered",
                    ["path", "kind", "operation", "decision", "dry_run"], **kw),
            Counter("qos_guard_violations", "Rule violations found in admission requests", ["rule"], **kw),
            Histogram("qos_guard_admission_duration_seconds", "Time to answer an admission request", ["path"],
                      buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0), **kw),
        )


def _bounded(value: str, allowed: tuple[str, ...] | frozenset[str], other: str = "other") -> str:
    return value if value in allowed else other


_KINDS = frozenset(KINDS) | {"Namespace"}
_OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


def read_body() -> bytes:
    """The request body within bounds (``serving/body.py``): ``TooLarge`` (413) or ``BadBody`` (a ``BadReview``:
    400)."""
    return read_bounded(request.environ)


def _json(status: int, body: dict[str, Any]) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


def create_app(config: Config, metrics: Metrics | None = None, own_namespace: str | None = None,
               noop: bool = False) -> Flask:
    """The admission application. ``noop`` adds ``POST /noop`` (parse and allow) for benchmarks only."""
    app = Flask("qos-guard")
    metrics = metrics or Metrics.create(CollectorRegistry())
    routes = {**ENDPOINTS, "/noop": NOOP} if noop else ENDPOINTS
    # Open this process's metric files now (multiprocess mode creates them on first use), so a worker
    # finishing its last requests during shutdown never needs a file the master has already removed.
    for endpoint in routes.values():
        metrics.latency.labels(endpoint.name)
    metrics.requests.labels("validate", "Pod", "CREATE", "allowed", "false")
    metrics.violations.labels("cpu-not-integer")

    def record(path: str, review: Review, decision: Decision, elapsed: float) -> None:
        """Metrics and the decision log line; a failure here is logged, never a failed admission."""
        try:
            metrics.latency.labels(path).observe(elapsed)
            metrics.requests.labels(path, _bounded(review.kind, _KINDS), _bounded(review.operation, _OPERATIONS),
                                    decision.label, str(review.dry_run).lower()).inc()
            for rule in decision.rules:
                metrics.violations.labels(_bounded(rule, (*RULE_IDS, "invalid-mode-label"))).inc()
            LOG.info(json.dumps({
                "uid": review.uid, "kind": review.kind, "namespace": review.namespace,
                "name": review.name or object_name(review.obj), "operation": review.operation, "path": path,
                "decision": decision.label, "rules": decision.rules, "dryRun": review.dry_run,
                "durationMs": round(elapsed * 1000, 3),
            }))
        except Exception:  # metrics or logging broke: the answer still goes out
            logging.getLogger("qos_guard.server").exception("recording the decision failed")

    def answer(endpoint: Endpoint) -> Response:
        started = time.perf_counter()
        try:
            review = parse_review(read_body(), endpoint)
            decision = decide(review, endpoint, config, own_namespace)
        except TooLarge:
            metrics.requests.labels(endpoint.name, "unknown", "unknown", "too-large", "false").inc()
            return _json(413, {"error": "request body too large", "reason": f"over {MAX_BODY} bytes"})
        except BadReview as exc:
            metrics.requests.labels(endpoint.name, "unknown", "unknown", "bad-request", "false").inc()
            return _json(400, {"error": "bad AdmissionReview", "reason": str(exc)})
        if endpoint is not NOOP:
            record(endpoint.name, review, decision, time.perf_counter() - started)
        return _json(200, response(review, decision))

    def route(url: str) -> Callable[[], Response]:
        def view() -> Response:
            if url == "/validate" and request.args.get("mode") == "mutate":
                return answer(ENDPOINTS["/validate/mutate"])
            return answer(routes[url])
        return view

    for url, endpoint in routes.items():
        app.add_url_rule(url, endpoint.name, route(url), methods=["POST"])

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        return _json(exc.code or 500, {"error": exc.name, "reason": exc.description})

    @app.errorhandler(Busy)
    def busy(exc: Busy) -> Response:  # large bodies being read hold this worker's memory budget
        answer = _json(503, {"error": "busy", "reason": "too many large requests in flight; retry"})
        answer.headers["Retry-After"] = "1"
        return answer

    @app.errorhandler(RecursionError)
    def too_deep(exc: RecursionError) -> Response:  # an object nested deeper than the judge can walk
        return _json(400, {"error": "bad AdmissionReview", "reason": "request.object is nested too deeply"})

    return app


def multiprocess_registry() -> CollectorRegistry:
    """All gunicorn workers' metrics, merged (prometheus-client multiprocess mode)."""
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return registry
