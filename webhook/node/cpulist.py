"""Linux CPU and NUMA node lists (``0-3,8-11``), as the kernel writes them in sysfs and cgroup files, parsed
strictly and within stated bounds: a malformed or oversized list is a ``ValueError`` naming what is wrong,
never a huge set built from a hostile ``0-4294967295``."""

from __future__ import annotations

from webhook.core.cpuset import CPUSet

MAX_ID = 65_535  # CPU ids and NUMA node ids above this are refused (Linux's NR_CPUS tops out at 8192)
MAX_TEXT = 64 * 1024  # a cpulist file longer than this is refused before it is parsed


def parse_list(text: str, what: str = "CPU list") -> frozenset[int]:
    """``0-2,5`` -> {0, 1, 2, 5}; the empty list (a NUMA node without CPUs) is the empty set."""
    if len(text) > MAX_TEXT:
        raise ValueError(f"{what} is {len(text)} characters long (more than {MAX_TEXT})")
    body = text.strip()
    if not body:
        return frozenset()
    ids: set[int] = set()
    for part in body.split(","):
        lo_text, dash, hi_text = part.partition("-")
        if not _number(lo_text) or (dash and not _number(hi_text)):
            raise ValueError(f"{what} {_show(body)}: {_show(part)} is not a number or a range a-b")
        if len(lo_text) > 6 or len(hi_text) > 6:
            raise ValueError(f"{what} {_show(body)}: an id in {_show(part)} is above {MAX_ID}")
        lo, hi = int(lo_text), int(hi_text) if dash else int(lo_text)
        if hi < lo:
            raise ValueError(f"{what} {_show(body)}: range {_show(part)} ends before it starts")
        if hi > MAX_ID:
            raise ValueError(f"{what} {_show(body)}: id {hi} is above {MAX_ID}")
        ids.update(range(lo, hi + 1))
    return frozenset(ids)


def format_list(ids: frozenset[int] | set[int]) -> str:
    """{0, 1, 2, 5} -> ``0-2,5`` (the kernel's own form, which people read in ``taskset -cp``; kubelet's
    ``CPUSet.String`` writes the same)."""
    return str(CPUSet.of(ids))


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _show(text: str, limit: int = 40) -> str:
    shown = text if len(text) <= limit else text[:limit] + "..."
    return repr(shown)
