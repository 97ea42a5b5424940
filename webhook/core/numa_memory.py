"""The static Memory Manager over NUMA masks, as pkg/kubelet/cm/memorymanager/policy_static.go reads them: its
hints (``calculateHints``: a NUMA node of a single-NUMA allocation joins no group, nor one node two groups) and its
``Allocate`` (the merged hint extended to its own narrowest that holds the request, each type taken NUMA node by
NUMA node, what init containers left on that mask reused first). Amounts in the caller's units. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from webhook.core.numa_masks import Unknown, masks, narrower, sums, total, width
from webhook.core.numatopology import UNEXPECTED_ADMISSION_ERROR


@dataclass(slots=True)
class Memory:
    """The Memory Manager's machine state: per type and zone the allocatable and free bytes, each zone's group
    (the mask of its last allocation; 0 before any; ``FOREIGN`` where other Pods hold memory there, in groups
    no object publishes), and what init containers left for reuse per mask."""

    allocatable: dict[str, list[int]]
    free: dict[str, list[int]]
    cells: list[int]
    reuse: dict[int, dict[str, int]] = field(default_factory=dict)

    def groups(self, mask: int) -> list[int]:
        """The groups of ``mask``'s NUMA nodes (0: none yet); Unknown where other Pods' memory is there."""
        found = [self.cells[z] for z in range(len(self.cells)) if mask >> z & 1]
        if FOREIGN in found:
            raise Unknown(GROUPED_UNKNOWN)
        return found


FOREIGN = -1
GROUPED_UNKNOWN = "how the Memory Manager grouped other Pods' memory over NUMA nodes is not published"


def memory_masks(memory: Memory, zones: int, want: Mapping[str, int]) -> tuple[list[int], int]:
    """``calculateHints``: the masks it hints (every memory type gets the same list) and the fewest NUMA nodes whose
    allocatable holds every type (a hint of that many is preferred)."""
    # Each rule a filter over the masks still in (comprehensions: this runs on every restricted and best-effort
    # row), in calculateHints' order: the allocatable, then the groups (Unknown where a mask still in has other
    # Pods' memory), then what is free.
    found = allocatable_masks(memory.allocatable, zones, want)
    smallest = min(map(int.bit_count, found), default=zones)
    if any(memory.cells):  # else no NUMA node is in a group yet: every mask's groups are all 0
        found = [m for m in found if _ungrouped(memory.groups(m), m)]
    for k, v in want.items():
        held = sums(memory.free.get(k, [0] * zones))
        if memory.reuse:
            found = [m for m in found if held[m] + memory.reuse.get(m, {}).get(k, 0) >= v]
        else:
            found = [m for m in found if held[m] >= v]
    return found, min(smallest, zones)


def allocatable_masks(allocatable: Mapping[str, list[int]], zones: int, want: Mapping[str, int]) -> list[int]:
    """``calculateHints``' first rule: the masks whose allocatable holds every type ``want`` asks. A mask still in
    after it that has other Pods' memory (``FOREIGN``) makes the hints ``Unknown``, whatever else holds."""
    found = list(masks(tuple(range(zones))))
    for k, v in want.items():
        held = sums(allocatable.get(k, [0] * zones))
        found = [m for m in found if held[m] >= v]
    return found


def _ungrouped(groups: list[int], mask: int) -> bool:
    """A hint of ``mask`` by its NUMA nodes' groups: a single NUMA node not in a group of several, or several
    NUMA nodes each in no group or in exactly this one (no node in two groups)."""
    if mask.bit_count() == 1:
        return width(groups[0]) <= 1
    return not any(g and g != mask for g in groups)


def allocate_memory(memory: Memory, zones: int, want: Mapping[str, int], init: bool, hint: int | None,
                    preferred: bool) -> str:
    """The Memory Manager's ``Allocate``: the merged hint, extended to the narrowest hint of its own that holds the
    request and contains it (refused where that is not preferred and the merged one was), no NUMA node in two
    groups; each type taken NUMA node by NUMA node, what init containers left on that mask reused first."""
    if hint is None:
        # No hint (topologyManagerPolicy none): getDefaultHint, its own best (preferred first, then the narrowest).
        hinted, smallest = memory_masks(memory, zones, want)
        if not hinted:
            return (f"{UNEXPECTED_ADMISSION_ERROR}: [memorymanager] failed to get the default NUMA affinity, no NUMA "
                    "nodes with enough memory is available")
        hint = _best(hinted, smallest)
        preferred = width(hint) == smallest
    mask = hint
    if any(total(memory.free.get(k, [0] * zones), mask) < v for k, v in want.items()):
        hinted, smallest = memory_masks(memory, zones, want)
        within = [m for m in hinted if m & mask == mask]
        if not within:
            return (f"{UNEXPECTED_ADMISSION_ERROR}: [memorymanager] failed to find NUMA nodes to extend the current "
                    "topology hint")
        best = _best(within, smallest)
        if width(best) != smallest and preferred:
            return f"{UNEXPECTED_ADMISSION_ERROR}: [memorymanager] failed to find the extended preferred hint"
        mask = best
    if width(mask) > 1 and any(g and g != mask for g in memory.groups(mask)):
        return f"{UNEXPECTED_ADMISSION_ERROR}: [memorymanager] preferred hint violates NUMA node allocation"
    reuse = memory.reuse.setdefault(mask, {})
    for kind, size in want.items():
        left = max(0, size - reuse.get(kind, 0))
        free = memory.free.setdefault(kind, [0] * zones)
        for z in range(zones):
            if not mask >> z & 1:
                continue
            memory.cells[z] = mask
            took = min(free[z], left)
            free[z] -= took
            left -= took
    for kind, size in want.items():
        if init:
            reuse[kind] = max(reuse.get(kind, 0), size)
        elif reuse.get(kind):
            reuse[kind] = max(0, reuse[kind] - size)
    return ""


def _best(hinted: list[int], smallest: int) -> int:
    """``findBestHint``: a preferred mask (as narrow as ``smallest``) before any other, then the narrowest."""
    best = hinted[0]
    for m in hinted[1:]:
        if (width(m) == smallest) != (width(best) == smallest):
            best = m if width(m) == smallest else best
        elif narrower(m, best):
            best = m
    return best
