"""The words of a container's verdict: where its CPUs, memory blocks and devices sit (``CPUs 1 on NUMA 0,
...``), its devices whose NUMA node is unknown and what was looked for, and why a DRA device off the CPUs'
NUMA node is not aligned (kubelet's Topology Manager aligns none of them)."""

from __future__ import annotations

from collections.abc import Iterable

from webhook.core.quantity import format_bytes
from webhook.node.allocation import ContainerAllocation, DeviceGroup, DraDevice, MemoryBlock
from webhook.node.cpulist import format_list
from webhook.node.podinfo import ContainerSpec

DRA_REASON = "kubelet's Topology Manager does not align devices allocated through DRA"
# A container whose CPUs the DRA CPU driver pinned: the claim decided both sides, nothing on the node aligns them.
DRA_CPU_REASON = "its claim's CPUs and devices were allocated without a matchAttribute keeping them on one NUMA node"
DRA_CPU_WAY_OUT = ("add constraints: [{matchAttribute: dra.net/numaNode}] over every request of the claim (an "
                   "attribute both drivers publish; qos-guard check: dra-cpu-unpaired)")
DRA_WAY_OUT = ("serve this device with its device plugin on pinned nodes (the Topology Manager aligns those), or keep "
               "a claim's devices together with a matchAttribute constraint on resource.kubernetes.io/numaNode and "
               "verify with qos-guard agent")


def nodes_text(nodes: frozenset[int]) -> str:
    """NUMA nodes as a CPU list, ``none`` when there are none."""
    return format_list(nodes) if nodes else "none"


def device_parts(devices: Iterable[DeviceGroup], dra: Iterable[DraDevice]) -> list[str]:
    """Each device plugin group and DRA device with its NUMA node (``unknown`` when it could not be found)."""
    return [f"{d.resource} {','.join(d.ids)} on NUMA {nodes_text(d.numa) if d.numa else 'unknown'}" for d in devices] \
        + [dra_text(x) for x in dra]


def where_text(cpus: frozenset[int], cpu_numa: frozenset[int], memory: Iterable[MemoryBlock],
               devices: Iterable[DeviceGroup], dra: Iterable[DraDevice]) -> str:
    """Where a pinned container's CPUs, memory blocks and devices are, as its verdict's detail begins."""
    parts = [f"CPUs {format_list(cpus)} on NUMA {nodes_text(cpu_numa)}"]
    parts += [f"{m.kind} {format_bytes(m.size)} on NUMA {nodes_text(m.numa)}" for m in memory]
    return ", ".join(parts + device_parts(devices, dra))


def dra_text(x: DraDevice) -> str:
    """``DRA gpu.example.com/pool/gpu-0 (claim ns/c) on NUMA 0`` (``unknown`` when it could not be found); a
    device given with adminAccess is a monitoring Pod's view of a device another Pod may use: not judged."""
    if x.admin:
        return f"DRA {x.ref} (claim {x.claim}) with monitoring access (adminAccess): no alignment needed"
    return f"DRA {x.ref} (claim {x.claim}) on NUMA {nodes_text(x.numa) if x.numa else 'unknown'}"


def unknown_devices(alloc: ContainerAllocation, spec: ContainerSpec | None = None) -> tuple[str, ...]:
    """Each device of ``alloc`` whose NUMA node is not known, and what was looked for: a device plugin's device
    without ``TopologyInfo``, a DRA device whose slice and sysfs did not say, or DRA claims the spec gives the
    container of which PodResources reported no device (so nothing can be looked up)."""
    found = [f"{d.resource} {','.join(d.ids)}: the device plugin reported no TopologyInfo (NUMA node) for it"
             for d in alloc.devices if not d.numa]
    found += [f"DRA device {x.ref} (claim {x.claim}): {x.looked or 'no NUMA node found'}"
              for x in alloc.dynamic if not x.numa and not x.admin]
    if spec is not None and spec.claims and not alloc.dynamic:
        found.append(f"the DRA devices of {', '.join(spec.claims)}: the Pod gives them to this container, yet "
                     "kubelet's PodResources reported no DRA device for it (is kubelet's "
                     "KubeletPodResourcesDynamicResources feature gate off?)")
    return tuple(found)



def dra_misaligned(alloc: ContainerAllocation, cpu_nodes: frozenset[int]) -> str:
    """Why, when a DRA device sits off the CPUs' NUMA nodes: kubelet never aligned it, and the way out."""
    off = [x for x in alloc.dynamic if x.numa and not x.admin and not x.numa <= cpu_nodes]
    if not off:
        return ""
    named = "; ".join(f"DRA device {x.ref} (claim {x.claim}) on NUMA {nodes_text(x.numa)}"
                      f"{f' (from {x.source})' if x.source else ''}" for x in off)
    return f": {named}, the CPUs on NUMA {nodes_text(cpu_nodes)}: {DRA_REASON}; {DRA_WAY_OUT}"
