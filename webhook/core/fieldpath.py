"""Field paths: kept as segments (keys and list indexes) from where they are found to where they are
printed, so nothing ever parses a path back. ``dotted`` is the one printed form."""

from __future__ import annotations

from dataclasses import dataclass

Segment = str | int
FieldPath = tuple[Segment, ...]


@dataclass(frozen=True, slots=True)
class Remark:
    """What is said about one field of a manifest: ``path`` from the document root (or where a missing field
    belongs), for ``container`` (``None``: the Pod). A rule's ``Violation`` and the mutation's ``Change``."""

    path: FieldPath
    message: str
    container: str | None = None


def dotted(path: FieldPath) -> str:
    """``("spec", "containers", 0, "name")`` -> ``spec.containers[0].name``."""
    out = ""
    for seg in path:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else seg)
    return out


def pointer(path: FieldPath) -> str:
    """The RFC 6901 JSON Pointer of ``path`` (``/spec/containers/0/name``), as JSONPatch needs."""
    return "".join("/" + str(seg).replace("~", "~0").replace("/", "~1") for seg in path)
