"""The rows ``numafit.fit_rows``' single-NUMA pass could not place, on a node whose policy admits across NUMA nodes
(restricted, best-effort), handed to ``numa_across`` one row at a time: each row read back from the pass's arrays
as that model's ``Node``. Pure."""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from webhook.core.demands import Demands
from webhook.core.numa_across import MAX_ZONES, Node, Outcome, Want, admit, refused_on_any_hint
from webhook.core.numa_amounts import Amounts
from webhook.core.numa_masks import Unknown
from webhook.core.numa_memory import FOREIGN, GROUPED_UNKNOWN, Memory, allocatable_masks
from webhook.core.numafit import NOT_PLACED, POD, Ask, Fits, Machines
from webhook.core.numatopology import RESTRICTED
from webhook.core.resourceblock import CPU

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from webhook.core.numafit import _Rows, _Start
else:
    from webhook.core.numafit import np


def hand_over(wants: Demands, asks: Sequence[Ask], node: _Rows, fits: Fits, machine: npt.NDArray[np.int64],
            across: Sequence[str | None], machines: Machines, column: Mapping[str, int]) -> None:
    """Where the policy admits what no NUMA node holds (``across``: restricted, best-effort), a row the
    single-NUMA pass could not place goes on in ``numa_across.admit``, one row at a time in Python: from the
    container that failed, on what the ones before it left (``container`` scope), or the whole Pod from the empty
    node (``pod`` scope). It is admitted across NUMA nodes (the row keeps the container that failed, no reason),
    refused (``Fits.refused`` with kubelet's reason) or not known (``Fits.unknown``). A row already refused for a
    reason (full-pcpus-only's SMTAlignmentError on one NUMA node) stays so. The rows whose first hint turns on
    other Pods' memory groups (``_grouped``, most of a fleet's where Pods hold memory) are found over arrays first:
    their answer needs no node (tests/unit/test_numa_handover.py holds them to the row-by-row loop)."""
    start = node.start
    want = [Want(a.kind, a.cpus // 1000, dict(a.memory), {k: v // 1000 for k, v in a.devices.items()})
            for a in asks]
    whole = Ask.of(wants.pod)
    pod = Want("pod", whole.cpus // 1000, dict(whole.memory), {k: v // 1000 for k, v in whole.devices.items()})
    nothing = np.array([p == "none" for p in across], np.bool_)[machine]
    read: _Read | None = None
    handed = np.array([p is not None for p in across], np.bool_)[machine]  # the others' rows are not this pass's
    rows = np.flatnonzero(((fits.failed != NOT_PLACED) | nothing) & handed)
    grouped = _grouped(rows, want, pod, fits, start, machine, across, machines, column)
    # Restricted, or the Pod's own hint (pod scope): admit raises GROUPED_UNKNOWN itself, nothing to read of the row.
    restricted = np.array([p == RESTRICTED for p in across], np.bool_)[machine[rows]]
    quick = grouped & (restricted | machines.pod_scope[machine[rows]])
    # best-effort, container scope: where no allocation can fail whatever the hint, GROUPED_UNKNOWN too.
    left = grouped & ~quick
    quick[left] = _plenty(rows[left], want, fits, node, machine, machines)
    fits.unknown.update(dict.fromkeys(rows[quick].tolist(), GROUPED_UNKNOWN))
    grouped_rows = set(rows[grouped & ~quick].tolist())
    empty: dict[tuple[int, int, tuple[bool, ...]], bool] = {}  # (machine, demand, device flags): refused alone
    for r in rows[~quick].tolist():
        m = int(machine[r])
        policy = across[m]
        if policy is None or (r in fits.reason and policy != "none"):
            continue
        pod_scope = bool(machines.pod_scope[m]) and policy != "none"
        if policy == "none":
            # No Topology Manager hints: nothing of the single-NUMA pass holds; every container from the empty node.
            fits.failed[r], fits.alone[r], fits.placed[r], fits.pod_zone[r] = NOT_PLACED, False, NOT_PLACED, NOT_PLACED
            fits.reason.pop(r, None)
        read = read or _Read(start, node, machines, column, rows[~quick])
        first = POD if pod_scope else int(fits.failed[r])
        asked = pod if pod_scope else want[first]
        try:
            if r in grouped_rows:
                # best-effort, container scope: admit's first hint raises GROUPED_UNKNOWN, and it asks whether the
                # allocation fails on any hint (``refused_on_any_hint``), without the row's memory or its hints.
                why = refused_on_any_hint(_row_node(read, r, m, policy, machines, NOW, column,
                                                    wants.zero_devices_aligned, memory=False), asked)
                if not why:
                    raise Unknown(GROUPED_UNKNOWN)
                outcome = Outcome(first, why)
            else:
                state = _row_node(read, r, m, policy, machines, START if pod_scope or policy == "none" else NOW,
                                  column, wants.zero_devices_aligned)
                outcome = admit(state, want, 0 if policy == "none" else first, pod if pod_scope else None)
        except Unknown as exc:
            fits.unknown[r] = str(exc)
            if policy == "none":
                fits.failed[r] = 0  # no verdict: the first container stands for the Pod
            continue
        if outcome.failed is not None:
            fits.failed[r], fits.reason[r] = outcome.failed, outcome.reason
            fits.refused.add(r)
            # Alone: refused on the empty node too, with nothing placed before it (the Pod's own refusal is).
            # The empty node is its machine's, but for the device plugin resources the row's zones have.
            if outcome.failed == POD:
                fits.alone[r] = True
                continue
            key = (m, outcome.failed, tuple(read.dev_in[res][r] for res in read.dev))
            found = empty.get(key)
            if found is None:
                found = empty[key] = _refused_alone(
                    _row_node(read, r, m, policy, machines, EMPTY, column, wants.zero_devices_aligned),
                    want[outcome.failed])
            fits.alone[r] = found


def _grouped(rows: npt.NDArray[np.int64], want: Sequence[Want], pod: Want, fits: Fits, start: _Start,
             machine: npt.NDArray[np.int64], across: Sequence[str | None], machines: Machines,
             column: Mapping[str, int]) -> npt.NDArray[np.bool_]:
    """Of ``rows``, those where ``admit``'s first hint raises ``GROUPED_UNKNOWN`` before anything else could
    answer, over every row at once: a restricted or best-effort machine of at most ``MAX_ZONES`` zones whose Memory
    Manager gives hints, a row refused for no reason yet, the first demand (the Pod in pod scope, else the container
    that failed) asks memory and no CPU hint before it can raise (align-by-socket), and a mask the machine's
    allocatable holds that memory on has a zone where the row began with less than that allocatable (``_row_node``'s
    ``FOREIGN`` cells; ``memory_masks`` reads such a mask's groups)."""
    m = machine[rows]
    policies = np.array([p in (RESTRICTED, "best-effort") for p in across], np.bool_)
    ok = policies[m] & (machines.zones[m] <= MAX_ZONES) & machines.memory_hints[m]
    if fits.reason:
        ok &= ~np.isin(rows, np.fromiter(fits.reason, np.int64, len(fits.reason)))
    if not start.mem or not ok.any():
        return np.zeros(rows.shape[0], np.bool_)
    first = np.where(machines.pod_scope[m], POD, fits.failed[rows])
    span = len(want) + 2  # a demand from POD up
    pairs, which = np.unique(m * span + first + 2, return_inverse=True)
    totals: dict[int, list[list[int]]] = {}
    union: list[int] = []  # per (machine, demand): the union of the masks whose allocatable holds the demand's memory
    for pair in pairs.tolist():
        at, f = divmod(pair, span)
        asked = pod if f - 2 == POD else want[f - 2]
        cpu = machines.cpu_managers[at]
        if not asked.memory or (asked.cpus and cpu is not None and "align-by-socket" in cpu.options):
            union.append(0)
            continue
        zones = int(machines.zones[at])
        total = totals.get(at)
        if total is None:
            total = totals[at] = machines.total[at, :zones].tolist()
        allocatable = {k: [zone[column[k]] for zone in total] if k in column else [0] * zones for k in start.mem}
        union.append(functools.reduce(operator.or_, allocatable_masks(allocatable, zones, asked.memory), 0))
    held = np.array(union, np.int64)[which.reshape(-1)]
    out: npt.NDArray[np.bool_] = ok & (held & _foreign(start, machine, machines, column)[rows] != 0)
    return out


def _foreign(start: _Start, machine: npt.NDArray[np.int64], machines: Machines,
             column: Mapping[str, int]) -> npt.NDArray[np.int64]:
    """Per row, the mask of its zones where it began with less of some memory type than its machine's allocatable
    (``_row_node``'s ``FOREIGN`` cells), over every row at once."""
    below = np.zeros(start.owner.shape[0], np.bool_)
    at = machine[start.owner]
    for k, began in start.mem.items():
        i = column.get(k)
        if i is not None:  # else the row and the machine both have none of it
            below |= np.asarray(began < machines.total[at, start.position, i], np.bool_)
    # Past MAX_ZONES a row is not ``_grouped``: its bits need not be right, only within int64.
    bits = np.where(below, np.left_shift(1, np.minimum(start.position, 62)), 0)
    out: npt.NDArray[np.int64] = np.bitwise_or.reduceat(bits, start.starts)
    return out


def _plenty(rows: npt.NDArray[np.int64], want: Sequence[Want], fits: Fits, node: _Rows,
            machine: npt.NDArray[np.int64], machines: Machines) -> npt.NDArray[np.bool_]:
    """Of best-effort container-scope ``rows`` whose first hint raises ``GROUPED_UNKNOWN`` (``_grouped``), those
    where ``refused_on_any_hint`` finds nothing, over every row at once: the node has at least the container's
    devices and CPUs in total (free plus reusable, in whole units) and no full-pcpus-only check. Such a row needs
    no node (``_row_node``): it was a third of the rows that built one, to answer ``GROUPED_UNKNOWN``."""
    out = np.ones(rows.shape[0], np.bool_)
    if not rows.shape[0]:
        return out
    start = node.start
    begin = start.starts[rows]
    end = begin + machines.zones[machine[rows]]

    def total(flat: npt.NDArray[np.int64], reuse: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]
              ) -> npt.NDArray[np.int64]:
        """Per row, its zones' whole units (each zone's milli-units // 1000, as ``_row_node`` reads them) plus
        the reusable ones."""
        summed = np.concatenate([np.zeros(1, flat.dtype), np.cumsum(flat // 1000)])
        where, count = reuse
        held: npt.NDArray[np.int64] = summed[end] - summed[begin] + np.where(where[rows] != NOT_PLACED,
                                                                            count[rows] // 1000, 0)
        return held

    first = fits.failed[rows]
    strict = np.array([c is not None and c.full_pcpus_only for c in machines.cpu_managers], np.bool_)[machine[rows]]
    cpus: npt.NDArray[np.int64] | None = None
    for f in np.unique(first).tolist():
        asked, on = want[f], first == f
        for res, count in asked.devices.items():
            if count and res in node.dev:
                out &= ~(on & start.dev_in[res][rows] & (total(node.dev[res], node.reuse_dev[res]) < count))
        if asked.cpus:
            cpus = total(node.cpu, node.reuse_cpu) if cpus is None else cpus
            out &= ~(on & (strict | (cpus < asked.cpus)))
    return out


def _refused_alone(empty: Node, want: Want) -> bool:
    try:
        return admit(empty, [want], 0).failed is not None
    except Unknown:
        return False


NOW, START, EMPTY = "now", "start", "empty"  # which amounts ``_row_node`` reads


class _Read:
    """The single-NUMA pass's arrays as Python lists, read once per ``hand_over`` (a ``tolist`` per array), not a
    slice of each per row: ``_row_node`` ran on every restricted and best-effort row, and reading numpy arrays
    element by element cost it more than building the row's node. Only the ``rows`` that build one (all without):
    a call's arrays hold every row of the fleet, and reading them all cost more than the few hundred rows left
    need. Per row (``starts``, ``reuse_cpu``...) a dict by row; per zone a list, the rows' zones one after another.
    Read only: each row's node gets lists of its own (``numa_across.admit`` changes them)."""

    def __init__(self, start: _Start, node: _Rows, machines: Machines, column: Mapping[str, int],
                 rows: npt.NDArray[np.int64] | None = None) -> None:
        if rows is None:
            rows = np.arange(start.starts.shape[0])
        ends = np.append(start.starts[1:], start.owner.shape[0])
        counts = ends[rows] - start.starts[rows]
        index: list[int] = rows.tolist()
        at = np.repeat(start.starts[rows] - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))

        def zone(a: npt.NDArray[Any]) -> list[Any]:
            out: list[Any] = a[at].tolist()
            return out

        def per_row(a: npt.NDArray[Any]) -> dict[int, Any]:
            return dict(zip(index, a[rows].tolist(), strict=True))

        self.column = column
        self.starts: dict[int, int] = dict(zip(index, (np.cumsum(counts) - counts).tolist(), strict=True))
        self.cpu: tuple[list[int], list[int]] = (zone(start.cpu), zone(node.cpu))
        self.reuse_cpu: tuple[dict[int, int], dict[int, int]] = (per_row(node.reuse_cpu[0]), per_row(node.reuse_cpu[1]))
        self.dev = {res: (zone(start.dev[res]), zone(node.dev[res])) for res in start.dev}
        self.dev_in: dict[str, dict[int, bool]] = {res: per_row(start.dev_in[res]) for res in start.dev}
        self.reuse_dev = {res: (per_row(where), per_row(count)) for res, (where, count) in node.reuse_dev.items()}
        self.memory_hints: dict[int, bool] = per_row(start.memory_hints)
        self.mem = {k: (zone(start.mem[k]), zone(node.mem[k])) for k in start.mem}
        self.reuse_mem = {k: zone(held) for k, held in node.reuse_mem.items()}
        self.assigned: list[bool] = zone(node.assigned)
        self.machines = machines
        self._machine: dict[int, tuple[list[list[int]], list[list[int]]]] = {}

    def machine(self, m: int) -> tuple[list[list[int]], list[list[int]]]:
        """Machine ``m``'s capacity and allocatable, [zone][resource], each machine read once (a fleet may have
        thousands: not all of them up front)."""
        found = self._machine.get(m)
        if found is None:
            zones = int(self.machines.zones[m])
            found = self._machine[m] = (self.machines.capacity[m, :zones].tolist(),
                                        self.machines.total[m, :zones].tolist())
        return found


def _row_node(read: _Read, r: int, m: int, policy: str, machines: Machines, when: str,
              column: Mapping[str, int], device_nodes_only: bool, memory: bool = True) -> Node:
    """Row ``r`` as ``numa_across`` reads a node: whole CPUs and devices, memory in the rows' milli-bytes, what
    init containers left for reuse and where the Memory Manager allocated. ``when``: ``NOW``, as the single-NUMA
    pass left it; ``START``, as the row began (``pod`` scope, ``none``); ``EMPTY``, the machine's empty node. Where
    the row began with less memory than its machine's allocatable, other Pods hold memory there, in groups no object
    publishes (``numa_memory.FOREIGN``). Without ``memory``, the node's memory is left out (None)."""
    first = read.starts[r]
    zones = int(machines.zones[m])
    end = first + zones
    capacity, total = read.machine(m)
    now = when == NOW

    def amounts(name: str, began_left: tuple[list[int], list[int]] | None) -> list[int]:
        """Milli-units per zone: the machine's (EMPTY), the row's start, or what the pass left."""
        if when == EMPTY or began_left is None:
            i = column.get(name)
            return [zone[i] for zone in total] if i is not None else [0] * zones
        return began_left[1 if now else 0][first:end]

    def capacity_of(name: str, free: list[int]) -> list[int]:
        i = column.get(name)
        if i is None:
            return [max(0, f) for f in free]
        return [max(zone[i] // 1000, f) for zone, f in zip(capacity, free, strict=True)]

    def reused(where_count: tuple[Mapping[int, int], Mapping[int, int]]) -> list[int]:
        out = [0] * zones
        where, count = where_count[0][r], where_count[1][r]
        if now and where != NOT_PLACED:
            out[where] = count // 1000
        return out

    cpu = [v // 1000 for v in amounts(CPU, read.cpu)]
    devices: dict[str, Amounts] = {}
    devices_capacity: dict[str, list[int]] = {}
    for res, began_left in read.dev.items():
        if not read.dev_in[res][r]:
            continue  # no zone of this node has it: not a device plugin resource here
        free = [v // 1000 for v in amounts(res, began_left)]
        devices[res] = Amounts.of(free, reused(read.reuse_dev[res]))
        devices_capacity[res] = capacity_of(res, free)
    manager: Memory | None = None
    if read.memory_hints[r] and memory:
        reuse: dict[int, dict[str, int]] = {}
        if now:
            for kind, held in read.reuse_mem.items():
                for z, v in enumerate(held[first:end]):
                    if v:
                        reuse.setdefault(1 << z, {})[kind] = v
        allocatable = {k: amounts(k, None) for k in read.mem}
        if when == EMPTY:
            cells = [0] * zones
        else:
            began = {k: began_left[0][first:end] for k, began_left in read.mem.items()}
            assigned = read.assigned[first:end]
            cells = [FOREIGN if any(began[k][z] < allocatable[k][z] for k in read.mem) else
                     1 << z if now and assigned[z] else 0 for z in range(zones)]
        manager = Memory(allocatable, {k: amounts(k, began_left) for k, began_left in read.mem.items()}, cells, reuse)
    return Node(zones, capacity_of(CPU, cpu), Amounts.of(cpu, reused(read.reuse_cpu)), devices_capacity, devices,
                manager, policy, machines.cpu_managers[m], machines.sockets[m], device_nodes_only)
