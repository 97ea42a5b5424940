"""kubelet's admission of what no single NUMA node holds, on a node whose Topology Manager policy admits across
NUMA nodes (``restricted``, ``best-effort``): one node, in Python, from where ``numafit.fit_rows``' single-NUMA
pass stopped. Read in pkg/kubelet/cm (v1.33.13 to v1.38.0-beta.0; the differential in
tests/fidelity/test_topology.py holds it to each):

- every provider's hints over every NUMA mask (``generateCPUTopologyHints``, ``generateDeviceTopologyHints``,
  the Memory Manager's ``calculateHints``), a hint preferred where its mask is as narrow as the provider's
  smallest that could ever hold the request (with ``align-by-socket``, a CPU hint within the fewest sockets too);
- the ``HintMerger``: a merged hint is preferred only where every provider's hint is preferred *and names the same
  mask*; the best merged hint is the narrowest preferred one, else a non-preferred one by
  ``BestNonPreferredAffinityCount``; ``restricted`` refuses the container (or the Pod) when it is not preferred
  (``TopologyAffinityError``), ``best-effort`` never;
- then each provider's ``Allocate``, in kubelet's order (device manager, CPU Manager, Memory Manager): devices and
  CPUs from the hint's NUMA nodes first and the rest from anywhere (they fail only where the node has too few:
  ``UnexpectedAdmissionError``), ``full-pcpus-only``'s ``SMTAlignmentError``, and the Memory Manager's own rules
  (a hint it extends, a NUMA node that cannot be in two groups).

Which CPUs or devices kubelet takes from several NUMA nodes depends on cores and device IDs a
NodeResourceTopology object does not publish: after such an allocation those amounts are known only in total, and
a later container whose verdict turns on them is ``Unknown``, never guessed. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from webhook.core.numa_amounts import Amounts
from webhook.core.numa_masks import Unknown, fewest, masks, narrower, sums, width
from webhook.core.numa_memory import Memory, allocate_memory, memory_masks
from webhook.core.numatopology import RESTRICTED, UNEXPECTED_ADMISSION_ERROR, CPUManager

TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"
MAX_ZONES = 8  # kubelet's Topology Manager refuses more NUMA nodes without max-allowable-numa-nodes (and 2^n masks)


@dataclass(frozen=True, slots=True)
class Hint:
    """A provider's (or the merged) hint: a NUMA mask over zone positions (None: any), and whether preferred."""

    mask: int | None
    preferred: bool


@cache
def _hints(zones: int) -> tuple[tuple[Hint, ...], tuple[Hint, ...]]:
    """Every mask's ``Hint`` over ``zones`` NUMA nodes, not preferred and preferred, indexed by the mask: one
    object each, shared (a frozen dataclass's construction cost more than the rest of a row's hint list)."""
    return tuple(Hint(m, False) for m in range(1 << zones)), tuple(Hint(m, True) for m in range(1 << zones))


def _listed(zones: int, hinted: Sequence[int], smallest: int) -> list[Hint]:
    """The hints of the masks ``hinted``, preferred where as narrow as ``smallest``."""
    other, preferred = _hints(zones)
    return [preferred[m] if m.bit_count() == smallest else other[m] for m in hinted]


@dataclass(frozen=True, slots=True)
class Want:
    """What one container (or, in ``pod`` scope, the Pod) asks, in whole units: exclusive CPUs, memory by type in
    bytes, devices by resource."""

    kind: str  # "init", "sidecar", "app" or "pod"
    cpus: int
    memory: Mapping[str, int]
    devices: Mapping[str, int]


@dataclass(slots=True)
class Node:
    """One node during one admission, zone by zone in NUMA order (a mask's bit ``p`` is the ``p``-th zone)."""

    zones: int
    cpu_capacity: list[int]  # whole CPUs per zone, reserved ones included (kubelet's topology counts them)
    cpu: Amounts
    devices_capacity: dict[str, list[int]]  # every device of the resource per zone (healthy or not)
    devices: dict[str, Amounts]
    memory: Memory | None  # None: the Memory Manager gives no hints (policy None)
    policy: str  # "restricted", "best-effort" or "none" (no hints: each provider allocates as it likes)
    cpu_manager: CPUManager | None
    sockets: Sequence[int] | None  # each zone's socket, where published
    device_nodes_only: bool  # from 1.36 a device's hints cover only the NUMA nodes with such devices

    @property
    def all(self) -> int:
        return (1 << self.zones) - 1


@dataclass(frozen=True, slots=True)
class Outcome:
    """Where the admission ended: ``failed`` the index of the container (or -2 for the Pod) kubelet refuses, with
    ``reason``; None where it admits."""

    failed: int | None
    reason: str = ""


def cpu_hints(node: Node, want: int, reusable: bool = True) -> list[Hint]:
    """``generateCPUTopologyHints``: masks over the NUMA nodes with CPUs whose free CPUs (plus the reusable ones,
    every one of them inside) hold ``want``; preferred at the fewest NUMA nodes whose CPUs could ever hold it, or
    with ``align-by-socket`` within the fewest sockets that could."""
    cpu = node.cpu
    if cpu.free is None or cpu.reuse is None:
        raise Unknown("which CPUs kubelet took across NUMA nodes for an earlier container is not known")
    free, reuse = cpu.free, cpu.reuse if reusable else [0] * node.zones
    held = [z for z in range(node.zones) if node.cpu_capacity[z] > 0]
    reused = sum(1 << z for z in range(node.zones) if reuse[z])
    have = sums([f + r for f, r in zip(free, reuse, strict=True)])
    # A comprehension, not a loop with a step per mask: this runs on every restricted and best-effort row.
    smallest = fewest(node.cpu_capacity, held, want)
    hints = [m for m in masks(tuple(held)) if not reused & ~m and have[m] >= want]
    if node.cpu_manager is not None and "align-by-socket" in node.cpu_manager.options:
        return [Hint(m, m.bit_count() == smallest or _socket_aligned(node, m, smallest)) for m in hints]
    return _listed(node.zones, hints, smallest)


def _socket_aligned(node: Node, mask: int, smallest: int) -> bool:
    """``isHintSocketAligned``: the mask's NUMA nodes lie on as many sockets as the fewest NUMA nodes that hold the
    request need (NUMA nodes per socket: the machine's NUMA nodes over its sockets)."""
    if node.sockets is None:
        raise Unknown("align-by-socket needs each NUMA node's socket, which the node's NodeResourceTopology does "
                      "not publish (qos-guard agent --publish-topology does)")
    # kubelet's NumNUMANodes and NumSockets count what holds CPUs.
    held = [z for z in range(node.zones) if node.cpu_capacity[z] > 0]
    per = len(held) // len({node.sockets[z] for z in held}) if held else 0
    if per == 0:
        return False
    fewest = (smallest + per - 1) // per
    return len({node.sockets[z] for z in range(node.zones) if mask >> z & 1}) == fewest


def device_hints(node: Node, resource: str, want: int, reusable: bool = True) -> list[Hint]:
    """``generateDeviceTopologyHints`` (``[]`` where fewer are free than asked: no possible affinity)."""
    amounts = node.devices[resource]
    if amounts.total_free + (amounts.total_reuse if reusable else 0) < want:
        return []
    if amounts.free is None or amounts.reuse is None:
        raise Unknown(f"which {resource} kubelet took across NUMA nodes for an earlier container is not known")
    free, reuse = amounts.free, amounts.reuse if reusable else [0] * node.zones
    capacity = node.devices_capacity[resource]
    having = [z for z in range(node.zones) if capacity[z] > 0 or free[z] > 0]
    zones = having if node.device_nodes_only and having else list(range(node.zones))
    reused = sum(1 << z for z in range(node.zones) if reuse[z])
    have = sums([f + r for f, r in zip(free, reuse, strict=True)])
    smallest = fewest([max(c, f) for c, f in zip(capacity, free, strict=True)], zones, want)
    hints = [m for m in masks(tuple(zones)) if not reused & ~m and have[m] >= want]
    return _listed(node.zones, hints, smallest)


def merge(lists: Sequence[list[Hint] | None], zones: int, full: bool = True) -> Hint:
    """The ``HintMerger``'s best hint over one list per provider and resource (None: no preference, ``[]``: no
    possible affinity): every permutation's merged mask (the AND of its masks) and preference (all preferred and
    naming one mask), the best by ``compare``. Permutations are folded by the (mask, preferred) they merge to, so
    the count stays within 2^zones states per list. Without ``full``, a merge with no preferred hint answers
    ``Hint(None, False)`` (restricted refuses it: which non-preferred one is best does not matter)."""
    every = (1 << zones) - 1
    # A preferred merged hint beats every other: the masks every list prefers, in common. A list that prefers no
    # mask at all (None, or a preferred hint without one) suits any, and may name one of its own.
    common: set[int] | None = None
    loose: set[int] = {every}
    for hints in lists:
        liked = {h.mask for h in hints or () if h.preferred and h.mask is not None}
        if hints is None or any(h.mask is None and h.preferred for h in hints):
            loose |= liked
            continue
        common = liked if common is None else common & liked
    if common is None:
        common = loose
    common.discard(0)
    if common:
        return Hint(min(common, key=lambda m: (width(m), m)), True)
    if not full:
        return Hint(None, False)
    states: set[tuple[int, bool, bool]] = {(every, True, False)}  # (mask, preferred, a mask was named)
    narrowest: list[int] = []
    for hints in lists:
        if hints is None:
            hints = [Hint(None, True)]
        elif not hints:
            hints = [Hint(None, False)]
        masks = [h.mask for h in hints if h.mask is not None]
        if masks:
            narrowest.append(min(width(m) for m in masks))
        nxt: set[tuple[int, bool, bool]] = set()
        for mask, preferred, named in states:
            for h in hints:
                if h.mask is None:
                    nxt.add((mask, preferred and h.preferred, named if preferred and h.preferred else False))
                    continue
                same = not named or h.mask == mask
                ok = preferred and h.preferred and same
                nxt.add((mask & h.mask, ok, ok))
        states = nxt
    best_count = max(narrowest, default=0)
    best: Hint | None = None
    for mask, preferred, _ in sorted(states):
        best = _compare(best, Hint(mask, preferred), best_count)
    return best or Hint(every, False)


def _compare(current: Hint | None, candidate: Hint, best_count: int) -> Hint | None:
    """``HintMerger.compare`` (without prefer-closest-numa-nodes, which no NodeResourceTopology object says)."""
    assert candidate.mask is not None
    if candidate.mask == 0:
        return current
    if current is None:
        return candidate
    assert current.mask is not None
    better = candidate if narrower(candidate.mask, current.mask) else current
    if current.preferred != candidate.preferred:
        return candidate if candidate.preferred else current
    if current.preferred:
        return better
    c, n = width(current.mask), width(candidate.mask)
    if c > best_count:
        return better
    if c == best_count:
        return current if n != best_count else better
    if n > best_count:
        return current
    if n == best_count:
        return candidate
    if n != c:
        return candidate if n > c else current
    return better


def admit(node: Node, wants: Sequence[Want], start: int, pod: Want | None = None) -> Outcome:
    """kubelet's admission from ``wants[start]`` on (``container`` scope: each container merged and allocated in
    turn), or, with ``pod``, the Pod's one hint and then every container allocated with it (``pod`` scope, from the
    first container). Raises ``Unknown`` where the verdict turns on what is not published."""
    if node.zones > MAX_ZONES and (node.policy != "none" or node.memory is not None):
        # none checks no NUMA count (topology_manager.go), and then only the Memory Manager iterates masks.
        raise Unknown(f"{node.zones} NUMA nodes: kubelet's Topology Manager needs max-allowable-numa-nodes past "
                      f"{MAX_ZONES}, not modelled")
    if pod is not None:
        hint = _merged(node, pod, reusable=False)
        if node.policy == RESTRICTED and not hint.preferred:
            return Outcome(-2, _affinity_error(node, pod))
        for i, want in enumerate(wants):
            why = _allocate(node, want, hint)
            if why:
                return Outcome(i, why)
        return Outcome(None)
    for i in range(start, len(wants)):
        want = wants[i]
        try:
            hint = _merged(node, want)
        except Unknown:
            # best-effort admits whatever the hint; an allocation that fails on any hint fails on this one too.
            why = refused_on_any_hint(node, want) if node.policy != RESTRICTED else ""
            if not why:
                raise
            return Outcome(i, why)
        if node.policy == RESTRICTED and not hint.preferred:
            return Outcome(i, _affinity_error(node, want))
        why = _allocate(node, want, hint)
        if why:
            return Outcome(i, why)
    return Outcome(None)


def _merged(node: Node, want: Want, reusable: bool = True) -> Hint:
    """The Topology Manager's best hint for ``want``: the providers' hint lists in kubelet's order (device manager,
    CPU Manager, Memory Manager), each resource a list of its own. Under ``best-effort`` without memory to align,
    no answer turns on it (devices and CPUs fail only where the node has too few): none is worked out, so CPUs and
    devices taken earlier across NUMA nodes need not be known per NUMA node."""
    if node.policy == "none" or (node.policy != RESTRICTED and not (node.memory is not None and want.memory)):
        return Hint(None, False)  # none: no hint at all (each provider allocates with none)
    lists: list[list[Hint] | None] = []
    for resource, count in sorted(want.devices.items()):
        if resource in node.devices:
            lists.append(device_hints(node, resource, count, reusable))
    lists.append(cpu_hints(node, want.cpus, reusable) if want.cpus else None)
    if node.memory is not None and want.memory:
        hinted, smallest = memory_masks(node.memory, node.zones, want.memory)
        # No mask at all: calculateHints returns no entry, which the merger reads as no preference.
        # One list per memory type, all alike (``merge`` reads them, never changes one).
        lists += [_listed(node.zones, hinted, smallest)] * len(want.memory) if hinted else [None]
    return merge(lists, node.zones, full=node.policy != RESTRICTED)


def refused_on_any_hint(node: Node, want: Want) -> str:
    """Why the device manager or the CPU Manager fails ``want`` whatever the merged hint (too few on the node,
    full-pcpus-only's check); ``""`` where that turns on the hint or nothing fails."""
    for resource, count in sorted(want.devices.items()):
        amounts = node.devices.get(resource)
        if amounts is not None and count and amounts.total_free + amounts.total_reuse < count:
            return (f"{UNEXPECTED_ADMISSION_ERROR}: {count} {resource} asked, "
                    f"{amounts.total_free + amounts.total_reuse} free on the node")
    if want.cpus:
        cpu = node.cpu_manager
        if cpu is not None and cpu.full_pcpus_only and not node.cpu.split:
            raise Unknown("how many of the node's free CPUs an init container still holds is not known (kubelet "
                          "took CPUs from its reusable ones and free ones alike), and full-pcpus-only counts them")
        why = cpu.smt_refusal(want.cpus, node.cpu.total_free) if cpu is not None else None
        if why is not None:
            return why
        if node.cpu.total_free + node.cpu.total_reuse < want.cpus:
            return (f"{UNEXPECTED_ADMISSION_ERROR}: {want.cpus} CPUs asked, "
                    f"{node.cpu.total_free + node.cpu.total_reuse} free on the node")
    return ""


def _affinity_error(node: Node, want: Want) -> str:
    return (f"{TOPOLOGY_AFFINITY_ERROR}: topologyManagerPolicy restricted finds no NUMA nodes that every resource "
            "prefers alike")


def _allocate(node: Node, want: Want, hint: Hint) -> str:
    """Each provider's ``Allocate`` of ``want`` with the merged ``hint``; kubelet's reason where one fails."""
    init = want.kind == "init"
    why = refused_on_any_hint(node, want)
    if why:
        return why
    for resource, count in sorted(want.devices.items()):
        amounts = node.devices.get(resource)
        if amounts is not None and count:
            amounts.take(count, hint.mask, init, reuse_first=True)
    if want.cpus:
        cpu = node.cpu_manager
        if cpu is not None and "align-by-socket" in cpu.options and hint.mask is not None:
            # getAlignedCPUs: every CPU of the hint's sockets is aligned, taken first (where the sockets are not
            # published, which CPUs went is not known).
            sockets = node.sockets
            if sockets is None:
                node.cpu.free = node.cpu.reuse = None
                node.cpu.take(want.cpus, None, init, reuse_first=False)
            else:
                on = {sockets[z] for z in range(node.zones) if hint.mask >> z & 1}
                aligned = sum(1 << z for z in range(node.zones) if sockets[z] in on)
                node.cpu.take(want.cpus, aligned, init, reuse_first=False)
        else:
            node.cpu.take(want.cpus, hint.mask, init, reuse_first=False)
    if node.memory is not None and want.memory:
        return allocate_memory(node.memory, node.zones, want.memory, want.kind == "init", hint.mask, hint.preferred)
    return ""
