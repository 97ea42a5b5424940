"""Who pins a node's CPUs, as the node agent publishes it in its NodeResourceTopology object (``--publish-topology``)
and as ``qos-guard nodes``, ``check --kubeconfig`` and ``audit`` read it back where their own sources (each
kubelet's configz, the ResourceSlices) cannot be read. Pure: the agent hands what it read, the readers the
object's attributes.

Two NRT attributes, beside NFD's ``topologyManagerPolicy``/``Scope`` and the CPU Manager options others publish:

- ``cpuPinner``: ``cpu-manager`` (kubelet's static CPU Manager, no ``dra.cpu`` device on the node), ``dra.cpu``
  (the node's ResourceSlices publish ``dra.cpu`` devices and kubelet's CPU Manager is ``none``),
  ``cpu-manager+dra.cpu`` (both: they fight, ``cpu-pinners-conflict``) or ``none`` (nobody pins);
- ``cpuPinnerSource``: what the agent read to say it (``configz+resourceslices``).

The agent publishes them only when it read both its kubelet's configz and its node's ResourceSlices: unknown is
left out (never ``none``), and a reader then says it does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PINNER_ATTRIBUTE = "cpuPinner"
SOURCE_ATTRIBUTE = "cpuPinnerSource"
CPU_MANAGER = "cpu-manager"
DRA_CPU = "dra.cpu"  # the driver's name (webhook.core.dracpu.CPU_DRIVER)
BOTH = f"{CPU_MANAGER}+{DRA_CPU}"
NOBODY = "none"
VALUES = (CPU_MANAGER, DRA_CPU, BOTH, NOBODY)
AGENT_SOURCE = "configz+resourceslices"


@dataclass(frozen=True, slots=True)
class Pinner:
    """A node's pinner as published: ``value`` one of ``VALUES``, ``source`` what the publisher read."""

    value: str
    source: str

    @property
    def static(self) -> bool:
        return self.value in (CPU_MANAGER, BOTH)

    @property
    def dra(self) -> bool:
        return self.value in (DRA_CPU, BOTH)

    @property
    def cpu_manager_policy(self) -> str:
        """The kubelet's policy this implies, as ``DraFacts.cpu_managers`` holds it (static or none)."""
        return "static" if self.static else "none"


def decide(cpu_manager_policy: str | None, dra_devices: bool | None) -> str | None:
    """The ``cpuPinner`` value from kubelet's ``cpuManagerPolicy`` and whether the node's ResourceSlices publish
    ``dra.cpu`` devices; None when either is not known."""
    if cpu_manager_policy is None or dra_devices is None:
        return None
    static = cpu_manager_policy.lower() == "static"
    if static and dra_devices:
        return BOTH
    if static:
        return CPU_MANAGER
    return DRA_CPU if dra_devices else NOBODY


def pinner_attributes(cpu_manager_policy: str | None, dra_devices: bool | None) -> list[dict[str, str]]:
    """The NRT attributes to publish: both, or none when the pinner is not known."""
    value = decide(cpu_manager_policy, dra_devices)
    if value is None:
        return []
    return [{"name": PINNER_ATTRIBUTE, "value": value}, {"name": SOURCE_ATTRIBUTE, "value": AGENT_SOURCE}]


def read_pinner(obj: Mapping[str, Any]) -> Pinner | None:
    """The pinner a NodeResourceTopology object publishes; None when it publishes none, a value not known, or
    two different ones (the NUMA fit drops CPUs on a ``none`` node: a guess there would change verdicts)."""
    raw = obj.get("attributes")
    named = [a for a in raw if isinstance(a, Mapping) and isinstance(a.get("name"), str)] \
        if isinstance(raw, list) else []
    values = {v if isinstance(v := a.get("value"), str) else None for a in named if a["name"] == PINNER_ATTRIBUTE}
    attrs = {a["name"]: a.get("value") for a in named}
    value, source = attrs.get(PINNER_ATTRIBUTE), attrs.get(SOURCE_ATTRIBUTE)
    if len(values) != 1 or value not in VALUES:
        return None
    return Pinner(str(value), source if isinstance(source, str) and source else "unknown")


__all__ = ["AGENT_SOURCE", "BOTH", "CPU_MANAGER", "DRA_CPU", "NOBODY", "PINNER_ATTRIBUTE", "SOURCE_ATTRIBUTE",
           "VALUES", "Pinner", "decide", "pinner_attributes", "read_pinner"]
