"""DRA's claims as qos-guard judges them: ResourceClaim and ResourceClaimTemplate (``resource.k8s.io``), judged
whole by ``dra-claim-spread``, not as pod specs. Kept apart from ``workloads.KINDS`` (the table of pod
templates); ``workloads.walk`` yields a claim's spec as a ``Target`` through ``claim_spec``. Their spec cannot
change after create, so the webhook judges CREATE only.

A claim a Pod controls (made from the Pod's ResourceClaimTemplate by the resourceclaim controller, or by the
scheduler for a DRA extended resource, both with the Pod as controlling owner) is never judged: it is judged where
it comes from (the template, the Pod), and refusing it would only keep the Pod from starting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.fieldpath import FieldPath
from webhook.core.resourceblock import ManifestError

CLAIM_GROUP = "resource.k8s.io"


@dataclass(frozen=True, slots=True)
class ClaimKind:
    """A judged claim kind: its API group/version and plural (as discovery names them), where its claim spec is,
    and the requests judged."""

    kind: str
    api_version: str
    plural: str
    spec_path: tuple[str, ...]
    operations: tuple[str, ...] = ("CREATE",)
    subresources: tuple[tuple[str, str], ...] = ()

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


CLAIM_KINDS: dict[str, ClaimKind] = {k.kind: k for k in (
    ClaimKind("ResourceClaim", f"{CLAIM_GROUP}/v1", "resourceclaims", ("spec",)),
    ClaimKind("ResourceClaimTemplate", f"{CLAIM_GROUP}/v1", "resourceclaimtemplates", ("spec", "spec")),
)}


def claim_kind(obj: Mapping[str, Any]) -> ClaimKind | None:
    """The claim kind of ``obj``: its ``kind``, in ``resource.k8s.io`` (or without ``apiVersion``: a listed
    object); None for anything else (another group's ``ResourceClaim`` is not DRA's)."""
    found = CLAIM_KINDS.get(str(obj.get("kind")))
    api_version = obj.get("apiVersion")
    if found is None or (isinstance(api_version, str) and api_version.rpartition("/")[0] != CLAIM_GROUP):
        return None
    return found


def made_for_pod(obj: Mapping[str, Any]) -> bool:
    """A claim a Pod controls (see the module docstring)."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    return any(isinstance(r, Mapping) and r.get("controller") is True and r.get("kind") == "Pod"
               for r in (refs if isinstance(refs, list) else []))


def claim_spec(obj: Mapping[str, Any], found: ClaimKind, where: FieldPath) -> tuple[FieldPath, Mapping[str, Any]] | str:
    """Where the claim spec is and the spec, or why there is none to judge (``ResourceClaim made for a Pod``,
    ``ResourceClaimTemplate without a claim spec``); raises ``ManifestError`` for a spec of the wrong shape."""
    if made_for_pod(obj):
        return f"{found.kind} made for a Pod"
    node: Any = obj
    walked = where
    for key in found.spec_path:
        node = node.get(key)
        walked = (*walked, key)
        if node is None:
            return f"{found.kind} without a claim spec"
        if not isinstance(node, Mapping):
            raise ManifestError(walked, "expected a mapping")
    return walked, node
