"""The extender's score, written once: what the Pod holds of each zone where the fit placed it (``held``), and how
full that leaves those zones (``score``), over rows: a fleet's free shapes at once (``fleet_verdicts``) or one node
as one row (``score_node``). Change the score here; nothing else computes it.

Best fit: 10 where the zones the Pod goes to are left with nothing of what it takes, down to 1 where they are left
whole (fragmentation is free room split over zones that no large Pod can use). In integers (each share in
``SHARE``ths of its zone's amount), so exact in any order. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from webhook.core.demands import Demand, Demands, is_device
from webhook.core.numa import NodeFit
from webhook.core.numa_row import node_row
from webhook.core.numafit import NOT_PLACED
from webhook.core.numatopology import NodeTopology
from webhook.core.resourceblock import CPU

MAX_SCORE = 10  # extenderv1.MaxExtenderPriority
SHARE = 1 << 10  # what a score counts a zone's amount left in: 1/1024ths

Amounts = npt.NDArray[Any]  # milli-units: int64 over a fleet, Python ints for one node (``core.numafit.Row``)


def amounts(d: Demand) -> dict[str, int]:
    """What a demand takes of a zone, in the zone's milli-units."""
    out = {CPU: d.cpus * 1000} if d.cpus else {}
    out.update({k: v * 1000 for k, v in d.memory.items()})
    out.update({k: v * 1000 for k, v in d.devices.items() if is_device(k) and v})
    return out


def held(slots: Sequence[tuple[npt.NDArray[np.int64], Demand]], column: Mapping[str, int],
         like: Amounts) -> tuple[Amounts, npt.NDArray[np.bool_]]:
    """What the Pod holds of each zone of each row once it runs, [rows, zones, resources] as ``like``, and where it
    holds a resource at all. ``slots``: each demand placed with its zone per row (``NOT_PLACED`` where none): the
    Pod's total in ``pod`` scope, else each container's; app containers and sidecars on a zone added up, init
    containers' reused by the containers after them (the larger of the two, as kubelet's reuse leaves it)."""
    added = np.zeros_like(like)
    reused = np.zeros_like(like)
    present = np.zeros(like.shape, np.bool_)
    rows = np.arange(like.shape[0])
    for zone, d in slots:
        on = zone != NOT_PLACED
        r, z = rows[on], zone[on]
        for res, amount in amounts(d).items():
            c = column.get(res)
            if c is None:
                continue
            if d.kind == "init":
                reused[r, z, c] = np.maximum(reused[r, z, c], amount)
            else:
                added[r, z, c] += amount  # one zone per row and slot: no index twice
            present[r, z, c] = True
    return np.maximum(added, reused), present


def score(total: Amounts, free: Amounts, taken: Amounts, present: npt.NDArray[np.bool_]) -> Amounts:
    """Per row: 1 plus 9 times the mean share used of each amount the Pod holds (``held``), of each zone's
    ``total`` (the empty node's allocatable; a zone without any of it is not counted), by what is ``free`` now;
    1 where it holds nothing counted."""
    counted = present & (total > 0)
    share = np.maximum(0, free - taken) * SHARE // np.where(counted, total, 1)
    return scored(np.where(counted, share, 0).sum(axis=(1, 2)), counted.sum(axis=(1, 2)))


def scored(left: Amounts | int, count: Amounts | int) -> Amounts:
    """The score of ``count`` shares that leave ``left`` (``SHARE``ths, added up): 1 + 9 x the mean share used,
    rounded half to even; 1 with none."""
    whole = np.maximum(SHARE * count, 1)
    used = (MAX_SCORE - 1) * (whole - left)
    quotient, rest = used // whole, used % whole
    up = (2 * rest > whole) | ((2 * rest == whole) & (quotient % 2 == 1))
    return np.where(count > 0, 1 + quotient + up, 1)


def _slots(wants: Demands, fit: NodeFit, numas: Sequence[int]) -> list[tuple[npt.NDArray[np.int64], Demand]]:
    """``fit``'s placement as ``held`` reads one row: each demand placed and its zone's position."""
    position = {n: p for p, n in enumerate(numas)}
    if fit.scope == "pod":
        at = fit.placed.get("")
        return [] if at is None else [(np.array([position[at]]), wants.pod)]
    return [(np.array([position[fit.placed[d.container or ""]]]), d) for d in wants.containers
            if (d.container or "") in fit.placed]


def usage(wants: Demands, fit: NodeFit, topo: NodeTopology) -> dict[int, dict[str, int]]:
    """What the Pod, admitted on ``topo`` as ``fit`` placed it, holds of each zone once it runs (``held`` on one
    row), by NUMA number."""
    row = node_row(topo)
    taken, present = held(_slots(wants, fit, row.numas), row.column, row.free)
    names = list(row.column)
    out: dict[int, dict[str, int]] = {}
    for z, c in zip(*np.nonzero(present[0]), strict=True):
        out.setdefault(row.numas[int(z)], {})[names[int(c)]] = int(taken[0, z, c])
    return out


def score_node(wants: Demands, fit: NodeFit, empty: NodeTopology, free: NodeTopology) -> int:
    """The score of one node (``score`` on one row): the Pod placed as ``fit`` says on its zones ``free`` now, of
    the ``empty`` shape. Where its CPU Manager is ``none`` the Pod's CPUs come from the shared pool, held on no
    zone (``NodeTopology.cpu_hints``)."""
    if not empty.cpu_hints:
        wants = wants.without_cpus()
    whole, now = node_row(empty), node_row(free)
    taken, present = held(_slots(wants, fit, now.numas), now.column, now.free)
    total = whole.free
    if whole.column != now.column or whole.numas != now.numas:
        # Not of one layout (``free`` is ``empty`` with amounts taken, so it always is, where read by ``read_nrt``).
        total = np.zeros_like(now.free)
        position = {n: p for p, n in enumerate(now.numas)}
        for z in empty.zones:
            for k, v in z.allocatable.items():
                if z.numa in position and k in now.column:
                    total[0, position[z.numa], now.column[k]] = v
    return int(score(total, now.free, taken, present)[0])
