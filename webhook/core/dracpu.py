"""CPUs through DRA (``github.com/kubernetes-sigs/dra-driver-cpu``, v0.2.0) and what the cluster's ResourceSlices
say about DRA devices. Pure: the callers read the objects (``check`` from its input files, ``--kubeconfig`` and
``audit`` from the API server) and hand the index over as ``Facts.dra``.

What the driver does, from its module at v0.2.0 (``pkg/driver/dra_hooks.go``, ``pkg/device/attributes.go``,
README "Workload Configuration Requirements"):

- it is the driver ``dra.cpu``; its chart installs the DeviceClass ``dra.cpu`` (``device.driver == "dra.cpu"``);
  a class of another name counts as CPUs when its object is known (``check``'s input, the cluster's with
  ``policy.deviceClasses: true``) and its selectors read exactly as that driver test (``cpu_class``);
- grouped mode (the default): one device per NUMA node with the consumable capacity ``dra.cpu/cpu``; a claim asks
  CPUs with ``capacity.requests: {dra.cpu/cpu: N}`` (N rounded up); individual mode: a device per CPU, ``count``;
- its NUMA attributes are ``dra.cpu/numaNodeID`` and ``dra.net/numaNode`` (ints), NOT the standard
  ``resource.kubernetes.io/numaNode``: a ``matchAttribute`` on the standard name with a CPU request is never
  satisfied (the structured allocator refuses a device without the attribute: ``matchAttributeConstraint.add``
  in ``k8s.io/dynamic-resource-allocation/structured``);
- the QoS class and the cgroup limits ignore claims: a container's (or the pod-level) cpu requests and limits
  must mirror the CPUs its claims ask, or the Pod is BestEffort/Burstable and its CFS quota is not its cpuset;
- the kubelet's CPU Manager must be ``none`` on its nodes: the two pinners are mutually incompatible.

With ``DRAListTypeAttributes`` a ``matchAttribute`` over list values is satisfied when the devices' lists
*intersect* (the allocator keeps the running intersection, ``updateToIntersection``): a device that publishes
``numaNode: [0, 1, 2, 3]`` matches a device on any of those nodes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from webhook.core.dracpu_objects import CLASS_KIND, cpu_capacity, cpu_class
from webhook.core.dracpu_objects import CPU_CAPACITY as CPU_CAPACITY
from webhook.core.dracpu_objects import CPU_DRIVER as CPU_DRIVER
from webhook.core.quantity import QuantityError, parse_quantity

CPU_CLASS = "dra.cpu"  # the DeviceClass the driver's chart installs
# The NUMA attributes dra-driver-cpu v0.2.0 publishes on its devices (grouped by NUMA node, and individual).
CPU_NUMA_ATTRIBUTES = ("dra.net/numaNode", "dra.cpu/numaNodeID")
SLICE_KIND = "ResourceSlice"
_SCALARS = ("int", "bool", "string", "version")
_LISTS = ("ints", "bools", "strings", "versions")

Value = int | bool | str


@dataclass(frozen=True, slots=True)
class SliceDevice:
    """One device a ResourceSlice publishes: its driver, node ('' for a slice not bound to one node), name and
    attributes by fully qualified name (a name without a domain is the driver's, as the allocator's
    ``lookupAttribute`` reads it), each a tuple of values (a scalar is a tuple of one); ``lists``: the
    attributes published as lists."""

    driver: str
    node: str
    name: str
    attributes: Mapping[str, tuple[Value, ...]]
    lists: frozenset[str] = frozenset()
    # The ``dra.cpu/cpu`` capacity a CPU driver's device publishes (grouped mode: the CPUs of its group); None
    # for a device without it (individual mode: the device is one CPU; any other driver's) or whose capacity is
    # there but not a whole number of CPUs (``cpu_capacity_unread`` then says what it holds).
    cpu_capacity: int | None = None
    # A ``dra.cpu/cpu`` capacity present but unreadable ("abc", "1500m", not a mapping): the device is a group
    # of some size, never one CPU; '' when absent or read.
    cpu_capacity_unread: str = ""

    def describe(self) -> str:
        return f"{self.driver} device {self.name}" + (f" on node {self.node}" if self.node else "")


@dataclass(frozen=True)
class DraFacts:
    """What the cluster's DRA objects say: the devices its ResourceSlices publish (None: slices not read), and
    the CPUs each claim and claim template asks through ``dra.cpu`` (None: claims not read). A claim key is
    ``(kind, name)``; a name two namespaces use for different CPU counts maps to None (not known)."""

    devices: tuple[SliceDevice, ...] | None = None
    cpu_claims: Mapping[tuple[str, str], int | None] | None = None
    # Each node's kubelet cpuManagerPolicy (its configz), None where it could not be read; the whole mapping
    # None when the kubelets were not asked.
    cpu_managers: Mapping[str, str | None] | None = None
    # Each claim's and template's spec, by the same key (None where two namespaces differ): for the rules that
    # judge a Pod with the claims it names (dra-cpu-unpaired); None: not kept.
    claim_specs: Mapping[tuple[str, str], Mapping[str, Any] | None] | None = None
    # The claims are all there are (the webhook's cache, listed whole, for the Pod's namespace): a claim a Pod
    # names that is absent is not found, and the rules say "unknown" instead of nothing.
    claims_whole: bool = False
    # Why the claims are not known (the webhook's cache not synced, its list refused): said as "unknown".
    claims_unknown: str | None = None
    # Whether ``cpu_managers`` names every node (configz read for each): the webhook's, from the agents' NRT
    # ``cpuPinner``, names only the nodes whose agent published one, so a Pod asking the CPU Manager is not judged.
    cpu_managers_whole: bool = True
    # ``claim_specs`` are as the API server stores them (read from the cluster, not from files): a field it drops
    # where a gate is off (``capacity`` without DRAConsumableCapacity, pkg/api/resourceclaimspec/util.go) and
    # that is still there shows the gate on.
    specs_stored: bool = False
    # DeviceClasses besides ``dra.cpu`` known to select only the CPU driver's devices (``cpu_class``): a request
    # of one asks CPUs as one of ``dra.cpu`` does.
    cpu_classes: frozenset[str] = frozenset()
    # Claims whose CPUs are not known for a reason said with them (a DeviceClass not listed, the input and the
    # cluster holding one differently, a claim of another namespace): ``unknown_claims`` says each, whoever holds.
    unknown_why: Mapping[tuple[str, str], str] = field(default_factory=lambda: MappingProxyType({}))

    def nodes_of(self, driver: str) -> tuple[str, ...]:
        return tuple(sorted({d.node for d in self.devices or () if d.driver == driver and d.node}))


def qualified(driver: str, name: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _values(raw: Any) -> tuple[tuple[Value, ...], bool] | None:
    """A DeviceAttribute's values and whether it is a list (None for a shape the API server refuses)."""
    if not isinstance(raw, Mapping):
        return None
    for key in _SCALARS:
        if key in raw and isinstance(raw[key], int | str):
            return (raw[key],), False
    for key in _LISTS:
        if key in raw and isinstance(raw[key], list):
            return tuple(v for v in raw[key] if isinstance(v, int | str)), True
    return None


def slice_devices(obj: Mapping[str, Any]) -> list[SliceDevice]:
    """The devices of one ResourceSlice object (``resource.k8s.io/v1``)."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return []
    driver = spec.get("driver")
    node = spec.get("nodeName")
    if not isinstance(driver, str) or not driver:
        return []
    found = []
    for raw in spec.get("devices") or []:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            continue
        attributes: dict[str, tuple[Value, ...]] = {}
        lists = set()
        raw_attributes = raw.get("attributes")
        for key, value in (raw_attributes.items() if isinstance(raw_attributes, Mapping) else ()):
            parsed = _values(value)
            if parsed is None or not isinstance(key, str):
                continue
            name = qualified(driver, key)
            attributes[name] = parsed[0]
            if parsed[1]:
                lists.add(name)
        cpus, unread = cpu_capacity(driver, raw)
        found.append(SliceDevice(driver, node if isinstance(node, str) else "", raw["name"],
                                 MappingProxyType(attributes), frozenset(lists), cpus, unread))
    return found


# ---- the CPUs a claim asks ----

def _exact(request: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if "deviceClassName" in request:  # v1beta1 shape
        return request
    exact = request.get("exactly")
    return exact if isinstance(exact, Mapping) else None


def _is_cpu_class(name: Any, classes: Collection[str]) -> bool:
    return name == CPU_CLASS or (isinstance(name, str) and name in classes)


def exact_cpu_request(request: Mapping[str, Any], classes: Collection[str] = ()) -> Mapping[str, Any] | None:
    """The exact request (``exactly``, or a v1beta1 request) of a request asking the CPU driver's class, else None."""
    return _exact(request) if cpu_request(request, classes) else None


def request_classes(request: Mapping[str, Any]) -> list[Any]:
    """The DeviceClass names a request (of a claim spec) asks: its exact request's (``exactly``, or a v1beta1
    request), else each ``firstAvailable`` alternative's."""
    exact = _exact(request)
    alternatives = request.get("firstAvailable") if exact is None else None
    ones = [exact] if exact is not None else alternatives if isinstance(alternatives, list) else []
    return [one["deviceClassName"] for one in ones if isinstance(one, Mapping) and "deviceClassName" in one]


def cpu_request(request: Mapping[str, Any], classes: Collection[str] = ()) -> bool:
    """Does this request (of a claim spec) ask devices of the CPU driver's DeviceClass (``dra.cpu``, or one of
    ``classes``, known to select only its devices)?"""
    return any(_is_cpu_class(name, classes) for name in request_classes(request))


def _whole_device(count: int, devices: Iterable[SliceDevice] | None) -> int | None:
    """CPUs ``count`` devices of ``dra.cpu`` give a request that asks no capacity, as the cluster's slices say.
    In grouped mode the allocator fills an empty request with the device's whole capacity (``fillEmptyRequest``,
    k8s.io/dynamic-resource-allocation/structured/internal/incubating/consumable_capacity.go: the driver publishes
    no requestPolicy) and the driver pins that many CPUs; in individual mode a device is one CPU. Without the CPU
    driver's slices, or with groups of different sizes, not known (None): never counted as one CPU."""
    cpu_devices = [d for d in devices or () if d.driver == CPU_DRIVER]
    capacities = {d.cpu_capacity for d in cpu_devices}
    if not capacities or any(d.cpu_capacity_unread for d in cpu_devices):
        return None  # a group whose size cannot be read is not one CPU
    if capacities == {None}:
        return count  # individual mode everywhere
    if None in capacities or len(capacities) > 1:
        return None  # modes or group sizes differ between nodes: which one the scheduler picks is not known
    return count * next(c for c in capacities if c is not None)


def _cpus_of(exact: Mapping[str, Any], devices: Iterable[SliceDevice] | None = None) -> int | None:
    """CPUs the driver pins for one exact request: its ``dra.cpu/cpu`` capacity rounded up (``fractional`` in
    dra_cpu_not_mirrored), else a whole device's (``_whole_device``); None when it cannot be told (allocationMode
    All, a capacity not a positive quantity, no capacity asked and the slices not known)."""
    if exact.get("allocationMode") == "All":
        return None
    capacity = exact.get("capacity")
    requests = capacity.get("requests") if isinstance(capacity, Mapping) else None
    asked = requests.get(CPU_CAPACITY) if isinstance(requests, Mapping) else None
    count = exact.get("count", 1)
    count = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1
    if asked is None:
        return _whole_device(count, devices)
    try:
        q = parse_quantity(str(asked))
    except QuantityError:
        return None
    if q.milli <= 0:
        return None
    return count * q.ceil_units()


def request_base(name: str) -> str:
    """The request a ``resources.claims[].request`` (or an allocation result's request) names: ``req/sub`` (a
    ``firstAvailable`` sub-request) is ``req``."""
    return name.split("/", 1)[0]


def _asks_capacity(exact: Mapping[str, Any]) -> bool:
    """Does this exact request ask ``dra.cpu/cpu`` capacity (``capacity.requests``)?"""
    capacity = exact.get("capacity")
    asked = capacity.get("requests") if isinstance(capacity, Mapping) else None
    return isinstance(asked, Mapping) and CPU_CAPACITY in asked


def claim_requests(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The requests of a ResourceClaimSpec (``spec.devices.requests``), those that are mappings."""
    devices = spec.get("devices")
    raw = devices.get("requests") if isinstance(devices, Mapping) else None
    return [r for r in raw if isinstance(r, Mapping)] if isinstance(raw, list) else []


def claim_cpus(spec: Mapping[str, Any], devices: Iterable[SliceDevice] | None = None,
               requests: Iterable[str] | None = None, classes: Collection[str] = ()) -> int | None:
    """The CPUs a ResourceClaimSpec asks through ``dra.cpu`` (0: none; None: not known, e.g. a CPU request
    among ``firstAvailable`` alternatives, whose size the scheduler picks, or one that asks no capacity while the
    slices are not known). ``devices``: the cluster's slices; ``requests``: only these requests (a container's
    ``resources.claims[].request``: kubelet hands it only that request's devices; ``req/sub`` counts as ``req``);
    ``classes``: the DeviceClasses besides ``dra.cpu`` that select the CPU driver (``DraFacts.cpu_classes``)."""
    only = {request_base(r) for r in requests} if requests is not None else None
    total = 0
    for request in claim_requests(spec):
        if not cpu_request(request, classes) or (only is not None and request.get("name") not in only):
            continue
        exact = _exact(request)
        cpus = _cpus_of(exact, devices) if exact is not None else None
        if cpus is None:
            return None
        total += cpus
    return total


def unreadable_size(spec: Mapping[str, Any], devices: Iterable[SliceDevice] | None,
                    classes: Collection[str] = ()) -> str | None:
    """Why the CPUs of a claim that asks a whole ``dra.cpu`` device (no capacity) cannot be told because a CPU
    device's capacity is there but unreadable (``cpu_capacity_unread``); None when that is not the cause."""
    unread = [d for d in devices or () if d.driver == CPU_DRIVER and d.cpu_capacity_unread]
    if not unread:
        return None
    for request in claim_requests(spec):
        exact = exact_cpu_request(request, classes)
        if exact is not None and not _asks_capacity(exact):
            more = f" and {len(unread) - 1} more" if len(unread) > 1 else ""
            return (f"request {request.get('name')} asks no capacity, so a whole device, whose size cannot be read "
                    f"({unread[0].describe()}: {unread[0].cpu_capacity_unread}{more})")
    return None


def asks_capacity(spec: Mapping[str, Any], classes: Collection[str] = ()) -> bool:
    """Does a CPU request of the claim ask ``dra.cpu/cpu`` capacity (``capacity.requests``)?"""
    for request in claim_requests(spec):
        exact = exact_cpu_request(request, classes)
        if exact is not None and _asks_capacity(exact):
            return True
    return False


def grouped(spec: Mapping[str, Any], devices: Iterable[SliceDevice] | None = None,
            classes: Collection[str] = ()) -> bool:
    """Does a CPU request of the claim take a grouped-mode device: it asks ``dra.cpu/cpu`` capacity, or asks none
    where the slices publish only groups? With DRAConsumableCapacity off (1.34, 1.35) the API server drops
    ``capacity`` (pkg/api/resourceclaimspec/util.go) and the allocator records no ConsumedCapacity, so
    dra-driver-cpu v0.2.0 pins 0 CPUs for it (pkg/driver/dra_hooks.go: claimCPUCount stays 0)."""
    capacities = {d.cpu_capacity is not None or bool(d.cpu_capacity_unread)
                  for d in devices or () if d.driver == CPU_DRIVER}  # a device with capacity (read or not)
    for request in claim_requests(spec):
        exact = exact_cpu_request(request, classes)
        if exact is not None and (_asks_capacity(exact) or capacities == {True}):
            return True
    return False


def _claim_spec(obj: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    kind = obj.get("kind")
    spec = obj.get("spec")
    if kind == "ResourceClaimTemplate" and isinstance(spec, Mapping):
        spec = spec.get("spec")
    if kind not in ("ResourceClaim", "ResourceClaimTemplate") or not isinstance(spec, Mapping):
        return None
    api_version = obj.get("apiVersion")
    if isinstance(api_version, str) and not api_version.startswith("resource.k8s.io/"):
        return None
    return str(kind), spec


def dra_facts(objects: Iterable[Any], slices: bool = True, claims: bool = True,
              known_devices: Iterable[SliceDevice] | None = None, classes: Collection[str] = ()) -> DraFacts:
    """The index of the DRA objects among ``objects`` (ResourceSlices, ResourceClaims, ResourceClaimTemplates,
    DeviceClasses that select the CPU driver; the rest ignored). ``slices``/``claims``: whether those kinds were
    read at all (else None: not known); ``known_devices``: slices read apart, for the CPUs of a request that asks
    no capacity; ``classes``: CPU classes read apart (``cpu_class``)."""
    objects = [o for o in objects if isinstance(o, Mapping)]
    devices: list[SliceDevice] = [d for o in objects if o.get("kind") == SLICE_KIND for d in slice_devices(o)]
    found_classes = {c for o in objects if o.get("kind") == CLASS_KIND and (c := cpu_class(o)) is not None}
    cpu_classes = frozenset((*classes, *found_classes)) - {CPU_CLASS}
    resolving = [*devices, *(known_devices or ())]
    cpu_claims: dict[tuple[str, str], int | None] = {}
    specs: dict[tuple[str, str], Mapping[str, Any] | None] = {}
    seen: set[tuple[str, str]] = set()
    for obj in objects:
        if obj.get("kind") == SLICE_KIND:
            continue
        found = _claim_spec(obj)
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if found is None or not isinstance(name, str):
            continue
        key = (found[0], name)
        cpus = claim_cpus(found[1], resolving, classes=cpu_classes)
        if key in seen and cpu_claims.get(key) != cpus:
            cpu_claims[key] = None  # two namespaces, two answers: not known
        elif key not in seen:
            cpu_claims[key] = cpus
        if key in seen and specs.get(key) != found[1]:
            specs[key] = None
        elif key not in seen:
            specs[key] = found[1]
        seen.add(key)
    return DraFacts(tuple(devices) if slices else None,
                    MappingProxyType({k: v for k, v in cpu_claims.items()}) if claims else None,
                    claim_specs=MappingProxyType(specs) if claims else None, cpu_classes=cpu_classes)


UNKNOWN = "unknown: "  # how a finding that says the rule could not judge begins


def unknown_claims(facts: DraFacts | None, sources: Mapping[str, tuple[str, str]]) -> list[tuple[str, str]]:
    """The Pod's claims (``spec.resourceClaims`` name -> (kind, object name)) the facts cannot judge and why: those
    ``unknown_why`` names, for any caller; the others for callers that hold every claim (``claims_whole``) or know
    why they hold none (``claims_unknown``), nothing elsewhere (``check`` without the cluster: a claim not in its
    input says nothing, as before)."""
    if facts is None:
        return []
    said = [(name, f"{kind} {obj}: {facts.unknown_why[(kind, obj)]}") for name, (kind, obj) in sources.items()
            if (kind, obj) in facts.unknown_why]
    if facts.cpu_claims is None:
        return said + [(name, facts.claims_unknown) for name in sources if facts.claims_unknown]
    if not facts.claims_whole and not facts.claims_unknown:
        return said
    return said + [(name, f"{kind} {obj} not found" if facts.claims_whole
                    else f"{kind} {obj}: {facts.claims_unknown}")
                   for name, (kind, obj) in sources.items() if (kind, obj) not in facts.cpu_claims]


@dataclass(frozen=True, slots=True)
class Pinners:
    """Who pins CPUs on the nodes the facts know: ``static`` the nodes whose kubelet runs the static CPU Manager
    and publish no ``dra.cpu`` device, ``dra`` those whose CPUs the DRA driver publishes and whose CPU Manager is
    ``none``, ``both`` those with both; ``complete``: every node's CPU Manager policy was read."""

    static: tuple[str, ...]
    dra: tuple[str, ...]
    both: tuple[str, ...]
    complete: bool


def pinners(facts: DraFacts) -> Pinners | None:
    """Who pins where, or None when the slices or the kubelets were not read."""
    if facts.devices is None or facts.cpu_managers is None:
        return None
    driven = set(facts.nodes_of(CPU_DRIVER))
    static: list[str] = []
    dra: list[str] = []
    both: list[str] = []
    for node, policy in sorted(facts.cpu_managers.items()):
        if policy is None:
            continue
        if policy == "static":
            (both if node in driven else static).append(node)
        elif node in driven:
            dra.append(node)
    complete = facts.cpu_managers_whole and all(p is not None for p in facts.cpu_managers.values()) and \
        driven <= set(facts.cpu_managers)
    return Pinners(tuple(static), tuple(dra), tuple(both), complete)


def multi_valued(devices: Iterable[SliceDevice], attribute: str) -> tuple[SliceDevice, ...]:
    """The devices publishing ``attribute`` with more than one value."""
    return tuple(d for d in devices if attribute in d.lists and len(set(d.attributes[attribute])) > 1)
