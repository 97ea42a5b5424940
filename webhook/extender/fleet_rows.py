"""The free shapes of a fleet as rows of one table, for ``webhook.extender.fleet_verdicts`` to judge a Pod shape on
all of them at once: each free shape's zones (``view.Freed.topo``) in one layout for the whole fleet (every resource
name its NRTs publish, as many zones as its largest machine), and per machine (empty shape) what its free shapes
share.

Kept across calls, as the view's ``by_key`` is: a row is made once per free shape (its verdict key), not once per
Pod shape judged; one row is ``8 x (1 + zones x resources)`` bytes (5,000 free shapes of 8 zones and 8 resources:
2.6 MB), at most ``MAX_ROWS`` of them. Not modelled (no row; judged one by one by ``Judge.judged``): a machine with
two zones of one NUMA number, amounts from ``EXACT`` milli-units on, and a node whose CPU Manager runs
``full-pcpus-only`` (``NodeTopology.cpu_manager``). Pure, no I/O.
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count, repeat
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from webhook.core.numa_row import memory_hinted
from webhook.core.numafit import EXACT
from webhook.core.numatopology import CPUManager, NodeTopology
from webhook.extender.reservations import NodeState
from webhook.extender.verdicts import aligned

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
MAX_ROWS = 50_000  # free shapes remembered (as ``view.MAX_IDS``), and machines
_TOKENS = count()


@dataclass(slots=True)
class Machine:
    """An empty shape (policy, scope, zones): what every free shape of it shares."""

    empty: NodeTopology
    index: int
    named: frozenset[str]  # what a refusal names (``verdicts.aligned``)


class Free(Protocol):
    """What a row is made of (``view.Freed``): the node's NRT, its zones free now, whether it is judged at all."""

    @property
    def state(self) -> NodeState: ...
    @property
    def topo(self) -> NodeTopology: ...
    @property
    def opinion(self) -> bool: ...


class Columns:
    """The fleet's layout (resource names, the most zones of a machine) and each free shape's row in it, kept
    across calls: a row is made once per free shape (its verdict key), not once per Pod shape judged. A row is
    bytes: its machine, then each zone's amount (milli) of each resource; ``b""`` for a free shape not modelled."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.column: dict[str, int] = {}
        self.zones = 0
        self.layout = 0  # how many times the layout grew (the rows made before are then made again)
        self.machines: dict[tuple[Any, ...], Machine] = {}
        self.rows: dict[int, bytes] = {}  # verdict key -> its row
        self.token = next(_TOKENS)  # these machines' numbers apart from another ``Columns``' (a Judge's refusals)
        self._tables: Tables | None = None

    def _machine(self, empty: NodeTopology) -> Machine | None:
        """The machine of ``empty``, registered with its resources (a new name or more zones: every row again)."""
        key = empty.shape
        found = self.machines.get(key)
        if found is not None:
            return found
        numas = [z.numa for z in empty.zones]
        amounts = [v for z in empty.zones for v in (*z.capacity.values(), *z.allocatable.values())]
        if not numas or len(set(numas)) != len(numas) or not all(-EXACT < v < EXACT for v in amounts):
            return None
        if empty.cpu_manager is not None and empty.cpu_manager.full_pcpus_only:
            return None  # full-pcpus-only's SMT refusal is a step per row in Python: judged one node at a time
        if len(self.machines) >= MAX_ROWS:
            # Numbered anew from 0: no row nor a Judge's refusal (``token``) keeps an old number.
            self.machines.clear()
            self.token = next(_TOKENS)
        new = sorted({k for z in empty.zones for k in (*z.capacity, *z.allocatable)} - set(self.column))
        if new or len(numas) > self.zones or not self.machines:
            for name in new:
                self.column[name] = len(self.names)
                self.names.append(name)
            self.zones = max(self.zones, len(numas))
            self.rows.clear()
            self.layout += 1
        found = self.machines[key] = Machine(empty, len(self.machines), aligned(empty))
        self._tables = None
        return found

    def of(self, keys: Sequence[int], by_key: Mapping[int, Free]) -> list[bytes]:
        """The rows of ``keys`` (each a key of ``by_key``), made where not made before; ``b""`` for each where the
        layout changed twice in this call (more machines than ``MAX_ROWS``): all judged one by one, then."""
        for _ in range(2):  # a machine seen first here may widen the layout: the rows again, once
            layout = self.layout
            rows = list(map(self.rows.get, keys, repeat(b"")))
            for i in compress(range(len(keys)), map(operator.not_, rows)):
                key = keys[i]
                if key not in self.rows:
                    found = by_key.get(key)
                    rows[i] = self._row(key, found) if found is not None else b""
            if layout == self.layout:
                return rows
        return [b""] * len(keys)

    def _row(self, key: int, found: Free) -> bytes:
        machine = self._machine(found.state.empty) if found.opinion else None
        row = b""
        if machine is not None:
            width = len(self.names)
            values = [0] * (1 + self.zones * width)
            values[0] = machine.index
            column = self.column
            for p, zone in enumerate(found.topo.zones):
                base = 1 + p * width
                for name, amount in zone.allocatable.items():
                    values[base + column[name]] = amount
            if min(values) > -EXACT and max(values) < EXACT:
                row = array("q", values).tobytes()
        if len(self.rows) >= MAX_ROWS:
            self.rows.clear()
        self.rows[key] = row
        return row

    def tables(self) -> Tables:
        """Per machine, stacked: its zones' capacity and allocatable (milli), its flags."""
        if self._tables is None:
            machines = sorted(self.machines.values(), key=lambda m: m.index)
            shape = (len(machines), self.zones, len(self.names))
            capacity, total = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
            for m in machines:
                for p, zone in enumerate(m.empty.zones):
                    for name, amount in zone.capacity.items():
                        capacity[m.index, p, self.column[name]] = amount
                    for name, amount in zone.allocatable.items():
                        total[m.index, p, self.column[name]] = amount
            self._tables = Tables(machines, capacity, total,
                                  np.array([memory_hinted(m.empty) for m in machines], np.bool_),
                                  np.array([m.empty.scope == "pod" for m in machines], np.bool_),
                                  np.array([len(m.empty.zones) for m in machines], np.int64),
                                  [m.empty.cpu_manager for m in machines],
                                  np.array([m.empty.cpu_hints for m in machines], np.bool_),
                                  [m.empty.sockets for m in machines])
        return self._tables


@dataclass(frozen=True, slots=True)
class Tables:
    """The machines' own amounts and flags, stacked (made again when a machine is added)."""

    machines: list[Machine]
    capacity: Ints  # [machine, zone, resource]
    total: Ints  # the empty node's allocatable, [machine, zone, resource]
    memory_hints: Bools  # [machine]: a Memory Manager's hints (``core.numa_row.memory_hinted``)
    pod_scope: Bools  # [machine]
    zones: Ints  # [machine]: how many it has
    cpu_managers: list[CPUManager | None]  # [machine] (none runs full-pcpus-only: see ``Columns._machine``)
    cpu_hints: Bools  # [machine]: its CPU Manager gives hints (``NodeTopology.cpu_hints``; ``none`` does not)
    sockets: list[tuple[int, ...] | None]  # [machine]
