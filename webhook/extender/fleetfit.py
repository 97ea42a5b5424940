"""One Pod shape judged on every free shape of a fleet at once: ``core.numa.fit_node`` and ``Judge``'s verdict
(kept or refused, the reason, the score) computed over arrays (numpy), one row per free shape
(``webhook.extender.fleetrows``), instead of once per free shape in Python.

Why: a fleet whose NRTs count their Pods has about one free shape per node, so a Pod shape not seen before is
judged on thousands of them (5,000 nodes: about 4,900 free shapes, 180 ms of Python per ``filter``), while
kube-scheduler waits for the answer.

The fit is ``fit_node``'s, step by step over the rows: the same providers' checks (``_Node.accepts``,
``holds_memory``, ``constrained``), the lowest numbered NUMA node every provider accepts (each row has its own
machine's zones only, one after another), what init containers leave for reuse (``_Node.place``), in
``container`` or ``pod`` scope per row; the machines' empty nodes ride along as rows of their own (what a refusal
says turns on them). The score is
``placement.score``'s, in integers as it is. So each row's verdict is the one ``Judge.judged`` gives it alone
(tests/unit/test_fleetfit.py holds the two together over the topology differential's machines and Pods). Left to
``Judge.judged``: the rows ``fleetrows`` does not model, and Pods with a fractional byte count of memory or a
request from ``EXACT`` milli-units on. Pure, no I/O.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import compress

import numpy as np

from webhook.core.demands import Demand, Demands, is_device
from webhook.core.podspec import CPU
from webhook.extender.fleetrows import EXACT, Bools, Columns, Free, Ints, Tables
from webhook.extender.placement import MAX_SCORE, SHARE, Judge, Verdict, amounts

_NOT_PLACED = -1
_FAR = 1 << 30  # past any zone's position
_POD = -2  # ``failed``: the Pod's own demand (``pod`` scope), not a container's


@dataclass(frozen=True, slots=True)
class Ask:
    """A ``Demand`` in milli-units (``_Start``)."""

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


class _Rows:
    """``core.numa._Node`` over many rows: free amounts per zone, what init containers left for reuse. A zone
    array has one element per zone of each row (``_Start``: the rows' zones one after another), a row array one
    per row; a zone is its position in its machine's NUMA order."""

    def __init__(self, start: _Start) -> None:
        self.start = start
        self.cpu = start.cpu.copy()
        self.mem = {k: v.copy() for k, v in start.mem.items()}
        self.reuse_mem = {k: np.zeros_like(v) for k, v in start.mem.items()}
        self.dev = {k: v.copy() for k, v in start.dev.items()}
        rows = start.starts.shape[0]
        self.reused = False  # an init container was placed: its amounts may be reused (else no reuse to read)
        self.reuse_cpu = (np.full(rows, _NOT_PLACED, np.int64), np.zeros(rows, np.int64))
        self.reuse_dev = {res: (np.full(rows, _NOT_PLACED, np.int64), np.zeros(rows, np.int64)) for res in self.dev}

    def accepts(self, d: Ask) -> Bools:
        """``_Node.accepts`` on every zone of every row."""
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

    def _holds(self, d: Ask, at: Ints | slice = slice(None)) -> Bools:
        """``_Node.holds_memory`` with a Memory Manager, on every zone (or the zones ``at``)."""
        ok: Bools | None = None
        for kind, req in d.memory.items():
            held = self.start.mem[kind][at] >= req
            held &= ((self.mem[kind][at] + self.reuse_mem[kind][at] >= req) if self.reused
                     else (self.mem[kind][at] >= req))
            ok = held if ok is None else ok & held
        assert ok is not None
        return ok

    def holds_memory(self, d: Ask, zone: Ints) -> Bools:
        """``_Node.holds_memory`` on each row's ``zone``."""
        return ~self.start.memory_hints | self._holds(d, self.start.starts + zone)

    def first(self, ok: Bools) -> tuple[Ints, Bools]:
        """Each row's first zone that is ``ok`` (0 where none), and whether it has one."""
        first = np.minimum.reduceat(np.where(ok, self.start.position, _FAR), self.start.starts)
        found = first < _FAR
        return np.where(found, first, 0), found

    def constrained(self, d: Ask) -> Bools:
        """``_Node.constrained`` per row."""
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

    def place(self, d: Ask, zone: Ints, chosen: Bools) -> None:
        """``_Node.place`` on the ``chosen`` rows, each on its ``zone``."""
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


class _Start:
    """The rows as ``_Node._read`` reads a topology, for the resources the Pod asks: what is free per zone, the
    zones that have a device (capacity or free above 0), the machine's flags per row. A row's zones are only its
    machine's (not the layout's padding), one after another: ``starts`` (per row) says where each row's begin,
    ``owner`` and ``position`` (per zone) which row a zone is of and its place there. In milli-units, where
    ``_Node`` has whole units (``// 1000``) and the requests are whole units: ``a // 1000 >= b`` is
    ``a >= 1000 * b`` for a whole ``b``, and so on through every sum and difference of whole units (``Ask``)."""

    def __init__(self, wants: Demands, free: Ints, machine: Ints, columns: Columns, tables: Tables) -> None:
        zones = tables.zones[machine]  # at least one each (a topology without zones is not judged)
        self.starts: Ints = np.concatenate([np.zeros(1, np.int64), np.cumsum(zones)[:-1]])
        self.owner: Ints = np.repeat(np.arange(machine.shape[0]), zones)
        self.position: Ints = np.arange(self.owner.shape[0]) - self.starts[self.owner]
        self.memory_hints: Bools = tables.memory_hints[machine]
        self.memory_hints_at: Bools = self.memory_hints[self.owner]
        self.zero = wants.zero_devices_aligned
        column = columns.column

        # Each zone's first amount in ``free`` (a C-ordered [rows, zones, resources]): a column is one ``take``.
        at = (self.owner * free.shape[1] + self.position) * free.shape[2]
        flat = free.reshape(-1)

        def amounts(name: str) -> Ints:
            i = column.get(name)
            return np.take(flat, at + i) if i is not None else np.zeros(self.owner.shape[0], np.int64)

        asked = (*wants.containers, wants.pod)
        self.cpu = amounts(CPU)
        self.mem = {k: amounts(k) for k in sorted({k for d in asked for k in d.memory})}
        self.dev: dict[str, Ints] = {}
        self.dev_has: dict[str, Bools] = {}
        self.dev_in: dict[str, Bools] = {}  # per row: some zone has it (``res in _Node.dev_numa``)
        self.dev_in_at: dict[str, Bools] = {}  # the same per zone
        for res in sorted({k for d in asked for k in d.devices}):
            i = column.get(res)
            if i is not None and is_device(res):
                self.dev[res] = amounts(res)
                has = (tables.capacity[machine[self.owner], self.position, i] > 0) | (self.dev[res] > 0)
                self.dev_has[res] = has
                self.dev_in[res] = np.logical_or.reduceat(has, self.starts)
                self.dev_in_at[res] = self.dev_in[res][self.owner]


@dataclass(slots=True)
class _Fits:
    """Each row's answer: the container (index) or the Pod (``_POD``) that failed, or ``_NOT_PLACED`` where it
    fits; whether it fails alone (on the empty node too); where each container (or the Pod) went."""

    failed: Ints
    alone: Bools
    placed: Ints  # [rows, containers] zone positions, ``_NOT_PLACED`` where unconstrained (container scope)
    pod_zone: Ints  # the Pod's zone (pod scope), ``_NOT_PLACED`` where unconstrained


def fit_rows(wants: Demands, free: Ints, machine: Ints, columns: Columns, tables: Tables) -> _Fits:
    """``fit_node`` on every row (free amounts [rows, zones, resources] of ``machine`` [rows]): the rows of
    ``pod`` scope machines as its pod branch, the others container by container."""
    start = _Start(wants, free, machine, columns, tables)
    node = _Rows(start)
    asks = [Ask.of(d) for d in wants.containers]
    rows = free.shape[0]
    pod_scope: Bools = tables.pod_scope[machine]
    failed = np.full(rows, _NOT_PLACED, np.int64)
    alone = np.zeros(rows, np.bool_)
    placed = np.full((rows, len(wants.containers)), _NOT_PLACED, np.int64)
    pod_zone = np.full(rows, _NOT_PLACED, np.int64)
    alive = np.ones(rows, np.bool_)
    if pod_scope.any():
        # The Pod's total on the first NUMA node that holds it, then each container allocated there.
        whole = Ask.of(wants.pod)
        constrained = node.constrained(whole) & pod_scope
        first, found = node.first(node.accepts(whole))
        fails = constrained & ~found
        failed[fails], alone[fails] = _POD, True
        going = constrained & ~fails
        pod_zone[going] = first[going]
        for i, d in enumerate(asks):
            if d.memory:
                short = going & ~node.holds_memory(d, first)
                failed[short] = i
                going &= ~short
            node.place(d, first, going)
        alive &= failed == _NOT_PLACED
    # ``container`` scope: each container on the first NUMA node that takes it, on what the ones before left.
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
        node.place(d, first, going)
        placed[going, i] = first[going]
        placed_any |= going
    return _Fits(failed, alone, placed, pod_zone)


def judge_rows(judge: Judge, keys: list[int], by_key: Mapping[int, Free], columns: Columns) -> list[int]:
    """Judge the free shapes ``keys`` (of ``by_key``) the arrays model, writing each verdict into ``judge.verdicts``
    under its key (as ``Judge.judged`` does); the keys it left to ``Judge.judged``."""
    wants = judge.wants
    assert wants is not None
    if wants.fractional_memory or not all(Ask.of(d).exact for d in (*wants.containers, wants.pod)):
        return keys
    rows = columns.of(keys, by_key)
    left = list(compress(keys, map(operator.not_, rows)))
    if len(left) == len(keys):
        return left
    if left:
        keys = list(compress(keys, rows))
    tables = columns.tables()
    count, zones, width = len(keys), columns.zones, len(columns.names)
    table = np.frombuffer(b"".join(rows), np.int64).reshape(count, 1 + zones * width)
    # The machines' empty nodes ride along as rows of their own: whether a refused Pod would fit there ever.
    machines = np.unique(table[:, 0])
    machine: Ints = np.concatenate([table[:, 0], machines])
    free: Ints = np.concatenate([table[:, 1:].reshape(count, zones, width), tables.total[machines]])
    fits = fit_rows(wants, free, machine, columns, tables)
    answers: list[Verdict] = []
    code = np.zeros(count, np.int64)
    _refused(judge, wants, fits, machine, count, columns, tables, answers, code)
    _scored(wants, fits, free, machine, count, columns, tables, answers, code)
    judge.verdicts.update(zip(keys, map(answers.__getitem__, code.tolist()), strict=True))
    return left


def _refused(judge: Judge, wants: Demands, fits: _Fits, machine: Ints, count: int, columns: Columns,
             tables: Tables, answers: list[Verdict], code: Ints) -> None:
    """The first ``count`` rows that do not fit: refused with the reason (``Judge.refusal``: one object per
    machine, demand and alone; whether the empty machine, a row after ``count``, holds the Pod), or kept where
    the machine's policy admits across NUMA nodes."""
    failing = np.flatnonzero(fits.failed[:count] != _NOT_PLACED)
    if not failing.size:
        return
    span = len(wants.containers) + 2  # a failed index from _POD up
    kinds, which = np.unique((machine[failing] * span + fits.failed[failing] + 2) * 2 + fits.alone[failing],
                             return_inverse=True)
    ever = {m: i for i, m in enumerate(machine[count:].tolist())}
    ever_fits = (fits.failed[count:] == _NOT_PLACED).tolist()
    ever_alone = fits.alone[count:].tolist()
    for kind in kinds.tolist():
        m, failed, alone = kind // (2 * span), kind // 2 % span - 2, bool(kind % 2)
        machine_ = tables.machines[m]
        empty = machine_.empty
        if not empty.refuses:
            answers.append(Verdict(empty.name, True))  # restricted or best-effort: admitted across NUMA nodes
            continue
        need = wants.pod if failed == _POD else wants.containers[failed]
        e = ever[m]
        answers.append(judge.refusal(empty, need, alone, ever=(ever_fits[e], ever_alone[e]),
                                     empty_key=(columns.token, m), named=machine_.named))
    code[failing] = len(answers) - len(kinds) + which.reshape(-1)


def _scored(wants: Demands, fits: _Fits, free: Ints, machine: Ints, count: int, columns: Columns, tables: Tables,
            answers: list[Verdict], code: Ints) -> None:
    """The first ``count`` rows that fit, each with ``placement.score``: what the Pod takes of each zone
    (``usage``: app containers and sidecars added up, init containers' reused, by where each went) against the
    zones' allocatable and free amounts."""
    fitting = np.flatnonzero(fits.failed[:count] == _NOT_PLACED)
    if not fitting.size:
        return
    rows, m = fitting, machine[fitting]
    pod_scope = tables.pod_scope[m]
    # A slot per demand placed: the Pod's (``pod`` scope rows) or a container's, its zone per row (or none).
    slots = [(np.where(pod_scope, fits.pod_zone[rows], _NOT_PLACED), wants.pod)]
    slots += [(np.where(pod_scope, _NOT_PLACED, fits.placed[rows, i]), d) for i, d in enumerate(wants.containers)]
    taking = [(zone, d.kind == "init", amounts(d)) for zone, d in slots]
    asked = sorted({res for _, _, taken in taking for res in taken if res in columns.column})
    left = np.zeros(rows.size, np.int64)
    shares = np.zeros(rows.size, np.int64)
    for j, (zone, _, _) in enumerate(taking):
        # Each zone a row's Pod takes from, once (at its first slot): what every slot there takes of a resource,
        # app containers and sidecars added, init containers' reused (the larger).
        first = zone != _NOT_PLACED
        for before, _, _ in taking[:j]:
            first &= before != zone
        if not first.any():
            continue
        there = [(z == zone, init, taken) for z, init, taken in taking]
        at = np.maximum(zone, 0)
        for res in asked:
            held = np.zeros(rows.size, np.int64)
            reused = np.zeros(rows.size, np.int64)
            present = np.zeros(rows.size, np.bool_)
            inited = np.zeros(rows.size, np.bool_)
            for same, init, taken in there:
                if res not in taken:
                    continue
                if init:
                    reused = np.maximum(reused, np.where(same, taken[res], 0))
                    inited |= same
                else:
                    held += np.where(same, taken[res], 0)
                    present |= same
            c = columns.column[res]
            whole = tables.total[m, at, c]
            counted = first & (present | inited) & (whole > 0)
            used = np.where(inited, np.maximum(held, reused), held)
            share = np.maximum(0, free[rows, at, c] - used) * SHARE // np.where(counted, whole, 1)
            left += np.where(counted, share, 0)
            shares += counted
    # ``placement.scored``, over arrays: 1 + round half to even of 9 x the mean share used.
    whole_all = np.maximum(SHARE * shares, 1)
    quotient, rest = np.divmod((MAX_SCORE - 1) * (whole_all - left), whole_all)
    up = (2 * rest > whole_all) | ((2 * rest == whole_all) & (quotient % 2 == 1))
    scores = np.where(shares > 0, 1 + quotient + up, 1)
    low = int(scores.min())
    span = int(scores.max()) - low + 1
    kinds, which = np.unique(m * span + (scores - low), return_inverse=True)
    for kind in kinds.tolist():
        answers.append(Verdict(tables.machines[kind // span].empty.name, True, score=kind % span + low))
    code[fitting] = len(answers) - len(kinds) + which.reshape(-1)
