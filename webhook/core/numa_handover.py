"""The rows ``numafit.fit_rows``' single-NUMA pass could not place, on a node whose policy admits across NUMA nodes
(restricted, best-effort), handed to ``numa_across`` one row at a time: each row read back from the pass's arrays
as that model's ``Node``. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from webhook.core.demands import Demands
from webhook.core.numa_across import Node, Want, admit
from webhook.core.numa_amounts import Amounts
from webhook.core.numa_masks import Unknown
from webhook.core.numa_memory import FOREIGN, Memory
from webhook.core.numafit import NOT_PLACED, POD, Ask, Fits, Machines
from webhook.core.podspec import CPU

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
    reason (full-pcpus-only's SMTAlignmentError on one NUMA node) stays so."""
    start = node.start
    want = [Want(a.kind, a.cpus // 1000, dict(a.memory), {k: v // 1000 for k, v in a.devices.items()})
            for a in asks]
    whole = Ask.of(wants.pod)
    pod = Want("pod", whole.cpus // 1000, dict(whole.memory), {k: v // 1000 for k, v in whole.devices.items()})
    nothing = np.array([p == "none" for p in across], np.bool_)[machine]
    for r in np.flatnonzero((fits.failed != NOT_PLACED) | nothing).tolist():
        m = int(machine[r])
        policy = across[m]
        if policy is None or (r in fits.reason and policy != "none"):
            continue
        pod_scope = bool(machines.pod_scope[m]) and policy != "none"
        if policy == "none":
            # No Topology Manager hints: nothing of the single-NUMA pass holds; every container from the empty node.
            fits.failed[r], fits.alone[r], fits.placed[r], fits.pod_zone[r] = NOT_PLACED, False, NOT_PLACED, NOT_PLACED
            fits.reason.pop(r, None)
        try:
            state = _row_node(start, node, r, m, policy, machines, START if pod_scope or policy == "none" else NOW,
                              column, wants.zero_devices_aligned)
            outcome = admit(state, want, 0 if policy == "none" else int(fits.failed[r]), pod if pod_scope else None)
        except Unknown as exc:
            fits.unknown[r] = str(exc)
            if policy == "none":
                fits.failed[r] = 0  # no verdict: the first container stands for the Pod
            continue
        if outcome.failed is not None:
            fits.failed[r], fits.reason[r] = outcome.failed, outcome.reason
            fits.refused.add(r)
            # Alone: refused on the empty node too, with nothing placed before it (the Pod's own refusal is).
            fits.alone[r] = outcome.failed == POD or _refused_alone(
                _row_node(start, node, r, m, policy, machines, EMPTY, column, wants.zero_devices_aligned),
                want[outcome.failed])


def _refused_alone(empty: Node, want: Want) -> bool:
    try:
        return admit(empty, [want], 0).failed is not None
    except Unknown:
        return False


NOW, START, EMPTY = "now", "start", "empty"  # which amounts ``_row_node`` reads


def _row_node(start: _Start, node: _Rows, r: int, m: int, policy: str, machines: Machines, when: str,
              column: Mapping[str, int], device_nodes_only: bool) -> Node:
    """Row ``r`` as ``numa_across`` reads a node: whole CPUs and devices, memory in the rows' milli-bytes, what
    init containers left for reuse and where the Memory Manager allocated. ``when``: ``NOW``, as the single-NUMA
    pass left it; ``START``, as the row began (``pod`` scope, ``none``); ``EMPTY``, the machine's empty node. Where
    the row began with less memory than its machine's allocatable, other Pods hold memory there, in groups no object
    publishes (``numa_memory.FOREIGN``)."""
    first = int(start.starts[r])
    zones = int(machines.zones[m])
    at = slice(first, first + zones)
    capacity, total = machines.capacity[m], machines.total[m]
    now = when == NOW

    def empty(name: str) -> list[int]:
        """Milli-units per zone on the machine's empty node (its allocatable)."""
        i = column.get(name)
        return [int(v) for v in total[:zones, i].tolist()] if i is not None else [0] * zones

    def amounts(name: str, began: npt.NDArray[Any], left: npt.NDArray[Any] | None) -> list[int]:
        """Milli-units per zone: the machine's (EMPTY), the row's start, or what the pass left."""
        if when == EMPTY:
            return empty(name)
        return [int(v) for v in (left if now and left is not None else began)[at].tolist()]

    def capacity_of(name: str, free: list[int]) -> list[int]:
        i = column.get(name)
        held = [int(v) // 1000 for v in capacity[:zones, i].tolist()] if i is not None else [0] * zones
        return [max(c, f) for c, f in zip(held, free, strict=True)]

    def reused(where_count: tuple[npt.NDArray[np.int64], npt.NDArray[Any]]) -> list[int]:
        out = [0] * zones
        where, count = int(where_count[0][r]), int(where_count[1][r])
        if now and where != NOT_PLACED:
            out[where] = count // 1000
        return out

    cpu = [v // 1000 for v in amounts(CPU, start.cpu, node.cpu)]
    devices: dict[str, Amounts] = {}
    devices_capacity: dict[str, list[int]] = {}
    for res in start.dev:
        if not start.dev_in[res][r]:
            continue  # no zone of this node has it: not a device plugin resource here
        free = [v // 1000 for v in amounts(res, start.dev[res], node.dev[res])]
        devices[res] = Amounts.of(free, reused(node.reuse_dev[res]))
        devices_capacity[res] = capacity_of(res, free)
    memory = None
    if bool(start.memory_hints[r]):
        reuse: dict[int, dict[str, int]] = {}
        for kind, held in node.reuse_mem.items():
            for z, v in enumerate(held[at].tolist()):
                if v and now:
                    reuse.setdefault(1 << z, {})[kind] = int(v)
        allocatable = {k: empty(k) for k in start.mem}  # the Memory Manager's, whatever ``when`` reads
        began = {k: [int(v) for v in start.mem[k][at].tolist()] for k in start.mem}
        foreign = [when != EMPTY and any(began[k][z] < allocatable[k][z] for k in start.mem) for z in range(zones)]
        assigned = node.assigned[at].tolist()
        cells = [FOREIGN if foreign[z] else 1 << z if now and assigned[z] else 0 for z in range(zones)]
        memory = Memory(allocatable, {k: amounts(k, start.mem[k], node.mem[k]) for k in start.mem}, cells, reuse)
    return Node(zones, capacity_of(CPU, cpu), Amounts.of(cpu, reused(node.reuse_cpu)), devices_capacity, devices,
                memory, policy, machines.cpu_managers[m], machines.sockets[m], device_nodes_only)
