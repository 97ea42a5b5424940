"""Whether a node's kubelet pins: its ``configz`` document read into the settings that decide it, the verdict,
and the pools whose nodes disagree. Pure, so in the core (its import ban in pyproject.toml):
``webhook.cluster.configz`` fetches the document, this module only judges it.

A node *pins* when the static CPU Manager gives exclusive CPUs (``cpuManagerPolicy: static`` with a CPU
reservation) and the Topology Manager aligns them with memory and devices (``topologyManagerPolicy`` not
``none``). Sources, k8s.io/kubernetes v1.36: the document is ``setConfigz`` (cmd/kubelet/app/server.go), the
v1beta1 ``KubeletConfiguration`` with kubelet's defaults applied (pkg/kubelet/apis/config/v1beta1/defaults.go);
the reserved CPUs are ``getReservedCPUs`` and the static policy's ``ceil(reserved milli / 1000)`` of
systemReserved + kubeReserved cpu (pkg/kubelet/cm/cpumanager/cpu_manager.go ``NewManager``,
node_container_manager_linux.go ``GetNodeAllocatableReservation``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.core.cpuset import CPUSet, CPUSetError, parse_cpuset
from webhook.core.quantity import QuantityError, parse_quantity_nano

# What kubelet v1.36 accepts (validation.go, cpu_manager.go, memory_manager.go); its defaults when absent.
CPU_POLICIES = ("none", "static")
MEMORY_POLICIES = ("None", "Static", "BestEffort")
TOPOLOGY_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
TOPOLOGY_SCOPES = ("container", "pod")
DEFAULTS = {"cpuManagerPolicy": "none", "memoryManagerPolicy": "None", "topologyManagerPolicy": "none",
            "topologyManagerScope": "container"}
_NANO_PER_CPU = 10**9

# Labels that name a node pool: nodes sharing one are meant to be interchangeable, so a Pod that selects
# on it must not pin on one node and not on the next. ``PREFIX/*`` matches every key under PREFIX/ (roles).
DEFAULT_POOL_LABELS = (
    "node.kubernetes.io/instance-type",
    "node-role.kubernetes.io/*",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
    "karpenter.sh/nodepool",
)
# The settings compared across a pool: how kubelet decides placement. Reservations are left out: nodes of
# one pool may differ in size, and so in what they reserve.
POOL_SETTINGS = ("cpuManagerPolicy", "cpuManagerPolicyOptions", "memoryManagerPolicy", "topologyManagerPolicy",
                 "topologyManagerScope", "topologyManagerPolicyOptions")


class ConfigzError(ValueError):
    """A ``configz`` reply qos-guard cannot read: not JSON, not a kubelet's, or a setting of the wrong type or
    an unknown value (a kubelet newer than this qos-guard). ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


@dataclass(frozen=True, slots=True)
class ReservedCPUs:
    """The CPUs kubelet keeps out of exclusive use: ``reservedSystemCPUs`` when set, else the ceiling of
    systemReserved + kubeReserved cpu (as the original texts)."""

    count: int
    cpus: CPUSet | None = None
    system: str | None = None
    kube: str | None = None

    def describe(self) -> str:
        if self.cpus is not None:
            return f"{self.count} (reservedSystemCPUs {self.cpus})"
        parts = [f"{name} {text}" for name, text in (("systemReserved", self.system), ("kubeReserved", self.kube))
                 if text is not None]
        return f"{self.count} ({' + '.join(parts)})" if parts else "0"

    def as_json(self) -> dict[str, Any]:
        return {"count": self.count, "reservedSystemCPUs": None if self.cpus is None else str(self.cpus),
                "systemReservedCPU": self.system, "kubeReservedCPU": self.kube}


@dataclass(frozen=True, slots=True)
class MemoryReservation:
    """One ``reservedMemory`` entry: what the Static Memory Manager keeps on one NUMA node."""

    numa_node: int
    limits: tuple[tuple[str, str], ...]

    def describe(self) -> str:
        return f"NUMA {self.numa_node} " + ",".join(f"{k}={v}" for k, v in self.limits)


@dataclass(frozen=True, slots=True)
class KubeletPinning:
    """The kubelet settings that decide pinning, with kubelet's defaults for what the document leaves out."""

    cpu_manager_policy: str
    cpu_manager_options: tuple[tuple[str, str], ...]
    reserved: ReservedCPUs
    memory_manager_policy: str
    reserved_memory: tuple[MemoryReservation, ...]
    topology_manager_policy: str
    topology_manager_scope: str
    topology_manager_options: tuple[tuple[str, str], ...]
    pod_level_resource_managers: bool = False

    def settings(self) -> dict[str, str]:
        """The pool-compared settings as printable values."""
        return {"cpuManagerPolicy": self.cpu_manager_policy,
                "cpuManagerPolicyOptions": _options(self.cpu_manager_options),
                "memoryManagerPolicy": self.memory_manager_policy,
                "topologyManagerPolicy": self.topology_manager_policy,
                "topologyManagerScope": self.topology_manager_scope,
                "topologyManagerPolicyOptions": _options(self.topology_manager_options)}

    def as_json(self) -> dict[str, Any]:
        return {
            "cpuManager": {"policy": self.cpu_manager_policy, "options": dict(self.cpu_manager_options),
                           "reservedCPUs": self.reserved.as_json()},
            "memoryManager": {"policy": self.memory_manager_policy,
                              "reservedMemory": [{"numaNode": r.numa_node, "limits": dict(r.limits)}
                                                 for r in self.reserved_memory]},
            "topologyManager": {"policy": self.topology_manager_policy, "scope": self.topology_manager_scope,
                                "options": dict(self.topology_manager_options)},
        }


def _options(options: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f"{k}={v}" for k, v in options) or "(none)"


# --- reading the document ---

def _loads(body: bytes | str) -> Any:
    if isinstance(body, bytes):
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigzError("", f"the reply is not UTF-8 text (byte {exc.start})") from None

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(body, parse_constant=no_constant)
    except RecursionError:
        raise ConfigzError("", "the reply is nested too deeply to be a kubelet configuration") from None
    except ValueError as exc:
        raise ConfigzError("", f"the reply is not JSON ({exc})") from None


def _string(doc: Mapping[str, Any], key: str, path: str) -> str | None:
    value = doc.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigzError(f"{path}.{key}", f"expected a string, got {_type(value)}")
    return value


def _enum(doc: Mapping[str, Any], key: str, path: str, allowed: Sequence[str]) -> str:
    value = _string(doc, key, path) or DEFAULTS[key]
    if value not in allowed:
        raise ConfigzError(f"{path}.{key}", f"unknown value {value!r} (kubelet v1.36 knows {', '.join(allowed)}; "
                                            "a newer kubelet needs a newer qos-guard)")
    return value


def _string_map(doc: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigzError(f"{path}.{key}", f"expected an object, got {_type(value)}")
    for k, v in value.items():
        if not isinstance(v, str):
            raise ConfigzError(f"{path}.{key}.{k}", f"expected a string, got {_type(v)}")
    return value


def _type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
             dict: "an object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _cpu_nano(reserved: Mapping[str, str], path: str) -> int | None:
    """A reservation's cpu in nano CPUs as kubelet's ``parseResourceList`` reads it (``ParseQuantity``,
    negative refused), or None when it reserves no cpu."""
    text = reserved.get("cpu")
    if text is None:
        return None
    try:
        nano = parse_quantity_nano(text)
    except QuantityError as exc:
        raise ConfigzError(f"{path}.cpu", f"{text!r} is not a quantity ({exc}); kubelet would not start") from None
    if nano < 0:
        raise ConfigzError(f"{path}.cpu", f"{text!r} is negative; kubelet would not start")
    return nano


def _reserved_cpus(config: Mapping[str, Any], path: str) -> ReservedCPUs:
    listed = _string(config, "reservedSystemCPUs", path)
    if listed is not None:
        try:
            cpus = parse_cpuset(listed)
        except CPUSetError as exc:
            raise ConfigzError(f"{path}.reservedSystemCPUs", str(exc)) from None
        return ReservedCPUs(cpus.size, cpus=cpus)
    system = _string_map(config, "systemReserved", path)
    kube = _string_map(config, "kubeReserved", path)
    nanos = [n for n in (_cpu_nano(system, f"{path}.systemReserved"), _cpu_nano(kube, f"{path}.kubeReserved"))
             if n is not None]
    total = sum(nanos)
    return ReservedCPUs(-(-total // _NANO_PER_CPU), system=system.get("cpu"), kube=kube.get("cpu"))


def _reserved_memory(config: Mapping[str, Any], path: str) -> tuple[MemoryReservation, ...]:
    value = config.get("reservedMemory")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigzError(f"{path}.reservedMemory", f"expected a list, got {_type(value)}")
    out = []
    for i, entry in enumerate(value):
        where = f"{path}.reservedMemory[{i}]"
        if not isinstance(entry, dict):
            raise ConfigzError(where, f"expected an object, got {_type(entry)}")
        node = entry.get("numaNode", 0)
        if not isinstance(node, int) or isinstance(node, bool) or not 0 <= node < 1 << 31:
            raise ConfigzError(f"{where}.numaNode", f"expected a NUMA node number, got {node!r:.40}")
        limits = _string_map(entry, "limits", where)
        out.append(MemoryReservation(node, tuple(sorted(limits.items()))))
    return tuple(out)


def _feature_gates(config: Mapping[str, Any], path: str) -> dict[str, bool]:
    value = config.get("featureGates")
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, bool) for v in value.values()):
        raise ConfigzError(f"{path}.featureGates", "expected an object of booleans")
    return value


def read_configz(body: bytes | str) -> KubeletPinning:
    """The pinning settings of a ``GET /api/v1/nodes/NAME/proxy/configz`` reply: ``{"kubeletconfig": {...}}``.

    Raises ``ConfigzError`` naming the field for anything else; never another exception.
    """
    doc = _loads(body)
    if not isinstance(doc, dict):
        raise ConfigzError("", f"the reply is {_type(doc)}, not an object with kubeletconfig")
    config = doc.get("kubeletconfig")
    if config is None:
        keys = ", ".join(sorted(map(str, doc))[:5]) or "nothing"
        raise ConfigzError("", f"the reply has no kubeletconfig (it has {keys:.200}): not a kubelet's configz")
    path = "kubeletconfig"
    if not isinstance(config, dict):
        raise ConfigzError(path, f"expected an object, got {_type(config)}")
    kind, api_version = config.get("kind"), config.get("apiVersion")
    if kind not in (None, "KubeletConfiguration"):
        raise ConfigzError(f"{path}.kind", f"{kind!r:.60} is not KubeletConfiguration")
    if api_version not in (None, "kubelet.config.k8s.io/v1beta1"):
        raise ConfigzError(f"{path}.apiVersion", f"{api_version!r:.60} is not kubelet.config.k8s.io/v1beta1, "
                                                 "the version this qos-guard reads")
    gates = _feature_gates(config, path)
    return KubeletPinning(
        cpu_manager_policy=_enum(config, "cpuManagerPolicy", path, CPU_POLICIES),
        cpu_manager_options=tuple(sorted(_string_map(config, "cpuManagerPolicyOptions", path).items())),
        reserved=_reserved_cpus(config, path),
        memory_manager_policy=_enum(config, "memoryManagerPolicy", path, MEMORY_POLICIES),
        reserved_memory=_reserved_memory(config, path),
        topology_manager_policy=_enum(config, "topologyManagerPolicy", path, TOPOLOGY_POLICIES),
        topology_manager_scope=_enum(config, "topologyManagerScope", path, TOPOLOGY_SCOPES),
        topology_manager_options=tuple(sorted(_string_map(config, "topologyManagerPolicyOptions", path).items())),
        pod_level_resource_managers=gates.get("PodLevelResourceManagers", False),
    )


# --- the verdict ---

@dataclass(frozen=True, slots=True)
class Problem:
    """Why a node cannot pin: a stable id, the setting, and a message that ends with the way out."""

    rule: str
    setting: str
    message: str


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    problems: tuple[Problem, ...]
    notes: tuple[str, ...]

    @property
    def pins(self) -> bool:
        return not self.problems


# One-line descriptions of the problem ids (SARIF rules, docs/howto/nodes.md).
RULES = {
    "cpu-manager-none": "cpuManagerPolicy is none: no container gets exclusive CPUs",
    "no-reserved-cpus": "the static CPU Manager has no reserved CPU: kubelet refuses to start it",
    "topology-manager-none": "topologyManagerPolicy is none: exclusive CPUs are not aligned to a NUMA node",
    "pool-mismatch": "nodes sharing a pool label differ in their pinning settings",
}


def _go_bool(text: str) -> bool | None:
    """``strconv.ParseBool`` (kubelet reads policy option values with it)."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def node_verdict(p: KubeletPinning) -> NodeVerdict:
    """Pins, or the problems that stop it; notes for what pins with a caveat."""
    problems: list[Problem] = []
    notes: list[str] = []
    if p.cpu_manager_policy == "none":
        problems.append(Problem(
            "cpu-manager-none", "cpuManagerPolicy",
            "cpuManagerPolicy is none: every container runs on the shared pool, none gets exclusive CPUs; set "
            "cpuManagerPolicy: static with a CPU reservation (reservedSystemCPUs, or systemReserved cpu), which "
            "leaves the reserved CPUs out of exclusive use; drain the node and delete cpu_manager_state in "
            "kubelet's root directory (/var/lib/kubelet) before restarting kubelet"))
    elif p.reserved.count == 0:
        problems.append(Problem(
            "no-reserved-cpus", "reservedSystemCPUs",
            "cpuManagerPolicy is static but no CPU is reserved: kubelet refuses to start the static CPU Manager "
            "(systemReserved.cpu + kubeReserved.cpu must be above zero); reserve one, e.g. reservedSystemCPUs: "
            "\"0\", which leaves that CPU out of exclusive use"))
    if p.topology_manager_policy == "none":
        problems.append(Problem(
            "topology-manager-none", "topologyManagerPolicy",
            "topologyManagerPolicy is none: exclusive CPUs, memory and devices are chosen without regard to NUMA, "
            "so a container may span NUMA nodes (harmless only on a one-NUMA-node machine); set "
            "topologyManagerPolicy: single-numa-node (a Pod that cannot be aligned then fails with "
            "TopologyAffinityError) or restricted"))
    elif p.topology_manager_policy == "best-effort":
        notes.append("topologyManagerPolicy best-effort admits a Pod it cannot align, which then runs across NUMA "
                     "nodes; single-numa-node or restricted refuse it instead")
    if p.cpu_manager_policy == "static" and p.memory_manager_policy != "Static":
        notes.append(f"memoryManagerPolicy is {p.memory_manager_policy}: a pinned Pod's memory is not pinned to "
                     "its CPUs' NUMA node (its cpuset.mems spans every node; the kernel places the pages by first "
                     "touch and spills to a remote node under pressure; qos-guard verify and the agent show where "
                     "they are, NUMARemoteMemory when off the CPUs' node); Static with reservedMemory on each NUMA "
                     "node pins it, at the cost of a drained node and kubelet's memory_manager_state file removed")
    options = dict(p.cpu_manager_options)
    if p.cpu_manager_policy == "static" and _go_bool(options.get("full-pcpus-only", "")):
        notes.append("full-pcpus-only: a container must ask for whole physical cores or kubelet fails it with "
                     "SMTAlignmentError; qos-guard's policy.smtAlignment checks this at admission")
    if p.cpu_manager_policy == "static" and p.pod_level_resource_managers:
        notes.append("PodLevelResourceManagers is on: Pods with pod-level resources are pinned here too "
                     "(policy.podLevelResources: allow matches this node)")
    return NodeVerdict(tuple(problems), tuple(notes))


# --- pools ---

@dataclass(frozen=True, slots=True)
class PoolMismatch:
    """Nodes sharing ``label=value`` whose pinning settings differ: for each differing setting, the nodes
    holding each value."""

    label: str
    value: str
    nodes: tuple[str, ...]
    differences: tuple[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], ...]

    @property
    def pool(self) -> str:
        return f"{self.label}={self.value}" if self.value else self.label

    def message(self) -> str:
        parts = []
        for setting, values in self.differences:
            held = "; ".join(f"{value} on {', '.join(_few(nodes))}" for value, nodes in values)
            parts.append(f"{setting} ({held})")
        return (f"its {len(self.nodes)} nodes differ in {', '.join(parts)}: a Pod that selects this pool pins "
                "on some of them only; give them one kubelet configuration")

    def describe(self) -> str:
        return f"pool {self.pool}: {self.message()}"

    def as_json(self) -> dict[str, Any]:
        return {"label": self.label, "value": self.value, "nodes": list(self.nodes),
                "differences": {setting: {value: list(nodes) for value, nodes in values}
                                for setting, values in self.differences},
                "message": self.describe()}


def _few(names: Sequence[str], shown: int = 5) -> list[str]:
    return list(names) if len(names) <= shown else [*names[:shown], f"{len(names) - shown} more"]


_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def valid_pool_label(label: str) -> bool:
    """A label key (``[prefix/]name``, as the API server validates it), or ``prefix/*`` for every key under
    a prefix (``node-role.kubernetes.io/*``)."""
    if label.endswith("/*"):
        prefix = label[:-2]
        return len(prefix) <= 253 and bool(_DNS_SUBDOMAIN.fullmatch(prefix))
    prefix, slash, name = label.rpartition("/")
    if slash and not (len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return len(name) <= 63 and bool(_LABEL_NAME.fullmatch(name))


def _pools(labels: Mapping[str, str], pool_labels: Iterable[str]) -> Iterable[tuple[str, str]]:
    for key in pool_labels:
        if key.endswith("/*"):
            prefix = key[:-1]
            yield from ((k, v) for k, v in labels.items() if k.startswith(prefix))
        elif key in labels:
            yield key, labels[key]


def pool_mismatches(nodes: Iterable[tuple[str, Mapping[str, str], KubeletPinning]],
                    pool_labels: Iterable[str] = DEFAULT_POOL_LABELS) -> list[PoolMismatch]:
    """Every pool (a label and value two or more nodes share) whose nodes differ in ``POOL_SETTINGS``."""
    wanted = list(pool_labels)
    members: dict[tuple[str, str], list[tuple[str, dict[str, str]]]] = {}
    for name, labels, pinning in nodes:
        settings = pinning.settings()
        for pool in dict.fromkeys(_pools(labels, wanted)):
            members.setdefault(pool, []).append((name, settings))
    found = []
    for (label, value), held in sorted(members.items()):
        if len(held) < 2:
            continue
        differences = []
        for setting in POOL_SETTINGS:
            by_value: dict[str, list[str]] = {}
            for name, settings in held:
                by_value.setdefault(settings[setting], []).append(name)
            if len(by_value) > 1:
                differences.append((setting, tuple((v, tuple(sorted(n))) for v, n in sorted(by_value.items()))))
        if differences:
            found.append(PoolMismatch(label, value, tuple(sorted(n for n, _ in held)), tuple(differences)))
    return found
