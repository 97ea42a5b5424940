"""The Pod and its namespace, from the API server's JSON: the facts the per-container verdict needs (QoS class,
pod-level resources, each container's cpu request, container ID and DRA claims, when the namespace opted in)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.core.dra_requests import container_claim_requests
from webhook.core.podspec import build_pod_spec
from webhook.core.qos import qos_class
from webhook.core.resourceblock import CPU, MEMORY, Block


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    name: str
    cpu_milli: int | None  # the request kubelet sizes by (after the API server's defaulting)
    container_id: str | None  # status.containerStatuses[].containerID, for the cgroup
    fractional_allowed: bool = False  # listed in policy.fractionalCPUContainers
    claims: tuple[str, ...] = ()  # the DRA claims the spec gives it (resources.claims, DRA extended resources)
    # The ResourceClaims (namespace/name) it names by request only (resources.claims[].request) -> those requests:
    # kubelet hands it only their devices, though PodResources lists every device of the claim.
    request_claims: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # kubelet's resourcesQualifyForExclusiveCPUs (pkg/kubelet/cm/cpumanager/cpu_manager.go:573): asked only of a Pod
    # with pod-level resources, whose other containers share the Pod's pool (ResourceIsolationPod).
    own_cpus: bool = True


@dataclass(frozen=True, slots=True)
class PodInfo:
    """The Pod as the API server stores it, and how its namespace opted in."""

    namespace: str
    name: str
    uid: str
    qos: str
    pod_level: bool  # spec.resources sets cpu, memory or hugepages (IsPodLevelResourcesSet)
    created: str
    mode: str  # the namespace's qos-guard.io/mode
    opted_in: str | None  # when the namespace's label was last written (managedFields), if known
    containers: tuple[ContainerSpec, ...]


def spec_claims(obj: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Container name -> the DRA claims its spec gives it: ``resources.claims`` (by the Pod's claim name) and the
    extended resources the scheduler served through DRA (``status.extendedResourceClaimStatus``)."""
    found: dict[str, list[str]] = {}
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or [] if isinstance(spec, Mapping) else []:
            resources = c.get("resources") if isinstance(c, Mapping) else None
            claims = resources.get("claims") if isinstance(resources, Mapping) else None
            for claim in claims if isinstance(claims, list) else []:
                if isinstance(claim, Mapping) and isinstance(claim.get("name"), str):
                    request = claim.get("request")
                    found.setdefault(str(c.get("name")), []).append(
                        f"claim {claim['name']}" + (f" (request {request})" if isinstance(request, str) else ""))
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    extended = status.get("extendedResourceClaimStatus") if isinstance(status, Mapping) else None
    if isinstance(extended, Mapping):
        name = extended.get("resourceClaimName")
        for m in extended.get("requestMappings") or [] if isinstance(extended.get("requestMappings"), list) else []:
            if isinstance(m, Mapping) and isinstance(m.get("containerName"), str):
                found.setdefault(m["containerName"], []).append(
                    f"extended resource {m.get('resourceName')} (claim {name})")
    return {k: tuple(v[:16]) for k, v in found.items()}


def request_claims(obj: Mapping[str, Any]) -> dict[str, dict[str, tuple[str, ...]]]:
    """Container name -> the ResourceClaims (namespace/name) it names by request only -> the requests; a Pod claim
    is resolved to its object through ``spec.resourceClaims[].resourceClaimName`` or, for a template's,
    ``status.resourceClaimStatuses`` (a claim not resolved yet is left out)."""
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    namespace = str(meta.get("namespace", "")) if isinstance(meta, Mapping) else ""
    objects: dict[str, str] = {}
    for source, key in ((spec.get("resourceClaims") if isinstance(spec, Mapping) else None, "resourceClaimName"),
                        (status.get("resourceClaimStatuses") if isinstance(status, Mapping) else None,
                         "resourceClaimName")):
        for item in source if isinstance(source, list) else []:
            if isinstance(item, Mapping) and isinstance(item.get("name"), str) and isinstance(item.get(key), str):
                objects.setdefault(item["name"], f"{namespace}/{item[key]}")
    found: dict[str, dict[str, tuple[str, ...]]] = {}
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or [] if isinstance(spec, Mapping) else []:
            resources = c.get("resources") if isinstance(c, Mapping) else None
            if not isinstance(resources, Mapping):
                continue
            for claim, requests in container_claim_requests(resources).items():
                if requests is not None and claim in objects:
                    found.setdefault(str(c.get("name")), {})[objects[claim]] = requests
    return found


def opted_in_at(namespace: Mapping[str, Any], label: str) -> str | None:
    """When ``label`` was last written on the namespace: the latest managedFields entry that owns it."""
    latest: str | None = None
    for entry in (namespace.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, Mapping):
            continue
        fields = entry.get("fieldsV1") or {}
        labels = ((fields.get("f:metadata") or {}) if isinstance(fields, Mapping) else {}).get("f:labels") or {}
        when = entry.get("time")
        if isinstance(labels, Mapping) and f"f:{label}" in labels and isinstance(when, str):
            latest = max(latest or when, when)
    return latest


def own_cpus(resources: Block) -> bool:
    """kubelet's ``resourcesQualifyForExclusiveCPUs`` (cpu_manager.go:573): cpu and memory requests equal to their
    non-zero limits (``IsContainerEquivalentQOSGuaranteed``, pkg/kubelet/cm/qos/helpers.go:27), the cpu whole."""
    for name in (CPU, MEMORY):
        request, limit = resources.requests.get(name), resources.limits.get(name)
        if request is None or limit is None or not request.positive or limit.invalid or request.milli != limit.milli:
            return False
    return resources.limits[CPU].milli % 1000 == 0


def pod_info(obj: Mapping[str, Any], mode: str, opted_in: str | None,
             fractional_allowed: Iterable[str] = ()) -> PodInfo:
    """The facts the decision needs from a Pod object; ``ManifestError`` when its spec cannot be read."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    spec = build_pod_spec(obj.get("spec"), ("spec",), status)
    qos = status.get("qosClass") if isinstance(status.get("qosClass"), str) else None
    pod_level = spec.pod_level is not None and spec.pod_level.sets_supported
    ids = {s.get("name"): s.get("containerID") for key in ("containerStatuses", "initContainerStatuses")
           for s in status.get(key) or [] if isinstance(s, Mapping)}
    allowed = set(fractional_allowed)
    claims = spec_claims(obj)
    by_request = request_claims(obj)
    containers = []
    for c in (*spec.init_containers, *spec.containers):
        sizing = c.resources.requests.get("cpu")
        if sizing is None or sizing.invalid:
            found = c.resources.sizing_cpu()
            sizing = found[1] if found else None
        cid = ids.get(c.name)
        containers.append(ContainerSpec(c.name, sizing.milli if sizing is not None and not sizing.invalid else None,
                                        cid if isinstance(cid, str) and cid else None, c.name in allowed,
                                        claims.get(c.name, ()), by_request.get(c.name, {}), own_cpus(c.resources)))
    return PodInfo(namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")),
                   uid=str(meta.get("uid", "")), qos=qos or qos_class(spec), pod_level=pod_level,
                   created=str(meta.get("creationTimestamp", "")), mode=mode, opted_in=opted_in,
                   containers=tuple(containers))

