"""The AdmissionReview decoder: only what is judged is built; everything else is skipped as it is read.

``json.loads`` built every field of a review (about five times the body in Python objects) although the engine
reads a handful. Here msgspec decodes the body once, in C, into ``Struct`` types that name exactly the fields
the admission layer, the engine and the mutation read; unknown fields are scanned (so the body must still be
JSON) but never built. The object is then handed to the engine as plain mappings holding only those fields
(``Review.obj``), so the engine's input stays what ``check`` and ``audit`` give it: a JSON-like object.

What is kept, and why:

- the envelope: ``apiVersion``, ``kind``, and the request's ``uid``, ``kind.kind``, ``operation``,
  ``subResource``, ``namespace``, ``name``, ``userInfo.username`` and ``dryRun``;
- a core kind's object (``KINDS``, groups ``""``, ``apps``, ``batch``) or a DRA claim's (``resource.k8s.io``,
  ``webhook.core.claims``): ``apiVersion``, ``kind``, ``metadata`` (``name``, ``generateName``, ``namespace``,
  and of ``ownerReferences`` each ``kind`` and ``controller``) and the pod spec where that kind keeps it
  (``spec``, ``spec.template.spec``, ``template.spec``, ``spec.jobTemplate.spec.template.spec``), and a Pod's
  ``status.qosClass``, and how many Pods of the template run at once (``spec.replicas``, a Job's and a
  CronJob's ``parallelism``); a custom resource's object (LeaderWorkerSet, JobSet, a kind the configuration declares)
  is decoded whole once its group is known (``decode_object``), its templates being wherever its kind says;
- in a pod spec: ``containers`` and ``initContainers`` (``name``, ``restartPolicy``, ``resources``),
  the pod-level ``resources``, ``runtimeClassName`` (exemptions), ``schedulerName`` (``/place``), and for
  ``policy.numa: auto`` the scheduling constraints ``nodeName``, ``nodeSelector``, the required node affinity
  and ``tolerations`` (``key``, ``operator``, ``value``, ``effect``);
- resource values as the JSON has them: a string stays a string, an integer an exact integer, a float the
  float ``json.loads`` would give, and any other value stays as it is so the engine can name it
  (``invalid-quantity``); every resource name is kept (extended resources and hugepages count for NUMA).
- ``resourceClaims[]`` of a pod spec (``name``, ``resourceClaimName``, ``resourceClaimTemplateName``) and each
  container's ``resources.claims[]`` (``name``, ``request``), and of a ResourceClaim (``spec``) or ResourceClaimTemplate
  (``spec.spec``) the claim spec's ``devices``: each request's ``name``, ``allocationMode``, ``count``,
  ``deviceClassName``, ``capacity`` (and of its ``exactly`` and ``firstAvailable``), each constraint's
  ``requests`` and ``matchAttribute``;
- for ``/validate-namespace``, the Namespace's ``metadata.labels``.

A body that is not JSON, or whose kept fields have the wrong type, is a ``BadReview`` (HTTP 400) naming the
field, as the engine names a wrongly shaped field. ``null`` and a missing field mean the same to the engine, so
both are left out of ``Review.obj``.
"""

from __future__ import annotations

import codecs
import re
from typing import Any

import msgspec

from webhook.core.claims import CLAIM_GROUP


class BadReview(ValueError):
    """Not an AdmissionReview we can answer: HTTP 400 with this reason."""


class _Kept(msgspec.Struct, omit_defaults=True, rename="camel"):
    """A decoded part of the object: camelCase on the wire, ``None`` (null or missing) left out of
    ``to_builtins``."""


class ResourceClaimRef(_Kept):
    name: Any = None
    request: Any = None  # only this request's devices are the container's (dra-cpu-not-mirrored)


class Resources(_Kept):
    requests: dict[str, Any] | None = None
    limits: dict[str, Any] | None = None
    claims: list[ResourceClaimRef] | None = None  # the Pod's claims a container uses (dra-cpu-not-mirrored)


class Container(_Kept):
    name: str | msgspec.UnsetType = msgspec.UNSET  # null is refused, as the engine refuses it
    restart_policy: str | None = None
    resources: Resources | None = None


class MatchRequirement(_Kept):
    key: str | None = None
    operator: str | None = None
    values: list[str] | None = None


class NodeSelectorTerm(_Kept):
    match_expressions: list[MatchRequirement] | None = None
    match_fields: list[MatchRequirement] | None = None


class NodeSelector(_Kept):
    node_selector_terms: list[NodeSelectorTerm] | None = None


class NodeAffinity(_Kept):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None


class Affinity(_Kept):
    node_affinity: NodeAffinity | None = None


class Toleration(_Kept):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None


class PodResourceClaim(_Kept):
    name: Any = None
    resource_claim_name: Any = None  # where the claim comes from (the DRA CPU rules look its CPUs up)
    resource_claim_template_name: Any = None


class DeviceSubRequest(_Kept):
    """An exact request, a ``firstAvailable`` alternative, or a v1beta1 request: what ``dra-claim-spread`` counts."""

    name: Any = None
    device_class_name: Any = None
    allocation_mode: Any = None
    count: Any = None
    capacity: Any = None  # the CPUs a dra.cpu request asks (capacity.requests["dra.cpu/cpu"])


class DeviceRequest(DeviceSubRequest):
    exactly: DeviceSubRequest | None = None
    first_available: list[DeviceSubRequest] | None = None


class DeviceConstraint(_Kept):
    requests: Any = None
    match_attribute: Any = None


class ClaimDevices(_Kept):
    requests: list[DeviceRequest] | None = None
    constraints: list[DeviceConstraint] | None = None


class ClaimSpec(_Kept):
    devices: ClaimDevices | None = None


class PodSpec(_Kept):
    containers: list[Container] | None = None
    init_containers: list[Container] | None = None
    resources: Resources | None = None
    runtime_class_name: str | None = None
    scheduler_name: str | None = None  # placement.schedulerName (/place) leaves a user's own scheduler alone
    # What ``policy.numa: auto`` reads to find the nodes a Pod can land on (the scheduler's hard constraints, and
    # a node named outright).
    node_name: str | None = None
    node_selector: dict[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None
    resource_claims: list[PodResourceClaim] | None = None  # DRA devices (dra-unaligned)


class PodTemplate(_Kept):
    spec: PodSpec | None = None


class JobSpec(_Kept):
    template: PodTemplate | None = None
    parallelism: Any = None  # several Pods at once (dra-cpu-shared)


class JobTemplate(_Kept):
    spec: JobSpec | None = None


class Spec(PodSpec):
    """``spec`` of every judged kind at once: a Pod's pod spec, a workload's ``template``, a CronJob's
    ``jobTemplate``. The API server sends only the fields of the object's own kind, so they never clash."""

    template: PodTemplate | None = None
    job_template: JobTemplate | None = None
    replicas: Any = None  # several Pods of the template at once (dra-cpu-shared)
    parallelism: Any = None
    # A ResourceClaim's ``spec.devices``, a ResourceClaimTemplate's ``spec.spec`` (dra-claim-spread).
    devices: ClaimDevices | None = None
    spec: ClaimSpec | None = None


class OwnerReference(_Kept):
    kind: Any = None
    controller: Any = None


class Metadata(_Kept):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    owner_references: list[OwnerReference] | None = None  # a claim a Pod controls is not judged (dra-claim-spread)


class Status(_Kept):
    qos_class: str | None = None


class Manifest(_Kept):
    """A Pod, a core workload (``KINDS``) or a DRA claim (``CLAIM_KINDS``): where each keeps its pod spec or
    claim spec, and a Pod's status."""

    api_version: str | None = None
    kind: str | None = None
    metadata: Metadata | None = None
    spec: Spec | None = None
    template: PodTemplate | None = None  # PodTemplate
    status: Status | None = None


class LabelledMetadata(Metadata):
    labels: dict[str, Any] | None = None


class Namespace(_Kept):
    kind: str | None = None
    metadata: LabelledMetadata | None = None


class GroupVersionKind(msgspec.Struct):
    group: str | None = None
    version: str | None = None
    kind: str | None = None


class UserInfo(msgspec.Struct):
    username: str | None = None


class Request(msgspec.Struct, rename="camel"):
    uid: str | None = None
    kind: GroupVersionKind | None = None
    operation: str | None = None
    sub_resource: str | None = None
    namespace: str | None = None
    name: str | None = None
    user_info: UserInfo | None = None
    dry_run: bool | None = None
    # Decoded once the kind is known (``decode_object``): a core kind's fields are typed, a custom
    # resource's kept whole (its templates are wherever its kind says).
    object: msgspec.Raw = msgspec.Raw()  # an empty Raw: no object; null stays b"null"


class NamespaceRequest(Request):
    object: Namespace | None = None  # type: ignore[assignment]


class AdmissionReview(msgspec.Struct, rename="camel"):
    api_version: str | None = None
    kind: str | None = None
    request: Request | None = None


class NamespaceReview(AdmissionReview):
    request: NamespaceRequest | None = None


# float_hook: a JSON float becomes the float json.loads gives (an out-of-range one inf, which the engine names).
_DECODERS = {labels: msgspec.json.Decoder(NamespaceReview if labels else AdmissionReview, float_hook=float)
             for labels in (False, True)}

_STEP = 1 << 20
_TYPE_NAMES = {"array": "a list", "object": "a mapping", "str": "a string", "int": "a number", "float": "a number",
               "bool": "a boolean", "null": "null"}
_EXPECTED = re.compile(r"^Expected `(?P<want>[^`]*)`, got `(?P<got>[^`]*)`$")
_AT = re.compile(r"^(?P<what>.*) - at `\$(?P<path>[^`]*)`$")


def _where(path: str) -> str:
    """msgspec's ``$.request.object.spec.containers[0]`` as the engine names fields: ``request.object:
    spec.containers[0]``."""
    path = path.lstrip(".").replace("[...]", "[*]")
    if path.startswith("request.object."):
        return "request.object: " + path.removeprefix("request.object.")
    return path or "body"


def _reason(exc: msgspec.ValidationError) -> str:
    """A 400 reason in the engine's words (``spec.containers: expected a list, got a string``)."""
    text = str(exc)
    found = _AT.match(text)
    what, path = (found["what"], found["path"]) if found else (text, "")
    if "out of range" in what:  # an integer over 4,300 digits (as json.loads), or a float beyond float64
        return f"body has a number JSON cannot hold here ({_where(path)}): {what}"
    if path == ".request.object":
        return "request.object is not an object"
    if path == "" and what.startswith("Expected `object`"):
        return "body is not an AdmissionReview object"
    typed = _EXPECTED.match(what)
    if typed:
        wants = [t.strip() for t in typed["want"].split("|") if t.strip() != "null"]
        want = " or ".join(_TYPE_NAMES.get(t, t) for t in wants)
        return f"{_where(path)}: expected {want}, got {_TYPE_NAMES.get(typed['got'], typed['got'])}"
    return f"{_where(path)}: {what}"


def _not_json(body: bytes | bytearray | memoryview, exc: msgspec.DecodeError) -> str:
    """Why ``body`` is not JSON: its first byte that is not UTF-8, or where msgspec gave up."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(body)
    for start in range(0, len(view), _STEP):  # a MiB at a time: no copy of a 3 MiB body as text
        try:
            decoder.decode(view[start:start + _STEP], final=start + _STEP >= len(view))
        except UnicodeDecodeError as bad:
            return f"body is not UTF-8 (byte {start + bad.start})"
    what = str(exc).removeprefix("JSON is malformed: ")
    return f"body is not JSON: {what[:1].lower()}{what[1:]}"


def decode(body: bytes | bytearray | memoryview, labels: bool = False) -> AdmissionReview:
    """The review in ``body``; ``labels`` keeps a Namespace's labels (``/validate-namespace``)."""
    try:
        return _DECODERS[labels].decode(body)
    except msgspec.ValidationError as exc:
        raise BadReview(_reason(exc)) from None
    except msgspec.DecodeError as exc:
        raise BadReview(_not_json(body, exc)) from None
    except RecursionError:
        raise BadReview("body is nested too deeply") from None


CORE_GROUPS = frozenset({"", "apps", "batch"})
# Decoded to the kept fields (``Manifest``): the core kinds and DRA's claims, whose shapes are fixed.
TYPED_GROUPS = CORE_GROUPS | {CLAIM_GROUP}
_MANIFEST = msgspec.json.Decoder(Manifest, float_hook=float)
_ANY = msgspec.json.Decoder(float_hook=float)


def decode_object(raw: msgspec.Raw, group: str) -> Any:
    """``request.object`` as the engine reads objects: a core kind's (``group`` ``""``, ``apps``, ``batch``) or
    a DRA claim's (``resource.k8s.io``) with only the judged fields; any other (a custom resource, whose pod
    templates are where its kind in ``KINDS`` or the configuration says) whole, as ``json.loads`` would give it."""
    if not raw or (len(raw) == 4 and bytes(raw) == b"null"):  # bytes() of a small one only: it copies
        return None
    try:
        if group in TYPED_GROUPS:
            return plain(_MANIFEST.decode(raw))
        obj = _ANY.decode(raw)
    except msgspec.ValidationError as exc:
        text = str(exc)
        text = text.replace("`$", "`$.request.object") if " - at `$" in text else f"{text} - at `$.request.object`"
        raise BadReview(_reason(msgspec.ValidationError(text))) from None
    except msgspec.DecodeError as exc:
        raise BadReview(f"request.object: {exc}") from None
    except RecursionError:
        raise BadReview("body is nested too deeply") from None
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise BadReview("request.object is not an object")
    return obj


def plain(obj: Manifest | Namespace | None) -> dict[str, Any] | None:
    """The object as the engine reads objects: mappings and lists holding only the kept fields."""
    return None if obj is None else msgspec.to_builtins(obj)
