"""The static CPU Manager's settings the agent publishes in its NodeResourceTopology, as the NUMA fit reads them
(``webhook.core.numatopology.parse_cpu_manager``): ``cpuManagerPolicyOptions`` (kubelet's configz), and from sysfs
and kubelet's own answer ``threadsPerCore`` and ``reservedCPUSiblings``.

- ``threadsPerCore`` is kubelet's ``CPUTopology.CPUsPerCore`` (pkg/kubelet/cm/cpumanager/topology): its CPUs over its
  physical cores, integer division. The cores are the distinct ``thread_siblings_list`` sets of the CPUs each NUMA
  node lists, read through the node's ``cpuN`` entries (``devices/system/node/nodeM/cpuN/topology``), the path
  cadvisor reads a CPU's ``core_id`` by for kubelet.
- ``reservedCPUSiblings`` is what full-pcpus-only keeps out besides the reserved CPUs (policy_static.go
  ``reservedPhysicalCPUs``: every CPU of a core that has a reserved one): the CPUs of those cores that are not
  reserved. The reserved CPUs are the node's CPUs that ``GetAllocatableResources`` does not list: kubelet's own set,
  ``reservedSystemCPUs`` when configured, else the ones its static policy picked for systemReserved + kubeReserved
  (which configz cannot say).

Anything not known leaves all three out (the fit then says the options are unknown, never guesses them): configz
not read, a CPU without ``thread_siblings_list``, or a CPU Manager other than ``static`` (kubelet refuses options
with ``none``, and hands out no exclusive CPUs, so no count of reserved siblings means anything there)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from webhook.core.numatopology import CPU_OPTIONS_ATTRIBUTE, SIBLINGS_ATTRIBUTE, THREADS_ATTRIBUTE
from webhook.node.cpulist import parse_list
from webhook.node.sysfs import SysfsError, read_text


@dataclass(frozen=True, slots=True)
class CPUManagerConfig:
    """kubelet's ``cpuManagerPolicy`` and ``cpuManagerPolicyOptions`` (as configz lists them, in its order)."""

    policy: str
    options: tuple[tuple[str, str], ...] = ()

    def text(self) -> str:
        """The options as kubelet's ``--cpu-manager-policy-options`` flag writes them (``a=true,b=false``)."""
        return ",".join(f"{k}={v}" for k, v in self.options)


class KubeletSettings(NamedTuple):
    """What the agent reads of its kubelet's configz: the Topology Manager's policy and scope, and the CPU Manager's
    settings (None: not read with them)."""

    policy: str
    scope: str
    cpu: CPUManagerConfig | None = None


def read_cores(sys_root: Path, cpus_by_node: Mapping[int, Iterable[int]]) -> tuple[frozenset[int], ...] | None:
    """The physical cores of the CPUs the NUMA nodes list (each a ``thread_siblings_list``), in order of their
    lowest CPU; None when a CPU has no such file (a tree without CPU topology: not known). A malformed file is a
    ``SysfsError`` naming it."""
    base = sys_root / "devices" / "system" / "node"
    cores: set[frozenset[int]] = set()
    for numa, cpus in sorted(cpus_by_node.items()):
        for cpu in sorted(cpus):
            path = base / f"node{numa}" / f"cpu{cpu}" / "topology" / "thread_siblings_list"
            if not path.exists():
                return None
            try:
                siblings = parse_list(read_text(path), "CPU list")
            except ValueError as exc:
                raise SysfsError(f"{path}: {exc}") from None
            if cpu not in siblings:
                raise SysfsError(f"{path}: CPU {cpu} is not among its own siblings ({read_text(path).strip()})")
            cores.add(siblings)
    return tuple(sorted(cores, key=min))


def cpu_manager_attributes(config: CPUManagerConfig | None, cores: tuple[frozenset[int], ...] | None,
                           cpus: frozenset[int], allocatable: frozenset[int]) -> list[dict[str, str]]:
    """The three NRT attributes, or none when any part is not known (see the module docstring). ``cpus``: every
    CPU the NUMA nodes list; ``allocatable``: those ``GetAllocatableResources`` lists (the rest are reserved)."""
    if config is None or cores is None or config.policy != "static" or not cores or not cpus:
        return []
    reserved = cpus - allocatable
    touched = frozenset().union(*(core for core in cores if core & reserved))
    siblings = len((touched & cpus) - reserved)
    return [{"name": CPU_OPTIONS_ATTRIBUTE, "value": config.text()},
            {"name": THREADS_ATTRIBUTE, "value": str(len(cpus) // len(cores))},
            {"name": SIBLINGS_ATTRIBUTE, "value": str(siblings)}]
