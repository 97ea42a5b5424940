"""The Kubernetes objects the tests build over and over, written once with keyword arguments: a Pod and its
containers, a NodeResourceTopology as an exporter publishes it, a ResourceSlice as a DRA driver's kubeletplugin
publishes it, and the resource.k8s.io DeviceClass and claims. A test file keeps a helper of its own only where it
builds something else (and says why)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

IMAGE = "example/image:1"
GPU = "nvidia.com/gpu"
NRT_API = "topology.node.k8s.io/v1alpha2"
DRA_API = "resource.k8s.io/v1"
NUMA_NODE = "resource.kubernetes.io/numaNode"

# --- Pods --------------------------------------------------------------------------------------------------------


def rl(cpu: str = "", memory: str = "") -> dict[str, str]:
    """A resource list like upstream's ``getResourceList``: empty strings are left out."""
    return {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}


def container(name: str = "app", requests: Mapping[str, str] | None = None, limits: Mapping[str, str] | None = None,
              *, image: str = IMAGE, claims: Iterable[str] = (), **fields: Any) -> dict[str, Any]:
    """A container asking ``requests`` and ``limits`` (each left out when empty) and taking the Pod's claims
    ``claims`` (``resources.claims``); ``fields`` are the container's other fields."""
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    if claims:
        resources["claims"] = [{"name": c} for c in claims]
    return {"name": name, "image": image, "resources": resources, **fields}


def guaranteed(name: str = "app", cpu: str = "2", memory: str = "4Gi", *, claims: Iterable[str] = (),
               **extended: str) -> dict[str, Any]:
    """A container of the Guaranteed class: requests equal to limits (``extended``: more resources by name, e.g.
    ``**{GPU: "1"}``), taking the Pod's claims ``claims``."""
    amounts = rl(cpu, memory) | extended
    return container(name, amounts, amounts, claims=claims)


def pod(*containers: dict[str, Any], name: str = "p", namespace: str | None = "ns",
        labels: Mapping[str, str] | None = None, init: list[dict[str, Any]] | None = None,
        resources: dict[str, Any] | None = None, claims: Mapping[str, str] | None = None,
        status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    """A v1 Pod of ``containers`` (``init``: its init containers; ``resources``: pod-level resources; ``claims``:
    claim name to the ResourceClaimTemplate it is made from); ``spec`` are its other spec fields and
    ``namespace=None`` leaves the namespace out (the API server's request names it)."""
    body: dict[str, Any] = {"containers": list(containers), **spec}
    if init:
        body["initContainers"] = init
    if resources is not None:
        body["resources"] = resources
    if claims:
        body["resourceClaims"] = [{"name": n, "resourceClaimTemplateName": t} for n, t in claims.items()]
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}
    if status is not None:
        obj["status"] = status
    return obj


# --- NodeResourceTopology ----------------------------------------------------------------------------------------


def nrt(name: str, zones: Sequence[Mapping[str, str | int]], policy: str = "single-numa-node",
        scope: str | None = "container", available: Sequence[Mapping[str, str | int]] | None = None,
        attributes: Mapping[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """A NodeResourceTopology (v1alpha2) as NFD's topology exporter publishes it: one zone per NUMA node of
    ``zones`` (resource to amount: its capacity and allocatable), ``available`` per zone where some is taken
    (else all of it), the Topology Manager's policy and scope (``scope=None`` leaves it out) and ``attributes``
    as top-level attributes; ``extra`` are more top-level fields (``metadata`` replaces the name's)."""
    free = available or zones
    attrs = [{"name": "topologyManagerPolicy", "value": policy}]
    if scope is not None:
        attrs.append({"name": "topologyManagerScope", "value": scope})
    attrs += [{"name": k, "value": v} for k, v in (attributes or {}).items()]
    return {"apiVersion": NRT_API, "kind": "NodeResourceTopology", "metadata": {"name": name},
            "attributes": attrs,
            "zones": [{"name": f"node-{i}", "type": "Node",
                       "resources": [{"name": k, "capacity": str(v), "allocatable": str(v),
                                      "available": str(free[i].get(k, v))} for k, v in z.items()]}
                      for i, z in enumerate(zones)], **extra}


# --- resource.k8s.io: ResourceSlice, DeviceClass, claims ---------------------------------------------------------


def resource_slice(name: str, driver: str, devices: Sequence[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
                   node: str | None = "node-1", pool: str | None = None, generation: int = 1,
                   **spec: Any) -> dict[str, Any]:
    """A resource.k8s.io/v1 ResourceSlice as a driver's kubeletplugin publishes it: ``devices`` as written, or
    device name to its attributes; on ``node`` (``node=None``: no ``spec.nodeName``, e.g. with
    ``perDeviceNodeSelection=True`` in ``spec``) in one slice of the pool named after it (or ``pool``)."""
    listed = ([{"name": n, "attributes": dict(a)} for n, a in devices.items()] if isinstance(devices, Mapping)
              else [dict(d) for d in devices])
    body: dict[str, Any] = {"driver": driver}
    if node is not None:
        body["nodeName"] = node
    body["pool"] = {"name": pool or node or name, "generation": generation, "resourceSliceCount": 1}
    body["devices"] = listed
    return {"apiVersion": DRA_API, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body | spec}


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
