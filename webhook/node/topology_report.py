"""The NodeResourceTopology object (``topology.node.k8s.io/v1alpha2``) the agent publishes for its node with
``--publish-topology``, built as NFD's topology-updater builds it (node-feature-discovery
``pkg/resourcemonitor/noderesourcesaggregator.go`` and ``pkg/nfd-topology-updater``, noderesourcetopology-api
v0.1.2), so that ``numa: auto``, ``qos-guard extender`` and scheduler-plugins' NodeResourceTopologyMatch read it as
they read NFD's. Pure: what kubelet and sysfs said comes in; the publisher (``topology_publisher.py``) asks.

Per NUMA node of the sysfs layout one zone ``node-N`` of type ``Node``:

- ``cpu``: allocatable = the CPUs of ``GetAllocatableResources`` on that node (the static CPU Manager's pool:
  every CPU but the reserved ones), capacity = allocatable + the node's other CPUs (reserved), available =
  allocatable - the CPUs ``List`` reports for containers on that node, each once (under PodLevelResourceManagers
  each container sharing a Pod's pool reports that pool);
- ``memory`` and ``hugepages-<size>``: allocatable = the Memory Manager's blocks of ``GetAllocatableResources``
  (none with ``memoryManagerPolicy: None``: then no zone has memory, as with NFD), capacity = the node's total
  (sysfs ``meminfo``, ``nr_hugepages``; the allocatable where unknown), available = allocatable - the blocks
  ``List`` reports, a block spanning NUMA nodes taken from the lowest-numbered first (as the Memory Manager fills
  them and NFD subtracts them);
- each device plugin resource: allocatable = capacity = its devices whose ``TopologyInfo`` names that node
  (a device without one is in no zone), available = allocatable - the devices ``List`` reports.

A NUMA node with nothing allocatable has a ``cpu`` entry of allocatable 0 and its CPUs as capacity. ``costs``
are the node's distances (sysfs ``distance``) where known. Where sysfs says every NUMA node's socket
(``sysfs.read_sockets``: the ``physical_package_id`` of its CPUs, kubelet's ``SocketID``), each ``Node`` zone has
``parent: socket-<id>`` and one zone ``socket-<id>`` of type ``Socket`` (no resources, after the ``Node`` zones)
stands for each socket, as v1alpha2's ``Zone.parent`` nests zones (NFD publishes none: readers that know only
``Node`` zones skip them); where any is unknown, neither. Each ``Node`` zone's attribute ``cpus`` is its CPU count
(sysfs ``cpulist``, the reserved CPUs included, as kubelet's CPU topology counts them): NFD lists no ``cpu`` in a
zone that has something else allocatable but no allocatable CPU, so without it a reader cannot tell a NUMA node
whose CPUs are all reserved (whose CPUs still count in kubelet's CPU hints: which masks exist, which are narrowest)
from one without CPUs. Attributes: ``topologyManagerPolicy`` and
``topologyManagerScope`` (left out when unknown: the node is then unknown to the fit, never guessed; the
deprecated ``topologyPolicies`` likewise) and ``nodeTopologyPodsFingerprint`` over every Pod ``List`` reports
(``webhook.extender.fingerprint``, NFD's ``computePodFingerprint``; from 1.34 kubelet's List reports only active
Pods, ``KubeletPodResourcesListUseActivePods``; on 1.33 the terminal Pods still bound too: signed as listed).
Quantities are written as client-go writes an integer ``resource.Quantity`` in ``DecimalSI``: ``2``, ``1500``,
``2G``, ``1073741824``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from webhook.core.numatopology import HUGEPAGES, NRT_GROUP_VERSION, SOCKET, ZONE_CPUS_ATTRIBUTE
from webhook.core.resourceblock import MEMORY
from webhook.extender.fingerprint import ATTRIBUTE, fingerprint
from webhook.node.allocation import Allocatable, PodAllocation
from webhook.node.sysfs import NodeFacts

KIND = "NodeResourceTopology"
# noderesourcetopology-api v1alpha2's TopologyManagerPolicy values, as NFD's DetectTopologyPolicy maps them.
_LEGACY = {("single-numa-node", "container"): "SingleNUMANodeContainerLevel",
           ("single-numa-node", "pod"): "SingleNUMANodePodLevel",
           ("restricted", "container"): "RestrictedContainerLevel", ("restricted", "pod"): "RestrictedPodLevel",
           ("best-effort", "container"): "BestEffortContainerLevel", ("best-effort", "pod"): "BestEffortPodLevel"}
_SUFFIXES = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"))


@dataclass(frozen=True, slots=True)
class Owner:
    """The Node the object belongs to: the garbage collector deletes the NRT with it."""

    name: str
    uid: str


def socket_zone(socket: int) -> str:
    """The name of a socket's zone, and of the parent of its NUMA nodes' zones (``numatopology.SOCKET_ZONE``)."""
    return f"socket-{socket}"


def decimal_quantity(value: int) -> str:
    """An integer as ``resource.NewQuantity(value, DecimalSI).String()``: trailing zeros folded into the largest
    SI suffix whose exponent is a multiple of 3 (``2000`` is ``2k``, ``1500`` stays ``1500``)."""
    if value == 0:
        return "0"
    sign, magnitude = ("-", -value) if value < 0 else ("", value)
    for exponent, suffix in _SUFFIXES:
        if magnitude % 10 ** exponent == 0:
            return f"{sign}{magnitude // 10 ** exponent}{suffix}"
    return f"{sign}{magnitude}"


def _take_memory(available: dict[int, dict[str, int]], kind: str, size: int, nodes: Sequence[int]) -> None:
    """A block's size off its NUMA nodes, lowest first, each down to 0 (NFD's ``updateMemoryAvailable``)."""
    for numa in nodes:
        if size <= 0:
            return
        free = available.get(numa, {}).get(kind)
        if free is None or free == 0:
            continue
        taken = min(free, size)
        available[numa][kind] = free - taken
        size -= taken


def build_topology(node: str, facts: NodeFacts, allocatable: Allocatable, pods: Sequence[PodAllocation],
                   policy: str | None, scope: str | None, owner: Owner | None = None) -> dict[str, Any]:
    """The NodeResourceTopology object for ``node`` (see the module docstring for each field)."""
    numa_of_cpu = {cpu: numa for numa, cpus in facts.cpus.items() for cpu in cpus}
    alloc: dict[int, dict[str, int]] = {}
    for cpu in allocatable.cpus:
        numa = numa_of_cpu.get(cpu)
        if numa is not None:  # a CPU no NUMA node lists is left out, as NFD leaves it out
            alloc.setdefault(numa, {}).setdefault("cpu", 0)
            alloc[numa]["cpu"] += 1
    device_numa: dict[tuple[str, str], int] = {}
    for group in allocatable.devices:
        for numa in sorted(group.numa):
            alloc.setdefault(numa, {}).setdefault(group.resource, 0)
            alloc[numa][group.resource] += len(group.ids)
        for device in group.ids:
            if group.numa:  # NFD's makeResourceMap keeps the last NUMA node a device names: one taken there
                device_numa[(group.resource, device)] = max(group.numa)
    for block in allocatable.memory:
        for numa in sorted(block.numa):
            alloc.setdefault(numa, {}).setdefault(block.kind, 0)
            alloc[numa][block.kind] += block.size
    available = {numa: dict(amounts) for numa, amounts in alloc.items()}
    # Each CPU taken once: under PodLevelResourceManagers every container of a Pod's shared pool reports that pool
    # as its cpu_ids (pkg/kubelet/cm/cpumanager/policy_static.go:498); exclusive CPUs are otherwise disjoint.
    for cpu in frozenset().union(*(c.cpus for pod in pods for c in pod.containers)):
        numa = numa_of_cpu.get(cpu)
        if numa is not None and "cpu" in available.get(numa, {}):
            available[numa]["cpu"] -= 1
    for pod in pods:
        for c in pod.containers:
            for group in c.devices:
                for device in group.ids:
                    numa = device_numa.get((group.resource, device))
                    if numa is not None and group.resource in available.get(numa, {}):
                        available[numa][group.resource] -= 1
            for block in c.memory:
                _take_memory(available, block.kind, block.size, sorted(block.numa))
    zones = []
    # every NUMA node's socket, or none (sysfs.read_sockets): a partial map is not published
    sockets = facts.sockets if set(facts.cpus) <= set(facts.sockets) else {}
    for numa in sorted(facts.cpus):
        resources: dict[str, tuple[int, int, int]] = {}  # name -> capacity, allocatable, available
        reserved = len(facts.cpus[numa]) - alloc.get(numa, {}).get("cpu", 0)
        if numa not in alloc:
            resources["cpu"] = (len(facts.cpus[numa]), 0, 0)
        for name, amount in alloc.get(numa, {}).items():
            if name == "cpu":
                capacity = amount + reserved
            elif name == MEMORY or name.startswith(HUGEPAGES):
                capacity = facts.memory.get(numa, {}).get(name, amount)
            else:
                capacity = amount
            resources[name] = (capacity, amount, max(0, available[numa][name]))
        zone: dict[str, Any] = {"name": f"node-{numa}", "type": "Node"}
        if sockets:
            zone["parent"] = socket_zone(sockets[numa])
        costs = facts.distances.get(numa)
        if costs:
            zone["costs"] = [{"name": f"node-{other}", "value": value} for other, value in sorted(costs.items())]
        zone["attributes"] = [{"name": ZONE_CPUS_ATTRIBUTE, "value": str(len(facts.cpus[numa]))}]
        zone["resources"] = [{"name": name, "capacity": decimal_quantity(cap), "allocatable": decimal_quantity(al),
                              "available": decimal_quantity(av)}
                             for name, (cap, al, av) in sorted(resources.items())]
        zones.append(zone)
    if sockets:
        zones += [{"name": socket_zone(socket), "type": SOCKET} for socket in sorted({sockets[n] for n in facts.cpus})]
    attributes = []
    legacy: list[str] = []
    if policy is not None and scope is not None:
        attributes += [{"name": "topologyManagerPolicy", "value": policy},
                       {"name": "topologyManagerScope", "value": scope}]
        legacy = [_LEGACY.get((policy, scope), "None")]
    if pods:  # NFD signs only a non-empty List
        attributes.append({"name": ATTRIBUTE, "value": fingerprint((p.namespace, p.name) for p in pods)})
    metadata: dict[str, Any] = {"name": node}
    if owner is not None:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": owner.name, "uid": owner.uid}]
    obj: dict[str, Any] = {"apiVersion": NRT_GROUP_VERSION, "kind": KIND, "metadata": metadata}
    if legacy:
        obj["topologyPolicies"] = legacy
    obj["zones"] = zones
    obj["attributes"] = attributes
    return obj
