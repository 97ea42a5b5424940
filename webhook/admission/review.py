"""AdmissionReview ``admission.k8s.io/v1`` and ``v1beta1`` in and out; nothing else knows this format.

Requests are decoded by ``decode.py`` (only the judged fields are built) and judged with the engine;
responses echo the request's apiVersion and uid. A body that is not an AdmissionReview raises ``BadReview``
(HTTP 400) with the reason, never an unhandled exception.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
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
from webhook.core.refusal import LINE_BREAK, finding, fit_warnings, not_judged, note, refusal, warning
from webhook.core.resourceblock import ManifestError
from webhook.core.rules import Violation
from webhook.core.scheduler_name import choose_for
from webhook.core.target import Target
from webhook.core.workloads import POD, judged, table

API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
MODES = tuple(m.value for m in Mode)
MAX_UID = 128
NEVER_SELECTED = NEVER_JUDGED


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


@dataclass(frozen=True)
class Decision:
    """What was decided, for the response, the log line and the metrics; built by ``allowed``, ``denied``,
    ``patched`` and ``skipped``. A request that cannot be answered raises ``BadReview`` (HTTP 400) instead."""

    allowed: bool
    rules: tuple[str, ...] = ()
    message: str | None = None
    warnings: tuple[str, ...] = ()
    patch: list[dict[str, Any]] | None = None
    skipped: str | None = None
    not_judged: int = 0  # how many parts were not judged for not being known (``ObjectVerdict.unknown``): logged

    @property
    def label(self) -> str:
        if self.skipped:
            return "skipped"
        if not self.allowed:
            return "denied"
        return "patched" if self.patch else ("warned" if self.warnings else "allowed")


def allowed(warnings: Sequence[str] = (), rules: Iterable[str] = ()) -> Decision:
    """Admitted, with ``warnings`` (fitted to what a client shows) and the ``rules`` they name (metrics)."""
    return Decision(True, rules=tuple(sorted(set(rules))), warnings=tuple(fit_warnings(list(warnings))))


def denied(message: str, rules: Iterable[str], warnings: Sequence[str] = ()) -> Decision:
    """Refused with ``message`` (403), for ``rules``."""
    return Decision(False, rules=tuple(sorted(set(rules))), message=message,
                    warnings=tuple(fit_warnings(list(warnings))))


def patched(patch: list[dict[str, Any]] | None, warnings: Sequence[str] = ()) -> Decision:
    """Admitted with the JSONPatch ``patch`` (None or empty: nothing to change)."""
    return Decision(True, patch=patch or None, warnings=tuple(fit_warnings(list(warnings))))


def skipped(why: str) -> Decision:
    """Admitted without being judged, and why (the decision log says ``skipped``)."""
    return Decision(True, skipped=why)


# ``handle(review, config, facts, own_namespace, mode)``: one endpoint's answer (``mode``: the endpoint's).
Handler = Callable[[Review, Config, Facts, str | None, Mode | None], Decision]


@dataclass(frozen=True)
class Endpoint:
    """One admission endpoint: its name in metrics and logs, its handler, and the mode it judges pod specs in
    (None: it judges no pod spec). ``labels``: the request's object is a Namespace whose labels are judged."""

    name: str
    handle: Handler
    mode: Mode | None = None
    labels: bool = False


def parse_review(body: bytes | bytearray | memoryview, endpoint: Endpoint | None = None) -> Review:
    """The review in ``body``, decoded by ``admission/decode.py`` (only what is judged is built); the object
    kept for ``endpoint`` (a Namespace's labels for ``/validate-namespace``). ``BadReview`` says why not."""
    doc = decode(body, labels=endpoint is not None and endpoint.labels)
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
        body["warnings"] = list(decision.warnings)
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


def object_name(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if isinstance(meta, Mapping):
        return str(meta.get("name") or meta.get("generateName") or "<unnamed>")
    return "<unnamed>"


def _skip(review: Review, own_namespace: str | None, wanted: bool, *, namespaced: bool = True) -> str | None:
    """Why a request is let through unjudged, or None: the test every endpoint makes first. ``wanted``: whether
    the endpoint judges this request's kind, operation and subresource. ``namespaced``: whether the request's
    namespace counts (a Namespace's own request names itself there, and its label is judged wherever)."""
    if namespaced and (review.namespace in NEVER_SELECTED or (own_namespace and review.namespace == own_namespace)):
        return f"namespace {review.namespace} is never judged"
    if not wanted:
        return f"{review.operation} of {review.kind}{'/' + review.subresource if review.subresource else ''}"
    if review.obj is None:
        return "no object"
    return None


def _verdict(review: Review, config: Config, facts: Facts, own_namespace: str | None,
             mode: Mode | None) -> ObjectVerdict | Decision:
    """The engine's verdict on the request's object in ``mode`` (the endpoint's, from ``ENDPOINTS``), or the
    ``skipped`` decision when it is not judged (its namespace, kind or operation; an exemption)."""
    assert mode is not None, "an endpoint that judges pod specs names its mode in ENDPOINTS"
    why = _skip(review, own_namespace,
                judged(review.group, review.kind, review.operation, review.subresource, table(config.workloads)))
    if why is not None:
        return skipped(why)
    try:
        verdict = evaluate(review.obj, config, mode, facts, namespace=review.namespace, username=review.username)
    except ManifestError as exc:
        raise BadReview(f"request.object: {exc}") from None
    return skipped(verdict.exempt) if verdict.exempt else verdict


def _said(config: Config, facts: Facts) -> list[str]:
    """At a minor judged from its pre-release, every answer that says something says that too (kubeversion)."""
    text = kube_of(config, facts).note
    return [note(text)] if text else []


# Said after what is not judged of a kind whose builder reads other objects (``Kind.related``: ServingRuntimes,
# LLMInferenceServiceConfigs) when the webhook reads none: a fact and the way out, no promise they would do.
NOT_READ = "the webhook reads no objects these Pods are built from: policy.operatorObjects is false"
# Said of such a kind judged all the same (a custom container): KServe's inferenceservice-config (its storage
# initializer, agent, defaults) was taken as shipped, so a refusal after the cluster's was changed says why.
SHIPPED = "judged with the operator's shipped config: the webhook reads none (policy.operatorObjects is false)"


def _unknown(review: Review, verdict: ObjectVerdict, config: Config) -> list[str]:
    """What is not judged and why (``ObjectVerdict.unknown``), one warning each, without the request's kind (the
    user applied it; the cut at ``WARNING_CHARS`` then keeps more of the reason): the webhook admits what it
    cannot know, and says so (docs/contract.md#what-the-webhook-cannot-judge). A kind built from objects the
    webhook does not read says that too, judged or not (``NOT_READ``, ``SHIPPED``)."""
    kind = review.kind
    shown = [not_judged(r.removeprefix(f"{kind}: ").removeprefix(f"{kind} ")) for r in verdict.unknown]
    known = table(config.workloads).get((review.group, kind))
    if known is None or not known.related or config.policy.operator_objects:
        return shown
    if shown:
        return [*shown, note(NOT_READ)]
    return [note(SHIPPED)] if verdict.results and verdict.exempt is None else []


def _counted(decision: Decision, verdict: ObjectVerdict) -> Decision:
    """``decision`` with how many parts of the object were not judged (the decision log says it)."""
    return replace(decision, not_judged=len(verdict.unknown)) if verdict.unknown else decision


def validate(review: Review, config: Config, facts: Facts, own_namespace: str | None, mode: Mode | None) -> Decision:
    """``/validate`` (``mode`` enforce or mutate): refused with every violation the mode reports; advisories
    and what is not known are warnings, never a refusal."""
    verdict = _verdict(review, config, facts, own_namespace, mode)
    if isinstance(verdict, Decision):
        return verdict
    said = _said(config, facts)
    found = verdict.violations
    advised = [finding(v.rule, v.message) for _, v in verdict.advisories] + _unknown(review, verdict, config)
    warnings = advised + said if advised else []
    if not found:
        return _counted(allowed(warnings), verdict)
    lines = [finding(v.rule, v.message, _remedy(verdict, t, v)) for t, v in found]
    claim = review.group == CLAIM_GROUP and review.kind in CLAIM_KINDS
    message = refusal(review.kind, review.name or object_name(review.obj), lines, claim=claim)
    return _counted(denied(LINE_BREAK.join([message, *said]), (v.rule for _, v in found), warnings), verdict)


def warn(review: Review, config: Config, facts: Facts, own_namespace: str | None, mode: Mode | None) -> Decision:
    """``/warn``: admitted, with one warning per violation, advisory and what is not known."""
    verdict = _verdict(review, config, facts, own_namespace, mode)
    if isinstance(verdict, Decision):
        return verdict
    found = verdict.violations
    advised = [finding(v.rule, v.message) for _, v in verdict.advisories] + _unknown(review, verdict, config)
    shown = [warning(v) for _, v in found] + advised
    return _counted(allowed(shown + _said(config, facts) if shown else [], (v.rule for _, v in found)), verdict)


def mutate(review: Review, config: Config, facts: Facts, own_namespace: str | None, mode: Mode | None) -> Decision:
    """``/mutate``: the JSONPatch of the mutation, and what is not known as warnings. Only Pods are patched: a
    patched template would make GitOps tools see drift (docs/contract.md#modes-per-namespace-by-label)."""
    verdict = _verdict(review, config, facts, own_namespace, mode)
    if isinstance(verdict, Decision):
        return verdict
    unknown = _unknown(review, verdict, config)
    if review.kind != POD or review.subresource or not verdict.changes:
        return _counted(allowed(unknown + _said(config, facts) if unknown else []), verdict)
    shown = [f"qos-guard: {c.message}" for c in verdict.changes] + unknown
    return _counted(patched(json_patch(review.obj, verdict.changes), shown + _said(config, facts)), verdict)


def _remedy(verdict: ObjectVerdict, target: Target, violation: Violation) -> str | None:
    """In ``mutate`` mode, the mutation setting that would have fixed what is denied, where one would."""
    if verdict.mode is not Mode.MUTATE:
        return None
    for result in verdict.results:
        if result.target is target:
            return result.remedies.get((violation.rule, violation.subject))
    return None


def place(review: Review, config: Config, facts: Facts, own_namespace: str | None, mode: Mode | None) -> Decision:
    """``/place``: a new Pod that must fit one NUMA node gets ``placement.schedulerName``. Pods only, on CREATE:
    a workload's template changed here would roll out every replica
    (docs/contract.md#placement-the-scheduler-a-new-pod-gets-placementschedulername)."""
    if config.placement.scheduler_name is None:
        return skipped("placement.schedulerName is not set")
    new_pod = review.kind == POD and not review.group and review.operation == "CREATE" and not review.subresource
    why = _skip(review, own_namespace, new_pod)
    if why is not None:
        return skipped(why)
    try:
        choice = choose_for(review.obj, config, facts, namespace=review.namespace, username=review.username)
    except ManifestError as exc:
        raise BadReview(f"request.object: {exc}") from None
    return patched(json_patch(review.obj, choice.changes) if choice.changes else None,
                   [f"qos-guard: {c.message}" for c in choice.changes] + list(choice.warnings))


def validate_namespace(review: Review, config: Config, facts: Facts, own_namespace: str | None,
                       mode: Mode | None) -> Decision:
    """``/validate-namespace``: the opt-in label must name a mode qos-guard knows."""
    why = _skip(review, own_namespace, review.kind == "Namespace" and review.operation in ("CREATE", "UPDATE"),
                namespaced=False)
    if why is not None:
        return skipped(why)
    problem = mode_label_problem(review.obj)
    return allowed() if problem is None else denied(problem, [MODE_LABEL_RULE])


# The one table of admission endpoints (URL path -> endpoint): routes, metrics and ``review_decision`` all read it.
ENDPOINTS: dict[str, Endpoint] = {
    "/validate": Endpoint("validate", validate, Mode.ENFORCE),
    # ``/validate?mode=mutate`` too; webhook configurations need this form: the API server refuses a query
    # string in clientConfig.url (k8s.io/apiserver/pkg/util/webhook/validation.go).
    "/validate/mutate": Endpoint("validate-mutated", validate, Mode.MUTATE),
    "/warn": Endpoint("warn", warn, Mode.WARN),
    "/mutate": Endpoint("mutate", mutate, Mode.MUTATE),
    "/validate-namespace": Endpoint("validate-namespace", validate_namespace, labels=True),
    # placement.schedulerName, in every opted-in namespace whatever its mode
    # (docs/contract.md#placement-the-scheduler-a-new-pod-gets-placementschedulername).
    "/place": Endpoint("place", place),
}


def review_decision(review: Review, endpoint: Endpoint, config: Config, facts: Facts = NO_FACTS,
                    own_namespace: str | None = None) -> Decision:
    """The decision for one request at ``endpoint``, against what the cluster says (``facts``)."""
    return endpoint.handle(review, config, facts, own_namespace, endpoint.mode)
