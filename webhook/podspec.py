"""The Pod as kubelet will see it: containers, init containers and sidecars, API-server defaulting,
pod-level resources and the QoS class.

Built from a raw (JSON-like) pod spec; every structural problem is a ``ManifestError`` naming the field,
every unparsable quantity is kept as an ``Amount`` with an error so that rules can report it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.quantity import Quantity, QuantityError, format_milli, quantity_from_value

CPU = "cpu"
MEMORY = "memory"
COMPUTE = (CPU, MEMORY)
# Not devices: resources that are per node, not per NUMA node, or are not requests at all.
_NOT_DEVICES = frozenset({CPU, MEMORY, "ephemeral-storage", "storage"})

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"


class ManifestError(ValueError):
    """An object whose shape the API server would refuse; ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True, slots=True)
class Amount:
    """One cpu/memory value as written, parsed; ``defaulted`` marks a request copied from its limit."""

    raw: object
    path: str
    quantity: Quantity | None
    error: str | None = None
    defaulted: bool = False

    @property
    def valid(self) -> bool:
        return self.quantity is not None and self.error is None

    @property
    def positive(self) -> bool:
        return self.quantity is not None and self.error is None and self.quantity.milli > 0

    @property
    def milli(self) -> int:
        return self.quantity.milli if self.quantity is not None else 0

    def show(self) -> str:
        return str(self.raw)


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    path: str
    sidecar: bool
    init: bool
    requests: Mapping[str, Amount]
    limits: Mapping[str, Amount]
    devices: Mapping[str, int] = field(default_factory=dict)

    def label(self) -> str:
        return f'container "{self.name}" ({self.path})'


@dataclass(frozen=True, slots=True)
class PodSpec:
    path: str
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    pod_requests: Mapping[str, Amount]
    pod_limits: Mapping[str, Amount]
    runtime_class_name: str | None = None

    @property
    def all_containers(self) -> tuple[Container, ...]:
        """Regular then init containers: the set kubelet's QoS computation walks."""
        return self.containers + self.init_containers

    @property
    def pod_level_set(self) -> bool:
        """``isPodLevelResourcesSet`` restricted to cpu/memory, the resources the rules are about."""
        return any(r in self.pod_requests or r in self.pod_limits for r in COMPUTE)


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ManifestError(path, f"expected a mapping, got {_type_name(value)}")
    return value


def _sequence(value: Any, path: str) -> list[Any]:
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


def _amount(raw: object, path: str, defaulted: bool = False) -> Amount:
    try:
        return Amount(raw, path, quantity_from_value(raw), None, defaulted)
    except QuantityError as exc:
        return Amount(raw, path, None, str(exc), defaulted)


def _resource_list(value: Any, path: str, only: Iterable[str] | None = None) -> dict[str, Amount]:
    items = _mapping(value, path)
    wanted = set(only) if only is not None else None
    out: dict[str, Amount] = {}
    for name, raw in items.items():
        if not isinstance(name, str):
            raise ManifestError(path, f"resource name {name!r} is not a string")
        if wanted is None or name in wanted:
            out[name] = _amount(raw, f"{path}.{name}")
    return out


def _devices(resources: Mapping[str, Any], path: str) -> dict[str, int]:
    """Extended resources and hugepages, in milli-units, from limits (or requests: they must match)."""
    found: dict[str, int] = {}
    for kind in ("requests", "limits"):
        for name, amount in _resource_list(resources.get(kind), f"{path}.{kind}").items():
            if name not in _NOT_DEVICES and amount.quantity is not None:
                found[name] = amount.quantity.milli
    return found


def _container(raw: Any, path: str, init: bool) -> Container:
    spec = _mapping(raw, path)
    name = spec.get("name", "")
    if not isinstance(name, str):
        raise ManifestError(f"{path}.name", f"expected a string, got {_type_name(name)}")
    res_path = f"{path}.resources"
    resources = _mapping(spec.get("resources"), res_path)
    requests = _resource_list(resources.get("requests"), f"{res_path}.requests", COMPUTE)
    limits = _resource_list(resources.get("limits"), f"{res_path}.limits", COMPUTE)
    # SetDefaults_Pod (pkg/apis/core/v1/defaults.go): a missing request is copied from its limit.
    # Pod templates are not defaulted that way, so judging a template as the Pod it becomes needs this.
    for resource, limit in limits.items():
        if resource not in requests:
            requests[resource] = Amount(limit.raw, f"{res_path}.requests.{resource}", limit.quantity,
                                        limit.error, defaulted=True)
    restart = spec.get("restartPolicy")
    return Container(
        name=name or "<unnamed>",
        path=path,
        sidecar=init and restart == "Always",
        init=init,
        requests=requests,
        limits=limits,
        devices=_devices(resources, res_path),
    )


def effective_requests(containers: Iterable[Container], init_containers: Iterable[Container],
                       kind: str = "requests") -> dict[str, int]:
    """``AggregateContainerRequests`` (k8s.io/component-helpers/resource/helpers.go), in milli-units:
    max(sum of app containers and sidecars, each init container plus the sidecars started before it)."""
    total: dict[str, int] = {}

    def values(c: Container) -> dict[str, int]:
        source = c.requests if kind == "requests" else c.limits
        out = {k: a.milli for k, a in source.items() if a.valid}
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


def _pod_level(spec: Mapping[str, Any], path: str, containers: tuple[Container, ...],
               init_containers: tuple[Container, ...]) -> tuple[dict[str, Amount], dict[str, Amount]]:
    """Pod-level cpu/memory after ``defaultPodRequests``/``defaultPodLimits`` (pkg/apis/core/v1/defaults.go)."""
    if spec.get("resources") is None:
        return {}, {}
    res_path = f"{path}.resources"
    resources = _mapping(spec.get("resources"), res_path)
    requests = _resource_list(resources.get("requests"), f"{res_path}.requests", COMPUTE)
    limits = _resource_list(resources.get("limits"), f"{res_path}.limits", COMPUTE)
    everyone = containers + init_containers
    raw_limits = _mapping(resources.get("limits"), f"{res_path}.limits")
    if raw_limits:
        aggregated = effective_requests(containers, init_containers)
        for name in COMPUTE:
            if name in requests or name not in limits:
                continue
            if any(name in c.requests for c in everyone):
                milli = aggregated.get(name, 0)
                requests[name] = Amount(format_milli(milli), f"{res_path}.requests.{name}",
                                        Quantity(milli, format_milli(milli)), defaulted=True)
            else:
                lim = limits[name]
                requests[name] = Amount(lim.raw, f"{res_path}.requests.{name}", lim.quantity, lim.error,
                                        defaulted=True)
    elif requests:
        aggregated = effective_requests(containers, init_containers, kind="limits")
        for name in COMPUTE:
            if name in limits or not everyone or not all(name in c.limits for c in everyone):
                continue
            milli = aggregated.get(name, 0)
            limits[name] = Amount(format_milli(milli), f"{res_path}.limits.{name}",
                                  Quantity(milli, format_milli(milli)), defaulted=True)
    return requests, limits


def build_pod_spec(spec: Any, path: str) -> PodSpec:
    """The pod spec at ``path`` as kubelet sees it, defaulted the way the API server defaults a Pod."""
    body = _mapping(spec, path)
    containers = tuple(
        _container(c, f"{path}.containers[{i}]", init=False)
        for i, c in enumerate(_sequence(body.get("containers"), f"{path}.containers"))
    )
    init_containers = tuple(
        _container(c, f"{path}.initContainers[{i}]", init=True)
        for i, c in enumerate(_sequence(body.get("initContainers"), f"{path}.initContainers"))
    )
    pod_requests, pod_limits = _pod_level(body, path, containers, init_containers)
    runtime_class = body.get("runtimeClassName")
    return PodSpec(
        path=path,
        containers=containers,
        init_containers=init_containers,
        pod_requests=pod_requests,
        pod_limits=pod_limits,
        runtime_class_name=runtime_class if isinstance(runtime_class, str) else None,
    )


def qos_class(pod: PodSpec) -> str:
    """``ComputePodQOS`` (pkg/apis/core/helper/qos/qos.go) with PodLevelResources on: only cpu and memory
    count, zero amounts are ignored, ephemeral containers never count, and pod-level cpu/memory, when set,
    decide alone. Never trust ``status.qosClass``."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True

    def add(into: dict[str, int], source: Mapping[str, Amount]) -> set[str]:
        found = set()
        for name, amount in source.items():
            if amount.positive:
                into[name] = into.get(name, 0) + amount.milli
                found.add(name)
        return found

    if pod.pod_level_set:
        add(requests, pod.pod_requests)
        if pod.pod_limits:
            guaranteed = add(limits, pod.pod_limits) >= set(COMPUTE)
    else:
        for c in pod.all_containers:
            add(requests, c.requests)
            if add(limits, c.limits) < set(COMPUTE):
                guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and all(limits.get(k) == v for k, v in requests.items()) and len(requests) == len(limits):
        return GUARANTEED
    return BURSTABLE
