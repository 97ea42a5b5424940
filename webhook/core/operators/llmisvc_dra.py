"""KServe v0.20.0's managed DRA for an LLMInferenceService (``pkg/controller/v1alpha2/llmisvc/managed_dra.go``):
the ``serving.kserve.io/exp-dra-device-class`` annotation makes KServe create a ResourceClaimTemplate
``<name>-managed-dra`` and, in the merged spec before any model is attached (``injectManagedDRAIntoConfig``), give
each workload pod spec (template, worker, prefill template and worker; not the scheduler) the pod claim
``managed-device`` from it, taken by the container ``exp-dra-container-name`` names, else by the first one. KServe's
validating webhook refuses the annotations it cannot read
(``pkg/apis/serving/v1alpha2/llm_inference_service_validation.go`` ``validateManagedDRAAnnotations``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from webhook.core.fieldpath import FieldPath
from webhook.core.operators.llmisvc_base import KIND, Unknown, get

PREFIX = "serving.kserve.io/exp-dra-"
DEVICE_CLASS = PREFIX + "device-class"
DEVICE_COUNT = PREFIX + "device-count"
CEL_SELECTOR = PREFIX + "cel-selector"
CONTAINER_NAME = PREFIX + "container-name"
CLAIM = "managed-device"
SUFFIX = "-managed-dra"
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")


def child_name(parent: str, suffix: str) -> str:
    """knative ``kmeta.ChildName`` for a suffix shorter than 31 characters (``-managed-dra``): ``parent + suffix``,
    the parent cut and followed by its md5 where that passes 63 characters."""
    if len(parent) > 63 - len(suffix):
        parent = parent[:31 - len(suffix)] + hashlib.md5(parent.encode()).hexdigest()
    return parent + suffix


def _refusal(annotations: Mapping[str, Any]) -> str | None:
    """What ``validateManagedDRAAnnotations`` refuses, or None."""
    def value(key: str) -> str | None:
        raw = annotations.get(key)
        return raw.strip() if isinstance(raw, str) else None
    if DEVICE_CLASS not in annotations:
        others = [k for k in (DEVICE_COUNT, CEL_SELECTOR, CONTAINER_NAME) if k in annotations]
        return f"{others[0]} without {DEVICE_CLASS}" if others else None
    device_class, count = value(DEVICE_CLASS), value(DEVICE_COUNT)
    if not device_class or len(device_class) > 253 or not _SUBDOMAIN.fullmatch(device_class):
        return f"{DEVICE_CLASS} {annotations[DEVICE_CLASS]!r} is not a DNS subdomain"
    if DEVICE_COUNT in annotations and count and not (re.fullmatch(r"[+-]?[0-9]+", count) and int(count) >= 1):
        return f"{DEVICE_COUNT} {annotations[DEVICE_COUNT]!r} is not a count of 1 or more"
    if CEL_SELECTOR in annotations and not (value(CEL_SELECTOR) or ""):
        return f"{CEL_SELECTOR} holds no CEL expression"
    name = value(CONTAINER_NAME)
    if CONTAINER_NAME in annotations and (not name or len(name) > 63 or not re.fullmatch(_LABEL, name)):
        return f"{CONTAINER_NAME} {annotations[CONTAINER_NAME]!r} is not a DNS label"
    return None


def managed(annotations: Mapping[str, Any]) -> bool:
    """``HasManagedDRA``, once KServe's webhook has admitted the annotations (``Unknown`` where it refuses them)."""
    refusal = _refusal(annotations)
    if refusal is not None:
        raise Unknown(f"{KIND} metadata.annotations: {refusal}: KServe's webhook refuses the object, so it builds "
                      "no Pods")
    return DEVICE_CLASS in annotations


def with_claim(pod: Mapping[str, Any], name: str, annotations: Mapping[str, Any]) -> tuple[
        dict[str, Any], tuple[tuple[FieldPath, FieldPath], ...]]:
    """``injectManagedDRA`` on one pod spec, and where its pod claim comes from (the annotation), to name it."""
    out = dict(pod)
    claims = list(out.get("resourceClaims") or [])
    shown: tuple[tuple[FieldPath, FieldPath], ...] = ()
    if not any(get(c, "name") == CLAIM for c in claims):
        shown = ((("resourceClaims", len(claims)), ("metadata", "annotations")),)
        claims.append({"name": CLAIM, "resourceClaimTemplateName": child_name(name, SUFFIX)})
    out["resourceClaims"] = claims
    containers = list(out.get("containers") or [])
    wanted = annotations.get(CONTAINER_NAME)
    wanted = wanted.strip() if isinstance(wanted, str) else ""
    at = (0 if containers else None) if not wanted else next(
        (i for i, c in enumerate(containers) if get(c, "name") == wanted), None)
    if at is not None and isinstance(containers[at], Mapping):
        target = dict(containers[at])
        resources = dict(target.get("resources") or {})
        taken = list(resources.get("claims") or [])
        if not any(get(c, "name") == CLAIM for c in taken):
            resources["claims"] = [*taken, {"name": CLAIM}]
        target["resources"] = resources
        containers[at] = target
        out["containers"] = containers
    return out, shown


__all__ = ["CLAIM", "DEVICE_CLASS", "child_name", "managed", "with_claim"]
