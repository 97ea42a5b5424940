"""Linux CPU and NUMA node lists (``0-3,8-11``), as the kernel writes them in sysfs and cgroup files, parsed
strictly and within stated bounds: a malformed or oversized list is a ``ValueError`` naming what is wrong,
never a huge set built from a hostile ``0-4294967295``."""

from __future__ import annotations

from webhook.core.cpuset import MAX_ID, MAX_TEXT, CPUSet, parse_kernel_list

__all__ = ["MAX_ID", "MAX_TEXT", "format_list", "parse_list"]


def parse_list(text: str, what: str = "CPU list") -> frozenset[int]:
    """``0-2,5`` -> {0, 1, 2, 5}; the empty list (a NUMA node without CPUs) is the empty set. Parsed by the one
    CPU-list parser (``webhook.core.cpuset.parse_kernel_list``); a malformed list is a ``ValueError``."""
    return frozenset(parse_kernel_list(text, what))


def format_list(ids: frozenset[int] | set[int]) -> str:
    """{0, 1, 2, 5} -> ``0-2,5`` (the kernel's own form, which people read in ``taskset -cp``; kubelet's
    ``CPUSet.String`` writes the same)."""
    return str(CPUSet.of(ids))
