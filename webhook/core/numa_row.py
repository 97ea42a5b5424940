"""One node as one row of ``numafit.fit_rows`` (``node_row``): its zones' amounts in Python ints, made once per
shape, for ``numa.fit_node`` and the scheduler extender's score. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from webhook.core.numatopology import HUGEPAGES, CPUManager, NodeTopology

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
else:
    from webhook.core.numafit import np


def memory_hinted(topo: NodeTopology) -> bool:
    """Does the Memory Manager give hints on this node: some zone publishes memory or hugepages (with
    memoryManagerPolicy None kubelet has no memory blocks, and NFD or the agent publish none)."""
    return any(k == "memory" or k.startswith(HUGEPAGES) for z in topo.zones for k in (*z.capacity, *z.allocatable))


@dataclass(frozen=True, slots=True)
class Row:
    """One node as a row of ``fit_rows`` (and of the extender's score): its zones' amounts in Python ints (exact at
    any size), one zone per NUMA number in the zones' order (``numas``); where two zones share a number (no
    exporter publishes that), the last one's amounts, and a device where either has it."""

    free: npt.NDArray[Any]  # [1, zones, resources]: the zones' allocatable
    column: Mapping[str, int]
    numas: tuple[int, ...]
    capacity: npt.NDArray[Any]
    total: npt.NDArray[Any]  # the empty node's allocatable (``free`` itself unless the caller names the empty node)
    memory_hints: npt.NDArray[np.bool_]
    pod_scope: npt.NDArray[np.bool_]
    zones: npt.NDArray[np.int64]
    cpu_managers: Sequence[CPUManager | None]
    cpu_hints: npt.NDArray[np.bool_]
    sockets: Sequence[tuple[int, ...] | None]
    machine: npt.NDArray[np.int64]  # the one row's machine: 0


_ROWS: dict[object, Row] = {}


def node_row(topo: NodeTopology, empty: NodeTopology | None = None) -> Row:
    """``topo`` as one row, made once per shape (``topo.key``; the arrays are never written); ``empty``: the node of
    which ``topo`` is what is free now (the extender), whose allocatable kubelet's Memory Manager counts."""
    key = (topo.key, empty.key if empty is not None else None) if topo.key else None
    found = _ROWS.get(key) if key else None
    if found is not None:
        return found
    names = sorted({k for z in topo.zones for k in (*z.capacity, *z.allocatable)})
    column = {k: i for i, k in enumerate(names)}
    numas = tuple(dict.fromkeys(z.numa for z in topo.zones))
    position = {n: p for p, n in enumerate(numas)}
    free = np.zeros((1, len(numas), len(names)), object)
    capacity = np.zeros((1, len(numas), len(names)), object)
    doubled = len(numas) < len(topo.zones)
    for z in topo.zones:
        p = position[z.numa]
        for k, v in z.allocatable.items():
            free[0, p, column[k]] = v
        for k, v in z.capacity.items():
            capacity[0, p, column[k]] = max(capacity[0, p, column[k]], v)
        if doubled:  # a device on either zone of one number
            for k, v in z.allocatable.items():
                capacity[0, p, column[k]] = max(capacity[0, p, column[k]], v)
    total = free
    if empty is not None and tuple(z.numa for z in empty.zones) == numas:
        total = np.zeros((1, len(numas), len(names)), object)
        for p, z in enumerate(empty.zones):
            for k, v in z.allocatable.items():
                if k in column:
                    total[0, p, column[k]] = v
    found = Row(free, column, numas, capacity, total, np.array([memory_hinted(topo)]), np.array([topo.scope == "pod"]),
                np.array([len(numas)], np.int64), (topo.cpu_manager,), np.array([topo.cpu_hints]),
                (None if doubled else topo.sockets,),
                np.zeros(1, np.int64))
    if key:
        if len(_ROWS) >= 4096:
            _ROWS.clear()
        _ROWS[key] = found
    return found


