"""What a Pod asks kubelet's resource managers to align on one NUMA node: per container (``container`` scope)
and for the whole Pod (``pod`` scope), as pkg/kubelet/cm reads a Pod (v1.36): CPUs only for Guaranteed Pods'
whole-CPU containers, memory and hugepages only for Guaranteed Pods, device plugin resources always. Pure; the
placement on a node's zones is ``webhook.core.numa``'s."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from webhook.core.config import Policy
from webhook.core.dra_requests import DeviceClasses, DraUse, dra_resources
from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.numatopology import HUGEPAGES
from webhook.core.podspec import GUARANTEED, PodSpec
from webhook.core.qos import qos_class
from webhook.core.quantity import format_bytes
from webhook.core.resourceblock import CPU, MEMORY, Container


@dataclass(frozen=True, slots=True)
class Demand:
    """What kubelet's resource managers align for one container, or for the Pod in ``pod`` scope.

    ``cpus`` are exclusive CPUs (whole); ``memory`` is bytes by type (memory, hugepages-*), Guaranteed Pods
    only; ``devices`` are device counts by resource, from limits.
    """

    label: str
    path: FieldPath
    container: str | None
    kind: str  # "init", "sidecar", "app" or "pod"
    cpus: int = 0
    memory: Mapping[str, int] = field(default_factory=dict)
    devices: Mapping[str, int] = field(default_factory=dict)

    def show(self, only: Iterable[str] | None = None) -> str:
        wanted = set(only) if only is not None else None
        parts = []
        for name, amount in self.items():
            if wanted is None or name in wanted:
                parts.append(show_amount(name, amount))
        return " and ".join(parts)

    def items(self) -> list[tuple[str, int]]:
        """Everything asked, in base units (CPUs, bytes, devices)."""
        out: list[tuple[str, int]] = [(CPU, self.cpus)] if self.cpus else []
        out += sorted(self.memory.items(), key=lambda kv: (kv[0] != MEMORY, kv[0]))
        out += sorted(self.devices.items())
        return out


def show_amount(name: str, amount: int) -> str:
    if name == CPU:
        return f"{amount} CPU" + ("" if amount == 1 else "s")
    if name == MEMORY or name.startswith(HUGEPAGES):
        return f"{format_bytes(amount)} {name}"
    return f"{amount} {name}"


def _units(milli: int) -> int:
    """``Quantity.Value()``: rounded up to a whole unit."""
    return -(-milli // 1000)


@lru_cache(maxsize=1024)
def is_device(name: str) -> bool:
    """A device plugin's resource (not CPU, memory, hugepages or storage). Remembered per name: reading a
    fleet's topologies for the scheduler extender asks it of every resource of every zone."""
    return name not in (CPU, MEMORY, "ephemeral-storage", "storage") and not name.startswith(HUGEPAGES)


def _guaranteed(pod: PodSpec) -> bool:
    """``GetPodQOS``: the stored ``status.qosClass`` (kept from the manifest on create) or the computed one."""
    return (pod.declared_qos or qos_class(pod)) == GUARANTEED


def may_align(pod: PodSpec) -> bool:
    """Could kubelet align anything for this Pod? Cheap checks first: a device, or every container limiting cpu
    and memory (Guaranteed needs that) without a pod-level block (the managers skip those); the QoS class last."""
    if any(is_device(k) for c in pod.all_containers for k in c.devices):
        return True
    if pod.pod_level_set:  # the CPU and Memory Managers skip it
        return False
    if pod.declared_qos is None and (pod.pod_level_decides or not all(
            (cpu := c.resources.limits.get(CPU)) is not None and cpu.positive
            and (mem := c.resources.limits.get(MEMORY)) is not None and mem.positive for c in pod.all_containers)):
        return False
    return _guaranteed(pod)


def dra_use(pod: PodSpec, classes: DeviceClasses | None) -> DraUse:
    """The devices the Pod takes through DRA: its claims, and the extended resources DRA serves it (``classes``:
    the cluster's DeviceClasses, None when not known). Kubelet aligns none of them (``webhook.core.dra_requests``).
    Where DRA serves no extended resource (before 1.36, ``Semantics.dra_extended_resources``) only the claims."""
    asked = [(name, (*c.resources.path, "limits", name)) for c in pod.all_containers for name in c.devices
             if is_device(name)] if pod.kube.dra_extended_resources else []
    resources, paths = dra_resources(asked, classes)
    return DraUse(pod.resource_claims, pod.claims_path, resources, paths)


def dra_judged(policy: Policy) -> bool:
    """Whether ``policy.dra`` asks the DRA rules (``dra-unaligned``, ``dra-claim-spread``) at all (not ``off``)."""
    return policy.dra != "off"


def dra_advisory(policy: Policy) -> bool:
    """Whether a DRA rule's finding is advice (``warn``), not a refusal (``deny``)."""
    return policy.dra != "deny"


def _container_demand(c: Container, guaranteed: bool, pod_level: bool) -> Demand:
    """``guaranteedCPUs``, ``getContainerRequestedResources`` and ``getContainerDeviceRequest``."""
    kind = "sidecar" if c.sidecar else ("init" if c.init else "app")
    cpus = 0
    memory: dict[str, int] = {}
    if guaranteed and not pod_level:  # the CPU and Memory Managers skip Pods with pod-level resources
        cpu = c.resources.requests.get(CPU)
        if cpu is not None and cpu.positive and cpu.milli % 1000 == 0:
            cpus = cpu.milli // 1000
        mem = c.resources.requests.get(MEMORY)
        if mem is not None and not mem.invalid:
            memory[MEMORY] = mem.milli  # bytes x 1000 for now; whole bytes checked by the caller
        memory.update({k: v for k, v in c.devices.items() if k.startswith(HUGEPAGES)})
    devices = {k: _units(v) for k, v in c.devices.items() if is_device(k)}
    return Demand(c.resources.label, c.path, c.name, kind, cpus, memory, devices)


def _whole_bytes(memory: Mapping[str, int]) -> dict[str, int] | None:
    """Milli-bytes to bytes; ``None`` when one is fractional (``Quantity.AsInt64`` fails: the Memory
    Manager then refuses the container)."""
    out = {}
    for k, v in memory.items():
        if v % 1000:
            return None
        out[k] = v // 1000
    return out


@dataclass(frozen=True, slots=True)
class Demands:
    """The Pod's containers in kubelet's admission order (init containers first), and the Pod's total
    (``podGuaranteedCPUs``, ``getPodRequestedResources``, ``getPodDeviceRequest``) for ``pod`` scope."""

    containers: tuple[Demand, ...]
    pod: Demand
    fractional_memory: tuple[str, ...] = ()
    # A zero request of a device plugin's resource still needs a NUMA node with its devices (the minor's
    # ``Semantics.zero_device_request_aligned``); else it constrains nothing.
    zero_devices_aligned: bool = True

    @property
    def key(self) -> tuple[Any, ...]:
        """Equal for Pods that ask the same, container by container (and name them alike)."""
        each = [(d.label, d.kind, d.cpus, tuple(sorted(d.memory.items())), tuple(sorted(d.devices.items())))
                for d in (*self.containers, self.pod)]
        return (self.fractional_memory, self.zero_devices_aligned, *each)

    def without_cpus(self) -> Demands:
        """What kubelet aligns for this Pod on a node whose CPU Manager is ``none`` (no CPU hints, no exclusive
        CPUs: pkg/kubelet/cm/cpumanager/policy_none.go): its memory and devices only."""
        return replace(self, containers=tuple(replace(d, cpus=0) for d in self.containers),
                       pod=replace(self.pod, cpus=0))

    @property
    def aligned(self) -> bool:
        """Does kubelet align anything for this Pod (exclusive CPUs, memory of a Guaranteed Pod, devices)?"""
        return bool(self.fractional_memory) or any(d.cpus or d.memory or d.devices for d in self.containers)


def demands(pod: PodSpec, guaranteed: bool | None = None) -> Demands:
    guaranteed = _guaranteed(pod) if guaranteed is None else guaranteed
    pod_level = pod.pod_level_set
    ordered = [_container_demand(c, guaranteed, pod_level) for c in pod.init_containers + pod.containers]
    fractional = tuple(d.label for d in ordered if _whole_bytes(d.memory) is None)
    ordered = [Demand(d.label, d.path, d.container, d.kind, d.cpus, _whole_bytes(d.memory) or {}, d.devices)
               for d in ordered]
    inits = [d for d in ordered if d.kind in ("init", "sidecar")]
    apps = [d for d in ordered if d.kind == "app"]

    # podGuaranteedCPUs / getPodRequestedResources: max(init peaks with the sidecars before them, apps +
    # sidecars); up to 1.37 memory types count only when an app container asks them, from 1.38 every container's
    # (``Semantics.pod_memory_hint_all_containers``).
    def total(get: Any, keys: Iterable[str]) -> dict[str, int]:
        out = {}
        for key in keys:
            init_peak = sidecars = 0
            for d in inits:
                value = get(d, key)
                if d.kind == "sidecar":
                    sidecars += value
                else:
                    init_peak = max(init_peak, sidecars + value)
            out[key] = max(init_peak, sum(get(d, key) for d in apps) + sidecars)
        return out

    cpus = total(lambda d, _k: d.cpus, [CPU])[CPU]
    mem_types = {k for d in (ordered if pod.kube.pod_memory_hint_all_containers else apps) for k in d.memory}
    memory = total(lambda d, k: d.memory.get(k, 0), sorted(mem_types))
    dev_types = {k for d in ordered for k in d.devices}
    devices = total(lambda d, k: d.devices.get(k, 0), sorted(dev_types))
    whole = Demand(f"pod ({dotted(pod.path)})", pod.path, None, "pod", cpus, memory, devices)
    return Demands(tuple(ordered), whole, fractional, pod.kube.zero_device_request_aligned)
