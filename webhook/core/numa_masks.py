"""NUMA masks as kubelet's Topology Manager iterates them (pkg/kubelet/cm/topologymanager/bitmask): a mask is an
int whose bit ``p`` is a node's ``p``-th NUMA zone. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache, lru_cache


class Unknown(Exception):
    """kubelet's verdict turns on what the node's NodeResourceTopology object does not say; the message says what."""


@cache
def masks(zones: tuple[int, ...]) -> tuple[int, ...]:
    """Every non-empty mask over ``zones`` (positions)."""
    return tuple(sum(1 << z for i, z in enumerate(zones) if choice >> i & 1) for choice in range(1, 1 << len(zones)))


def width(mask: int) -> int:
    return mask.bit_count()


def total(values: Sequence[int], mask: int) -> int:
    return sum(v for z, v in enumerate(values) if mask >> z & 1)


def sums(values: Sequence[int]) -> tuple[int, ...]:
    """``values`` summed over every mask of their zones, indexed by the mask: 2^zones additions where summing each
    mask would take zones times more. Remembered per ``values`` (a machine's capacity recurs on each of its rows)."""
    return _sums(tuple(values))


@lru_cache(maxsize=4096)
def _sums(values: tuple[int, ...]) -> tuple[int, ...]:
    # Zone by zone: the masks with zone z are those without it, each plus values[z] (a comprehension per zone,
    # not a Python step per mask: the extender's restricted and best-effort rows spent a third of their time here).
    out = [0]
    for v in values:
        out += [o + v for o in out]
    return tuple(out)


def fewest(values: Sequence[int], zones: Sequence[int], want: int) -> int:
    """The width of the narrowest mask over ``zones`` whose ``values`` sum to ``want`` or more (``len(zones)`` where
    none does): the widest sum of ``k`` zones is that of the ``k`` largest values, so the first ``k`` whose largest
    ``k`` hold it, without a step per mask."""
    held = 0
    for k, v in enumerate(sorted((values[z] for z in zones), reverse=True), 1):
        held += v
        if held >= want:
            return k
    return len(zones)


def narrower(a: int, b: int) -> bool:
    """``IsNarrowerThan``: fewer NUMA nodes, else the lower mask."""
    return width(a) < width(b) if width(a) != width(b) else a < b
