"""Where the Pod spec lives in each kind; every other kind is ignored.

Workloads are judged by their Pod template so that ``kubectl apply`` of a bad Deployment fails at once
instead of its ReplicaSet failing silently later.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.podspec import ManifestError

Segment = str | int

_TEMPLATE = ("spec", "template", "spec")
SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": _TEMPLATE,
    "ReplicaSet": _TEMPLATE,
    "StatefulSet": _TEMPLATE,
    "DaemonSet": _TEMPLATE,
    "Job": _TEMPLATE,
    "ReplicationController": _TEMPLATE,
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "PodTemplate": ("template", "spec"),
}
WORKLOAD_KINDS = frozenset(SPEC_PATHS)


def dotted(segments: tuple[Segment, ...]) -> str:
    """``("spec", "containers", 0, "name")`` -> ``spec.containers[0].name``."""
    out = ""
    for seg in segments:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else seg)
    return out


@dataclass(frozen=True, slots=True)
class Target:
    """One pod spec to judge: the object it belongs to and the segments from the document root."""

    kind: str
    name: str
    namespace: str | None
    segments: tuple[Segment, ...]
    spec: Mapping[str, Any]

    @property
    def is_pod(self) -> bool:
        return self.kind == "Pod"

    @property
    def path(self) -> str:
        return dotted(self.segments)


def _meta(obj: Mapping[str, Any], where: tuple[Segment, ...]) -> tuple[str, str | None]:
    meta = obj.get("metadata")
    if meta is None:
        return "<unnamed>", None
    if not isinstance(meta, Mapping):
        raise ManifestError(dotted((*where, "metadata")), "expected a mapping")
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    namespace = meta.get("namespace")
    return str(name), str(namespace) if namespace is not None else None


def find_targets(obj: Any, where: tuple[Segment, ...] = ()) -> Iterator[Target]:
    """The pod specs in ``obj`` (recursing into ``kind: List`` items)."""
    if not isinstance(obj, Mapping):
        return
    kind = obj.get("kind")
    if not isinstance(kind, str):
        return
    if kind.endswith("List") and "items" in obj:
        items = obj.get("items")
        if items is None:
            return
        if not isinstance(items, list):
            raise ManifestError(dotted((*where, "items")), "expected a list")
        for i, item in enumerate(items):
            yield from find_targets(item, (*where, "items", i))
        return
    spec_path = SPEC_PATHS.get(kind)
    if spec_path is None:
        return
    name, namespace = _meta(obj, where)
    node: Any = obj
    walked: tuple[Segment, ...] = where
    for key in spec_path:
        node = node.get(key)
        walked = (*walked, key)
        if node is None:
            return  # nothing to judge (e.g. a kustomize patch that only sets replicas)
        if not isinstance(node, Mapping):
            raise ManifestError(dotted(walked), "expected a mapping")
    yield Target(kind, name, namespace, walked, node)


_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_dotted(path: str) -> tuple[Segment, ...]:
    """Inverse of ``dotted`` for the paths this program writes (keys without dots)."""
    return tuple(int(index) if index else key for key, index in _PART.findall(path))
