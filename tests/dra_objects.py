"""The resource.k8s.io objects the DRA tests build (unit, agent, e2e, node), written once: a DeviceClass of one
driver's devices, a claim (or claim template) of exact requests, and a Pod's container taking a claim."""

from __future__ import annotations

from typing import Any

DRA_API = "resource.k8s.io/v1"
NUMA_NODE = "resource.kubernetes.io/numaNode"


def device_class(name: str, driver: str, extended_resource: str | None = None,
                 **metadata: str) -> dict[str, Any]:
    """A DeviceClass of every device of ``driver``; ``extended_resource`` maps that name to it
    (``spec.extendedResourceName``); ``metadata`` adds e.g. ``creationTimestamp``."""
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]}
    if extended_resource is not None:
        spec["extendedResourceName"] = extended_resource
    return {"apiVersion": DRA_API, "kind": "DeviceClass", "metadata": {"name": name, **metadata}, "spec": spec}


def exactly(name: str, device_class: str, count: int | None = None, mode: str | None = None) -> dict[str, Any]:
    """One request of a claim: ``count`` devices of ``device_class`` (``mode``: ``allocationMode``)."""
    body: dict[str, Any] = {"deviceClassName": device_class}
    if count is not None:
        body["count"] = count
    if mode is not None:
        body["allocationMode"] = mode
    return {"name": name, "exactly": body}


def claim(name: str, devices: dict[str, Any], kind: str = "ResourceClaimTemplate",
          namespace: str | None = None) -> dict[str, Any]:
    """A ResourceClaimTemplate (its claim spec under ``spec.spec``) or a ResourceClaim (under ``spec``) asking
    ``devices`` (``{"requests": [...], "constraints": [...]}``)."""
    spec = {"devices": devices}
    metadata = {"name": name} | ({"namespace": namespace} if namespace is not None else {})
    return {"apiVersion": DRA_API, "kind": kind, "metadata": metadata,
            "spec": {"spec": spec} if kind == "ResourceClaimTemplate" else spec}


def take_claim(obj: dict[str, Any], template: str, name: str = "gpu") -> dict[str, Any]:
    """``obj`` (a Pod) with the claim ``name`` made from ``template`` in ``spec.resourceClaims``, and its first
    container taking it (``resources.claims``); returned for chaining."""
    obj["spec"]["resourceClaims"] = [{"name": name, "resourceClaimTemplateName": template}]
    obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": name}]
    return obj
