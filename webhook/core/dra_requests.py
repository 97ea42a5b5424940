"""Dynamic Resource Allocation as admission sees it: which devices a Pod takes through DRA, and whether a
ResourceClaim keeps its devices on one NUMA node. Pure; ``webhook.cluster.deviceclass_cache`` reads DeviceClasses.

Kubelet v1.36's Topology Manager has three hint providers (the CPU Manager, the Memory Manager, the device
manager: ``pkg/kubelet/cm/container_manager_linux.go``) and none for DRA, and the device manager skips
DRA-backed extended resources. So a Pod's DRA devices are never aligned with its exclusive CPUs and memory, and
NodeResourceTopology (which publishes device plugin resources per NUMA node) knows nothing of them.

A Pod takes DRA devices through ``spec.resourceClaims`` (which its containers name in ``resources.claims``), or
through an extended resource that DRA serves (``DRAExtendedResource``, beta and on in 1.36): one a DeviceClass
names in ``spec.extendedResourceName``, or ``deviceclass.resource.kubernetes.io/<class>`` for any class. On a node
whose allocatable has that resource (a device plugin serves it there) the scheduler uses the device plugin;
elsewhere it allocates a DRA device and records the claim in ``status.extendedResourceClaimStatus``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from webhook.core.dracpu_objects import cpu_class
from webhook.core.fieldpath import FieldPath

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"  # resourceapi.ResourceDeviceClassPrefix
NUMA_ATTRIBUTE = "resource.kubernetes.io/numaNode"  # KEP-6072
PCIE_ATTRIBUTE = "resource.kubernetes.io/pcieRoot"  # k8s.io/dynamic-resource-allocation/deviceattribute
# matchAttribute names that keep a claim's devices on one NUMA node: the standard ones, and a driver's own
# ``<domain>/numaNode`` (dra.net/numaNode).
LOCAL_SUFFIXES = ("/numaNode",)


@dataclass(frozen=True)
class DeviceClasses:
    """The cluster's DeviceClasses as admission needs them: each class's ``spec.extendedResourceName`` ('' when
    none) and the reverse map, extended resource name -> the class that serves it. Immutable: a new index is
    built on a change."""

    extended: Mapping[str, str] = field(default_factory=dict)  # class name -> extendedResourceName or ''
    by_resource: Mapping[str, str] = field(default_factory=dict)  # extended resource name -> class name
    # The classes whose selectors pick only the DRA CPU driver's devices (``dracpu.cpu_class``).
    cpu: frozenset[str] = frozenset()

    def serves(self, resource: str) -> str | None:
        """The DeviceClass through which DRA serves the extended resource ``resource``, or None."""
        found = self.by_resource.get(resource)
        if found is not None:
            return found
        if resource.startswith(IMPLICIT_PREFIX):
            name = resource[len(IMPLICIT_PREFIX):]
            return name if name in self.extended else None
        return None


Entry = tuple[str, str, str] | tuple[str, str, str, bool]


def device_class_entry(obj: Mapping[str, Any]) -> tuple[str, str, str, bool] | None:
    """(name, extendedResourceName or '', creationTimestamp, whether it selects only the DRA CPU driver's devices)
    of a DeviceClass object; None without a name."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        return None
    created = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
    spec = obj.get("spec")
    extended = spec.get("extendedResourceName") if isinstance(spec, Mapping) else None
    return (name, extended if isinstance(extended, str) else "", created if isinstance(created, str) else "",
            cpu_class(obj) is not None)


def index_device_classes(entries: Iterable[Entry]) -> DeviceClasses:
    """The index of ``device_class_entry`` values. Two classes naming one extended resource: the newer wins, the
    name (sorted first) breaks a tie, as the scheduler's extended resource cache picks
    (pkg/scheduler/framework/plugins/dynamicresources/extended)."""
    extended: dict[str, str] = {}
    chosen: dict[str, tuple[str, str]] = {}  # resource -> (creationTimestamp, class name)
    cpu: set[str] = set()
    for name, resource, created, *selects_cpu in entries:
        extended[name] = resource
        if any(selects_cpu):
            cpu.add(name)
        if not resource:
            continue
        best = chosen.get(resource)
        # RFC 3339 timestamps in UTC sort as text.
        if best is None or created > best[0] or (created == best[0] and name < best[1]):
            chosen[resource] = (created, name)
    by_resource = {resource: name for resource, (_, name) in chosen.items()}
    return DeviceClasses(MappingProxyType(extended), MappingProxyType(by_resource), frozenset(cpu))


def parse_device_classes(objects: Iterable[Mapping[str, Any]]) -> DeviceClasses:
    entries = (device_class_entry(o) for o in objects if isinstance(o, Mapping))
    return index_device_classes(e for e in entries if e is not None)


# ---- a Pod's DRA devices ----

@dataclass(frozen=True, slots=True)
class DraUse:
    """How a Pod takes devices through DRA: its claims (``spec.resourceClaims`` names) and the extended resources
    DRA serves (resource -> DeviceClass), with the path of the first place each is asked."""

    claims: tuple[str, ...] = ()
    claims_path: FieldPath = ()
    resources: Mapping[str, str] = field(default_factory=dict)
    resource_paths: Mapping[str, FieldPath] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.claims or self.resources)

    def describe(self) -> str:
        """``spec.resourceClaims (gpu)``, ``example.com/dra-gpu (DeviceClass gpu.example.com)``."""
        parts = []
        if self.claims:
            parts.append(f"spec.resourceClaims ({', '.join(self.claims)})")
        parts += [f"{r} (DeviceClass {c})" for r, c in sorted(self.resources.items())]
        return " and ".join(parts)

    @property
    def path(self) -> FieldPath:
        if self.claims:
            return self.claims_path
        first = sorted(self.resources)[0]
        return self.resource_paths[first]


def pod_claims(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The names in ``spec.resourceClaims`` (entries without a name, which the API server refuses, left out)."""
    raw = spec.get("resourceClaims")
    names = []
    for item in raw if isinstance(raw, list) else []:
        name = item.get("name") if isinstance(item, Mapping) else None
        if isinstance(name, str) and name:
            names.append(name)
    return tuple(names)


def pod_claim_sources(spec: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """``spec.resourceClaims`` name -> (``ResourceClaim`` or ``ResourceClaimTemplate``, the object's name)."""
    raw = spec.get("resourceClaims")
    found: dict[str, tuple[str, str]] = {}
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            continue
        for key, kind in (("resourceClaimName", "ResourceClaim"),
                          ("resourceClaimTemplateName", "ResourceClaimTemplate")):
            if isinstance(item.get(key), str) and item[key]:
                found[item["name"]] = (kind, item[key])
    return found


def container_claims(resources: Mapping[str, Any]) -> tuple[str, ...]:
    """The claim names a container's ``resources.claims`` lists."""
    raw = resources.get("claims")
    return tuple(c["name"] for c in raw if isinstance(c, Mapping) and isinstance(c.get("name"), str)) \
        if isinstance(raw, list) else ()


def container_claim_requests(resources: Mapping[str, Any]) -> dict[str, tuple[str, ...] | None]:
    """Claim name -> the requests of it a container's ``resources.claims`` names (``request``), None where an
    entry names the whole claim. Kubelet hands the container only those requests' devices
    (pkg/kubelet/cm/dra/manager.go, GetResources: claimRequests)."""
    raw = resources.get("claims")
    found: dict[str, tuple[str, ...] | None] = {}
    for c in raw if isinstance(raw, list) else []:
        if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
            continue
        request = c.get("request")
        if not isinstance(request, str) or not request:
            found[c["name"]] = None
        elif c["name"] not in found or found[c["name"]] is not None:
            found[c["name"]] = (*(found.get(c["name"]) or ()), request)
    return found


def dra_resources(resources: Iterable[tuple[str, FieldPath]], classes: DeviceClasses | None
                  ) -> tuple[dict[str, str], dict[str, FieldPath]]:
    """Of the extended resources asked (name, where), those DRA serves: resource -> class, resource -> path.
    Without DeviceClasses (None: not known) only the implicit ``deviceclass.resource.kubernetes.io/`` names, which
    nothing but DRA serves."""
    found: dict[str, str] = {}
    paths: dict[str, FieldPath] = {}
    for name, where in resources:
        if name in found:
            continue
        served = classes.serves(name) if classes is not None else (
            name[len(IMPLICIT_PREFIX):] if name.startswith(IMPLICIT_PREFIX) else None)
        if served is not None:
            found[name] = served
            paths[name] = where
    return found, paths


# ---- a claim's devices ----

@dataclass(frozen=True, slots=True)
class ClaimSpread:
    """A claim's device requests that the scheduler may allocate on different NUMA nodes: ``devices`` is how
    many it asks ('all' for allocationMode All), ``requests`` their names."""

    devices: str
    requests: tuple[str, ...]


def _count(request: Mapping[str, Any]) -> int | None:
    """Devices one exact request (or sub-request) asks: ``count`` (1 by default), None for allocationMode All."""
    if request.get("allocationMode") == "All":
        return None
    count = request.get("count", 1)
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1


def _request_count(request: Mapping[str, Any]) -> int | None:
    if "deviceClassName" in request:  # v1beta1: the request is the exact one
        return _count(request)
    exact = request.get("exactly")
    if isinstance(exact, Mapping):
        return _count(exact)
    alternatives = request.get("firstAvailable")
    if isinstance(alternatives, list) and alternatives:
        counts = [_count(a) if isinstance(a, Mapping) else 1 for a in alternatives]
        return None if None in counts else max(c for c in counts if c is not None)
    return 1


def local_attribute(name: str) -> bool:
    """Does ``matchAttribute: name`` keep devices on one NUMA node?"""
    return name in (NUMA_ATTRIBUTE, PCIE_ATTRIBUTE) or name.endswith(LOCAL_SUFFIXES)


def _subrequests(request: Mapping[str, Any]) -> list[str]:
    alternatives = request.get("firstAvailable")
    if not isinstance(alternatives, list):
        return []
    return [str(a.get("name")) for a in alternatives if isinstance(a, Mapping) and a.get("name")]


def _covers(listed: set[str], name: str, request: Mapping[str, Any]) -> bool:
    """Does a constraint over ``listed`` apply to every device ``request`` may get? As ``DeviceConstraint.requests``
    says (``k8s.io/api/resource/v1``): the main request's name covers all its sub-requests, ``main/sub`` only
    that one; so a request is covered by its name, or by every one of its ``firstAvailable`` sub-requests
    (the scheduler may pick any of them)."""
    if name in listed:
        return True
    subs = _subrequests(request)
    return bool(subs) and all(f"{name}/{sub}" in listed for sub in subs)


def claim_spread(spec: Mapping[str, Any]) -> ClaimSpread | None:
    """A ResourceClaimSpec (``resource.k8s.io/v1``) that asks more than one device and has no NUMA or PCIe
    ``matchAttribute`` constraint over all its requests: its devices may land on different NUMA nodes. None
    when it asks one device, or keeps them together."""
    devices = spec.get("devices")
    if not isinstance(devices, Mapping):
        return None
    raw = devices.get("requests")
    requests = [r for r in raw if isinstance(r, Mapping)] if isinstance(raw, list) else []
    names = tuple(str(r.get("name") or f"[{i}]") for i, r in enumerate(requests))
    counts = [_request_count(r) for r in requests]
    if not requests or (len(requests) == 1 and counts[0] == 1):
        return None
    constraints = devices.get("constraints")
    for constraint in constraints if isinstance(constraints, list) else []:
        if not isinstance(constraint, Mapping):
            continue
        attribute = constraint.get("matchAttribute")
        if not isinstance(attribute, str) or not local_attribute(attribute):
            continue
        over = constraint.get("requests")
        # No requests listed: the constraint applies to all of them.
        if not (isinstance(over, list) and over) or all(
                _covers({str(n) for n in over}, name, request) for name, request in zip(names, requests, strict=True)):
            return None
    total = "all matching" if None in counts else str(sum(c for c in counts if c is not None))
    return ClaimSpread(total, names)
