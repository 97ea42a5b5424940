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

from webhook.core.claims import CLAIM_KINDS, ClaimKind, claim_kind, claim_spec
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
    claim = claim_kind(obj) if known is None else None
    if claim is not None:  # DRA's claims: their claim spec, judged whole (``webhook.core.claims``)
        found = claim_spec(obj, claim, where)
        if isinstance(found, str):
            yield found
        else:
            yield Target(kind, *_meta(obj, where), *found)
        return
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
            yield f"{kind} without a pod template"  # e.g. a kustomize patch that only sets replicas
            return
        if not isinstance(node, Mapping):
            raise ManifestError(walked, "expected a mapping")
    yield Target(kind, name, namespace, walked, node, obj.get("status") if kind == POD else None)


def find_targets(obj: Any, where: FieldPath = ()) -> Iterator[Target]:
    """The pod specs in ``obj`` (recursing into ``kind: List`` items)."""
    return (t for t in walk(obj, where) if isinstance(t, Target))


def judged(kind: str, operation: str, subresource: str = "") -> bool:
    """Whether a request for ``kind`` (``operation`` on the object or its ``subresource``) is judged."""
    found: Kind | ClaimKind | None = KINDS.get(kind) or CLAIM_KINDS.get(kind)
    if found is None:
        return False
    if subresource:
        return (subresource, operation) in found.subresources
    return operation in found.operations


__all__ = ["CONTROLLERS", "KINDS", "POD", "Kind", "Segment", "Target", "find_targets", "judged", "walk"]
