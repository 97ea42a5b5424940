"""The Flask application on the TLS port: one route per admission endpoint, the body read within bounds
(``body.py``), its errors mapped to HTTP (400, 413, 503: bad input is never a 500), metrics and the decision
log line.
No policy logic lives here: requests go to ``admission``, which asks the engine."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, request
from prometheus_client import CollectorRegistry
from werkzeug.exceptions import HTTPException

from webhook.admission.review import (
    ENDPOINTS,
    BadReview,
    Decision,
    Endpoint,
    Review,
    encode_response,
    object_name,
    parse_review,
    review_decision,
)
from webhook.core.claims import CLAIM_KINDS
from webhook.core.config import Config
from webhook.core.dra_requests import DeviceClasses
from webhook.core.dracpu import DraFacts
from webhook.core.dracpu_classes import classes_unknown, with_cpu_classes
from webhook.core.facts import NO_FACTS, Facts, Memo
from webhook.core.kubeversion import Semantics
from webhook.core.numatopology import Topology
from webhook.core.operators import NO_RELATED, Related
from webhook.core.rules import RULE_IDS
from webhook.core.workloads import KINDS
from webhook.serving.body import BUDGET, MAX_BODY, BadBody, BodyBudget, Busy, TooLarge, read_bounded
from webhook.serving.decisionlog import DECISIONS
from webhook.serving.metrics import Metrics

LOG = logging.getLogger(DECISIONS)


def _bounded(value: str, allowed: tuple[str, ...] | frozenset[str], other: str = "other") -> str:
    return value if value in allowed else other


_KINDS = frozenset(k.kind for k in KINDS.values()) | frozenset(CLAIM_KINDS) | {"Namespace"}
_OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


DEEP = 100  # levels: no Kubernetes object is nested so deep (a Pod's deepest field is ~15 down)


def nested_deeper(obj: Any, levels: int = DEEP) -> bool:
    """Whether ``obj`` has containers ``levels`` deep, found without recursion (it is asked after one)."""
    todo: list[tuple[Any, int]] = [(obj, 1)]
    while todo:
        node, depth = todo.pop()
        if depth >= levels:
            return True
        if isinstance(node, dict):
            todo.extend((value, depth + 1) for value in node.values() if isinstance(value, dict | list))
        elif isinstance(node, list):
            todo.extend((value, depth + 1) for value in node if isinstance(value, dict | list))
    return False


def _json(status: int, body: dict[str, Any]) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")


MAX_VIEWS = 64  # the DRA views (namespaces) whose facts and memo are kept at once


def create_app(config: Config, metrics: Metrics | None = None, own_namespace: str | None = None,
               topology: Callable[[], Topology] | None = None,
               device_classes: Callable[[], DeviceClasses | None] | None = None,
               kubernetes: Semantics | None = None, related: Callable[[], Related] | None = None,
               dra: Callable[[str | None], DraFacts] | None = None) -> Flask:
    """The admission application: one route per ``ENDPOINTS`` entry. ``topology`` (``policy.numa: auto``) and
    ``device_classes`` (``policy.deviceClasses: true``) are the caches' current snapshots, read once per
    request; ``kubernetes``: the API server's minor, read at start (None: ``config``'s, else the newest);
    ``related`` (``policy.operatorObjects: true``): the objects KServe's Pods are built from, as the cache holds
    them (``Facts.related``); ``dra`` (``policy.draObjects: true``): the claims and slices the cache holds, as a
    request's namespace sees them (``Facts.dra``)."""
    app = Flask("qos-guard")
    metrics = metrics or Metrics.create(CollectorRegistry())
    spare_budget = BodyBudget()
    # Open this process's metric files now (multiprocess mode creates them on first use), so a worker
    # finishing its last requests during shutdown never needs a file the master has already removed.
    for endpoint in ENDPOINTS.values():
        metrics.latency.labels(endpoint.name)
    metrics.requests.labels("validate", "Pod", "CREATE", "allowed", "false")
    metrics.violations.labels("cpu-not-integer")

    last: list[tuple[Topology | None, DeviceClasses | None, Related]] = []
    made: dict[int, tuple[DraFacts | None, Facts]] = {}  # by the DRA view (one per namespace): its facts
    plain = NO_FACTS if kubernetes is None else Facts(kubernetes=kubernetes)

    def judging(snapshot: Topology | None, classes: DeviceClasses | None, objects: Related,
                claims: DraFacts | None = None) -> Facts:
        """The facts of the snapshots, made once per trio (a snapshot lasts until a change) and DRA view (one per
        namespace, ``policy.draObjects``) with a memo of their own: the same Pods come again and again, and what
        was learnt dies with the snapshot. At most ``MAX_VIEWS`` views are kept (then all are dropped)."""
        if not last or any(a is not b for a, b in zip(last[0], (snapshot, classes, objects), strict=True)):
            last[:] = [(snapshot, classes, objects)]
            made.clear()
        kept = made.get(id(claims))
        if kept is None or kept[0] is not claims:
            if len(made) >= MAX_VIEWS:
                made.clear()
            # the DeviceClasses that select the CPU driver (policy.deviceClasses): the claims' own requests are CPUs
            view = claims
            if claims is not None and classes is None and device_classes is not None:
                view = classes_unknown(claims)  # not listed yet, or refused: a class may select the CPU driver
            elif claims is not None and classes is not None and classes.cpu:
                view = with_cpu_classes(claims, classes.cpu)
            kept = made[id(claims)] = (claims, Facts(topology=snapshot, device_classes=classes, kubernetes=kubernetes,
                                                     memo=Memo(), related=objects, dra=view))
        return kept[1]

    def read_body() -> bytes | bytearray:
        """The body within bounds, under the worker's budget (the Flask test client has none: a spare one)."""
        return read_bounded(request.environ, request.environ.get(BUDGET) or spare_budget)

    app.extensions["qos_guard.read_body"] = read_body  # for routes added to this app (bench/serve.py)

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
                **({"notJudged": decision.not_judged} if decision.not_judged else {}),
            }))
        except Exception:  # metrics or logging broke: the answer still goes out
            logging.getLogger("qos_guard.server").exception("recording the decision failed")

    def answer(endpoint: Endpoint) -> Response:
        started = time.perf_counter()
        try:
            review = parse_review(read_body(), endpoint)
            facts = plain if topology is None and device_classes is None and related is None and dra is None \
                else judging(None if topology is None else topology(),
                             None if device_classes is None else device_classes(),
                             NO_RELATED if related is None else related(),
                             None if dra is None else dra(review.namespace))
            try:
                decision = review_decision(review, endpoint, config, facts, own_namespace)
            except RecursionError:
                # The object's depth is bad input (decoding bounds it; a value kept whole may still be deep):
                # a 400. Any other RecursionError is a defect: a 500, logged, not passed off as the client's.
                if not nested_deeper(review.obj):
                    raise
                raise BadReview("request.object is nested too deeply to be judged") from None
        except (TooLarge, BadBody, BadReview) as exc:  # answered by the handlers below; counted here
            outcome = "too-large" if isinstance(exc, TooLarge) else "bad-request"
            metrics.requests.labels(endpoint.name, "unknown", "unknown", outcome, "false").inc()
            raise
        record(endpoint.name, review, decision, time.perf_counter() - started)
        return Response(encode_response(review, decision), status=200, mimetype="application/json")

    def route(url: str) -> Callable[[], Response]:
        def view() -> Response:
            if url == "/validate" and request.args.get("mode") == "mutate":
                return answer(ENDPOINTS["/validate/mutate"])
            return answer(ENDPOINTS[url])
        return view

    for url, endpoint in ENDPOINTS.items():
        app.add_url_rule(url, endpoint.name, route(url), methods=["POST"])

    @app.errorhandler(TooLarge)
    def too_large(exc: TooLarge) -> Response:
        return _json(413, {"error": "request body too large", "reason": f"over {MAX_BODY} bytes"})

    @app.errorhandler(BadBody)
    def bad_body(exc: BadBody) -> Response:  # the transport's error: the HTTP framing of the body
        return _json(400, {"error": "bad request body", "reason": str(exc)})

    @app.errorhandler(BadReview)
    def bad_review(exc: BadReview) -> Response:  # the protocol's error: not an AdmissionReview we can answer
        return _json(400, {"error": "bad AdmissionReview", "reason": str(exc)})

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        return _json(exc.code or 500, {"error": exc.name, "reason": exc.description})

    @app.errorhandler(Busy)
    def busy(exc: Busy) -> Response:  # large bodies being read hold this worker's memory budget
        answer = _json(503, {"error": "busy", "reason": "too many large requests in flight; retry"})
        answer.headers["Retry-After"] = "1"
        return answer

    return app
