"""The cluster's NUMA topology as ``policy.numa: auto`` sees it: NodeResourceTopology objects
(``topology.node.k8s.io/v1alpha2``) read into ``NodeTopology`` (zones with their capacity and allocatable
amounts, the node's Topology Manager policy and scope), and ``Topology``, one immutable snapshot of the cluster
(nodes with their labels, their NodeResourceTopology objects) with the nodes grouped by shape. Pure: reading
objects handed in; ``webhook.cluster.nrt`` fetches and watches them, ``webhook.core.numa`` judges against them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.core.cpupinner import read_pinner
from webhook.core.memo import Memo, remember
from webhook.core.quantity import QuantityError, quantity_from_value
from webhook.core.scheduling import NodeConstraints, Taint

SINGLE_NUMA_NODE = "single-numa-node"
RESTRICTED = "restricted"
POLICIES = ("none", "best-effort", RESTRICTED, SINGLE_NUMA_NODE)
SCOPES = ("container", "pod")
HUGEPAGES = "hugepages-"
# The API the objects are served at (noderesourcetopology-api v0.1.2): read by numa: auto and the extender,
# written by the agent's --publish-topology.
NRT_GROUP_VERSION = "topology.node.k8s.io/v1alpha2"
NRT_PATH = f"/apis/{NRT_GROUP_VERSION}/noderesourcetopologies"
# The deprecated v1alpha1-style ``topologyPolicies`` values (noderesourcetopology-api v1alpha2 types.go).
_LEGACY_POLICIES = {
    "SingleNUMANodeContainerLevel": (SINGLE_NUMA_NODE, "container"),
    "SingleNUMANodePodLevel": (SINGLE_NUMA_NODE, "pod"),
    "Restricted": ("restricted", "container"),
    "RestrictedContainerLevel": ("restricted", "container"),
    "RestrictedPodLevel": ("restricted", "pod"),
    "BestEffort": ("best-effort", "container"),
    "BestEffortContainerLevel": ("best-effort", "container"),
    "BestEffortPodLevel": ("best-effort", "pod"),
    "None": ("none", "container"),
}
_ZONE_NAME = re.compile(r"node-(\d{1,9})")  # numanode.NameToID in noderesourcetopology-api (bounded: int() refuses
# more than 4,300 digits with a ValueError that is no TopologyError)
# The agent's socket zones (webhook/node/topology_report.py): a zone of type Socket named socket-<id> for each
# socket, and each Node zone's parent naming its socket's zone (v1alpha2 Zone.parent).
SOCKET = "Socket"
_SOCKET_ZONE = re.compile(r"socket-(\d{1,9})")
# The agent's Node zone attribute: the NUMA node's CPU count, reserved CPUs included. Where NFD lists no cpu in a
# zone (something else allocatable there, no CPU), it says the zone's CPUs are all reserved: read as their capacity
# (what kubelet's CPU hints count), none allocatable, as NFD lists a zone with nothing allocatable at all.
ZONE_CPUS_ATTRIBUTE = "cpus"


class TopologyError(ValueError):
    """A NodeResourceTopology object this model cannot read; the message names the field."""


@dataclass(frozen=True, slots=True)
class Zone:
    """One NUMA node (an NRT zone of type ``Node``): amounts in milli-units, by resource name."""

    numa: int
    name: str
    capacity: Mapping[str, int]
    allocatable: Mapping[str, int]
    socket: int | None = None  # its socket, where published (the zone's ``parent``, ``socket-<id>``)


# The static CPU Manager's policy options (kubelet's cpuManagerPolicyOptions) whose effect on admission the
# NUMA fit models; the others (distribute-cpus-across-numa, align-by-socket, distribute-cpus-across-cores,
# strict-cpu-reservation, prefer-align-cpus-by-uncorecache) choose which CPUs a container gets, never whether a
# Pod is admitted under single-numa-node (align-by-socket is refused there: kubelet does not start), as the
# topology differential shows against each release's own code (tests/fidelity/test_topology.py). Where restricted
# or best-effort goes on across NUMA nodes, align-by-socket changes which hints are preferred too
# (``webhook.core.numa_across``; ``webhook.core.cpuoptions`` says what each does).
FULL_PCPUS_ONLY = "full-pcpus-only"
NONE_CPU_POLICY = "none"  # kubelet's cpuManagerPolicy none (its default): no hints, no exclusive CPUs
SMT_ALIGNMENT_ERROR = "SMTAlignmentError"  # kubelet's reason (policy_static.go ErrorSMTAlignment)
# kubelet's reason where a resource manager's Allocate fails (lifecycle.UnexpectedAdmissionError)
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
CPU_MANAGER_OPTIONS = (FULL_PCPUS_ONLY, "distribute-cpus-across-numa", "align-by-socket",
                       "distribute-cpus-across-cores", "strict-cpu-reservation", "prefer-align-cpus-by-uncorecache")
# Each option's maturity from a minor on (pkg/kubelet/cm/cpumanager/policy_options.go of each release): an alpha
# option needs the CPUManagerPolicyAlphaOptions gate (off by default in every supported minor), a beta one
# CPUManagerPolicyBetaOptions (on by default), a GA one nothing.
OPTION_LEVELS: dict[str, tuple[tuple[int, str], ...]] = {
    FULL_PCPUS_ONLY: ((33, "GA"),),
    "distribute-cpus-across-numa": ((33, "beta"),),
    "align-by-socket": ((33, "alpha"),),
    "distribute-cpus-across-cores": ((33, "alpha"),),
    "strict-cpu-reservation": ((33, "beta"), (35, "GA")),
    "prefer-align-cpus-by-uncorecache": ((33, "alpha"), (34, "beta"), (36, "GA")),
}
# Pairs kubelet refuses together (NewStaticPolicyOptions), in every supported minor.
EXCLUSIVE_OPTIONS = (
    (FULL_PCPUS_ONLY, "distribute-cpus-across-cores"), ("distribute-cpus-across-numa", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-cores"),
    ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-numa"))


def option_level(option: str, minor: int) -> str:
    """The option's maturity at ``minor`` (``alpha``, ``beta``, ``GA``)."""
    return [level for since, level in OPTION_LEVELS[option] if minor >= since][-1]


def options_refusal(options: frozenset[str], minor: int, policy: str, alpha_gate: bool = False,
                    beta_gate: bool = True, cpu_policy: str = "static") -> str | None:
    """Why kubelet at ``minor`` does not start its static CPU Manager with ``options`` (set to true) under
    Topology Manager ``policy`` (NewStaticPolicyOptions, ValidateStaticPolicyOptions); None: it starts. Its
    ``none`` policy (``cpu_policy``) takes no option at all (NewNonePolicy refuses any key, "false" too): there
    ``options`` is every key given."""
    if cpu_policy == NONE_CPU_POLICY:
        return (f"cpuManagerPolicy none takes no cpuManagerPolicyOptions ({', '.join(sorted(options))})"
                if options else None)
    for option in sorted(options):
        level = option_level(option, minor)
        if level == "alpha" and not alpha_gate:
            return f"{option} is alpha in Kubernetes 1.{minor}: it needs the CPUManagerPolicyAlphaOptions gate"
        if level == "beta" and not beta_gate:
            return f"{option} is beta in Kubernetes 1.{minor}: it needs the CPUManagerPolicyBetaOptions gate"
    for a, b in EXCLUSIVE_OPTIONS:
        if a in options and b in options:
            return f"{a} and {b} cannot be used together"
    if "align-by-socket" in options and policy == SINGLE_NUMA_NODE:
        return "align-by-socket cannot be used with topologyManagerPolicy single-numa-node"
    return None


# NRT attributes (qos-guard's own, beside NFD's topologyManagerPolicy/Scope): the node's cpuManagerPolicyOptions
# as kubelet's flag writes them ("full-pcpus-only=true,..."), its CPUs per physical core, and how many CPUs share
# a core with a reserved CPU without being reserved themselves (what full-pcpus-only cannot hand out).
CPU_OPTIONS_ATTRIBUTE = "cpuManagerPolicyOptions"
THREADS_ATTRIBUTE = "threadsPerCore"
SIBLINGS_ATTRIBUTE = "reservedCPUSiblings"


@dataclass(frozen=True, slots=True)
class CPUManager:
    """What a node's static CPU Manager is configured with, where it changes kubelet's admission."""

    options: frozenset[str]  # the cpuManagerPolicyOptions set to true
    threads_per_core: int  # CPUs per physical core (1 without SMT)
    reserved_siblings: int  # CPUs on a core with a reserved CPU, not reserved themselves

    @property
    def full_pcpus_only(self) -> bool:
        """``full-pcpus-only``: a container's exclusive CPUs are whole cores (policy_static.go
        ``enforceSMTAlignment``), else kubelet refuses it with SMTAlignmentError. Without SMT too: the count
        of free physical CPUs leaves out what init containers hold, though the containers after them reuse it."""
        return FULL_PCPUS_ONLY in self.options

    def smt_refusal(self, cpus: int, free: int) -> str | None:
        """Why kubelet's Allocate refuses ``cpus`` exclusive CPUs with ``free`` CPUs unassigned on the node
        (``enforceSMTAlignment``): not a multiple of the threads per core, or more than the CPUs of cores no
        reserved CPU touches; None when it does not."""
        if not self.full_pcpus_only or not cpus:
            return None
        tpc = self.threads_per_core
        if cpus % tpc:
            return (f"SMTAlignmentError: {cpus} CPUs is not a multiple of the node's {tpc} threads per core "
                    f"(cpuManagerPolicyOptions {FULL_PCPUS_ONLY}); ask a multiple of {tpc}")
        physical = free - self.reserved_siblings
        if cpus > physical:
            return (f"SMTAlignmentError: {cpus} CPUs but only {max(0, physical)} on whole free cores "
                    f"(cpuManagerPolicyOptions {FULL_PCPUS_ONLY}; the siblings of reserved CPUs do not count)")
        return None


def parse_cpu_manager(attrs: Mapping[Any, Any]) -> CPUManager | None:
    """The node's ``CPUManager`` from its NRT attributes; None (not known) unless all three are there and
    readable: qos-guard then judges as without options, and ``nodes`` says it does not know them."""
    raw, tpc, siblings = (attrs.get(CPU_OPTIONS_ATTRIBUTE), attrs.get(THREADS_ATTRIBUTE),
                          attrs.get(SIBLINGS_ATTRIBUTE))
    if not isinstance(raw, str) or not isinstance(tpc, str) or not isinstance(siblings, str):
        return None
    # ASCII digits only, and few of them: str.isdigit() also takes "²" and 5,000-digit strings, which int() refuses
    if not all(s.isascii() and s.isdigit() and len(s) <= 6 for s in (tpc, siblings)) or int(tpc) < 1:
        return None
    options = set()
    for item in filter(None, (part.strip() for part in raw.split(","))):
        name, _, value = item.partition("=")
        if name not in CPU_MANAGER_OPTIONS or value.lower() not in ("true", "false", "1", "0", "t", "f"):
            return None  # an option this model does not know: its effect is not known either
        if value.lower() in ("true", "1", "t"):
            options.add(name)
    return CPUManager(frozenset(options), int(tpc), int(siblings))


@dataclass(frozen=True, slots=True)
class NodeTopology:
    """A node's NUMA zones and the Topology Manager settings its exporter published."""

    name: str
    policy: str
    scope: str
    zones: tuple[Zone, ...]
    # Everything but the name (``signature``): nodes of one hardware and configuration judge alike.
    key: tuple[Any, ...] = field(default=(), compare=False, repr=False)
    # The node's static CPU Manager options, where published (``parse_cpu_manager``); None: not known.
    cpu_manager: CPUManager | None = None
    # kubelet's cpuManagerPolicy (``static`` or ``none``) where published (the agent's ``cpuPinner``:
    # ``webhook.core.cpupinner``); None: not known, judged as ``static`` (``cpu_hints``).
    cpu_policy: str | None = None

    def with_zones(self, zones: tuple[Zone, ...]) -> NodeTopology:
        """This node with other amounts (what is free of it): the same policy, scope and CPU Manager."""
        return NodeTopology(self.name, self.policy, self.scope, zones,
                            NodeTopology.signature(self.policy, self.scope, zones, self.cpu_manager, self.cpu_policy),
                            self.cpu_manager, self.cpu_policy)

    @property
    def shape(self) -> tuple[Any, ...]:
        """``key``, or the ``signature`` it stands for where a caller built this node without one."""
        return self.key or NodeTopology.signature(self.policy, self.scope, self.zones, self.cpu_manager,
                                                  self.cpu_policy)

    @property
    def cpu_hints(self) -> bool:
        """Does kubelet's CPU Manager give the Topology Manager hints and take exclusive CPUs from a NUMA node's
        pool? ``static`` does; ``none`` neither (policy_none.go: GetTopologyHints returns nil, Allocate pins
        nothing), so there a Pod's CPUs decide nothing and only memory and devices are aligned. Not known
        (``cpu_policy`` None): judged as ``static``, as the NUMA fit always has and as ``parse_cpu_manager`` judges
        unknown options; on a node that in fact runs ``none`` that may refuse a Pod for CPUs kubelet never aligns,
        and ``qos-guard nodes`` says the policy is not known."""
        return self.cpu_policy != NONE_CPU_POLICY

    @property
    def sockets(self) -> tuple[int, ...] | None:
        """Each zone's socket, in zone order; None unless every zone's is published."""
        found = tuple(z.socket for z in self.zones)
        return None if any(s is None for s in found) else tuple(s for s in found if s is not None)

    @property
    def published(self) -> set[str]:
        """The resources some zone of this node has (a device elsewhere on the node is not counted)."""
        return {name for z in self.zones for name, amount in z.capacity.items() if amount > 0}

    @staticmethod
    def signature(policy: str, scope: str, zones: tuple[Zone, ...],
                  cpu_manager: CPUManager | None = None, cpu_policy: str | None = None) -> tuple[Any, ...]:
        shape: tuple[Any, ...] = (policy, scope, tuple(
            (z.numa, tuple(sorted(z.capacity.items())), tuple(sorted(z.allocatable.items())), z.socket)
            for z in zones))
        if cpu_manager is not None:
            shape = (*shape, cpu_manager)
        return shape if cpu_policy is None else (*shape, ("cpuManagerPolicy", cpu_policy))

    @property
    def refuses(self) -> bool:
        """``single-numa-node`` refuses every Pod that no zone holds (the others may admit it: ``across``)."""
        return self.policy == SINGLE_NUMA_NODE

    @property
    def across(self) -> bool:
        """``restricted`` and ``best-effort`` may admit what no zone holds, and kubelet then allocates it across zones
        (``numa_across``: restricted still refuses it where no NUMA nodes suit every resource alike, and either
        where an allocation fails); ``none`` aligns nothing."""
        return self.policy in ("best-effort", "restricted")

    @property
    def allocates(self) -> bool:
        """The policies under which kubelet goes on past a Pod no NUMA node holds, to each provider's ``Allocate``
        (``numa_across``): ``across`` and ``none`` (no hints at all; full-pcpus-only and the Memory Manager still
        refuse there)."""
        return self.across or self.policy == "none"


@dataclass(frozen=True)
class Topology:
    """What the cluster said, at one moment: nodes with their labels (``None`` when the node list is not
    known), the taints of the tainted ones, NodeResourceTopology objects by node name, and why it may be
    incomplete. Immutable: the webhook publishes a new one on a change, and each request judges against one;
    what is learnt from it (``shapes_of``) is remembered in the caller's ``Memo``, never in the snapshot."""

    nodes: Mapping[str, Mapping[str, str]] | None = None
    topologies: Mapping[str, NodeTopology] = field(default_factory=dict)
    problem: str | None = None
    taints: Mapping[str, tuple[Taint, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class ShapeGroup:
    """Nodes of one hardware and configuration (equal ``NodeTopology.key``): judged once for all of them."""

    topology: NodeTopology  # the first node's; the others differ only by name
    nodes: tuple[str, ...]
    published: frozenset[str]


@dataclass(frozen=True)
class Shapes:
    """A snapshot's nodes by shape, and the nodes whose shape is unknown (no usable NodeResourceTopology)."""

    shapes: tuple[ShapeGroup, ...]
    shape_of: Mapping[str, int]  # node name -> index in ``shapes``
    unknown: tuple[str, ...]

    def matching(self, constraints: NodeConstraints, topology: Topology,
                 memo: Memo | None = None) -> tuple[dict[int, list[str]], list[str]]:
        """The nodes ``constraints`` allows, by shape, and the unknown ones; remembered in ``memo`` (Pods of one
        workload share their node constraints)."""
        def choose() -> tuple[dict[int, list[str]], list[str]]:
            chosen: dict[int, list[str]] = {}
            unknown: list[str] = []
            taints = topology.taints
            for name, labels in (topology.nodes or {}).items():
                if constraints.allows(name, labels, taints.get(name, ())):
                    where = self.shape_of.get(name)
                    if where is None:
                        unknown.append(name)
                    else:
                        chosen.setdefault(where, []).append(name)
            return {i: sorted(names) for i, names in chosen.items()}, sorted(unknown)
        return remember(memo, "topology.placed", constraints.key, choose, limit=1024)

    @classmethod
    def of(cls, topology: Topology) -> Shapes:
        groups: dict[tuple[Any, ...], list[str]] = {}
        first: dict[tuple[Any, ...], NodeTopology] = {}
        unknown = []
        for name in sorted(topology.nodes or {}):
            topo = topology.topologies.get(name)
            if topo is None or not topo.policy or not topo.zones:
                unknown.append(name)
                continue
            key = topo.shape
            groups.setdefault(key, []).append(name)
            first.setdefault(key, topo)
        shapes = tuple(ShapeGroup(first[k], tuple(names), frozenset(first[k].published)) for k, names in groups.items())
        shape_of = {name: i for i, shape in enumerate(shapes) for name in shape.nodes}
        return cls(shapes, shape_of, tuple(unknown))


def shapes_of(topology: Topology, memo: Memo | None = None) -> Shapes:
    """The snapshot's nodes grouped by shape, built once per ``memo`` (the caller keeps one per snapshot)."""
    return remember(memo, "topology.shapes", None, lambda: Shapes.of(topology), limit=1)


def _amount(raw: Any, where: str) -> int:
    try:
        return quantity_from_value(raw).milli
    except QuantityError as exc:
        raise TopologyError(f"{where}: {exc}") from None


def _list(value: Any) -> list[Any]:
    """A list field; anything else (the CRD's schema is loose) is read as empty."""
    return value if isinstance(value, list) else []


def parse_nrt(obj: Mapping[str, Any]) -> NodeTopology:
    """A ``NodeResourceTopology`` object as the API serves it (v1alpha2)."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise TopologyError("metadata.name: missing")
    attrs = {a.get("name"): a.get("value") for a in _list(obj.get("attributes"))
             if isinstance(a, Mapping) and isinstance(a.get("name"), str)}
    policy, scope = attrs.get("topologyManagerPolicy"), attrs.get("topologyManagerScope")
    if policy is None:
        for legacy in _list(obj.get("topologyPolicies")):
            if isinstance(legacy, str) and legacy in _LEGACY_POLICIES:
                policy, legacy_scope = _LEGACY_POLICIES[legacy]
                scope = scope or legacy_scope
                break
    policy = policy if policy in POLICIES else ""
    scope = scope if scope in SCOPES else "container"
    zones = []
    for i, raw in enumerate(_list(obj.get("zones"))):
        if not isinstance(raw, Mapping) or raw.get("type") != "Node":
            continue  # sockets, dies, cores: the Topology Manager aligns NUMA nodes (a Node zone's parent says
            # its socket)
        zname = str(raw.get("name") or "")
        found = _ZONE_NAME.fullmatch(zname)
        numa = int(found.group(1)) if found else i
        capacity: dict[str, int] = {}
        allocatable: dict[str, int] = {}
        for j, res in enumerate(_list(raw.get("resources"))):
            if not isinstance(res, Mapping) or not isinstance(res.get("name"), str):
                continue
            where = f"zones[{i}].resources[{j}]"
            capacity[res["name"]] = _amount(res.get("capacity", 0), f"{where}.capacity")
            allocatable[res["name"]] = _amount(res.get("allocatable", 0), f"{where}.allocatable")
        cpus = next((a.get("value") for a in _list(raw.get("attributes"))
                     if isinstance(a, Mapping) and a.get("name") == ZONE_CPUS_ATTRIBUTE), None)
        if "cpu" not in capacity and isinstance(cpus, str) and cpus.isascii() and cpus.isdigit() and len(cpus) <= 6 \
                and int(cpus) > 0:
            capacity["cpu"] = int(cpus) * 1000  # none allocatable: NFD lists allocatable CPUs wherever there are
        parent = raw.get("parent")
        socket = _SOCKET_ZONE.fullmatch(parent) if isinstance(parent, str) else None
        zones.append(Zone(numa, zname, capacity, allocatable, int(socket.group(1)) if socket else None))
    zones.sort(key=lambda z: z.numa)
    ordered = tuple(zones)
    cpu = parse_cpu_manager(attrs)
    pinner = read_pinner(obj)
    cpu_policy = pinner.cpu_manager_policy if pinner is not None else None
    return NodeTopology(name, policy, scope, ordered, NodeTopology.signature(policy, scope, ordered, cpu, cpu_policy),
                        cpu, cpu_policy)
