"""``policy.draObjects: true`` in the webhook: the cluster's ResourceClaims, ResourceClaimTemplates and
ResourceSlices (``resource.k8s.io/v1``), kept current by a list+watch each (the reflectors of
``webhook/cluster/watch.py``, published as the DeviceClass and operator-object caches are), so that a Pod is
judged at admission with the claims it names (``dra-cpu-not-mirrored``, ``dra-cpu-unpaired``) and the devices
the nodes publish (``dra-numa-list-match``, ``dra-cpu-pinner-mismatch``); ``webhook.cluster.dra_lists`` is the one-shot
read of ``check --kubeconfig`` and ``audit``, into the same claim stores (``claim_stores``) and ``DraSnapshot``.

Bounded memory: at most ``MAX_CLAIMS`` ResourceClaims, ``MAX_CLAIMS`` templates and ``MAX_SLICES`` slices are
kept, and of each only what the rules read: of a claim that names DeviceClasses, its requests and constraints
without their CEL selectors, of a slice its driver, node and one device per distinct set of locality attributes
(NUMA node, PCIe root), the others dropped. A claim made for a Pod (from its template, owned by the Pod) is not
kept: Pods name the template. The webhook projects a claim before its DeviceClasses are known (they come from
their own cache, ``policy.deviceClasses``), so a claim naming a class other than ``dra.cpu`` keeps its spec and
its CPUs are counted in each namespace's view with the classes then known (``dracpu_classes``): a class that
selects the CPU driver (``dracpu_objects.cpu_class``) is counted as ``check`` counts it, never as 0 CPUs;
``check --kubeconfig`` and ``audit`` read the DeviceClasses first and project with them (``claim_stores``), so
there a claim known to ask no CPUs is its name alone. Measured with tracemalloc, what a projection keeps once
the object is dropped (tests/unit/test_dra_objects_cache.py): about 2.4 KiB per claim of a GPU and a CPU request,
about 1.4 KiB per claim of one GPU request in the webhook (its name alone, under 0.2 KiB, where the classes are
known), about 1.6 KiB per slice of two NUMA nodes: about 125 MiB with every store at its bound, a few MiB for a
cluster of a thousand GPU nodes (the claims made for their Pods are not kept). (``dra-numa-list-match`` may count
fewer devices in its "and N more" than ``check``, which keeps every device.)

A claim kind is *whole* (a claim a Pod names that is absent does not exist) only while both claim lists have
succeeded, not been refused since, and no store is cut at its bound; otherwise the rules answer "unknown"
(``DraFacts.claims_unknown``), never "compliant".

The NodeResourceTopology objects are watched too, for the ``cpuPinner`` each node's agent publishes
(``webhook.core.cpupinner``: kept alone, per node): ``dra-cpu-pinner-mismatch`` then judges at admission a Pod
taking ``dra.cpu`` CPUs where a node also runs the static CPU Manager. Those objects name only the nodes whose
agent published, so a Pod asking the CPU Manager for exclusive CPUs is not judged here (``check``/``audit`` read
every kubelet's configz for that).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from webhook.cluster.cache import KindsCache, TellingReflector
from webhook.cluster.watch import Store, Transport
from webhook.core.claims import made_for_pod
from webhook.core.cpupinner import Pinner, read_pinner
from webhook.core.dra_requests import local_attribute
from webhook.core.dracpu import CPU_CLASS, DraFacts, SliceDevice, claim_cpus, cpu_request, slice_devices
from webhook.core.dracpu_classes import classes_named
from webhook.core.numatopology import NRT_PATH

GROUP_VERSION = "resource.k8s.io/v1"
JSON = ("application/json", "application/json")
GRANTED_BY = "the chart does with config.policy.draObjects: true"
MAX_CLAIMS = 20_000  # per claim kind (ResourceClaims, ResourceClaimTemplates)
MAX_SLICES = 20_000  # a node publishes one per driver and pool, usually
CLAIMS = "resourceclaims"
TEMPLATES = "resourceclaimtemplates"
SLICES = "resourceslices"
TOPOLOGIES = "noderesourcetopologies"
WATCHED: dict[str, tuple[str, str, int]] = {  # resource -> its kind, list path, bound
    CLAIMS: ("ResourceClaim", f"/apis/{GROUP_VERSION}/resourceclaims", MAX_CLAIMS),
    TEMPLATES: ("ResourceClaimTemplate", f"/apis/{GROUP_VERSION}/resourceclaimtemplates", MAX_CLAIMS),
    SLICES: ("ResourceSlice", f"/apis/{GROUP_VERSION}/resourceslices", MAX_SLICES),
    TOPOLOGIES: ("NodeResourceTopology", NRT_PATH, MAX_SLICES),
}
NOT_SYNCED = "the webhook's cache of ResourceClaims and ResourceClaimTemplates has not synced yet"
AMBIGUOUS = ("not known for an object of no namespace: the cluster's namespaces hold it with different specs, or "
             "not at all; set metadata.namespace to judge it with that namespace's claims")
MAX_VIEWS = 4096  # namespaces whose view a snapshot keeps made (a flood of namespaces empties it)

LOG = logging.getLogger("qos_guard.draobjects")


@dataclass(frozen=True, slots=True)
class KeptClaim:
    """What is kept of a claim or template: its namespace, kind, name, the CPUs it asks through ``dra.cpu``
    (0: none; None: not known) and, when it asks some, its spec reduced to what the rules read."""

    namespace: str
    kind: str
    name: str
    cpus: int | None
    spec: Mapping[str, Any] | None


# What a view holds of a claim: the CPUs it asks (None: not known) and its reduced spec (None: not kept).
Told = tuple[int | None, Mapping[str, Any] | None]


def _without_selectors(request: Any) -> Any:
    if not isinstance(request, Mapping):
        return request
    kept = {k: v for k, v in request.items() if k != "selectors"}
    for key in ("exactly",):
        if isinstance(kept.get(key), Mapping):
            kept[key] = {k: v for k, v in kept[key].items() if k != "selectors"}
    if isinstance(kept.get("firstAvailable"), list):
        kept["firstAvailable"] = [_without_selectors(a) for a in kept["firstAvailable"]]
    return kept


def keep_claim(kind: str, classes: frozenset[str] | None = None) -> Callable[[Mapping[str, Any]], KeptClaim | None]:
    """The projection of a ``kind`` object (None: not kept, a claim made for a Pod); ``classes``: DeviceClasses
    besides ``dra.cpu`` known to select the CPU driver (``check --kubeconfig``/``audit`` read them first); None:
    not known when projecting (the webhook's cache: its DeviceClasses come apart, ``policy.deviceClasses``), so a
    claim naming a class other than ``dra.cpu`` keeps its reduced spec and its CPUs are told per view
    (``DraSnapshot``, ``dracpu_classes.with_cpu_classes``): never 0 for a class that selects the CPU driver."""
    known = frozenset() if classes is None else classes

    def keep(obj: Mapping[str, Any]) -> KeptClaim | None:
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        namespace, name = meta.get("namespace"), meta.get("name")
        if made_for_pod(obj) or not isinstance(namespace, str) or not isinstance(name, str):
            return None
        spec = obj.get("spec")
        if kind == "ResourceClaimTemplate" and isinstance(spec, Mapping):
            spec = spec.get("spec")
        if not isinstance(spec, Mapping):
            return KeptClaim(namespace, kind, name, 0, None)
        devices = spec.get("devices")
        requests = devices.get("requests") if isinstance(devices, Mapping) else None
        requests = requests if isinstance(requests, list) else []
        others = classes is None and bool(classes_named(requests) - {CPU_CLASS})
        if not others and not any(isinstance(r, Mapping) and cpu_request(r, known) for r in requests):
            return KeptClaim(namespace, kind, name, 0, None)
        constraints = devices.get("constraints") if isinstance(devices, Mapping) else None
        reduced = {"devices": {"requests": [_without_selectors(r) for r in requests],
                               "constraints": constraints if isinstance(constraints, list) else []}}
        cpus = None if others else claim_cpus(spec, classes=known)
        return KeptClaim(namespace, kind, name, cpus, MappingProxyType(reduced))
    return keep


def _read(name: str) -> bool:
    """An attribute a DRA rule reads: a locality one (NUMA node, PCIe root) or the CPU driver's numaNodeID."""
    return local_attribute(name) or name.endswith(("/numaNode", "/numaNodeID"))


def keep_pinner(obj: Mapping[str, Any]) -> Pinner | None:
    """Of a NodeResourceTopology object only the ``cpuPinner`` its agent published (None: none, not kept)."""
    return read_pinner(obj)


def keep_slice(obj: Mapping[str, Any]) -> tuple[SliceDevice, ...]:
    """A slice's devices with only the attributes the rules read, one device per distinct set of them (the
    first's name kept): a slice of 128 CPUs in individual mode is kept as one device per NUMA node."""
    kept: dict[tuple[Any, ...], SliceDevice] = {}
    for device in slice_devices(obj):
        attributes = {k: v for k, v in device.attributes.items() if _read(k)}
        lists = frozenset(k for k in device.lists if k in attributes)
        key = (device.driver, device.node, tuple(sorted(attributes.items())), lists, device.cpu_capacity,
               device.cpu_capacity_unread)
        if key not in kept:
            kept[key] = SliceDevice(device.driver, device.node, device.name, MappingProxyType(attributes), lists,
                                    device.cpu_capacity, device.cpu_capacity_unread)
    return tuple(kept.values())


@dataclass
class DraSnapshot:
    """One published state: the devices (None: slices not read), the claims by namespace (None: not known, with
    ``problem``), and whether they are whole. ``for_namespace`` is what a request in that namespace judges with
    (the same object for the same namespace while the snapshot lasts, so the app's memo holds)."""

    devices: tuple[SliceDevice, ...] | None
    claims: Mapping[str, Mapping[tuple[str, str], KeptClaim]] | None
    whole: bool
    problem: str | None
    # Each node's CPU Manager policy as its agent's cpuPinner implies it (None: the NRT objects not read).
    cpu_managers: Mapping[str, str | None] | None = None
    # ``cpu_managers`` names every node (``check``/``audit`` read each kubelet's configz); the webhook's, from the
    # agents' NRT ``cpuPinner``, names only the nodes whose agent published.
    cpu_managers_whole: bool = False
    # DeviceClasses besides ``dra.cpu`` that select the CPU driver, as the claims were projected with them.
    cpu_classes: frozenset[str] = frozenset()
    _views: dict[str, DraFacts] = field(default_factory=dict, init=False, repr=False)
    _anywhere: list[DraFacts] = field(default_factory=list, init=False, repr=False)

    def for_namespace(self, namespace: str | None) -> DraFacts:
        ns = namespace or ""
        view = self._views.get(ns)
        if view is None:
            if len(self._views) >= MAX_VIEWS:
                self._views.clear()
            self._views[ns] = view = self._make(ns)
        return view

    def anywhere(self) -> DraFacts:
        """What an object that names no namespace judges with (a manifest ``check --kubeconfig`` reads, to be
        applied wherever): every namespace's claims by kind and name. Whole as the snapshot is (a name no namespace
        holds is in none of them), unless two namespaces hold one name differently: that one is left out and said
        unknown (``AMBIGUOUS``)."""
        if not self._anywhere:
            self._anywhere.append(self._make(None))
        return self._anywhere[0]

    def _make(self, namespace: str | None) -> DraFacts:
        if self.claims is None:
            return DraFacts(self.devices, None, self.cpu_managers, claims_unknown=self.problem,
                            cpu_managers_whole=self.cpu_managers_whole, cpu_classes=self.cpu_classes)
        told = {k: self._told(c) for k, c in self.claims.get(namespace, {}).items()} \
            if namespace is not None else self._across()
        cpus = {k: t[0] for k, t in told.items() if t is not None}
        specs = {k: t[1] for k, t in told.items() if t is not None and t[1] is not None}
        ambiguous = [k for k, t in told.items() if t is None]  # not in the view: unknown_claims says why
        whole = self.whole and not ambiguous
        return DraFacts(self.devices, MappingProxyType(cpus), self.cpu_managers,
                        claim_specs=MappingProxyType(specs),
                        claims_whole=whole, claims_unknown=None if whole else self.problem or AMBIGUOUS,
                        cpu_managers_whole=self.cpu_managers_whole, specs_stored=True,
                        cpu_classes=self.cpu_classes)

    def _told(self, kept: KeptClaim) -> Told:
        """The CPUs a kept claim asks and its spec: counted at projection, or here with the slices (a request asking
        no capacity takes a whole device) and the snapshot's CPU classes (the webhook's cache projects without)."""
        if kept.cpus is not None or kept.spec is None:
            return kept.cpus, kept.spec
        return claim_cpus(kept.spec, self.devices, classes=self.cpu_classes), kept.spec

    def _across(self) -> dict[tuple[str, str], Told | None]:
        """Every namespace's claims by kind and name; None where two namespaces hold one differently, unless both
        ask no CPUs (its spec is then not needed: left out, the CPUs kept)."""
        found: dict[tuple[str, str], Told | None] = {}
        for mine in (self.claims or {}).values():
            for key, kept in mine.items():
                told = self._told(kept)
                if key not in found:
                    found[key] = told
                elif (other := found[key]) is not None and other != told:
                    found[key] = (0, None) if other[0] == told[0] == 0 else None
        return found


def claims_of(stores: Mapping[str, Store]) -> dict[str, dict[tuple[str, str], KeptClaim]]:
    """The kept claims and templates of ``stores`` (``CLAIMS``, ``TEMPLATES``) by namespace: what a snapshot holds,
    from the webhook's watched stores or from one list of each (``webhook.cluster.dra_lists.read_dra``)."""
    claims: dict[str, dict[tuple[str, str], KeptClaim]] = {}
    for resource in (CLAIMS, TEMPLATES):
        for kept in stores[resource].snapshot().values():
            claims.setdefault(kept.namespace, {})[(kept.kind, kept.name)] = kept
    return claims


def claim_stores(classes: frozenset[str] | None = None) -> dict[str, Store]:
    """The stores of claims and templates, each of its projection (``keep_claim``, with the CPU ``classes``; None:
    not known when projecting, the webhook's) and bound (``MAX_CLAIMS``)."""
    return {CLAIMS: Store(keep_claim("ResourceClaim", classes), limit=MAX_CLAIMS),
            TEMPLATES: Store(keep_claim("ResourceClaimTemplate", classes), limit=MAX_CLAIMS)}


def _not_served(name: str) -> str:
    if name == TOPOLOGIES:
        return (f"{name} are not served (their CRD is not installed): who pins each node's CPUs is not "
                "known (dra-cpu-pinner-mismatch says nothing)")
    return f"{name} ({GROUP_VERSION}) are not served: the cluster has no DRA v1 API (1.34 or later)"


class DraCache(KindsCache):
    """The watched kinds, current within ``PUBLISH_EVERY`` of the API server; ``snapshot()`` is the
    ``DraSnapshot`` requests judge with."""

    def __init__(self, transport: Transport,
                 on_problem: Callable[[dict[str, str | None]], None] | None = None) -> None:
        super().__init__("qos-guard-draobjects", WATCHED, on_problem)
        self.stores: dict[str, Store] = {
            **claim_stores(),
            SLICES: Store(keep_slice, limit=MAX_SLICES),
            TOPOLOGIES: Store(keep_pinner, limit=MAX_SLICES)}
        self._snapshot = DraSnapshot(None, None, False, NOT_SYNCED)
        self.reflectors = tuple(TellingReflector(self.refused.add, _not_served, GRANTED_BY, resource, transport, path,
                                                 JSON, self.stores[resource], self.changed, self._stop)
                                for resource, (_, path, _) in WATCHED.items())

    def snapshot(self) -> DraSnapshot:
        return self._snapshot

    def _readable(self, resource: str) -> bool:
        return self.stores[resource].listed and resource not in self.refused

    def _claims_problem(self) -> str | None:
        for resource in (CLAIMS, TEMPLATES):
            kind = WATCHED[resource][0]
            if resource in self.refused:
                return f"{kind}s cannot be read: {self.problems[resource]}"
            if not self.stores[resource].listed:
                return NOT_SYNCED
            if self.stores[resource].truncated:
                return (f"the webhook's cache holds at most {self.stores[resource].limit} {kind}s and the cluster "
                        "has more")
        return None

    def publish(self) -> DraSnapshot:
        devices: tuple[SliceDevice, ...] | None = None
        if self._readable(SLICES) and not self.stores[SLICES].truncated:
            devices = tuple(d for kept in self.stores[SLICES].snapshot().values() for d in kept)
        problem = self._claims_problem()
        claims: dict[str, dict[tuple[str, str], KeptClaim]] | None = None
        if all(self._readable(r) for r in (CLAIMS, TEMPLATES)):
            claims = claims_of(self.stores)
        managers: dict[str, str | None] | None = None
        if self._readable(TOPOLOGIES) and not self.stores[TOPOLOGIES].truncated:
            managers = {name: p.cpu_manager_policy for name, p in self.stores[TOPOLOGIES].snapshot().items()}
        self._snapshot = snapshot = DraSnapshot(devices, claims, problem is None, problem,
                                                None if managers is None else MappingProxyType(managers))
        self.tell()
        return snapshot


def log_problem(problems: dict[str, str | None]) -> None:
    """The cache's state, in the log once per change."""
    LOG.warning(json.dumps({"draObjects": {r: p or "current" for r, p in problems.items()}}))


__all__ = ["MAX_CLAIMS", "MAX_SLICES", "WATCHED", "DraCache", "DraSnapshot", "KeptClaim", "claim_stores",
           "claims_of", "keep_claim", "keep_slice", "log_problem"]
