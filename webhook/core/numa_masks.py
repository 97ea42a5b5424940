"""NUMA masks as kubelet's Topology Manager iterates them (pkg/kubelet/cm/topologymanager/bitmask): a mask is an
int whose bit ``p`` is a node's ``p``-th NUMA zone. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache


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


def sums(values: Sequence[int]) -> list[int]:
    """``values`` summed over every mask of their zones, indexed by the mask (each from the one without its lowest
    zone: 2^zones additions where summing each mask would take zones times more)."""
    out = [0] * (1 << len(values))
    for mask in range(1, len(out)):
        low = mask & -mask
        out[mask] = out[mask ^ low] + values[low.bit_length() - 1]
    return out


def narrower(a: int, b: int) -> bool:
    """``IsNarrowerThan``: fewer NUMA nodes, else the lower mask."""
    return width(a) < width(b) if width(a) != width(b) else a < b
