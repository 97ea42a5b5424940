"""What kubelet allocated, as PodResources reports it: each container's exclusive CPUs, Memory Manager blocks,
device plugin devices and DRA devices, and what the node can hand out at all (``GetAllocatableResources``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    """One memory (or hugepages) block kubelet's Memory Manager gave a container, and its NUMA nodes."""

    kind: str
    size: int
    numa: frozenset[int]


@dataclass(frozen=True, slots=True)
class DeviceGroup:
    """Devices of one resource kubelet's device manager gave a container, with their NUMA nodes (as the
    device plugin reported them in ``TopologyInfo``; empty when it reported none)."""

    resource: str
    ids: tuple[str, ...]
    numa: frozenset[int]


@dataclass(frozen=True, slots=True)
class DraDevice:
    """One device a container got through DRA (PodResources ``dynamic_resources``), and its NUMA nodes as its
    ResourceSlice or sysfs says (``webhook/node/dra_locality.py``): empty when unknown, ``looked`` then saying what was
    looked for and why nothing answered (beside a known answer: the sources before it that gave nothing)."""

    driver: str
    pool: str
    device: str
    claim: str  # namespace/name of the ResourceClaim
    cdi: tuple[str, ...] = ()
    numa: frozenset[int] = frozenset()
    source: str = ""  # the attribute that answered: resource.kubernetes.io/numaNode, a driver's, pciBusID, pcieRoot
    path: str = ""  # the sysfs file read (pciBusID, pcieRoot)
    looked: str = ""
    admin: bool = False  # allocated with adminAccess (a monitoring Pod's): not the workload's, not judged
    request: str | None = None  # the claim's request it answers (its allocation result); None: not read

    @property
    def ref(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class ContainerAllocation:
    name: str
    cpus: frozenset[int]  # exclusive CPUs (kubelet's CPU Manager assignment); empty in the shared pool
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[DeviceGroup, ...] = ()
    dynamic: tuple[DraDevice, ...] = ()  # DRA devices


@dataclass(frozen=True, slots=True)
class PodAllocation:
    namespace: str
    name: str
    containers: tuple[ContainerAllocation, ...]


@dataclass(frozen=True, slots=True)
class Allocatable:
    """What kubelet can hand out exclusively (``GetAllocatableResources``): no CPU means no static CPU Manager."""

    cpus: frozenset[int]
    memory: tuple[MemoryBlock, ...] = ()
    devices: tuple[DeviceGroup, ...] = ()



def merged_devices(groups: tuple[DeviceGroup, ...]) -> tuple[DeviceGroup, ...]:
    """One group per device again: kubelet's PodResources lists a device attached to several NUMA nodes once per
    node (pkg/kubelet/cm/container_manager.go:303), and its Topology Manager counts it on any of them
    (devicemanager/topology_hints.go:179, ``mask.AnySet``), so its nodes belong together."""
    nodes: dict[tuple[str, tuple[str, ...]], frozenset[int]] = {}
    for g in groups:
        nodes[(g.resource, g.ids)] = nodes.get((g.resource, g.ids), frozenset()) | g.numa
    if len(nodes) == len(groups):
        return groups
    return tuple(DeviceGroup(resource, ids, numa) for (resource, ids), numa in nodes.items())
