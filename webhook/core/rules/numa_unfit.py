"""``numa-unfit``: with the Topology Manager's ``single-numa-node`` policy a container (scope
``container``) or the whole Pod (scope ``pod``) must fit in one NUMA node, or kubelet fails the Pod
with ``TopologyAffinityError``.

Two forms: ``policy.numa`` as one NUMA node's size typed into the configuration (every node alike), or
``policy.numa: auto``, where each node the Pod can land on is judged against its own NodeResourceTopology
object by ``webhook.core.numa`` (kubelet's admission, simulated; held to the real Topology Manager by
tests/fidelity/test_topology.py). The fitter reads each node's CPU Manager policy from its NodeResourceTopology's
``cpuPinner`` (the agent's): under ``none`` the Pod's CPUs get no hint there; where it is not published the node is
judged as ``static`` (``NodeTopology.cpu_hints``). A Pod whose CPUs come from a ``dra.cpu`` claim is fitted
without its CPUs on every node, since the driver's nodes run the CPU Manager ``none`` (no CPU hint).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.core.config import NUMA, AutoNuma, NumaPolicy, Policy
from webhook.core.cpuoptions import spread_caveat
from webhook.core.demands import Demand, Demands, demands, dra_use, may_align, show_amount
from webhook.core.dra_requests import DeviceClasses, DraUse
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.memo import Memo, remember
from webhook.core.numa import ClusterFit, NodeFit, fit_cluster
from webhook.core.numa_across import TOPOLOGY_AFFINITY_ERROR
from webhook.core.numatopology import (
    HUGEPAGES,
    RESTRICTED,
    SINGLE_NUMA_NODE,
    UNEXPECTED_ADMISSION_ERROR,
    NodeTopology,
    Topology,
    Zone,
)
from webhook.core.podspec import PodSpec
from webhook.core.quantity import format_bytes, format_milli, format_milli_bytes
from webhook.core.resourceblock import CPU, MEMORY, effective_requests
from webhook.core.rules.base import PolicyRefusal, Rule, Text, Violation
from webhook.core.rules.dra_unaligned import cpus_from_dra

RULE_ID = "numa-unfit"

UNFIT = Text("{label}: {total}needs {over}; kubelet's single-numa-node policy would fail it with "
            "TopologyAffinityError")
OVER = Text("{need} (a NUMA node has {cap})")
IN_TOTAL = "in total "


def _show(resource: str, milli: int) -> str:
    if resource == CPU:
        return f"{format_milli(milli)} CPUs"
    if resource == MEMORY:
        return f"{format_milli_bytes(milli)} memory"
    return f"{format_milli(milli)} {resource}"


def _overflow(needs: Mapping[str, int], numa: NumaPolicy) -> list[str]:
    capacity: dict[str, int | None] = {CPU: numa.cpus, MEMORY: numa.memory, **numa.devices}
    over = []
    for resource, cap in capacity.items():
        if cap is not None and needs.get(resource, 0) > cap:
            over.append(OVER(need=_show(resource, needs[resource]), cap=_show(resource, cap)))
    return over



# policy.numa: auto
ALONE = Text("{label}: {total}needs {need} on one NUMA node; the largest zone of any matching node has {have}")
IN_ORDER = Text("{label}: needs {need} on one NUMA node once the containers before it are placed (kubelet "
                "places init containers, sidecars and containers in order, each on what the earlier ones left); "
                "no matching node has that left")
REFUSED = Text("single-numa-node refuses it on {nodes} (TopologyAffinityError)")
SMT_REFUSED = Text("full-pcpus-only refuses it on {nodes} (SMTAlignmentError)")
# restricted admits a container across NUMA nodes only where every resource's preferred hint names the same ones
# (core.numa_across): e.g. its CPUs need two NUMA nodes while its one GPU prefers its own.
RESTRICTED_REFUSED = Text("restricted refuses it on {nodes} (TopologyAffinityError: no NUMA nodes that its CPUs, "
                          "memory and devices all prefer alike)")
OTHER_REFUSAL = Text("{policy} refuses it on {nodes} ({reason})")
ALLOCATION = Text("kubelet fails it on {nodes} at allocation ({reason})")
SPREAD = Text("{policy} on {nodes} would admit it across NUMA nodes")
UNSURE = Text("whether {policy} on {nodes} admits it is not known ({why})")
WAY_OUT = Text("ask for at most {have}")
# Each part fits some NUMA node, never all on one: no smaller request of one part helps, the node's layout does.
APART = Text("{label}: {total}needs {need} on one NUMA node; a matching node has each, never all on one NUMA "
             "node ({node}: {zones}); kubelet aligns them only where they share one NUMA node")
# Kubelet's Topology Manager has no DRA hint provider, and NodeResourceTopology does not publish DRA devices.
NOT_FITTED = Text("{label}: its DRA devices ({how}) were not fitted: kubelet's Topology Manager does not align "
                  "devices allocated through DRA and NodeResourceTopology does not publish them; numa: auto judged "
                  "its CPUs, memory and device plugin devices only")
NOWHERE = Text("{label}: no node's NodeResourceTopology publishes {names}, so numa: auto judged it on no node; if "
               "DRA serves it (a DeviceClass's extendedResourceName), policy.deviceClasses: true fits its CPUs and "
               "memory")
MAX_NODES_SHOWN = 2


def _nodes(fits: tuple[NodeFit, ...]) -> str:
    names = sorted(name for f in fits for name in f.names)
    shown = ", ".join(names[:MAX_NODES_SHOWN]) + (f" and {len(names) - MAX_NODES_SHOWN} more"
                                                  if len(names) > MAX_NODES_SHOWN else "")
    return f"node {shown}" if len(names) == 1 else f"nodes {shown}"


def _join(items: Iterable[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    words = list(items)
    return ", ".join(words[:-1]) + f" and {words[-1]}" if len(words) > 1 else "".join(words)


def _have(name: str, amount: int) -> str:
    """A zone's amount, after the need has named the resource: ``32 CPUs``, ``240Gi``, ``4``."""
    if name == CPU:
        return show_amount(name, amount)
    return format_bytes(amount) if name == MEMORY or name.startswith(HUGEPAGES) else str(amount)


def _auto(pod: PodSpec, topology: Topology, memo: Memo | None, classes: DeviceClasses | None,
          dra_cpus: bool = False) -> list[Violation]:
    """The findings for ``pod`` over the snapshot, remembered per node constraints, demand and DRA devices in the
    caller's ``memo`` (the same Pods come again and again: a workload's replicas, retries). ``dra_cpus``: its CPUs
    come from a ``dra.cpu`` claim, so its nodes run the CPU Manager ``none`` (the driver's requirement;
    ``dra-cpu-pinner-mismatch`` says where not), whose Topology Manager hint is none (policy_none.go
    GetTopologyHints): its CPUs are no NUMA constraint, memory and devices still are."""
    if topology.nodes is None or not may_align(pod):
        return []
    wants = demands(pod).without_cpus() if dra_cpus else demands(pod)
    use = dra_use(pod, classes)
    dra = frozenset(use.resources)
    found = remember(memo, "numa-unfit.verdicts", (pod.node_constraints.key, wants.key, dra, use.claims),
                     lambda: tuple(_judge(pod, topology, wants, memo, dra)
                                   + _not_fitted(pod, use, wants, topology)
                                   + _published_nowhere(pod, wants, topology, dra)))
    return list(found)


def _published_nowhere(pod: PodSpec, wants: Demands, topology: Topology, dra: frozenset[str]) -> list[Violation]:
    """A device the Pod asks that no node's NodeResourceTopology publishes (and that is not known to be DRA's):
    it is judged on no node, and that is said, not passed over: where DRA serves it, only the DeviceClasses
    tell (policy.deviceClasses: true)."""
    asked = sorted({k for d in wants.containers for k, v in d.devices.items() if v > 0 and k not in dra})
    # A node without a NodeResourceTopology object could have it: then nothing is known, and nothing is said.
    if not asked or not topology.topologies or any(n not in topology.topologies for n in topology.nodes or ()):
        return []
    anywhere = {name for t in topology.topologies.values() for name in t.published}
    missing = [k for k in asked if k not in anywhere]
    if not missing:
        return []
    return [Violation(pod.path, NOWHERE(label=f"pod ({dotted(pod.path)})", names=_join(missing)), rule=RULE_ID,
                      advisory=True)]


def _not_fitted(pod: PodSpec, use: DraUse, wants: Demands, topology: Topology) -> list[Violation]:
    """The advisory that the Pod's DRA devices were left out of the fit, and why. An extended resource that
    every node publishes per NUMA node is a device plugin's there, and was fitted."""
    everywhere = [r for r in use.resources if all(r in t.published for t in topology.topologies.values())]
    use = DraUse(use.claims, use.claims_path, {r: c for r, c in use.resources.items() if r not in everywhere},
                 use.resource_paths)
    if not use or not wants.aligned:
        return []
    how = [pod.claims_named(use.claims)] if use.claims else []
    how += [f"{r} (DeviceClass {c})" for r, c in sorted(use.resources.items())]
    return [Violation(use.path, NOT_FITTED(label=f"pod ({dotted(pod.path)})", how="; ".join(how)), rule=RULE_ID,
                      advisory=True)]


def _judge(pod: PodSpec, topology: Topology, wants: Demands, memo: Memo | None,
           dra: frozenset[str] = frozenset()) -> list[Violation]:
    fit: ClusterFit = fit_cluster(pod, topology, wants=wants, memo=memo, dra=dra)
    if fit.fits or fit.unknown or not (fit.refused or fit.spread or fit.unsure):
        return []
    # The node that placed the most before failing tells the story; ties go to the first by name.
    story = min(fit.refused + fit.spread + fit.unsure, key=lambda f: (-len(f.placed), f.node))
    need: Demand | None = story.failed
    if need is None:
        return []
    matching = [topology.topologies[f.node] for f in fit.refused + fit.spread + fit.unsure]
    # A device no matching node publishes per NUMA node is not aligned there (and is the scheduler's business);
    # nor is memory where no matching node publishes any (Memory Manager None: no memory hint), so it is not named.
    published = {name for t in matching for z in t.zones for name in z.capacity}
    asked = [(n, a) for n, a in need.items() if n == CPU or n in published]
    total = "in total " if need.kind == "pod" else ""
    parts = []
    way_out = ""
    best = largest_zone(need, matching) if story.alone else None
    # A node that holds each part on some NUMA node, never all on one (in name order: the message is stable).
    apart = next((t for t in sorted(matching, key=lambda t: t.name) if len(asked) > 1 and all(
        any(z.allocatable.get(n, 0) // 1000 >= a for z in t.zones) for n, a in asked)), None)
    if story.reason.startswith(("SMTAlignmentError", UNEXPECTED_ADMISSION_ERROR)):
        # kubelet refuses it at allocation (full-pcpus-only; too few on the node), whatever NUMA node holds it.
        parts.append(f"{need.label}: {story.reason}")
    elif best is not None and apart is not None:
        topo = apart
        zones = "; ".join(f"{z.name} has {_join(_have(n, z.allocatable.get(n, 0) // 1000) for n, _ in asked)}"
                          for z in topo.zones)
        parts.append(APART(label=need.label, total=total, need=_join(show_amount(n, a) for n, a in asked),
                           node=f"node {topo.name}", zones=zones))
    elif best is not None:
        zone = best[1]
        short = [(n, a) for n, a in asked if zone.allocatable.get(n, 0) // 1000 < a] or asked
        have = [(n, zone.allocatable.get(n, 0) // 1000) for n, _ in short]
        parts.append(ALONE(label=need.label, total=total, need=_join(show_amount(n, a) for n, a in short),
                           have=_join(_have(n, a) for n, a in have)))
        way_out = WAY_OUT(have=_join(show_amount(n, a) for n, a in have))
    else:
        parts.append(IN_ORDER(label=need.label, need=_join(show_amount(n, a) for n, a in asked)))
    if fit.refused:
        smt = tuple(f for f in fit.refused if f.smt_refused)
        allocation = tuple(f for f in fit.refused if f.reason.startswith(UNEXPECTED_ADMISSION_ERROR))
        numa = tuple(f for f in fit.refused if f not in smt and f not in allocation)
        single = tuple(f for f in numa if f.policy == SINGLE_NUMA_NODE)
        restricted = tuple(f for f in numa if f.policy == RESTRICTED
                           and f.reason.startswith(TOPOLOGY_AFFINITY_ERROR))
        parts += [REFUSED(nodes=_nodes(single))] if single else []
        parts += [RESTRICTED_REFUSED(nodes=_nodes(restricted))] if restricted else []
        # Any other refusal (none today: best-effort and none refuse only at allocation) says kubelet's reason.
        parts += [OTHER_REFUSAL(policy=f.policy, nodes=_nodes((f,)), reason=f.reason or "TopologyAffinityError")
                  for f in numa if f not in single and f not in restricted]
        parts += [SMT_REFUSED(nodes=_nodes(smt))] if smt else []
        parts += [ALLOCATION(nodes=_nodes(allocation), reason=allocation[0].reason)] if allocation else []
    spread = [SPREAD(policy=policy, nodes=_nodes(tuple(f for f in fit.spread if f.policy == policy)))
              for policy in sorted({f.policy for f in fit.spread})]
    spread += [UNSURE(policy=f.policy, nodes=_nodes((f,)), why=f.unknown) for f in fit.unsure]
    # Admitted across NUMA nodes is said only as far as the node's CPU Manager options are known there
    # (webhook.core.cpuoptions): where the Pod asks exclusive CPUs, one caveat names every node whose options are
    # unknown (one sentence, not one per node group: the advisory's first 120 characters must still say what the
    # Pod needs).
    # A node whose CPU Manager is none has no options (kubelet refuses any there): nothing unknown.
    unknown = tuple(f for f in fit.spread if topology.topologies[f.node].cpu_manager is None
                    and topology.topologies[f.node].cpu_hints)
    if unknown and any(d.cpus for d in wants.containers):
        spread += [c for c in (spread_caveat(_nodes(unknown), None),) if c is not None]
    if way_out:
        parts.append(way_out)
    # Refused only where kubelet would fail it on every node it can land on: where a node would admit the Pod
    # across NUMA nodes, or whether it would is not known, it is reported, and that comes first (an admission
    # warning is cut at 120 characters).
    return [Violation(need.path, "; ".join(spread + parts), need.container, rule=RULE_ID, advisory=bool(spread))]


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    numa = policy.numa
    if numa is None:
        return []
    if isinstance(numa, AutoNuma):  # the nodes' own NUMA zones: a fact, not configured; unknown says nothing
        return [] if facts.topology is None else _auto(pod, facts.topology, facts.remembering(),
                                                       facts.device_classes, cpus_from_dra(pod, facts))
    found = []
    if numa.scope == "container":
        for c in pod.all_containers:
            block = c.resources
            needs = {k: a.milli for k, a in block.requests.items() if a.positive}
            needs.update({k: a.milli for k, a in block.limits.items() if a.positive and k not in needs})
            needs.update(c.devices)
            over = _overflow(needs, numa)
            if over:
                found.append(Violation(block.path, UNFIT(label=block.label, total="", over=", ".join(over)),
                                       c.name, rule=RULE_ID))
        return found
    total = effective_requests(pod.containers, pod.init_containers)
    if pod.pod_level is not None:
        total.update({k: a.milli for k, a in pod.pod_level.requests.items() if a.positive})
    over = _overflow(total, numa)
    if over:
        found.append(Violation(pod.path, UNFIT(label=f"pod ({dotted(pod.path)})", total=IN_TOTAL,
                                                        over=", ".join(over)), rule=RULE_ID))
    return found


RULE = Rule(
    RULE_ID, check=check, cel=None,
    summary="with `policy.numa`, a container or the whole Pod needs more than one NUMA node has; with "
            "`policy.numa: auto`, no node the Pod can land on would admit it on one NUMA node",
    severity="medium",
    enabled=lambda policy: policy.numa is not None,
    policy_refusal=PolicyRefusal(
        f"policy.{NUMA.name}", f"{RULE_ID} is not available as an admission policy (the pod scope sums exact "
        "quantities over init containers and sidecars, which CEL cannot fold, and numa: auto reads the cluster's "
        "NodeResourceTopology objects, which an admission policy cannot); use the webhook (enforcement: webhook) "
        f"or remove policy.{NUMA.name}"),
)


def largest_zone(need: Demand, topologies: Iterable[NodeTopology]) -> tuple[NodeTopology, Zone] | None:
    """The zone that comes closest to holding ``need``: most of its resources held, then the most of the
    first resource short."""
    best: tuple[tuple[int, list[float]], NodeTopology, Zone] | None = None
    for topo in topologies:
        for zone in topo.zones:
            held = 0
            shares = []
            for name, amount in need.items():
                have = _zone_units(zone, name)
                held += have >= amount
                shares.append(min(1.0, have / amount) if amount else 1.0)
            key = (held, shares)
            if best is None or key > best[0]:
                best = (key, topo, zone)
    return None if best is None else (best[1], best[2])


def _zone_units(zone: Zone, name: str) -> int:
    milli = zone.allocatable.get(name, 0)
    return milli // 1000
