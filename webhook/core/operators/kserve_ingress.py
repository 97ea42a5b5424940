"""``inferenceservice-config``'s ``ingress`` as KServe v0.20.0 reads it (``NewIngressConfig``,
``pkg/apis/serving/v1beta1/configmap.go:295-330``, commit 1fb781055dd1567164358233e1125142ca6ef1fe), for both
KServe builders: the InferenceService's Standard-mode reconciler and the llmisvc controller's ``toConfig`` read it
before any Pod, and fail where it fails. The section itself is read by ``kserve_config.read_section``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from webhook.core.gojson import GoJSONError
from webhook.core.operators import Related, mapping_at
from webhook.core.operators.kserve_config import ISVC_CONFIG, given_config_map, read_section

# What KServe ships (config/configmap/inferenceservice.yaml): the way out of an ingress it refuses.
SHIPPED_INGRESS = ("KServe ships ingressGateway knative-serving/knative-ingress-gateway, kserveIngressGateway "
                   "kserve/kserve-ingress-gateway, ingressDomain example.com")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # validation.IsDNS1123Label, with its 63 characters


def _gateway_refusal(section: Mapping[str, Any]) -> str | None:
    """What ``NewIngressConfig`` refuses in a well-typed ``ingress``, or None. A ``pathTemplate`` Go's
    text/template cannot parse is refused too: not read here."""
    if section.get("enableGatewayApi"):
        gateway = section.get("kserveIngressGateway") or ""
        if not gateway:
            return "enableGatewayApi without kserveIngressGateway (kserveIngressGateway is required)"
        parts = gateway.split("/")
        if len(parts) != 2 or not all(len(p) <= 63 and _DNS_LABEL.fullmatch(p) for p in parts):
            return f"kserveIngressGateway {gateway!r} is not <namespace>/<name> of DNS-1123 labels"
    if not section.get("ingressGateway"):
        return "no ingressGateway (ingressGateway is required)"
    if section.get("pathTemplate") and not section.get("ingressDomain"):
        return "a pathTemplate without ingressDomain (ingressDomain is required if pathTemplate is given)"
    return None


def ingress_unreadable(cm: Mapping[str, Any]) -> str | None:
    """Where ``NewIngressConfig`` fails on this ConfigMap's ``ingress`` (not JSON of its types, a required key
    missing) or panics (null): "the ... ConfigMap's ingress ..." with Go's error; None where it reads it, or the
    section is absent (KServe's defaults)."""
    if "ingress" not in mapping_at(cm.get("data"), ("data",)):
        return None
    where = f"the {ISVC_CONFIG} ConfigMap's ingress"
    try:
        section = read_section(cm, "ingress")
    except GoJSONError as error:
        return f"{where} is not what KServe's Go code reads ({error}): NewIngressConfig fails"
    if section is None:
        return f"{where} is null: NewIngressConfig reads the nil config (a panic)"
    refused = _gateway_refusal(section)
    return None if refused is None else f"{where} has {refused}: NewIngressConfig fails"


def ingress_refusal(related: Related) -> str | None:
    """Why KServe builds no Pod from a given ``inferenceservice-config`` ``ingress`` in Standard mode, or None:
    its reconciler reads it (``NewRawKubeReconciler``, raw_kube_reconciler.go:106-109) before any Deployment
    (``ingress_unreadable``). In Knative mode the controller reads it only after the Knative Service
    (controller.go:355): the Pods are built."""
    cm = given_config_map(related)
    why = ingress_unreadable(cm) if cm is not None else None
    if why is None:
        return None
    return (f"{why}, so KServe's Standard-mode reconciler (NewRawKubeReconciler) fails before any Deployment: "
            f"KServe builds no Pod until it is mended ({SHIPPED_INGRESS})")


__all__ = ["SHIPPED_INGRESS", "ingress_refusal", "ingress_unreadable"]
