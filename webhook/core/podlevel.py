"""The pod-level ``spec.resources`` block as each minor's API server stores it: dropped where ``PodLevelResources``
is off (1.33, decoded first), defaulted from the containers' aggregated requests and limits as the release
defaults it (``defaultPodRequests`` up to 1.36, ``DefaultPodLevelResources`` from 1.37), and whether it names a
resource pod-level resources support (what decides the QoS class there and makes kubelet's managers skip the Pod).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.kubeversion import Semantics
from webhook.core.numatopology import HUGEPAGES
from webhook.core.resourceblock import (
    COMPUTE,
    Amount,
    Block,
    Container,
    aggregate,
    defaulted,
    effective_requests,
    label_prefix,
    mapping_field,
    resource_list,
)


def _supported(name: object) -> bool:
    """``IsSupportedPodLevelResource`` (k8s.io/component-helpers/resource/helpers.go)."""
    return isinstance(name, str) and (name in COMPUTE or name.startswith(HUGEPAGES))


def pod_level_block(spec: Mapping[str, Any], path: FieldPath, containers: tuple[Container, ...],
               init_containers: tuple[Container, ...], template: str, kube: Semantics) -> Block | None:
    """The pod-level block as the API server stores it: None where ``PodLevelResources`` is off (1.33 drops
    it), defaulted as ``kube``'s release defaults it (``_default_before_1_37`` or ``_default_from_1_37``)."""
    if spec.get("resources") is None or not kube.pod_level_resources:
        return None
    res_path = (*path, "resources")
    resources = mapping_field(spec.get("resources"), res_path)
    raw_requests = mapping_field(resources.get("requests"), (*res_path, "requests"))
    raw_limits = mapping_field(resources.get("limits"), (*res_path, "limits"))
    requests = resource_list(raw_requests, (*res_path, "requests"), COMPUTE)
    limits = resource_list(raw_limits, (*res_path, "limits"), COMPUTE)
    written = bool(raw_requests) or bool(raw_limits)
    if kube.pod_level_fix_defaulting:
        if written:
            _default_from_1_37(requests, limits, res_path, containers, init_containers)
    elif raw_limits:
        _default_before_1_37(requests, limits, res_path, containers, init_containers)
    return Block(f"{label_prefix(template)}pod ({dotted(res_path)})", None, res_path, requests, limits,
                 empty=not written, sets_supported=any(map(_supported, (*raw_requests, *raw_limits))))


def dropped_block(spec: Mapping[str, Any], path: FieldPath, template: str, kube: Semantics) -> Block | None:
    """The pod-level block where ``PodLevelResources`` is off: the API server decodes it (a bad quantity is
    refused then) and drops it in ``dropDisabledPodLevelResources`` (pkg/api/pod/util.go)."""
    if spec.get("resources") is None or kube.pod_level_resources:
        return None
    res_path = (*path, "resources")
    resources = mapping_field(spec.get("resources"), res_path)
    requests = resource_list(mapping_field(resources.get("requests"), (*res_path, "requests")),
                             (*res_path, "requests"), COMPUTE)
    limits = resource_list(mapping_field(resources.get("limits"), (*res_path, "limits")),
                           (*res_path, "limits"), COMPUTE)
    return Block(f"{label_prefix(template)}pod ({dotted(res_path)})", None, res_path, requests, limits,
                 empty=not (requests or limits))


def _default_before_1_37(requests: dict[str, Amount], limits: dict[str, Amount], res_path: FieldPath,
                         containers: tuple[Container, ...], init_containers: tuple[Container, ...]) -> None:
    """``defaultPodRequests`` (pkg/apis/core/v1/defaults.go, up to 1.36), run only when pod-level limits are
    set: a missing request defaults to the containers' aggregated requests, else to the limit. Pod-level
    limits are never defaulted."""
    aggregated = effective_requests(containers, init_containers)
    for name in COMPUTE:
        if name in requests:
            continue
        if name in aggregated:
            requests[name] = aggregate(aggregated[name], (*res_path, "requests", name))
        elif name in limits:
            requests[name] = defaulted(limits[name], (*res_path, "requests", name))


def _default_from_1_37(requests: dict[str, Amount], limits: dict[str, Amount], res_path: FieldPath,
                       containers: tuple[Container, ...], init_containers: tuple[Container, ...]) -> None:
    """``DefaultPodLevelResources`` (pkg/api/pod/util.go, PodLevelResourcesFixDefaulting, from 1.37), in
    PrepareForCreate, for a block that sets anything: requests from the containers' aggregated requests, then
    from the pod-level limits (``defaultPodLevelRequests``); a missing limit becomes the larger of the request
    and the containers' aggregated limits when every container sets that limit (``defaultPodLevelLimits``)."""
    aggregated = effective_requests(containers, init_containers)
    for name in COMPUTE:
        if name not in requests and name in aggregated:
            requests[name] = aggregate(aggregated[name], (*res_path, "requests", name))
    for name in COMPUTE:
        if name not in requests and name in limits:
            requests[name] = defaulted(limits[name], (*res_path, "requests", name))
    every = containers + init_containers
    candidates = [n for n in COMPUTE if n in requests and n not in limits
                  and all(n in c.resources.limits for c in every)]
    if not candidates:
        return
    aggregated_limits = effective_requests(containers, init_containers, kind="limits")
    for name in candidates:
        if name in aggregated_limits:
            limit = max(aggregated_limits[name], requests[name].milli if not requests[name].invalid else 0)
            limits[name] = aggregate(limit, (*res_path, "limits", name))


__all__ = ["dropped_block", "pod_level_block"]
