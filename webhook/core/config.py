"""The configuration (docs/contract.md#configuration): one declarative schema, strict validation, errors that
name the key.

``SCHEMA`` is the one place a key, its type, default, choices and help are written: ``parse_config``, the
admission policies' parameters, the chart's ``values.schema.json`` and the configuration table of
docs/contract.md are all derived from it (``hack/generate.py`` writes the last two; tests check them).
Validated once at start-up; an unknown key or a bad value is a ``ConfigError`` and the program stops with exit
code 2 rather than run with a policy nobody wrote. Reading the file is ``webhook.manifests.configfile``'s job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from webhook.core.claims import CLAIM_GROUP, CLAIM_KINDS
from webhook.core.kubeversion import DEFAULT as DEFAULT_KUBE
from webhook.core.kubeversion import SUPPORTED, Semantics, VersionError, resolve
from webhook.core.operators import KSERVE_NAMESPACE
from webhook.core.settings import (
    Amount,
    Amounts,
    Choice,
    ConfigError,
    Count,
    Flag,
    Kind,
    Label,
    Name,
    Names,
    Section,
    Setting,
)
from webhook.core.workloads import KINDS, PathError, Template
from webhook.core.workloads import Kind as Workload

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_KIND_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_VERSION = re.compile(r"^v[0-9]+((alpha|beta)[0-9]+)?$")


@dataclass(frozen=True)
class Workloads(Kind):
    """Kinds the configuration declares (``workloads``): a list of ``{group, version, kind, plural,
    templates}``, each template a path (``spec.groups[*].template.spec``) or ``{path, name}``. A built-in kind
    cannot be declared again; a kind whose CRD the cluster does not serve costs nothing. One kind may be declared
    at several versions (one entry each): it is one kind with those versions, judged by all their templates."""

    FIELDS = ("group", "version", "kind", "plural", "templates")

    def parse(self, raw: Any, key: str) -> tuple[Workload, ...]:
        if not isinstance(raw, list):
            raise ConfigError(f"{key}: expected a list of {{group, version, kind, plural, templates}}")
        out: dict[tuple[str, str], Workload] = {}
        for i, item in enumerate(raw):
            where = f"{key}[{i}]"
            kind = self._one(item, where)
            if kind.kind in CLAIM_KINDS:
                # the engine judges a Target of this name as DRA's claim (dra-claim-spread), not as pod templates
                raise ConfigError(f"{where}.kind: {kind.kind} is DRA's claim kind ({CLAIM_GROUP}), judged whole "
                                  "by dra-claim-spread, and no declared kind (in any group) may take its name; rename "
                                  "or remove it")
            if kind.key in KINDS:
                raise ConfigError(f"{where}: {kind.kind} of {kind.group or 'the core group'} is built in "
                                  "(docs/contract.md#kinds); remove it")
            before = out.get(kind.key)
            out[kind.key] = kind if before is None else self._another_version(before, kind, where)
        return tuple(out.values())

    @staticmethod
    def _another_version(before: Workload, kind: Workload, where: str) -> Workload:
        """The same kind at another API version (a CRD serves several at once): one kind with both versions.
        A kind is matched by its group and kind, never its version, so every version is judged by one list of
        templates (the paths of each entry, in order) and one plural (a CRD has one)."""
        (version,) = kind.versions
        if version in before.versions:
            raise ConfigError(f"{where}: {kind.kind} of {kind.group} is declared twice at {version}")
        if kind.plural != before.plural:
            raise ConfigError(f"{where}.plural: {kind.plural!r}, but {kind.kind} of {kind.group} is declared with "
                              f"plural {before.plural!r} at {', '.join(before.versions)}; a CRD has one plural for "
                              "all its versions")
        names = {t.path: t.name for t in before.templates}
        for t in kind.templates:
            if t.path in names and names[t.path] != t.name:
                raise ConfigError(f"{where}.templates: {t.path} is named {t.name!r} here and {names[t.path]!r} at "
                                  f"{', '.join(before.versions)}; one template has one name in every version")
        added = tuple(t for t in kind.templates if t.path not in names)
        return replace(before, versions=(*before.versions, version), templates=(*before.templates, *added))

    def _one(self, item: Any, where: str) -> Workload:
        if not isinstance(item, Mapping):
            raise ConfigError(f"{where}: expected a mapping with {', '.join(self.FIELDS)}")
        for name in item:
            if name not in self.FIELDS:
                raise ConfigError(f"{where}.{name}: unknown key (known: {', '.join(self.FIELDS)})")
        for name in self.FIELDS:
            if item.get(name) in (None, "", []):
                raise ConfigError(f"{where}.{name}: required")
        checks = (("group", _DNS_NAME, "a DNS name with a dot, as a CRD's spec.group (example.com)"),
                  ("version", _VERSION, "a Kubernetes API version (v1, v1beta2)"),
                  ("kind", _KIND_NAME, "a CamelCase kind (InferencePool)"),
                  ("plural", _DNS_LABEL, "the lowercase plural the API serves (inferencepools)"))
        for name, pattern, what in checks:
            value = item[name]
            if not isinstance(value, str) or not pattern.match(value) or (name == "group" and "." not in value):
                raise ConfigError(f"{where}.{name}: {value!r} is not {what}")
        paths = item["templates"]
        if not isinstance(paths, list):
            raise ConfigError(f"{where}.templates: expected a list of paths (spec.template.spec)")
        templates = []
        for j, raw in enumerate(paths):
            at = f"{where}.templates[{j}]"
            path, name = (raw, None) if isinstance(raw, str) else (
                (raw.get("path"), raw.get("name")) if isinstance(raw, Mapping) else (None, None))
            if isinstance(raw, Mapping) and set(raw) - {"path", "name"}:
                raise ConfigError(f"{at}: unknown key {sorted(set(raw) - {'path', 'name'})[0]!r} (known: name, "
                                  "path)")
            if name is not None and (not isinstance(name, str) or not name):
                raise ConfigError(f"{at}.name: expected a non-empty string")
            try:
                templates.append(Template(path, name))  # type: ignore[arg-type]
            except PathError as exc:
                raise ConfigError(f"{at}: {exc}") from None
        return Workload(item["kind"], item["group"], (item["version"],), item["plural"], tuple(templates),
                        declared=True)

    def text(self, value: Any) -> str:
        return ""

    def document(self, value: Any) -> Any:
        """One entry per kind and version (as they are written)."""
        return [{"group": k.group, "version": v, "kind": k.kind, "plural": k.plural,
                 "templates": [t.path if t.name is None else {"path": t.path, "name": t.name}
                               for t in k.templates]} for k in value for v in k.versions]


@dataclass(frozen=True)
class KubeVersion(Kind):
    """A supported Kubernetes minor (``1.37``, ``v1.37.2``); null: the API server's, else the newest."""

    def parse(self, raw: Any, key: str) -> Semantics:
        try:
            return resolve(str(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else raw)
        except VersionError as exc:
            raise ConfigError(f"{key}: {exc}") from None

    def text(self, value: Any) -> str:
        """The minor (``1.37``) in the policies' parameters; unset: the newest (the chart writes the cluster's)."""
        return str(DEFAULT_KUBE.minor if value is None else value)

    def cel(self, text: str) -> str:
        """The minor number (37): what the policies compare, as the engine reads ``kube.pod_level_qos_needs_set``
        and ``kube.keeps_declared_qos``."""
        return f"int({text}.split('.')[1])"

    def document(self, value: Any) -> Any:
        return None if value is None else str(value)


# The keys, each written once. Their dotted names are their place in SCHEMA below.
FRACTIONAL = Setting("fractionalCPUContainers", Names(), frozenset(),
                     "containers (by name) whose cpu may be fractional; they still need requests == limits")
POD_LEVEL = Setting("podLevelResources", Choice(("deny", "allow")), "deny",
                    "allow: permit pod-level cpu/memory in spec.resources (kubelet's CPU and Memory Managers then "
                    "skip the Pod unless nodes enable PodLevelResourceManagers)")
SMT = Setting("smtAlignment", Count(1), 1,
              "above 1 turns on smt-misaligned: cpu must be a multiple of it (kubelet's full-pcpus-only)")
DRA = Setting("dra", Choice(("warn", "deny", "off")), "warn",
              "dra-unaligned, dra-claim-spread, dra-cpu-unpaired, dra-numa-list-match and dra-cpu-pinner-mismatch: "
              "warn (a warning, a notice in check and audit), deny (refuse), or off. A Pod with exclusive CPUs "
              "and DRA devices runs with them on any NUMA nodes: kubelet's Topology Manager has no DRA hint provider")
DEVICE_CLASSES = Setting("deviceClasses", Flag(), False,
                         "true: read the cluster's DeviceClasses (needs list/watch on deviceclasses.resource.k8s.io) "
                         "so that extended resources a DeviceClass maps to DRA (spec.extendedResourceName) count as "
                         "DRA devices for dra-unaligned and numa: auto; the webhook and the CLI only", param=False)
OPERATOR_OBJECTS = Setting("operatorObjects", Flag(), False,
                           "true: the webhook watches the objects KServe's Pods are built from (ServingRuntimes, "
                           "ClusterServingRuntimes, LLMInferenceServiceConfigs, and the inferenceservice-config "
                           "ConfigMap in policy.kserveNamespace; needs list/watch on them) so that an "
                           "InferenceService or LLMInferenceService is judged with them at admission, not admitted as "
                           "unknown; the webhook only (check --kubeconfig and audit read the runtimes when they read "
                           "the cluster)", param=False)
KSERVE_NS = Setting("kserveNamespace", Label(), KSERVE_NAMESPACE,
                    "the namespace KServe runs in (its controller's POD_NAMESPACE: opendatahub or "
                    "redhat-ods-applications under OpenDataHub and OpenShift AI), where it reads its "
                    "inferenceservice-config ConfigMap, its LLMInferenceServiceConfig presets and its "
                    "config-scheduler-* ConfigMaps; check --kubeconfig and audit read inferenceservice-config there "
                    "(absent there or refused: not judged, as KServe needs it); --kserve-namespace "
                    "wins over it", param=False)
DRA_OBJECTS = Setting("draObjects", Flag(), False,
                      "true: the webhook watches the cluster's ResourceClaims, ResourceClaimTemplates, "
                      "ResourceSlices and NodeResourceTopology objects (needs list/watch on them; at most 20,000 of "
                      "each kept, reduced to what the rules read) so that a Pod is judged at admission with the "
                      "claims it names (dra-cpu-not-mirrored, dra-cpu-unpaired), the devices nodes publish and "
                      "who pins their CPUs as the agent publishes it (dra-cpu-pinner-mismatch); a "
                      "claim not in the cache, or a cache not synced, is said unknown; the webhook only (check "
                      "--kubeconfig and audit read them when they read the cluster)", param=False)
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
WORKLOADS = Setting("workloads", Workloads(), (),
                    "more kinds to judge by their pod templates (custom resources): group, version, kind, plural "
                    "and templates (paths; [*] every list item, * every map value); a kind served at several "
                    "versions: one entry per version; the chart adds them to the webhook's rules and audit's RBAC",
                    param=False)
SCHEDULER_NAME = Setting("schedulerName", Name(), None,
                         "the webhook sets spec.schedulerName to it on new Pods of opted-in namespaces that need "
                         "single-NUMA alignment (exclusive CPUs with devices, or with placement.memoryManager alone), "
                         "unless they name a scheduler other than default-scheduler; null: never. The chart sets its "
                         "own scheduler's name with scheduler.enabled", param=False)
PLACE_MEMORY = Setting("memoryManager", Flag(), False,
                       "true: the nodes run the Memory Manager Static, so Pods with exclusive CPUs and no devices "
                       "need one NUMA node too (for their memory) and get placement.schedulerName", param=False)
KUBERNETES_VERSION = Setting(
    "kubernetesVersion", KubeVersion(), None,
    f"the Kubernetes minor whose semantics judge (one of {', '.join(map(str, SUPPORTED))}): QoS class, defaulting "
    "and pod-level resources differ between minors (docs/contract.md#kubernetes-versions). null: the API server's "
    f"own (/version) where qos-guard reads the cluster, else {DEFAULT_KUBE.minor}, the newest released; "
    "--kubernetes-version wins over it; the admission policies read it too (the chart writes the cluster's own minor "
    "when it is null)")
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
    operator_objects: bool = OPERATOR_OBJECTS.default
    kserve_namespace: str = KSERVE_NS.default
    dra_objects: bool = DRA_OBJECTS.default


@dataclass(frozen=True)
class MutationPolicy:
    set_limits_from_requests: bool = SET_LIMITS.default
    cpu_rounding: str = CPU_ROUNDING.default


@dataclass(frozen=True)
class PlacementPolicy:
    """Which scheduler places the Pods that must fit one NUMA node (``placement``): None, the Pod's own."""

    scheduler_name: str | None = None
    memory_manager: bool = PLACE_MEMORY.default


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
    placement: PlacementPolicy = field(default_factory=PlacementPolicy)
    # Kinds declared in the configuration, judged as the built-in ones (``webhook.core.workloads.table``).
    workloads: tuple[Workload, ...] = ()
    # ``kubernetesVersion``: the minor written (``webhook.core.engine.kube_of`` says which minor judges).
    kubernetes_version: Semantics | None = None

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
    Section("policy", Policy, (FRACTIONAL, POD_LEVEL, SMT, NUMA, DRA, DEVICE_CLASSES, OPERATOR_OBJECTS, KSERVE_NS,
                                DRA_OBJECTS)),
    Section("mutation", MutationPolicy, (SET_LIMITS, CPU_ROUNDING)),
    Section("exemptions", Exemptions, (NAMESPACES, USERNAMES, RUNTIME_CLASSES)),
    Section("placement", PlacementPolicy, (SCHEDULER_NAME, PLACE_MEMORY)),
    WORKLOADS,
    KUBERNETES_VERSION,
))


def parse_config(raw: Any) -> Config:
    """Validate a decoded YAML document; ``None`` (an empty file) is the default configuration."""
    config: Config = SCHEMA.parse(raw)
    return config


__all__ = [
    "AUTO",
    "KSERVE_NS",
    "KUBERNETES_VERSION",
    "SCHEMA",
    "AutoNuma",
    "Config",
    "ConfigError",
    "Exemptions",
    "KubeVersion",
    "MutationPolicy",
    "NumaPolicy",
    "PlacementPolicy",
    "Policy",
    "Workloads",
    "parse_config",
]
