"""A container's memory per NUMA node as the verdict and the outputs use it (pure: the reader in
``webhook/node/numastat.py`` builds it from the cgroup's ``memory.numa_stat``), and how people read it: the
shares, sizes and the ``numastat -p``-like table ``verify`` prints."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NumaPages:
    """A container's anonymous and file memory per NUMA node, in bytes (every node of the layout, zeros
    included), with its cgroup's ``cpuset.mems`` when known."""

    anon: tuple[tuple[int, int], ...]
    file: tuple[tuple[int, int], ...]
    path: str  # the cgroup folder
    version: int
    mems: frozenset[int] | None = None

    @property
    def anon_total(self) -> int:
        return sum(b for _, b in self.anon)

    @property
    def file_total(self) -> int:
        return sum(b for _, b in self.file)

    def anon_on(self, nodes: Iterable[int]) -> int:
        wanted = set(nodes)
        return sum(b for n, b in self.anon if n in wanted)

    def anon_nodes(self) -> frozenset[int]:
        """The NUMA nodes holding any of its anonymous memory."""
        return frozenset(n for n, b in self.anon if b)

    def remote_share(self, local: frozenset[int]) -> float | None:
        """The share (0..1) of anonymous memory off ``local`` (the CPUs' NUMA nodes); None with none at all."""
        total = self.anon_total
        if not total or not local:
            return None
        return (total - self.anon_on(local)) / total

    def with_mems(self, mems: frozenset[int] | None) -> NumaPages:
        return NumaPages(self.anon, self.file, self.path, self.version, mems)


# --- as people read it ---

def kib(n: int) -> str:
    """Bytes as ``numastat`` users read them, rounded: 86016 -> ``84 KiB``, 36306944 -> ``34.6 MiB``. Not
    ``core.quantity.format_bytes``, which writes exact Pod-spec units (``64Mi``) and falls back to plain bytes
    for a page count that is no exact MiB."""
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if n >= 1 << shift:
            value = n / (1 << shift)
            return f"{value:.0f} {unit}" if value == int(value) or value >= 100 else f"{value:.1f} {unit}"
    return f"{(n + 1023) // 1024} KiB" if n else "0 KiB"


def percent(share: float) -> str:
    """0.9996 -> ``99.96 %``, 1.0 -> ``100 %``: never rounded up to 100 % nor down to 0 % when it is not."""
    value = share * 100
    if value in (0.0, 100.0):
        return f"{value:.0f} %"
    text = f"{value:.0f}" if 1 <= value <= 99 else f"{value:.2f}"
    return f"{text} %"


def distribution(pages: NumaPages) -> str:
    """``100 % of 84 KiB anonymous on NUMA 0``; ``70 % of 1 MiB anonymous on NUMA 0, 30 % on NUMA 1``."""
    total = pages.anon_total
    if not total:
        return "no anonymous memory yet"
    parts = [(n, b) for n, b in pages.anon if b]
    parts.sort(key=lambda nb: -nb[1])
    head, *rest = parts
    text = f"{percent(head[1] / total)} of {kib(total)} anonymous on NUMA {head[0]}"
    return text + "".join(f", {percent(b / total)} on NUMA {n}" for n, b in rest)


def table(pages: NumaPages) -> list[str]:
    """A ``numastat -p``-like table, KiB per NUMA node and the total."""
    nodes = [n for n, _ in pages.anon]
    head = ["KiB", *(f"NUMA {n}" for n in nodes), "Total"]
    rows = [head]
    for name, values in (("anon", pages.anon), ("file", pages.file)):
        total = sum(b for _, b in values)
        rows.append([name, *(f"{(b + 1023) // 1024}" for _, b in values), f"{(total + 1023) // 1024}"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                      enumerate(zip(r, widths, strict=True))) for r in rows]
