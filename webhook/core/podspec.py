"""The Pod as the API server stores it and kubelet reads it: containers, init containers and sidecars,
defaulting, the pod-level ``resources`` block and the QoS class.

Built from a raw (JSON-like) pod spec; every structural problem is a ``ManifestError`` naming the field,
every unparsable quantity is kept as an ``Amount`` with an error so that rules can report it. Rules walk
the ``Block``s (one ``resources`` block each) that ``PodSpec.blocks`` and ``PodSpec.qos_blocks`` yield,
as Pod Security Admission's checks walk ``visitContainers``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.core.dra_requests import container_claim_requests, container_claims, pod_claim_sources, pod_claims
from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.kubeversion import DEFAULT, Semantics
from webhook.core.numatopology import HUGEPAGES
from webhook.core.quantity import Quantity, QuantityError, format_milli, format_milli_bytes, quantity_from_value
from webhook.core.scheduling import NodeConstraints, node_constraints
from webhook.core.sizing import Sizing

CPU = "cpu"
MEMORY = "memory"
COMPUTE = (CPU, MEMORY)
# Not devices: resources that are per node, not per NUMA node, or are not requests at all.
_NOT_DEVICES = frozenset({CPU, MEMORY, "ephemeral-storage", "storage"})
_KINDS = ("requests", "limits")

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"


class ManifestError(ValueError):
    """An object whose shape the API server would refuse (in a file or an admission request);
    ``path`` names the field."""

    def __init__(self, path: FieldPath, message: str) -> None:
        super().__init__(f"{dotted(path)}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True, slots=True)
class Amount:
    """One cpu/memory value as written, parsed; ``defaulted`` marks a value the API server fills in."""

    raw: object
    path: FieldPath
    quantity: Quantity | None
    error: str | None = None
    defaulted: bool = False

    @property
    def invalid(self) -> bool:
        """Unparsable, or negative (``ValidateNonnegativeQuantity`` refuses it at the API server)."""
        return self.quantity is None or self.error is not None or self.quantity.milli < 0

    @property
    def positive(self) -> bool:
        return not self.invalid and self.milli > 0

    @property
    def milli(self) -> int:
        return self.quantity.milli if self.quantity is not None else 0

    def show(self) -> str:
        """The value as the user wrote it, in YAML/JSON spelling (``null``, ``true``, ``{"a":1}``, never
        Python's), or the canonical form of one the API server fills in (memory in binary units: ``1Gi``)."""
        if self.defaulted and self.raw is None:
            return format_milli_bytes(self.milli) if self.path and self.path[-1] != CPU else format_milli(self.milli)
        return "null (0)" if self.raw is None else spelled(self.raw)


def spelled(value: object) -> str:
    """A manifest value as YAML and JSON write it: a string as is, ``null``, ``true``, numbers, and a mapping
    or list as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), default=str, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Block:
    """One ``resources`` block: a container's, or the pod-level one (``container`` is then ``None``)."""

    label: str
    container: str | None
    path: FieldPath
    requests: Mapping[str, Amount]
    limits: Mapping[str, Amount]
    empty: bool = False  # nothing at all is written in it (no resource of any kind)
    # It names a resource pod-level resources support (cpu, memory, hugepages-*): ``IsPodLevelResourcesSet``,
    # what makes kubelet's CPU and Memory Managers skip the Pod, and from 1.37 what lets it decide the QoS class.
    sets_supported: bool = False
    sizing: Sizing | None = None  # an operator's container the object sizes otherwise (``webhook.core.sizing``)

    def clean(self, resource: str) -> bool:
        """No value of ``resource`` is invalid, and its request is not above its limit: either yields
        ``invalid-quantity`` and nothing else (the API server refuses the object)."""
        return not any((a := source.get(resource)) is not None and a.invalid
                       for source in (self.requests, self.limits)) and not self.above_limit(resource)

    def above_limit(self, resource: str) -> bool:
        """A request above its limit: ``ValidateResourceRequirements`` refuses it ("must be less than or equal
        to cpu limit of 2"), and ``fix`` must not lower what was asked for."""
        request, limit = self.requests.get(resource), self.limits.get(resource)
        return request is not None and limit is not None and not request.invalid and not limit.invalid \
            and request.milli > limit.milli

    def sizing_cpu(self) -> tuple[str, Amount] | None:
        """The cpu the CPU Manager sizes by: the limit, or the request where no limit is set."""
        for kind, source in (("limit", self.limits), ("request", self.requests)):
            amount = source.get(CPU)
            if amount is not None and amount.positive:
                return kind, amount
        return None

    def sets_compute(self) -> bool:
        """cpu or memory written in this block (not only filled in by defaulting)."""
        return any(not a.defaulted for source in (self.requests, self.limits)
                   for r, a in source.items() if r in COMPUTE)


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    path: FieldPath
    sidecar: bool
    init: bool
    resources: Block
    devices: Mapping[str, int] = field(default_factory=dict)
    claims: tuple[str, ...] = ()  # ``resources.claims``: the Pod's claims this container uses
    # of those, the requests it names (None: the whole claim): it gets only those requests' devices
    claim_requests: Mapping[str, tuple[str, ...] | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PodSpec:
    path: FieldPath
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    # ``spec.resources`` when present at all, even ``{}``: its presence alone moves the QoS class there.
    pod_level: Block | None = None
    # ``status.qosClass`` as the manifest carries it (Pods only): the API server keeps it on create.
    declared_qos: str | None = None
    # Where the Pod may be scheduled (nodeName, nodeSelector, required node affinity): ``policy.numa: auto``.
    node_constraints: NodeConstraints = field(default_factory=NodeConstraints)
    # ``spec.resourceClaims`` by name: devices allocated through DRA (``webhook.core.dra_requests``).
    resource_claims: tuple[str, ...] = ()
    # each claim's source: name -> (ResourceClaim or ResourceClaimTemplate, its name)
    claim_sources: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # The Kubernetes minor judged: what its API server stores and its kubelet pins (``webhook.core.kubeversion``).
    kube: Semantics = DEFAULT
    # How the object runs several Pods of this template at once ('its 3 replicas'), '' for one or not known.
    several: str = ""
    # ``spec.resources`` as written where the API server drops it (1.33): decoded first, so a value that is not
    # a quantity is still refused (``invalid-quantity``), though the block decides nothing.
    dropped: Block | None = None

    @property
    def pod_level_decides(self) -> bool:
        """The pod-level block alone decides the QoS class (``ComputePodQOS``): whenever ``spec.resources`` is
        there up to 1.36, even ``{}``; from 1.37 (PodLevelResourcesFixKubeletQOSClass) only when it sets a
        supported resource."""
        level = self.pod_level
        return level is not None and (level.sets_supported or not self.kube.pod_level_qos_needs_set)

    @property
    def pod_level_set(self) -> bool:
        """``IsPodLevelResourcesSet``: kubelet's CPU and Memory Managers skip the Pod (PodLevelResourceManagers
        is off by default in every supported minor)."""
        return self.pod_level is not None and self.pod_level.sets_supported and \
            not self.kube.pod_level_resource_managers

    @property
    def all_containers(self) -> tuple[Container, ...]:
        """Regular then init containers: the set kubelet's QoS computation walks."""
        return self.containers + self.init_containers

    def blocks(self) -> Iterator[Block]:
        """Every resources block: each container's, then the pod-level one."""
        for c in self.all_containers:
            yield c.resources
        if self.pod_level is not None:
            yield self.pod_level

    def qos_blocks(self) -> Iterator[Block]:
        """The blocks that decide the QoS class: the pod-level block alone when it does
        (``pod_level_decides``; ``ComputePodQOS``, pkg/apis/core/helper/qos/qos.go), else every container's."""
        if self.pod_level is not None and self.pod_level_decides:
            yield self.pod_level
        else:
            for c in self.all_containers:
                yield c.resources


def _mapping(value: Any, path: FieldPath) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ManifestError(path, f"expected a mapping, got {_type_name(value)}")
    return value


def _sequence(value: Any, path: FieldPath) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ManifestError(path, f"expected a list, got {_type_name(value)}")
    return value


def _type_name(value: Any) -> str:
    for kind, name in ((Mapping, "a mapping"), (list, "a list"), (str, "a string"), (bool, "a boolean"),
                       (int, "a number"), (float, "a number")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _amount(raw: object, path: FieldPath) -> Amount:
    try:
        return Amount(raw, path, quantity_from_value(raw))
    except QuantityError as exc:
        return Amount(raw, path, None, str(exc))


def _defaulted(source: Amount, path: FieldPath) -> Amount:
    return Amount(source.raw, path, source.quantity, source.error, defaulted=True)


def _aggregate(milli: int, path: FieldPath) -> Amount:
    return Amount(None, path, Quantity(milli, format_milli(milli)), defaulted=True)


def _resource_list(value: Any, path: FieldPath, only: Iterable[str] | None = None) -> dict[str, Amount]:
    items = _mapping(value, path)
    wanted = set(only) if only is not None else None
    out: dict[str, Amount] = {}
    for name, raw in items.items():
        if not isinstance(name, str):
            raise ManifestError(path, f"resource name {name!r} is not a string")
        if wanted is None or name in wanted:
            out[name] = _amount(raw, (*path, name))
    return out


def _devices(resources: Mapping[str, Any], path: FieldPath) -> dict[str, int]:
    """Extended resources and hugepages, in milli-units, from limits (or requests: they must match)."""
    found: dict[str, int] = {}
    for kind in ("requests", "limits"):
        for name, amount in _resource_list(resources.get(kind), (*path, kind)).items():
            if name not in _NOT_DEVICES and amount.quantity is not None:
                found[name] = amount.quantity.milli
    return found


def _container(raw: Any, path: FieldPath, init: bool, template: str = "") -> Container:
    spec = _mapping(raw, path)
    name = spec.get("name", "")
    if not isinstance(name, str):
        raise ManifestError((*path, "name"), f"expected a string, got {_type_name(name)}")
    name = name or "<unnamed>"
    res_path = (*path, "resources")
    resources = _mapping(spec.get("resources"), res_path)
    requests = _resource_list(resources.get("requests"), (*res_path, "requests"), COMPUTE)
    limits = _resource_list(resources.get("limits"), (*res_path, "limits"), COMPUTE)
    # SetDefaults_Pod (pkg/apis/core/v1/defaults.go): a missing request is copied from its limit.
    # Pod templates are not defaulted that way, so judging a template as the Pod it becomes needs this.
    for resource, limit in limits.items():
        if resource not in requests:
            requests[resource] = _defaulted(limit, (*res_path, "requests", resource))
    return Container(
        name=name, path=path, init=init,
        sidecar=init and spec.get("restartPolicy") == "Always",
        resources=Block(f'{_prefix(template)}container "{name}" ({dotted(path)})', name, res_path, requests,
                        limits, empty=not any(_mapping(resources.get(k), (*res_path, k)) for k in _KINDS)),
        devices=_devices(resources, res_path),
        claims=container_claims(resources),
        claim_requests=container_claim_requests(resources),
    )


def effective_requests(containers: Iterable[Container], init_containers: Iterable[Container],
                       kind: str = "requests") -> dict[str, int]:
    """``AggregateContainerRequests`` (k8s.io/component-helpers/resource/helpers.go), in milli-units:
    max(sum of app containers and sidecars, each init container plus the sidecars started before it)."""
    total: dict[str, int] = {}

    def values(c: Container) -> dict[str, int]:
        source = c.resources.requests if kind == "requests" else c.resources.limits
        out = {k: a.milli for k, a in source.items() if not a.invalid}
        out.update(c.devices)
        return out

    def add(into: dict[str, int], more: Mapping[str, int]) -> None:
        for k, v in more.items():
            into[k] = into.get(k, 0) + v

    for c in containers:
        add(total, values(c))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in init_containers:
        if c.sidecar:
            add(total, values(c))
            add(sidecars, values(c))
            use = dict(sidecars)
        else:
            use = dict(sidecars)
            add(use, values(c))
        for k, v in use.items():
            init_peak[k] = max(init_peak.get(k, 0), v)
    for k, v in init_peak.items():
        total[k] = max(total.get(k, 0), v)
    return total


def _prefix(template: str) -> str:
    """Blocks of one of several templates (``spec.replicatedJobs[1] (workers)``) say which, first."""
    return f"{template}: " if template else ""


def _supported(name: object) -> bool:
    """``IsSupportedPodLevelResource`` (k8s.io/component-helpers/resource/helpers.go)."""
    return isinstance(name, str) and (name in COMPUTE or name.startswith(HUGEPAGES))


def _pod_level(spec: Mapping[str, Any], path: FieldPath, containers: tuple[Container, ...],
               init_containers: tuple[Container, ...], template: str, kube: Semantics) -> Block | None:
    """The pod-level block as the API server stores it: None where ``PodLevelResources`` is off (1.33 drops
    it), defaulted as ``kube``'s release defaults it (``_default_before_1_37`` or ``_default_from_1_37``)."""
    if spec.get("resources") is None or not kube.pod_level_resources:
        return None
    res_path = (*path, "resources")
    resources = _mapping(spec.get("resources"), res_path)
    raw_requests = _mapping(resources.get("requests"), (*res_path, "requests"))
    raw_limits = _mapping(resources.get("limits"), (*res_path, "limits"))
    requests = _resource_list(raw_requests, (*res_path, "requests"), COMPUTE)
    limits = _resource_list(raw_limits, (*res_path, "limits"), COMPUTE)
    written = bool(raw_requests) or bool(raw_limits)
    if kube.pod_level_fix_defaulting:
        if written:
            _default_from_1_37(requests, limits, res_path, containers, init_containers)
    elif raw_limits:
        _default_before_1_37(requests, limits, res_path, containers, init_containers)
    return Block(f"{_prefix(template)}pod ({dotted(res_path)})", None, res_path, requests, limits,
                 empty=not written, sets_supported=any(map(_supported, (*raw_requests, *raw_limits))))


def _dropped(spec: Mapping[str, Any], path: FieldPath, template: str, kube: Semantics) -> Block | None:
    """The pod-level block where ``PodLevelResources`` is off: the API server decodes it (a bad quantity is
    refused then) and drops it in ``dropDisabledPodLevelResources`` (pkg/api/pod/util.go)."""
    if spec.get("resources") is None or kube.pod_level_resources:
        return None
    res_path = (*path, "resources")
    resources = _mapping(spec.get("resources"), res_path)
    requests = _resource_list(_mapping(resources.get("requests"), (*res_path, "requests")), (*res_path, "requests"),
                              COMPUTE)
    limits = _resource_list(_mapping(resources.get("limits"), (*res_path, "limits")), (*res_path, "limits"), COMPUTE)
    return Block(f"{_prefix(template)}pod ({dotted(res_path)})", None, res_path, requests, limits,
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
            requests[name] = _aggregate(aggregated[name], (*res_path, "requests", name))
        elif name in limits:
            requests[name] = _defaulted(limits[name], (*res_path, "requests", name))


def _default_from_1_37(requests: dict[str, Amount], limits: dict[str, Amount], res_path: FieldPath,
                       containers: tuple[Container, ...], init_containers: tuple[Container, ...]) -> None:
    """``DefaultPodLevelResources`` (pkg/api/pod/util.go, PodLevelResourcesFixDefaulting, from 1.37), in
    PrepareForCreate, for a block that sets anything: requests from the containers' aggregated requests, then
    from the pod-level limits (``defaultPodLevelRequests``); a missing limit becomes the larger of the request
    and the containers' aggregated limits when every container sets that limit (``defaultPodLevelLimits``)."""
    aggregated = effective_requests(containers, init_containers)
    for name in COMPUTE:
        if name not in requests and name in aggregated:
            requests[name] = _aggregate(aggregated[name], (*res_path, "requests", name))
    for name in COMPUTE:
        if name not in requests and name in limits:
            requests[name] = _defaulted(limits[name], (*res_path, "requests", name))
    every = containers + init_containers
    candidates = [n for n in COMPUTE if n in requests and n not in limits
                  and all(n in c.resources.limits for c in every)]
    if not candidates:
        return
    aggregated_limits = effective_requests(containers, init_containers, kind="limits")
    for name in candidates:
        if name in aggregated_limits:
            limit = max(aggregated_limits[name], requests[name].milli if not requests[name].invalid else 0)
            limits[name] = _aggregate(limit, (*res_path, "limits", name))


def rebase(path: FieldPath, fields: Sequence[tuple[FieldPath, FieldPath]]) -> FieldPath:
    """``path`` in a built pod spec as the object's field a user changes: the first of ``fields`` (built-spec
    prefix -> object field, the longest first) that covers it (``webhook.core.operators.Built.fields``)."""
    for prefix, field_path in fields:
        if path[:len(prefix)] == prefix:
            return (*field_path, *path[len(prefix):])
    return path


def build_pod_spec(spec: Any, path: FieldPath, status: Any = None, template: str = "",
                   kube: Semantics = DEFAULT, stored: bool = False,
                   fields: Sequence[tuple[FieldPath, FieldPath]] = ()) -> PodSpec:
    """The pod spec at ``path`` as ``kube``'s API server stores it; ``status`` is a Pod's own ``status``;
    ``template`` names it among its object's several (``webhook.core.target.Target.template``). ``stored``:
    the Pod was read from the API server, so its ``status.qosClass`` is the class the server gave it at
    create, which kubelet reads back (``GetPodQOS``) whatever the minor judging it now. ``fields``: a pod spec
    an operator builds, its containers named by the object's fields (``rebase``)."""
    body = _mapping(spec, path)
    containers = tuple(
        _container(c, rebase((*path, "containers", i), fields), init=False, template=template)
        for i, c in enumerate(_sequence(body.get("containers"), (*path, "containers")))
    )
    init_containers = tuple(
        _container(c, rebase((*path, "initContainers", i), fields), init=True, template=template)
        for i, c in enumerate(_sequence(body.get("initContainers"), (*path, "initContainers")))
    )
    keeps = stored or kube.keeps_declared_qos
    declared = status.get("qosClass") if isinstance(status, Mapping) and keeps else None
    return PodSpec(
        path=path,
        containers=containers,
        init_containers=init_containers,
        pod_level=_pod_level(body, path, containers, init_containers, template, kube),
        declared_qos=declared if isinstance(declared, str) and declared else None,
        node_constraints=node_constraints(body, kube.toleration_comparison_operators),
        # DynamicResourceAllocation off (1.33): the API server drops spec.resourceClaims on create.
        resource_claims=pod_claims(body) if kube.dra else (),
        claim_sources=pod_claim_sources(body) if kube.dra else {},
        kube=kube,
        dropped=_dropped(body, path, template, kube),
    )

