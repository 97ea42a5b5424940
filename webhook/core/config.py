"""The configuration (docs/contract.md#configuration): one declarative schema, strict validation, errors that
name the key.

``SCHEMA`` is the one place a key, its type, default, choices and help are written: ``parse_config``, the
admission policies' parameters, the chart's ``values.schema.json`` and the configuration table of
docs/contract.md are all derived from it (``hack/generate.py`` writes the last two; tests check them).
Validated once at start-up; an unknown key or a bad value is a ``ConfigError`` and the program stops with exit
code 2 rather than run with a policy nobody wrote. Reading the file is ``webhook.manifests.configfile``'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.core.settings import Amount, Amounts, Choice, ConfigError, Count, Flag, Names, Section, Setting

# The keys, each written once. Their dotted names are their place in SCHEMA below.
FRACTIONAL = Setting("fractionalCPUContainers", Names(), frozenset(),
                     "containers (by name) whose cpu may be fractional; they still need requests == limits")
POD_LEVEL = Setting("podLevelResources", Choice(("deny", "allow")), "deny",
                    "allow: permit pod-level cpu/memory in spec.resources (kubelet's CPU and Memory Managers then "
                    "skip the Pod unless nodes enable PodLevelResourceManagers)")
SMT = Setting("smtAlignment", Count(1), 1,
              "above 1 turns on smt-misaligned: cpu must be a multiple of it (kubelet's full-pcpus-only)")
DRA = Setting("dra", Choice(("warn", "deny", "off")), "warn",
              "dra-unaligned and dra-claim-spread: warn (a warning, a notice in check and audit), deny (refuse), or "
              "off. A Pod with exclusive CPUs and DRA devices runs with them on any NUMA nodes: kubelet's Topology "
              "Manager has no DRA hint provider")
DEVICE_CLASSES = Setting("deviceClasses", Flag(), False,
                         "true: read the cluster's DeviceClasses (needs list/watch on deviceclasses.resource.k8s.io) "
                         "so that extended resources a DeviceClass maps to DRA (spec.extendedResourceName) count as "
                         "DRA devices for dra-unaligned and numa: auto; the webhook and the CLI only", param=False)
NUMA_SCOPE = Setting("scope", Choice(("container", "pod")), "container",
                     "what must fit in one NUMA node: each container, or the whole Pod (the Topology Manager's "
                     "scope)", param=False)
NUMA_CPUS = Setting("cpus", Amount(), None, "CPUs of one NUMA node", param=False)
NUMA_MEMORY = Setting("memory", Amount(), None, "memory of one NUMA node", param=False)
NUMA_DEVICES = Setting("devices", Amounts(), {}, "devices of one NUMA node (e.g. nvidia.com/gpu: 4)", param=False)
SET_LIMITS = Setting("setLimitsFromRequests", Flag(), True,
                     "mutate mode and fix set a missing limit from its request")
CPU_ROUNDING = Setting("cpuRounding", Choice(("none", "up")), "none",
                       "up: mutate mode and fix round a fractional cpu up to whole CPUs")
NAMESPACES = Setting("namespaces", Names(), frozenset(), "namespaces never judged")
USERNAMES = Setting("usernames", Names(), frozenset(),
                    "requesting users never judged (as the API server names them)")
RUNTIME_CLASSES = Setting("runtimeClassNames", Names(), frozenset(),
                          "Pods with one of these runtimeClassName are never judged (e.g. VM-isolated kata)")


@dataclass(frozen=True)
class NumaPolicy:
    """One NUMA node's capacity, in milli-units, and whether containers or whole Pods must fit in it."""

    scope: str = NUMA_SCOPE.default
    cpus: int | None = None
    memory: int | None = None
    devices: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class AutoNuma:
    """``policy.numa: auto``: each node's NUMA zones, Topology Manager policy and scope come from its
    NodeResourceTopology object. Only the choice is configured: what the cluster published is a fact
    (``webhook.core.facts.Facts.topology``), handed to the judgement by its caller; without it numa-unfit says
    nothing."""

    def __repr__(self) -> str:
        return "auto"


AUTO = AutoNuma()


@dataclass(frozen=True)
class Policy:
    fractional_cpu_containers: frozenset[str] = FRACTIONAL.default
    pod_level_resources: str = POD_LEVEL.default
    smt_alignment: int = SMT.default
    numa: NumaPolicy | AutoNuma | None = None
    dra: str = DRA.default
    device_classes: bool = DEVICE_CLASSES.default


@dataclass(frozen=True)
class MutationPolicy:
    set_limits_from_requests: bool = SET_LIMITS.default
    cpu_rounding: str = CPU_ROUNDING.default


@dataclass(frozen=True)
class Exemptions:
    """As Pod Security Admission: by namespace, requesting user or runtimeClassName, never per-Pod annotation."""

    namespaces: frozenset[str] = NAMESPACES.default
    usernames: frozenset[str] = USERNAMES.default
    runtime_class_names: frozenset[str] = RUNTIME_CLASSES.default


@dataclass(frozen=True)
class Config:
    policy: Policy = field(default_factory=Policy)
    mutation: MutationPolicy = field(default_factory=MutationPolicy)
    exemptions: Exemptions = field(default_factory=Exemptions)

    @property
    def numa_auto(self) -> bool:
        return isinstance(self.policy.numa, AutoNuma)


NUMA = Section("numa", NumaPolicy, (NUMA_SCOPE, NUMA_CPUS, NUMA_MEMORY, NUMA_DEVICES),
               help="the capacity of one NUMA node, or auto: each node's own NUMA zones, Topology Manager policy "
                    "and scope from its NodeResourceTopology object (needs list/watch on nodes and "
                    "noderesourcetopologies); set, it turns on numa-unfit (the webhook and the CLI only: "
                    "admission policies cannot sum a Pod's requests or read the cluster)",
               nullable=True, require_any=("cpus", "memory", "devices"), literal="auto", literal_value=AUTO)
SCHEMA = Section("", Config, (
    Section("policy", Policy, (FRACTIONAL, POD_LEVEL, SMT, NUMA, DRA, DEVICE_CLASSES)),
    Section("mutation", MutationPolicy, (SET_LIMITS, CPU_ROUNDING)),
    Section("exemptions", Exemptions, (NAMESPACES, USERNAMES, RUNTIME_CLASSES)),
))


def parse_config(raw: Any) -> Config:
    """Validate a decoded YAML document; ``None`` (an empty file) is the default configuration."""
    config: Config = SCHEMA.parse(raw)
    return config


__all__ = ["AUTO", "SCHEMA", "AutoNuma", "Config", "ConfigError", "Exemptions", "MutationPolicy", "NumaPolicy",
           "Policy", "parse_config"]
