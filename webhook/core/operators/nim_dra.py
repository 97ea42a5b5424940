"""NVIDIA NIM operator v3.1.2's DRA claims for a NIMService (``internal/shared/resourceclaims.go``): each
``spec.draResources`` entry, and on the LeaderWorkerSet path ``spec.multiNode.computeDomain``, becomes a pod
``resourceClaims`` entry (``GetPodResourceClaims``), and every non-init container of the model Pod takes every
claim (``UpdateContainerResourceClaims``: the model container and the sidecars, the claim's ``requests`` each,
or the whole claim), so the DRA rules see the devices as the Pod gets them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.fieldpath import FieldPath
from webhook.core.operators import list_at, mapping_at
from webhook.core.resourceblock import ManifestError

# DraResourceFieldType: the number in a pod claim's name.
CLAIM, CLAIM_TEMPLATE, COMPUTE_DOMAIN = 0, 1, 2
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand


def short_hash(text: str) -> str:
    """``utils.GetTruncatedStringHash(text, 12)``: FNV-1a 32 of ``text``, its decimal digits through
    ``rand.SafeEncodeString``, cut to 12."""
    value = 0x811C9DC5
    for byte in text.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_ALPHANUMS[ord(d) % len(_ALPHANUMS)] for d in str(value))[:12]


def _resource_name(nim: str, prefix: str, index: int | None) -> str:
    """``generateUniqueDRAResourceName``."""
    return f"{prefix}-{short_hash(nim)}" if index is None else f"{prefix}-{short_hash(nim)}-{index}"


# the pod claim, its requests, the field that makes it, and what a finding adds of that field (``Built.notes``)
Claim = tuple[dict[str, Any], list[str], FieldPath, str]
# DRAClaimCreationSpec (api/apps/v1alpha1/dra_types.go:272-280) has generateName and devices only: no constraints.
CREATION_NOTE = ("a claimCreationSpec cannot set matchAttribute: name a ResourceClaimTemplate of your own with "
                 "resourceClaimTemplateName instead")


def pod_claims(spec: Mapping[str, Any], nim: str, multi_node: bool) -> list[Claim]:
    """The pod claims (``NewNamedDRAResourceList``) with each one's ``requests`` and the field it comes from; the
    names as the operator makes them (``generateUniquePodClaimName``)."""
    seen: dict[str, int] = {}

    def claim_name(resource: str, field_type: int) -> str:
        unique = f"claim-{short_hash(nim)}-{field_type}-{short_hash(resource)}"
        seen[unique] = seen[unique] + 1 if unique in seen else 0
        return f"{unique}-{seen[unique]}"

    out: list[Claim] = []
    for i, raw in enumerate(list_at(spec.get("draResources"), ("spec", "draResources"))):
        entry = mapping_at(raw, ("spec", "draResources", i))
        requests = [str(r) for r in list_at(entry.get("requests"), ("spec", "draResources", i, "requests"))]
        if entry.get("resourceClaimName"):
            name = str(entry["resourceClaimName"])
            out.append(({"name": claim_name(name, CLAIM), "resourceClaimName": name}, requests,
                        ("spec", "draResources", i), ""))
            continue
        note = ""
        if entry.get("resourceClaimTemplateName"):
            name = str(entry["resourceClaimTemplateName"])
        elif entry.get("claimCreationSpec") is not None:
            creation = mapping_at(entry["claimCreationSpec"], ("spec", "draResources", i, "claimCreationSpec"))
            name = _resource_name(nim, str(creation.get("generateName") or "claimtemplate"), i)
            note = CREATION_NOTE
        else:
            raise ManifestError(("spec", "draResources", i), "exactly one of resourceClaimName, "
                                "resourceClaimTemplateName or claimCreationSpec must be set")
        out.append(({"name": claim_name(name, CLAIM_TEMPLATE), "resourceClaimTemplateName": name}, requests,
                    ("spec", "draResources", i), note))
    multi = mapping_at(spec.get("multiNode"), ("spec", "multiNode"))
    domain = multi.get("computeDomain")
    if multi_node and domain is not None:
        domain = mapping_at(domain, ("spec", "multiNode", "computeDomain"))
        # create: the operator's own ComputeDomain (named as the NIMService) and its template; otherwise the
        # existing ComputeDomain's channel template, which only the cluster knows: named by the domain here.
        name = _resource_name(nim, "cd-claimtemplate", None) if domain.get("create") is True \
            else str(domain.get("name") or "")
        out.append(({"name": claim_name(name, COMPUTE_DOMAIN), "resourceClaimTemplateName": name}, [],
                    ("spec", "multiNode", "computeDomain"), ""))
    return out


def with_claims(containers: list[dict[str, Any]], claims: list[Claim]) -> None:
    """``UpdateContainerResourceClaims`` on the built containers (none names a claim before it)."""
    for claim, requests, *_ in claims:
        for container in containers:
            resources = container.setdefault("resources", {})
            taken = resources.setdefault("claims", [])
            taken.extend([{"name": claim["name"], "request": r} for r in requests] or [{"name": claim["name"]}])


__all__ = ["CREATION_NOTE", "Claim", "pod_claims", "short_hash", "with_claims"]
