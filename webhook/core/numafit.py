"""kubelet's Topology Manager admission, written once, over rows: ``fit_rows`` judges a Pod on many nodes' zones at
once (the scheduler extender's free shapes of a fleet: ``webhook.extender.fleet_verdicts``) and ``numa.fit_node``
on one node as one row (``node_row``). The model, provider by provider, is ``webhook.core.numa``'s docstring;
the differential tests (tests/fidelity/test_topology.py, test_placement.py) hold it to the real Topology Manager.
numpy is imported at the first fit. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from webhook.core.demands import Demand, Demands, is_device
from webhook.core.numatopology import CPUManager
from webhook.core.resourceblock import CPU

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    class _Numpy:
        """numpy, imported at the first fit: ``check`` and admission without a topology never fit, and never pay
        its import (about 0.1 s); after the first use ``np`` is numpy itself."""

        def __getattr__(self, name: str) -> Any:
            import numpy

            globals()["np"] = numpy
            return getattr(numpy, name)

    np = _Numpy()

EXACT = 1 << 53  # a fleet's amounts and requests below it leave int64 room for a few of them added, times 1,024
NOT_PLACED = -1
POD = -2  # ``Fits.failed``: the Pod's own demand (``pod`` scope), not a container's
_FAR = 1 << 30  # past any zone's position


@dataclass(frozen=True, slots=True)
class Ask:
    """A ``Demand`` in a zone's milli-units (``fit_rows`` compares them with the zones' amounts as they are)."""

    kind: str
    cpus: int
    memory: dict[str, int]
    devices: dict[str, int]

    @classmethod
    def of(cls, d: Demand) -> Ask:
        return cls(d.kind, d.cpus * 1000, {k: v * 1000 for k, v in d.memory.items()},
                   {k: v * 1000 for k, v in d.devices.items()})

    @property
    def exact(self) -> bool:
        """Every amount below ``EXACT`` (sums of a few stay within int64)."""
        return all(v < EXACT for v in (self.cpus, *self.memory.values(), *self.devices.values()))


class Machines(Protocol):
    """Per machine (an empty shape), what every row of it shares: stacked, one element per machine."""

    @property
    def capacity(self) -> npt.NDArray[Any]: ...  # [machine, zone, resource] (milli)
    @property
    def total(self) -> npt.NDArray[Any]: ...  # [machine, zone, resource]: the empty node's allocatable (milli)
    @property
    def memory_hints(self) -> npt.NDArray[np.bool_]: ...  # the Memory Manager gives hints (``memory_hinted``)
    @property
    def pod_scope(self) -> npt.NDArray[np.bool_]: ...
    @property
    def zones(self) -> npt.NDArray[np.int64]: ...  # how many zones it has (at least one)
    @property
    def cpu_managers(self) -> Sequence[CPUManager | None]: ...  # its static CPU Manager's options, where known
    @property
    def cpu_hints(self) -> npt.NDArray[np.bool_]: ...  # its CPU Manager gives hints (``NodeTopology.cpu_hints``)
    @property
    def sockets(self) -> Sequence[tuple[int, ...] | None]: ...  # each zone's socket, where published


class _Start:
    """The rows as kubelet reads a node on admission, for the resources the Pod asks: what is free per zone, the
    zones that have a device (capacity or free above 0: the device manager's NUMA nodes), the machine's flags per
    row. A row's zones are only its machine's (not the layout's padding), one after another: ``starts`` (per row)
    says where each row's begin, ``owner`` and ``position`` (per zone) which row a zone is of and its place in the
    machine's NUMA order. In milli-units: a zone's whole CPUs (``allocatable // 1000``) hold ``n`` CPUs when its
    milli-CPUs hold ``1000 n``, and so through every sum and difference of whole units (``Ask``)."""

    def __init__(self, wants: Demands, free: npt.NDArray[Any], machine: npt.NDArray[np.int64],
                 column: Mapping[str, int], machines: Machines) -> None:
        zones = machines.zones[machine]
        self.starts: npt.NDArray[np.int64] = np.concatenate([np.zeros(1, np.int64), np.cumsum(zones)[:-1]])
        self.owner: npt.NDArray[np.int64] = np.repeat(np.arange(machine.shape[0]), zones)
        self.position: npt.NDArray[np.int64] = np.arange(self.owner.shape[0]) - self.starts[self.owner]
        self.memory_hints: npt.NDArray[np.bool_] = machines.memory_hints[machine]
        self.memory_hints_at: npt.NDArray[np.bool_] = self.memory_hints[self.owner]
        self.zero = wants.zero_devices_aligned
        self.dtype = free.dtype

        # Each zone's first amount in ``free`` (a C-ordered [rows, zones, resources]): a column is one ``take``.
        at = (self.owner * free.shape[1] + self.position) * free.shape[2]
        flat = free.reshape(-1)

        def amounts(name: str) -> npt.NDArray[Any]:
            i = column.get(name)
            return np.take(flat, at + i) if i is not None else np.zeros(self.owner.shape[0], free.dtype)

        asked = (*wants.containers, wants.pod)
        self.cpu = amounts(CPU)
        self.mem = {k: amounts(k) for k in sorted({k for d in asked for k in d.memory})}
        self.dev: dict[str, npt.NDArray[Any]] = {}
        self.dev_has: dict[str, npt.NDArray[np.bool_]] = {}
        self.dev_in: dict[str, npt.NDArray[np.bool_]] = {}  # per row: some zone has it (a device plugin resource)
        self.dev_in_at: dict[str, npt.NDArray[np.bool_]] = {}  # the same per zone
        for res in sorted({k for d in asked for k in d.devices}):
            i = column.get(res)
            if i is not None and is_device(res):
                self.dev[res] = amounts(res)
                has = (machines.capacity[machine[self.owner], self.position, i] > 0) | (self.dev[res] > 0)
                self.dev_has[res] = has
                self.dev_in[res] = np.logical_or.reduceat(has, self.starts)
                self.dev_in_at[res] = self.dev_in[res][self.owner]
        # full-pcpus-only: per row, the node's CPU Manager where it runs the option (``_smt``).
        managers = machines.cpu_managers
        self.smt = [managers[m] for m in machine.tolist()] if any(
            c is not None and c.full_pcpus_only for c in managers) else None


class _Rows:
    """Free amounts per zone of each row, and what init containers left for reuse, during one admission: kubelet's
    providers (CPU, Memory and device managers) asked for hints and allocating. A zone array has one element per
    zone of each row (``_Start``), a row array one per row; a zone is its position in its machine's NUMA order."""

    def __init__(self, start: _Start) -> None:
        self.start = start
        self.cpu = start.cpu.copy()
        self.mem = {k: v.copy() for k, v in start.mem.items()}
        self.reuse_mem = {k: np.zeros_like(v) for k, v in start.mem.items()}
        self.assigned = np.zeros(start.cpu.shape, np.bool_)  # per zone: the Memory Manager allocated there
        self.dev = {k: v.copy() for k, v in start.dev.items()}
        rows = start.starts.shape[0]
        self.reused = False  # an init container was placed: its amounts may be reused (else no reuse to read)
        self.reuse_cpu = (np.full(rows, NOT_PLACED, np.int64), np.zeros(rows, start.dtype))
        self.reuse_dev = {res: (np.full(rows, NOT_PLACED, np.int64), np.zeros(rows, start.dtype))
                          for res in self.dev}

    def accepts(self, d: Ask) -> npt.NDArray[np.bool_]:
        """Would every provider give ``d`` a preferred hint for this NUMA node alone: on every zone of every row.
        CPUs (``generateCPUTopologyHints``): the zone's free CPUs plus the reusable ones there, none reusable
        elsewhere; memory (``holds``); each device plugin resource (``generateDeviceTopologyHints``): only zones
        that have it, reusable devices first; before 1.36 a request of 0 is no constraint
        (``Demands.zero_devices_aligned``) save that a mask missing a reusable device is dropped."""
        start = self.start
        owner, position = start.owner, start.position
        if d.cpus and not self.reused:
            ok = self.cpu >= d.cpus
        elif d.cpus:
            where, count = self.reuse_cpu[0][owner], self.reuse_cpu[1][owner]
            here = where == position
            ok = ((count == 0) | here) & (self.cpu + np.where(here, count, 0) >= d.cpus)
        else:
            ok = np.ones(self.cpu.shape, np.bool_)
        if d.memory:
            ok &= ~start.memory_hints_at | self._holds(d)
        for res, req in d.devices.items():
            if res not in self.dev:
                continue  # not a device plugin resource on any of these rows: no hint
            dev_in = start.dev_in_at[res]
            if not self.reused:
                if req or start.zero:
                    ok &= ~(dev_in & (~start.dev_has[res] | (self.dev[res] < req)))
                continue
            where, count = self.reuse_dev[res][0][owner], self.reuse_dev[res][1][owner]
            here = where == position
            elsewhere = (count > 0) & ~here
            if not req and not start.zero:
                bad = elsewhere
            else:
                bad = ~start.dev_has[res] | elsewhere | (self.dev[res] + np.where(here, count, 0) < req)
            ok &= ~(bad & dev_in)
        return ok

    def _holds(self, d: Ask, at: npt.NDArray[np.int64] | slice = slice(None)) -> npt.NDArray[np.bool_]:
        """The Memory Manager's single-NUMA hint (``calculateHints``), on every zone (or the zones ``at``): each
        type fits the zone's allocatable, and its free memory plus what init containers left there for reuse."""
        ok: npt.NDArray[np.bool_] | None = None
        for kind, req in d.memory.items():
            held = self.start.mem[kind][at] >= req
            held &= ((self.mem[kind][at] + self.reuse_mem[kind][at] >= req) if self.reused
                     else (self.mem[kind][at] >= req))
            ok = held if ok is None else ok & held
        assert ok is not None
        return ok

    def holds_memory(self, d: Ask, zone: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """The Memory Manager's hint on each row's ``zone`` (always, without a Memory Manager: no memory hints)."""
        return ~self.start.memory_hints | self._holds(d, self.start.starts + zone)

    def first(self, ok: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Each row's lowest numbered zone that is ``ok`` (0 where none: the ``HintMerger``'s choice), and whether
        it has one."""
        first = np.minimum.reduceat(np.where(ok, self.start.position, _FAR), self.start.starts)
        found = first < _FAR
        return np.where(found, first, 0), found

    def constrained(self, d: Ask) -> npt.NDArray[np.bool_]:
        """Per row: does any provider have a hint for ``d`` (else the Topology Manager admits it as it is)?"""
        rows = self.start.starts.shape[0]
        if d.cpus:
            return np.ones(rows, np.bool_)
        out = self.start.memory_hints.copy() if d.memory else np.zeros(rows, np.bool_)
        for res, req in d.devices.items():
            if res in self.dev and (req or self.start.zero):
                out |= self.start.dev_in[res]
            elif res in self.dev and self.reused:
                out |= self.start.dev_in[res] & (self.reuse_dev[res][1] > 0)
        return out

    def place(self, d: Ask, zone: npt.NDArray[np.int64], chosen: npt.NDArray[np.bool_]) -> None:
        """Allocate ``d`` on the ``chosen`` rows, each on its ``zone``, as the providers' Allocate does: reusable
        resources first; what an init container takes is left for reuse by the containers after it."""
        r = np.flatnonzero(chosen)
        if not r.size:
            return
        z = zone[r]
        e = self.start.starts[r] + z  # the zones' elements
        init = d.kind == "init"
        self.reused |= init
        if d.cpus:
            where, count = self.reuse_cpu
            from_reuse = np.where(where[r] == z, np.minimum(d.cpus, count[r]), 0)
            self.cpu[e] -= d.cpus - from_reuse
            if init:
                where[r] = z
                count[r] += d.cpus - from_reuse
            else:
                count[r] -= from_reuse
        if d.memory:
            m = self.start.memory_hints[r]
            me = e[m]
            self.assigned[me] = True
            for kind, req in d.memory.items():
                reuse = self.reuse_mem[kind][me]
                self.mem[kind][me] -= np.maximum(0, req - reuse)
                self.reuse_mem[kind][me] = np.maximum(reuse, req) if init else np.maximum(0, reuse - req)
        for res, req in d.devices.items():
            if res not in self.dev:
                continue
            has = self.start.dev_in[res][r]
            dr, dz, de = r[has], z[has], e[has]
            where, count = self.reuse_dev[res]
            from_reuse = np.minimum(req, count[dr])
            self.dev[res][de] -= req - from_reuse
            if init:
                where[dr] = np.where(req - from_reuse > 0, dz, where[dr])
                count[dr] += req - from_reuse
            else:
                count[dr] -= from_reuse

    def smt(self, d: Ask, going: npt.NDArray[np.bool_], fits: Fits, index: int,
            empty: npt.NDArray[Any]) -> None:
        """The CPU Manager's Allocate of ``d`` under ``full-pcpus-only`` (``CPUManager.smt_refusal``) on the
        ``going`` rows whose node runs it, against the CPUs no container holds now (an init container's stay held,
        though reusable): a row it refuses fails there (``alone``: refused on the empty node too), and leaves
        ``going``. ``empty``: each row's whole CPUs on its empty node."""
        smt = self.start.smt
        if smt is None or not d.cpus:
            return
        rows = [r for r in np.flatnonzero(going).tolist() if (c := smt[r]) is not None and c.full_pcpus_only]
        if not rows:
            return
        free = np.add.reduceat(self.cpu // 1000, self.start.starts)
        for r in rows:
            cpu = smt[r]
            assert cpu is not None
            why = cpu.smt_refusal(d.cpus // 1000, int(free[r]))
            if why is not None:
                fits.failed[r], fits.reason[r], going[r] = index, why, False
                fits.alone[r] = cpu.smt_refusal(d.cpus // 1000, int(empty[r])) is not None


@dataclass(slots=True)
class Fits:
    """Each row's answer: the container (index) or the Pod (``POD``) that failed, or ``NOT_PLACED`` where it
    fits; whether it fails alone (on the empty node too); where each container (or the Pod) went (zone
    positions); why, where a reason is more than that it did not fit (by row)."""

    failed: npt.NDArray[np.int64]
    alone: npt.NDArray[np.bool_]
    placed: npt.NDArray[np.int64]  # [rows, containers], ``NOT_PLACED`` where unconstrained (container scope)
    pod_zone: npt.NDArray[np.int64]  # the Pod's zone (pod scope), ``NOT_PLACED`` where unconstrained
    reason: dict[int, str]
    # Rows of a policy that admits across NUMA nodes (``across``) where kubelet still refuses the Pod (its
    # ``reason``: TopologyAffinityError under restricted, an allocation), and rows where that is not known (why).
    refused: set[int] = field(default_factory=set)
    unknown: dict[int, str] = field(default_factory=dict)


def fit_rows(wants: Demands, free: npt.NDArray[Any], machine: npt.NDArray[np.int64], column: Mapping[str, int],
             machines: Machines, across: Sequence[str | None] | None = None) -> Fits:
    """kubelet's Topology Manager admission of the Pod under ``single-numa-node`` rules on every row (free amounts
    [rows, zones, resources] in the layout ``column``, of ``machine`` [rows] of ``machines``): the one model of it,
    for one node (``fit_node``: one row) as for a fleet's free shapes (the scheduler extender).

    ``pod`` scope: the Pod on the lowest numbered NUMA node every provider accepts (``HintMerger``), then each
    container allocated there. Up to 1.37 the Pod's memory hint counts only the types its app containers ask
    (getPodRequestedResources), so an init container's hugepages can still miss that node: its Allocate then fails
    (extendTopologyManagerHint finds no preferred hint); from 1.38 it counts every container's
    (``Semantics.pod_memory_hint_all_containers``). ``container`` scope: each container in order, init
    containers first, on the lowest numbered NUMA node that takes it on what the ones before left
    (``containerScope.Admit``). Admitted by the Topology Manager, a container is then allocated: there
    full-pcpus-only may refuse it. ``across`` (per machine): its policy where it admits what no NUMA node holds
    (``restricted``, ``best-effort``), else None; there a row that fails goes on in ``numa_across`` (``numa_handover``):
    kubelet's merge of every provider's hints over NUMA masks and its allocation, which may still refuse it.

    A machine whose CPU Manager is ``none`` (``Machines.cpu_hints`` False) aligns no CPUs and takes none from a
    NUMA node: its rows are judged on the Pod without its CPUs (``Demands.without_cpus``)."""
    hinted = machines.cpu_hints[machine]
    if not hinted.all() and any(d.cpus for d in (*wants.containers, wants.pod)):
        return _split(wants, free, machine, column, machines, across, hinted)
    start = _Start(wants, free, machine, column, machines)
    node = _Rows(start)
    asks = [Ask.of(d) for d in wants.containers]
    rows = free.shape[0]
    pod_scope = machines.pod_scope[machine]
    fits = Fits(np.full(rows, NOT_PLACED, np.int64), np.zeros(rows, np.bool_),
                np.full((rows, len(asks)), NOT_PLACED, np.int64), np.full(rows, NOT_PLACED, np.int64), {})
    failed, alone, placed = fits.failed, fits.alone, fits.placed
    empty_cpus = np.add.reduceat(start.cpu // 1000, start.starts) if start.smt is not None else start.cpu
    alive = np.ones(rows, np.bool_)
    if pod_scope.any():
        whole = Ask.of(wants.pod)
        constrained = node.constrained(whole) & pod_scope
        first, found = node.first(node.accepts(whole))
        fails = constrained & ~found
        failed[fails], alone[fails] = POD, True
        going = constrained & ~fails
        fits.pod_zone[going] = first[going]
        for i, d in enumerate(asks):
            if d.memory:
                short = going & ~node.holds_memory(d, first)
                failed[short] = i
                going &= ~short
            node.smt(d, going, fits, i, empty_cpus)
            node.place(d, first, going)
        alive &= failed == NOT_PLACED
    empty: _Rows | None = None
    placed_any = np.zeros(rows, np.bool_)
    alive &= ~pod_scope
    for i, d in enumerate(asks):
        constrained = node.constrained(d) & alive
        if not constrained.any():
            continue
        first, found = node.first(node.accepts(d))
        fails = constrained & ~found
        if fails.any():
            # Alone: nothing placed before it (the node is the empty one), or no NUMA node of the empty node takes it.
            failed[fails] = i
            alone[fails] = True
            after = fails & placed_any
            if after.any():
                empty = empty or _Rows(start)
                alone[after] = ~empty.first(empty.accepts(d))[1][after]
            alive &= ~fails
        going = constrained & ~fails
        node.smt(d, going, fits, i, empty_cpus)
        alive &= failed == NOT_PLACED
        node.place(d, first, going)
        placed[going, i] = first[going]
        placed_any |= going
    if across is not None and any(across):
        from webhook.core.numa_handover import hand_over  # it reads this module's rows

        hand_over(wants, asks, node, fits, machine, across, machines, column)
    return fits


def _split(wants: Demands, free: npt.NDArray[Any], machine: npt.NDArray[np.int64], column: Mapping[str, int],
           machines: Machines, across: Sequence[str | None] | None, hinted: npt.NDArray[np.bool_]) -> Fits:
    """``fit_rows`` of the rows whose CPU Manager gives hints with the Pod as it is, and of the others (CPU
    Manager ``none``) with the Pod without its CPUs, put back together in row order."""
    rows = free.shape[0]
    out = Fits(np.full(rows, NOT_PLACED, np.int64), np.zeros(rows, np.bool_),
               np.full((rows, len(wants.containers)), NOT_PLACED, np.int64), np.full(rows, NOT_PLACED, np.int64), {})
    for part, asked in ((np.flatnonzero(hinted), wants), (np.flatnonzero(~hinted), wants.without_cpus())):
        if not part.size:
            continue
        sub = fit_rows(asked, free[part], machine[part], column, machines, across)
        out.failed[part], out.alone[part], out.placed[part], out.pod_zone[part] = (
            sub.failed, sub.alone, sub.placed, sub.pod_zone)
        at = part.tolist()
        out.reason.update({at[r]: why for r, why in sub.reason.items()})
        out.refused |= {at[r] for r in sub.refused}
        out.unknown.update({at[r]: why for r, why in sub.unknown.items()})
    return out
