"""Where a device allocated through Dynamic Resource Allocation sits: its NUMA node, found from the
ResourceSlice that publishes it and, for PCI devices, from sysfs.

Kubelet's Topology Manager has no hint provider for DRA (v1.36.3: the device manager, the CPU Manager and the
Memory Manager only), and PodResources reports a DRA device as driver/pool/device with no topology: so the
agent and ``verify`` look the device up in the ResourceSlices of their node and read, in this order (the first
that answers wins; what each gave is kept, so an unknown answer says everything that was looked at):

1. ``resource.kubernetes.io/numaNode`` (KEP-6072): ``int``, or (``DRAListTypeAttributes``, 1.37) ``ints``, the
   device's own node first, then the nodes of its socket equally near: the device sits on the first;
2. the driver attribute names configured (``--dra-numa-attribute``; default ``DEFAULT_DRIVER_ATTRIBUTES``: those
   of dranet and the SR-IOV driver, AMD's, the memory driver's, NVIDIA's VFIO devices', then the bare
   ``numaNode`` of the driver's own domain). An attribute name without a domain, in a slice or configured,
   belongs to the driver's domain (its name);
3. ``resource.kubernetes.io/pciBusID`` (``deviceattribute.StandardDeviceAttributePCIBusID``, extended BDF
   ``0000:3b:00.0``) -> ``SYS/bus/pci/devices/<BDF>/numa_node``;
4. ``resource.kubernetes.io/pcieRoot`` (``StandardDeviceAttributePCIeRoot``, ``pci<domain>:<bus>``) ->
   ``SYS/devices/<root>/numa_node``, else the ``numa_node`` of the devices on that root bus
   (``SYS/devices/<root>/<domain>:<bus>:<dev>.<fn>/numa_node``) when they all agree.

The devices looked up are this node's as the v1 API places them: a slice's ``spec.nodeName``, each device's
``nodeName`` under ``perDeviceNodeSelection``, and devices given to ``allNodes`` or by a ``nodeSelector`` (not of
one node); of each pool only its newest ``pool.generation`` (an older one is out-dated, set aside).

A ``numa_node`` of -1 is the kernel saying it knows no node: unknown, as is a bad value (a string where an int
belongs, a negative node, a malformed BDF). Resolution is pure given the slices and a ``Locality`` reader;
``webhook.node.sysfs.SysfsLocality`` is that reader over a sysfs root (``/sys``, or the agent's hostPath mount,
or a test's tree).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from webhook.node.allocation import DraDevice
from webhook.node.cpulist import MAX_ID
from webhook.node.sysfs import BDF, PCIE_ROOT_NAME, Answer

NUMA_NODE = "resource.kubernetes.io/numaNode"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
# The drivers' own numaNode names, found in their code: dranet and the SR-IOV DRA driver (dra.net/numaNode), AMD's
# (numaNode in its domain), the memory driver (dra.memory/numaNode), NVIDIA's for VFIO devices only (numa); then
# numaNode in any driver's own domain.
DEFAULT_DRIVER_ATTRIBUTES = ("dra.net/numaNode", "gpu.amd.com/numaNode", "dra.memory/numaNode", "gpu.nvidia.com/numa",
                             "numaNode")
ALL_NODES, NODE_SELECTOR = "allNodes", "nodeSelector"  # a device not of one node: how the slice gives it
SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"
MAX_DEVICES_PER_SLICE = 128  # resource.k8s.io/v1 ResourceSliceMaxDevices
MAX_ATTRIBUTES = 48  # per device (ResourceSliceMaxAttributeValues); more is not a valid slice

_TEXT = 64  # longest attribute value shown in a message


def qualified(name: str, driver: str) -> str:
    """An attribute name as the API qualifies it: without a domain it is the driver's (``numaNode`` of
    ``gpu.amd.com`` is ``gpu.amd.com/numaNode``)."""
    return name if "/" in name else f"{driver}/{name}"


# --- ResourceSlices: what is kept of them, and the index of this node's devices ---

def _access(spec: Mapping[str, Any]) -> str:
    """How a slice (or, under ``perDeviceNodeSelection``, a device) that names no node gives its devices."""
    if spec.get("allNodes") is True:
        return ALL_NODES
    return NODE_SELECTOR if isinstance(spec.get("nodeSelector"), Mapping) else ""


def slice_kept(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """A ResourceSlice as the agent keeps it: driver, pool (name, generation), node, and each device's name and
    attributes (names qualified); ``None`` for an object that is not a readable slice. A slice that names no
    node keeps how it gives its devices (``access``: allNodes, nodeSelector); one with ``perDeviceNodeSelection``
    (``perDevice``) keeps each device's ``nodeName`` or ``access`` (resource.k8s.io/v1: exactly one is set)."""
    spec = obj.get("spec")
    meta = obj.get("metadata")
    if not isinstance(spec, Mapping) or not isinstance(meta, Mapping):
        return None
    driver, pool = spec.get("driver"), spec.get("pool")
    if not isinstance(driver, str) or not driver or not isinstance(pool, Mapping):
        return None
    generation = pool.get("generation")
    per_device = spec.get("perDeviceNodeSelection") is True
    devices: list[dict[str, Any]] = []
    for d in (spec.get("devices") or [])[:MAX_DEVICES_PER_SLICE] if isinstance(spec.get("devices"), list) else []:
        if not isinstance(d, Mapping) or not isinstance(d.get("name"), str):
            continue
        attrs = d.get("attributes")
        kept = {qualified(str(k), driver): v for k, v in list(attrs.items())[:MAX_ATTRIBUTES]
                if isinstance(v, Mapping)} if isinstance(attrs, Mapping) else {}
        device: dict[str, Any] = {"name": d["name"], "attributes": kept}
        if per_device:
            own = d.get("nodeName")
            device["nodeName"], device["access"] = (own if isinstance(own, str) else ""), _access(d)
        devices.append(device)
    node = spec.get("nodeName")
    found = {"name": str(meta.get("name", "")), "driver": driver, "pool": str(pool.get("name", "")),
             "generation": generation if isinstance(generation, int) else 0,
             "nodeName": node if isinstance(node, str) else "", "devices": devices}
    if per_device:
        found["perDevice"] = True
    elif not found["nodeName"] and _access(spec):
        found["access"] = _access(spec)
    return found


def kept_for(node: str) -> Callable[[Mapping[str, Any]], dict[str, Any] | None]:
    """``slice_kept`` for the slices that name no node (``spec.nodeName=``, every node's agent watches them): of
    a ``perDeviceNodeSelection`` slice only the devices of ``node`` or of no one node; None when none is left."""
    def keep(obj: Mapping[str, Any]) -> dict[str, Any] | None:
        kept = slice_kept(obj)
        if kept is not None and kept.get("perDevice"):
            kept["devices"] = [d for d in kept["devices"] if d["nodeName"] == node or (not d["nodeName"] and
                                                                                       d["access"])]
        return kept if kept is not None and kept["devices"] else None
    return keep


@dataclass(frozen=True, slots=True)
class Published:
    """One device as a ResourceSlice publishes it."""

    slice: str
    node: str  # "" for a device not of one node (``access`` says how the slice gives it)
    attributes: Mapping[str, Any]
    access: str = ""


@dataclass(frozen=True, slots=True)
class SliceIndex:
    """The devices of a node's ResourceSlices, by (driver, pool, device); ``problem``: why the slices could not
    be read (every DRA device is then unknown, with that reason)."""

    devices: Mapping[tuple[str, str, str], tuple[Published, ...]]
    node: str | None
    problem: str | None = None
    # devices published only by slices of an older pool generation: (slice, its generation, the pool's newest)
    outdated: Mapping[tuple[str, str, str], tuple[str, int, int]] = field(default_factory=dict)

    @classmethod
    def build(cls, slices: Iterable[Mapping[str, Any]], node: str | None, problem: str | None = None) -> SliceIndex:
        """From kept slices (``slice_kept``), the devices of ``node`` (of any node when ``node`` is None): those of
        its node-local slices, those of ``perDeviceNodeSelection`` slices whose ``nodeName`` is it, and those
        given to all nodes or by a node selector (not of one node). Of each pool (driver, pool name) only the
        slices of the newest generation count, as the scheduler's allocator reads them (``GatherPools``: an older
        generation is out-dated and set aside)."""
        def mine(name: str) -> bool:
            return bool(name) and (node is None or name == node)

        placed: list[tuple[Mapping[str, Any], Mapping[str, Any], str, str]] = []  # slice, device, node, access
        for s in slices:
            if not s:
                continue
            for d in s["devices"]:
                if s.get("perDevice"):
                    where, access = str(d.get("nodeName", "")), str(d.get("access", ""))
                else:
                    where, access = s["nodeName"], str(s.get("access", ""))
                if mine(where) or (not where and access):
                    placed.append((s, d, where, access))
        newest: dict[tuple[str, str], int] = {}
        for s, _, _, _ in placed:
            pool = (s["driver"], s["pool"])
            newest[pool] = max(newest.get(pool, s["generation"]), s["generation"])
        devices: dict[tuple[str, str, str], list[Published]] = {}
        outdated: dict[tuple[str, str, str], tuple[str, int, int]] = {}
        for s, d, where, access in placed:
            key, top = (s["driver"], s["pool"], d["name"]), newest[(s["driver"], s["pool"])]
            if s["generation"] != top:
                outdated[key] = (s["name"], s["generation"], top)
                continue
            devices.setdefault(key, []).append(Published(s["name"], where, d["attributes"], access))
        return cls({k: tuple(v) for k, v in devices.items()}, node, problem,
                   {k: v for k, v in outdated.items() if k not in devices})


# --- ResourceClaims: which devices were given with adminAccess ---

def claim_path(claim: str) -> str:
    """The API path of ``namespace/name``'s ResourceClaim."""
    namespace, _, name = claim.partition("/")
    return f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"


def admin_devices(claim: Any) -> frozenset[tuple[str, str, str]]:
    """The (driver, pool, device) a claim's allocation gives with ``adminAccess``
    (``status.allocation.devices.results[].adminAccess``, resource.k8s.io/v1): a monitoring Pod's access to a
    device that may be in use by others, not a device of its workload."""
    status = claim.get("status") if isinstance(claim, Mapping) else None
    allocation = status.get("allocation") if isinstance(status, Mapping) else None
    devices = allocation.get("devices") if isinstance(allocation, Mapping) else None
    results = devices.get("results") if isinstance(devices, Mapping) else None
    return frozenset((str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
                     for r in (results if isinstance(results, list) else [])[:256]
                     if isinstance(r, Mapping) and r.get("adminAccess") is True)


def device_requests(claim: Any) -> dict[tuple[str, str, str], str]:
    """The request each (driver, pool, device) of a claim's allocation answers
    (``status.allocation.devices.results[].request``): kubelet hands a container that names requests
    (``resources.claims[].request``) only their devices, yet PodResources lists every device of the claim."""
    status = claim.get("status") if isinstance(claim, Mapping) else None
    allocation = status.get("allocation") if isinstance(status, Mapping) else None
    devices = allocation.get("devices") if isinstance(allocation, Mapping) else None
    results = devices.get("results") if isinstance(devices, Mapping) else None
    return {(str(r.get("driver")), str(r.get("pool")), str(r.get("device"))): r["request"]
            for r in (results if isinstance(results, list) else [])[:256]
            if isinstance(r, Mapping) and isinstance(r.get("request"), str)}


def mark_requests(devices: Iterable[DraDevice], requests: Callable[[str], Mapping[tuple[str, str, str], str]]
                  ) -> tuple[DraDevice, ...]:
    """``devices`` with ``request`` set from their claim's allocation (``requests(claim)``; left None where the
    claim could not be read)."""
    found: dict[str, Mapping[tuple[str, str, str], str]] = {}
    marked = []
    for d in devices:
        if d.claim not in found:
            found[d.claim] = requests(d.claim)
        request = found[d.claim].get((d.driver, d.pool, d.device))
        marked.append(replace(d, request=request) if request is not None else d)
    return tuple(marked)


def mark_admin(devices: Iterable[DraDevice], admin: Callable[[str], frozenset[tuple[str, str, str]]]
               ) -> tuple[DraDevice, ...]:
    """``devices`` with ``admin`` set on those their claim gives with adminAccess (``admin(claim)``: its set)."""
    found: dict[str, frozenset[tuple[str, str, str]]] = {}
    marked = []
    for d in devices:
        if d.claim not in found:
            found[d.claim] = admin(d.claim)
        marked.append(replace(d, admin=True) if (d.driver, d.pool, d.device) in found[d.claim] else d)
    return tuple(marked)


# --- where the kernel puts a PCI device: read by ``webhook.node.sysfs.SysfsLocality`` ---

class Locality(Protocol):
    """Where the kernel puts a PCI device or a PCIe root (``sysfs.SysfsLocality``; a test may hand in its own)."""

    def pci_device(self, bdf: str) -> Answer: ...

    def pcie_root(self, root: str) -> Answer: ...


# --- resolution ---

def _value(value: Mapping[str, Any]) -> str:
    """An attribute value as the API writes it, for a message: ``{"string": "0"}`` -> ``string "0"``."""
    for kind in ("int", "ints", "string", "bool", "version", "strings", "bools", "versions"):
        if kind in value:
            shown = repr(value[kind]) if isinstance(value[kind], str) else str(value[kind])
            return f"{kind} {shown[:_TEXT]}"
    return "no value"


def numa_value(value: Mapping[str, Any]) -> tuple[frozenset[int], str]:
    """The NUMA nodes a numaNode attribute gives, or (empty) why it gives none."""
    ints: list[Any]
    if "int" in value:
        ints = [value["int"]]
    elif isinstance(value.get("ints"), list) and value["ints"]:
        ints = list(value["ints"])
    else:
        return frozenset(), f"is {_value(value)}, not an int"
    for n in ints:
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_ID:
            return frozenset(), f"is {_value(value)}, not a NUMA node (0-{MAX_ID})"
    # The list form (DRAListTypeAttributes, 1.37): the device's own node first, then the nodes of its socket
    # equally near it (deviceattribute.ListAttribute, k8s.io/dynamic-resource-allocation v0.37): it sits on the
    # first only.
    return frozenset(ints[:1]), ""


def _string(value: Mapping[str, Any], pattern: re.Pattern[str], form: str) -> tuple[str | None, str]:
    text = value.get("string")
    if not isinstance(text, str):
        return None, f"is {_value(value)}, not a string"
    if not pattern.fullmatch(text):
        return None, f"is {text[:_TEXT]!r}, not {form}"
    return text, ""


def numa_attributes(driver: str, configured: Sequence[str]) -> list[str]:
    """The numaNode attribute names read for ``driver``'s devices, in order, each once."""
    names: list[str] = []
    for name in (NUMA_NODE, *configured):
        full = qualified(name, driver)
        if full not in names:
            names.append(full)
    return names


def resolve(device: DraDevice, index: SliceIndex, locality: Locality,
            configured: Sequence[str] = DEFAULT_DRIVER_ATTRIBUTES) -> DraDevice:
    """``device`` with its NUMA nodes and where they were found (``source``, ``path``), or with ``looked``
    saying what was looked for and why none answered."""
    names = numa_attributes(device.driver, configured)
    wanted = ", ".join([*names, PCI_BUS_ID, PCIE_ROOT])
    if index.problem is not None:
        return replace(device, numa=frozenset(), looked=f"the ResourceSlices could not be read ({index.problem})")
    if not device.device:
        return replace(device, numa=frozenset(), looked="PodResources names no device (an allocation that is not "
                       "a device)")
    where = f"node {index.node}" if index.node else "any node"
    key = (device.driver, device.pool, device.device)
    found = index.devices.get(key, ())
    if not found and key in index.outdated:
        name, generation, newest = index.outdated[key]
        return replace(device, numa=frozenset(), looked=f"only ResourceSlice {name} publishes device {device.device} "
                       f"in pool {device.pool} of driver {device.driver}, of pool generation {generation}: the "
                       f"pool's newest is {newest}, so it is out-dated and set aside, as the scheduler does (the "
                       "driver is republishing the pool)")
    if not found:
        return replace(device, numa=frozenset(), looked=f"no ResourceSlice of {where} publishes device "
                       f"{device.device} in pool {device.pool} of driver {device.driver} (read: slices with "
                       "spec.nodeName, devices[].nodeName of perDeviceNodeSelection slices, and devices given to "
                       f"allNodes or by a nodeSelector; looked for {wanted})")
    nodes = sorted({p.node for p in found if p.node})
    if len(nodes) > 1:
        return replace(device, numa=frozenset(), looked=f"ResourceSlices of several nodes ({', '.join(nodes[:4])}) "
                       "publish it: pass --node to say which is this one")
    published = found[0]
    attrs = published.attributes
    tried: list[str] = []
    for name in names:
        if name in attrs:
            numa, why = numa_value(attrs[name])
            if numa:
                return replace(device, numa=numa, source=name, path="", looked="; ".join(tried))
            tried.append(f"{name} {why}")
    lookups = ((PCI_BUS_ID, BDF, "a PCI address in extended BDF form (0000:3b:00.0)", locality.pci_device),
               (PCIE_ROOT, PCIE_ROOT_NAME, "a PCIe root pci<domain>:<bus> (pci0000:00)", locality.pcie_root))
    for name, pattern, form, lookup in lookups:  # the sysfs numa_node of the device, else of its root
        if name not in attrs:
            continue
        value, why = _string(attrs[name], pattern, form)
        if value is not None:
            answer = lookup(value)
            if answer.numa:
                return replace(device, numa=answer.numa, source=name, path=answer.where, looked="; ".join(tried))
            why = f"{value}: {answer.where} {answer.why}"
        tried.append(f"{name} {why}")
    if not tried:
        tried.append("none of them is set")
    shared = f" (it gives the device {published.access}, not to this node alone)" if published.access else ""
    return replace(device, numa=frozenset(), looked=f"ResourceSlice {published.slice}{shared}: looked for {wanted}: "
                   + "; ".join(tried))


def resolve_all(devices: Iterable[DraDevice], index: SliceIndex, locality: Locality,
                configured: Sequence[str] = DEFAULT_DRIVER_ATTRIBUTES) -> tuple[DraDevice, ...]:
    return tuple(resolve(d, index, locality, configured) for d in devices)


def check_attribute_names(names: Sequence[str]) -> str | None:
    """Why a configured attribute name is not one (a qualified name is ``domain/name``, C identifier after the
    slash, at most 32 characters, a DNS subdomain before it), or None."""
    for name in names:
        domain, slash, ident = name.rpartition("/")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,31}", ident) or (slash and not re.fullmatch(
                r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?", domain)):
            return (f"{name!r} is not a device attribute name (NAME or DOMAIN/NAME, NAME a C identifier of at "
                    "most 32 characters)")
    return None
