"""The kinds qos-guard judges and where the Pod spec lives in each; every other kind is ignored.

``KINDS`` is the one table of judged kinds: the engine finds pod specs by it, ``audit`` lists by it, the
admission layer decides what it judges by it, and the chart's webhook rules and RBAC are tested against it.
Workloads are judged by their Pod template so that ``kubectl apply`` of a bad Deployment fails at once
instead of its ReplicaSet failing silently later.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.fieldpath import FieldPath, Segment
from webhook.core.podspec import ManifestError, PodSpec, build_pod_spec

_TEMPLATE = ("spec", "template", "spec")
POD = "Pod"


@dataclass(frozen=True, slots=True)
class Kind:
    """A judged kind: its API group/version and plural (as discovery names them), where its pod spec is,
    and whether it controls Pods (then ``audit`` reports its Pods through it, once per template).

    ``operations`` are the requests judged on the object itself, ``subresources`` the judged subresource
    requests (a Pod is judged once, when created; a template on every change; a Pod's resize too)."""

    kind: str
    api_version: str
    plural: str
    spec_path: tuple[str, ...]
    controller: bool
    operations: tuple[str, ...] = ("CREATE", "UPDATE")
    subresources: tuple[tuple[str, str], ...] = ()

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


KINDS: dict[str, Kind] = {k.kind: k for k in (
    Kind(POD, "v1", "pods", ("spec",), False, ("CREATE",), (("resize", "UPDATE"),)),
    Kind("ReplicationController", "v1", "replicationcontrollers", _TEMPLATE, True),
    Kind("PodTemplate", "v1", "podtemplates", ("template", "spec"), False),
    Kind("Deployment", "apps/v1", "deployments", _TEMPLATE, True),
    Kind("ReplicaSet", "apps/v1", "replicasets", _TEMPLATE, True),
    Kind("StatefulSet", "apps/v1", "statefulsets", _TEMPLATE, True),
    Kind("DaemonSet", "apps/v1", "daemonsets", _TEMPLATE, True),
    Kind("Job", "batch/v1", "jobs", _TEMPLATE, True),
    Kind("CronJob", "batch/v1", "cronjobs", ("spec", "jobTemplate", "spec", "template", "spec"), True),
)}
# DRA's claims, judged whole (``webhook.core.rules.dra_claim_spread``), not as pod specs: kept apart from ``KINDS``,
# which is the table of pod specs. Their spec cannot change after create.
CLAIM_GROUP = "resource.k8s.io"
CLAIM_KINDS: dict[str, Kind] = {k.kind: k for k in (
    Kind("ResourceClaim", f"{CLAIM_GROUP}/v1", "resourceclaims", ("spec",), False, ("CREATE",)),
    Kind("ResourceClaimTemplate", f"{CLAIM_GROUP}/v1", "resourceclaimtemplates", ("spec", "spec"), False,
         ("CREATE",)),
)}
CONTROLLERS = frozenset(k.kind for k in KINDS.values() if k.controller)


@dataclass(frozen=True, slots=True)
class Target:
    """One pod spec to judge: the object it belongs to, the path from the document root, and the Pod's
    own ``status`` (templates have none)."""

    kind: str
    name: str
    namespace: str | None
    path: FieldPath
    spec: Mapping[str, Any]
    status: Any = None

    def pod_spec(self) -> PodSpec:
        return build_pod_spec(self.spec, self.path, self.status)


def _meta(obj: Mapping[str, Any], where: FieldPath) -> tuple[str, str | None]:
    meta = obj.get("metadata")
    if meta is None:
        return "<unnamed>", None
    if not isinstance(meta, Mapping):
        raise ManifestError((*where, "metadata"), "expected a mapping")
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    namespace = meta.get("namespace")
    return str(name), str(namespace) if namespace is not None else None


def walk(obj: Any, where: FieldPath = ()) -> Iterator[Target | str]:
    """Each object in ``obj`` (recursing into ``kind: List`` items): its pod spec as a ``Target``, or why it
    has none to judge (its kind, ``document without a kind``, ``KIND without a pod template``), so that
    ``check`` can count what it passed over instead of passing over it silently."""
    if not isinstance(obj, Mapping):
        return
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        yield "document without a kind"
        return
    if kind.endswith("List") and "items" in obj:
        items = obj.get("items")
        if items is None:
            return
        if not isinstance(items, list):
            raise ManifestError((*where, "items"), "expected a list")
        for i, item in enumerate(items):
            yield from walk(item, (*where, "items", i))
        return
    known = KINDS.get(kind)
    if known is None and kind in CLAIM_KINDS and _in_group(obj, CLAIM_GROUP):
        if made_for_pod(obj):
            yield f"{kind} made for a Pod"  # from its template, or by the scheduler for an extended resource
            return
        known = CLAIM_KINDS[kind]
    if known is None:
        yield kind
        return
    name, namespace = _meta(obj, where)
    node: Any = obj
    walked: FieldPath = where
    for key in known.spec_path:
        node = node.get(key)
        walked = (*walked, key)
        if node is None:
            # e.g. a kustomize patch that only sets replicas
            yield f"{kind} without {'a claim spec' if kind in CLAIM_KINDS else 'a pod template'}"
            return
        if not isinstance(node, Mapping):
            raise ManifestError(walked, "expected a mapping")
    yield Target(kind, name, namespace, walked, node, obj.get("status") if kind == POD else None)


def made_for_pod(obj: Mapping[str, Any]) -> bool:
    """A claim a Pod controls: made from the Pod's ResourceClaimTemplate by the resourceclaim controller, or by the
    scheduler for a DRA extended resource. Judged where it comes from (the template, the Pod), never refused
    here: refusing it would only keep the Pod from starting."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    return any(isinstance(r, Mapping) and r.get("controller") is True and r.get("kind") == POD
               for r in (refs if isinstance(refs, list) else []))


def _in_group(obj: Mapping[str, Any], group: str) -> bool:
    """The object's ``apiVersion`` is in ``group`` (or not given: a listed object)."""
    api_version = obj.get("apiVersion")
    return not isinstance(api_version, str) or api_version.rpartition("/")[0] == group


def find_targets(obj: Any, where: FieldPath = ()) -> Iterator[Target]:
    """The pod specs in ``obj`` (recursing into ``kind: List`` items)."""
    return (t for t in walk(obj, where) if isinstance(t, Target))


def judged(kind: str, operation: str, subresource: str = "") -> bool:
    """Whether a request for ``kind`` (``operation`` on the object or its ``subresource``) is judged."""
    found = KINDS.get(kind) or CLAIM_KINDS.get(kind)
    if found is None:
        return False
    if subresource:
        return (subresource, operation) in found.subresources
    return operation in found.operations


__all__ = ["CLAIM_KINDS", "CONTROLLERS", "KINDS", "POD", "Kind", "Segment", "Target", "find_targets", "judged", "walk"]
