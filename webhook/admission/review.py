"""AdmissionReview ``admission.k8s.io/v1`` and ``v1beta1`` in and out; nothing else knows this format.

Requests are decoded by ``decode.py`` (only the judged fields are built) and judged with the engine;
responses echo the request's apiVersion and uid. A body that is not an AdmissionReview raises ``BadReview``
(HTTP 400) with the reason, never an unhandled exception.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import msgspec

from webhook.admission.decode import BadReview as BadReview  # raised here, caught by the serving layer
from webhook.admission.decode import Namespace, decode, decode_object, plain
from webhook.core.claims import CLAIM_GROUP, CLAIM_KINDS
from webhook.core.config import Config
from webhook.core.engine import (
    MODE_LABEL_RULE,
    NEVER_JUDGED,
    Mode,
    ObjectVerdict,
    evaluate,
    kube_of,
    mode_label_problem,
)
from webhook.core.facts import NO_FACTS, Facts
from webhook.core.mutation import json_patch
from webhook.core.podspec import ManifestError
from webhook.core.rules import MORE, REFUSED, Violation
from webhook.core.rules.dra_claim_spread import REFUSED_CLAIM
from webhook.core.scheduler_name import choose_for
from webhook.core.workloads import POD, Target, judged, table

API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
MODES = tuple(m.value for m in Mode)
MAX_WARNING = 120
MAX_WARNINGS_BYTES = 4096
MAX_UID = 128
MAX_DENIAL_LINES = 20  # the denial message lists at most this many violations, then "... and K more"
NEVER_SELECTED = NEVER_JUDGED


class Action(StrEnum):
    """What an endpoint answers with."""

    DENY = "deny"  # allowed: false with every violation the mode reports
    WARN = "warn"  # allowed, with one warning per violation
    PATCH = "patch"  # allowed, with the JSONPatch of the mutation (Pods only)
    NAMESPACE = "namespace"  # the opt-in label's value is checked
    PLACE = "place"  # allowed, with the JSONPatch setting spec.schedulerName (new Pods that need one NUMA node)


@dataclass(frozen=True)
class Endpoint:
    """One admission endpoint: its name in metrics and logs, what it answers, and the mode it judges in."""

    name: str
    action: Action
    mode: Mode | None = None


# The one table of admission endpoints (URL path -> endpoint): routes, metrics and ``review_decision`` all read it.
ENDPOINTS: dict[str, Endpoint] = {
    "/validate": Endpoint("validate", Action.DENY, Mode.ENFORCE),
    # ``/validate?mode=mutate`` too; webhook configurations need this form: the API server refuses a query
    # string in clientConfig.url (k8s.io/apiserver/pkg/util/webhook/validation.go).
    "/validate/mutate": Endpoint("validate-mutated", Action.DENY, Mode.MUTATE),
    "/warn": Endpoint("warn", Action.WARN, Mode.WARN),
    "/mutate": Endpoint("mutate", Action.PATCH, Mode.MUTATE),
    "/validate-namespace": Endpoint("validate-namespace", Action.NAMESPACE),
    # placement.schedulerName, in every opted-in namespace whatever its mode
    # (docs/contract.md#placement-the-scheduler-a-new-pod-gets-placementschedulername).
    "/place": Endpoint("place", Action.PLACE),
}


@dataclass(frozen=True)
class Review:
    api_version: str
    uid: str
    kind: str
    subresource: str
    operation: str
    namespace: str | None
    name: str | None
    username: str | None
    dry_run: bool
    obj: Any
    group: str = ""  # request.kind.group: "" is the core group


@dataclass
class Decision:
    """What was decided, for the response, the log line and the metrics."""

    allowed: bool
    rules: list[str] = field(default_factory=list)
    message: str | None = None
    warnings: list[str] = field(default_factory=list)
    patch: list[dict[str, Any]] | None = None
    skipped: str | None = None

    @property
    def label(self) -> str:
        if self.skipped:
            return "skipped"
        if not self.allowed:
            return "denied"
        return "patched" if self.patch else ("warned" if self.warnings else "allowed")


def parse_review(body: bytes | bytearray | memoryview, endpoint: Endpoint | None = None) -> Review:
    """The review in ``body``, decoded by ``admission/decode.py`` (only what is judged is built); the object
    kept for ``endpoint`` (a Namespace's labels for ``/validate-namespace``). ``BadReview`` says why not."""
    doc = decode(body, labels=endpoint is not None and endpoint.action is Action.NAMESPACE)
    if doc.kind != "AdmissionReview":
        found = "no kind in the body" if doc.kind is None else f"kind is {doc.kind!r}"
        raise BadReview(f"{found}; expected AdmissionReview (what the API server sends a webhook)")
    if doc.api_version not in API_VERSIONS:
        raise BadReview(f"apiVersion {doc.api_version!r} is not one of {', '.join(API_VERSIONS)}")
    request = doc.request
    if request is None:
        raise BadReview("request is missing or not an object")
    uid = request.uid
    if not uid:
        raise BadReview("request.uid is missing or not a string")
    if len(uid) > MAX_UID:  # the API server sends a UUID (36 characters); it is echoed and logged
        raise BadReview(f"request.uid is {len(uid)} characters long, over {MAX_UID}")
    if request.kind is None or request.kind.kind is None:
        raise BadReview("request.kind.kind is missing")
    group = request.kind.group or ""
    if isinstance(request.object, Namespace):
        obj = plain(request.object)
    else:
        obj = decode_object(request.object, group)
        if obj is not None and "apiVersion" not in obj and request.kind.version:
            # the API server always sends it; judged as the kind the request names
            obj["apiVersion"] = f"{group}/{request.kind.version}" if group else request.kind.version
    return Review(
        api_version=doc.api_version,
        uid=uid,
        kind=request.kind.kind,
        subresource=request.sub_resource or "",
        operation=request.operation or "",
        namespace=request.namespace or None,
        name=request.name or None,
        username=request.user_info.username if request.user_info is not None else None,
        dry_run=request.dry_run is True,
        obj=obj,
        group=group,
    )


def response(review: Review, decision: Decision, raw_patch: bool = False) -> dict[str, Any]:
    """The AdmissionReview answered; ``raw_patch`` leaves the patch as JSON bytes for ``encode_response``
    (whose encoder writes bytes as base64 itself)."""
    body: dict[str, Any] = {"uid": review.uid, "allowed": decision.allowed}
    if not decision.allowed:
        body["status"] = {"code": 403, "reason": "Forbidden", "message": decision.message or "denied"}
    if decision.warnings:
        body["warnings"] = decision.warnings
    if decision.patch:
        body["patchType"] = "JSONPatch"
        patch = _ENCODER.encode(decision.patch)
        body["patch"] = patch if raw_patch else base64.b64encode(patch).decode("ascii")
    return {"apiVersion": review.api_version, "kind": "AdmissionReview", "response": body}


_ENCODER = msgspec.json.Encoder()


def encode_response(review: Review, decision: Decision) -> bytes:
    """The answer as JSON bytes, with as few copies as a patch of tens of thousands of operations allows: the
    patch is encoded once and written as base64 straight into the answer (json.dumps made five copies)."""
    try:
        return _ENCODER.encode(response(review, decision, raw_patch=True))
    except (msgspec.EncodeError, UnicodeEncodeError):  # a lone surrogate in a name: json escapes it
        return json.dumps(response(review, decision)).encode()


def warning(v: Violation) -> str:
    """``rule: message``; where that is over the 120 characters a client shows, the block's field path goes
    (``container "x" (spec...containers[0])`` is ``container "x"``), and if that is not enough what to do comes
    first (``rule: container "x": set ...; <what is wrong>``), so the cut never takes the way out (a
    LeaderWorkerSet's or RayCluster's template path alone filled the line)."""
    line = f"{v.rule}: {v.message}"
    if len(line) < MAX_WARNING:
        return line
    who = f'container "{v.container}"' if v.container else "pod"
    short = _LABEL.match(v.message)
    message = f"{who}: {v.message[short.end():]}" if short else v.message
    line = f"{v.rule}: {message}"
    head, sep, advice = message.partition("; ")
    if len(line) < MAX_WARNING or not sep or not short:
        return line
    return f"{v.rule}: {who}: {advice}; {head.removeprefix(who + ': ')}"


# A block's label: an optional template name, then ``container "NAME" (path)`` or ``pod (path)``, then ": ".
_LABEL = re.compile(r'^(?:[^"]*?: )?(?:container "[^"]*"|pod) \([^)]*\): ')


def fit_warnings(lines: list[str]) -> list[str]:
    """Kubernetes truncates long warnings; keep each under 120 characters and all under 4 KiB."""
    out: list[str] = []
    total = 0
    for i, line in enumerate(lines):
        text = line if len(line) < MAX_WARNING else line[: MAX_WARNING - 4] + "..."
        more = MORE(count=len(lines) - i)
        if total + len(text.encode()) + len(more) + 2 > MAX_WARNINGS_BYTES:
            out.append(more)
            break
        out.append(text)
        total += len(text.encode())
    return out


def _denial(review: Review, verdict: ObjectVerdict) -> str:
    name = review.name or object_name(review.obj)
    found = verdict.violations
    lines = [f"{v.rule}: {v.message}{_remedy(verdict, t, v)}"[:MAX_WARNING * 3]
             for t, v in found[:MAX_DENIAL_LINES]]
    if len(found) > MAX_DENIAL_LINES:
        lines.append(MORE(count=len(found) - MAX_DENIAL_LINES))
    head = REFUSED_CLAIM if review.group == CLAIM_GROUP and review.kind in CLAIM_KINDS else REFUSED
    return "\n".join([head(kind=review.kind, name=name[:253]), *lines])


def _remedy(verdict: ObjectVerdict, target: Target, violation: Violation) -> str:
    """In ``mutate`` mode, the mutation setting that would have fixed what is denied, where one would."""
    if verdict.mode is not Mode.MUTATE:
        return ""
    for result in verdict.results:
        if result.target is target:
            remedy = result.remedies.get((violation.rule, violation.subject))
            return f" ({remedy})" if remedy else ""
    return ""


def object_name(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if isinstance(meta, Mapping):
        return str(meta.get("name") or meta.get("generateName") or "<unnamed>")
    return "<unnamed>"


def _skip(review: Review, config: Config, own_namespace: str | None) -> str | None:
    if review.namespace in NEVER_SELECTED or (own_namespace and review.namespace == own_namespace):
        return f"namespace {review.namespace} is never judged"
    if not judged(review.group, review.kind, review.operation, review.subresource, table(config.workloads)):
        return f"{review.operation} of {review.kind}{'/' + review.subresource if review.subresource else ''}"
    if review.obj is None:
        return "no object"
    return None


def review_decision(review: Review, endpoint: Endpoint, config: Config, facts: Facts = NO_FACTS,
                    own_namespace: str | None = None) -> Decision:
    """The decision for one request at ``endpoint``, against what the cluster says (``facts``)."""
    if endpoint.action is Action.NAMESPACE:
        return _decide_namespace(review)
    if endpoint.action is Action.PLACE:
        return _decide_place(review, config, facts, own_namespace)
    assert endpoint.mode is not None
    base = Decision(True)
    why = _skip(review, config, own_namespace)
    if why is not None:
        base.skipped = why
        return base
    try:
        verdict = evaluate(review.obj, config, endpoint.mode, facts, namespace=review.namespace,
                           username=review.username)
    except ManifestError as exc:
        raise BadReview(f"request.object: {exc}") from None
    if verdict.exempt:
        base.skipped = verdict.exempt
        return base
    # At a minor judged from its pre-release, every answer that says something says that too (kubeversion); in
    # parentheses, so that no reader of the "rule: message" lines takes it for a rule's.
    note = kube_of(config, facts).note
    said = [f"({note})"] if note else []
    if endpoint.action is Action.PATCH:
        # Only Pods are patched: a patched template would make GitOps tools see drift
        # (docs/contract.md#modes-per-namespace-by-label).
        if review.kind == POD and review.subresource == "" and verdict.changes:
            base.patch = json_patch(review.obj, verdict.changes)
            base.warnings = fit_warnings([f"qos-guard: {c.message}" for c in verdict.changes] + said)
        return base
    found = verdict.violations
    advised = [f"{v.rule}: {v.message}" for _, v in verdict.advisories]  # reported, never refused
    base.rules = sorted({v.rule for _, v in found})
    if endpoint.action is Action.WARN:
        if found or advised:
            base.warnings = fit_warnings([warning(v) for _, v in found] + advised + said)
        return base
    if advised:
        base.warnings = fit_warnings(advised + said)
    if found:
        base.allowed = False
        base.message = "\n".join([_denial(review, verdict), *said])
    return base


def _decide_place(review: Review, config: Config, facts: Facts, own_namespace: str | None) -> Decision:
    """``/place``: a new Pod that must fit one NUMA node gets ``placement.schedulerName``. Pods only, on CREATE:
    a workload's template changed here would roll out every replica
    (docs/contract.md#placement-the-scheduler-a-new-pod-gets-placementschedulername)."""
    base = Decision(True)
    if config.placement.scheduler_name is None:
        base.skipped = "placement.schedulerName is not set"
        return base
    if review.namespace in NEVER_SELECTED or (own_namespace and review.namespace == own_namespace):
        base.skipped = f"namespace {review.namespace} is never judged"
        return base
    if review.kind != POD or review.group or review.operation != "CREATE" or review.subresource \
            or review.obj is None:
        base.skipped = f"{review.operation} of {review.kind}{'/' + review.subresource if review.subresource else ''}"
        return base
    try:
        choice = choose_for(review.obj, config, facts, namespace=review.namespace, username=review.username)
    except ManifestError as exc:
        raise BadReview(f"request.object: {exc}") from None
    if choice.changes:
        base.patch = json_patch(review.obj, choice.changes)
    base.warnings = fit_warnings([f"qos-guard: {c.message}" for c in choice.changes] + list(choice.warnings))
    return base


def _decide_namespace(review: Review) -> Decision:
    """``/validate-namespace``: the opt-in label must name a mode qos-guard knows."""
    base = Decision(True)
    if review.kind != "Namespace" or review.operation not in ("CREATE", "UPDATE") or review.obj is None:
        base.skipped = f"{review.operation} of {review.kind}"
        return base
    problem = mode_label_problem(review.obj)
    if problem is not None:
        base.allowed = False
        base.rules = [MODE_LABEL_RULE]
        base.message = problem
    return base
