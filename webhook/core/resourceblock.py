"""One ``resources`` block as the API server reads it: its cpu and memory amounts (``Amount``, each kept with its
parse error so that rules can report it), the container that carries it (``Container``: its devices and DRA
claims), the request a missing one defaults to (``SetDefaults_Pod``), and the containers' aggregated requests
(``effective_requests``). Every structural problem is a ``ManifestError`` naming the field. The Pod these make
up is ``webhook.core.podspec``; its pod-level block, ``webhook.core.podlevel``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.core.dra_requests import container_claim_requests, container_claims
from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.quantity import Quantity, QuantityError, format_milli, format_milli_bytes, quantity_from_value
from webhook.core.sizing import Sizing

CPU = "cpu"
MEMORY = "memory"
COMPUTE = (CPU, MEMORY)
# Not devices: resources that are per node, not per NUMA node, or are not requests at all.
_NOT_DEVICES = frozenset({CPU, MEMORY, "ephemeral-storage", "storage"})
_KINDS = ("requests", "limits")


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

    def at(self, kind: str, resource: str) -> FieldPath:
        """Where a finding about ``resource``'s request or limit (``kind``) is: the object's one value for both where
        an operator builds the container from one (``Sizing.one_value``), else ``resources.<kind>.<resource>``."""
        if self.sizing is not None and self.sizing.one_value:
            return (*self.sizing.one_value, resource)
        return (*self.path, kind, resource)

    def sizing_cpu(self) -> tuple[str, Amount] | None:
        """The cpu the CPU Manager sizes by: the limit, or the request where no limit is set."""
        for kind, source in (("limit", self.limits), ("request", self.requests)):
            amount = source.get(CPU)
            if amount is not None and amount.positive:
                return kind, amount
        return None


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


def mapping_field(value: Any, path: FieldPath) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ManifestError(path, f"expected a mapping, got {_type_name(value)}")
    return value


def list_field(value: Any, path: FieldPath) -> list[Any]:
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


def defaulted(source: Amount, path: FieldPath) -> Amount:
    return Amount(source.raw, path, source.quantity, source.error, defaulted=True)


def aggregate(milli: int, path: FieldPath) -> Amount:
    return Amount(None, path, Quantity(milli, format_milli(milli)), defaulted=True)


def resource_list(value: Any, path: FieldPath, only: Iterable[str] | None = None) -> dict[str, Amount]:
    items = mapping_field(value, path)
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
        for name, amount in resource_list(resources.get(kind), (*path, kind)).items():
            if name not in _NOT_DEVICES and amount.quantity is not None:
                found[name] = amount.quantity.milli
    return found


def read_container(raw: Any, path: FieldPath, init: bool, template: str = "") -> Container:
    spec = mapping_field(raw, path)
    name = spec.get("name", "")
    if not isinstance(name, str):
        raise ManifestError((*path, "name"), f"expected a string, got {_type_name(name)}")
    name = name or "<unnamed>"
    res_path = (*path, "resources")
    resources = mapping_field(spec.get("resources"), res_path)
    requests = resource_list(resources.get("requests"), (*res_path, "requests"), COMPUTE)
    limits = resource_list(resources.get("limits"), (*res_path, "limits"), COMPUTE)
    # SetDefaults_Pod (pkg/apis/core/v1/defaults.go): a missing request is copied from its limit.
    # Pod templates are not defaulted that way, so judging a template as the Pod it becomes needs this.
    for resource, limit in limits.items():
        if resource not in requests:
            requests[resource] = defaulted(limit, (*res_path, "requests", resource))
    return Container(
        name=name, path=path, init=init,
        sidecar=init and spec.get("restartPolicy") == "Always",
        resources=Block(f'{label_prefix(template)}container "{name}" ({dotted(path)})', name, res_path, requests,
                        limits, empty=not any(mapping_field(resources.get(k), (*res_path, k)) for k in _KINDS)),
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


def label_prefix(template: str) -> str:
    """Blocks of one of several templates (``spec.replicatedJobs[1] (workers)``) say which, first."""
    return f"{template}: " if template else ""


__all__ = [
    "COMPUTE",
    "CPU",
    "MEMORY",
    "Amount",
    "Block",
    "Container",
    "ManifestError",
    "aggregate",
    "defaulted",
    "effective_requests",
    "label_prefix",
    "list_field",
    "mapping_field",
    "read_container",
    "resource_list",
    "spelled",
]
