"""One resource's amounts on a node while kubelet admits a Pod's containers one after another (``numa_across``):
what is free and what init containers left for reuse, per NUMA node while that is determined, and in total always.
Which CPUs or devices kubelet takes where it may choose depends on cores and device IDs no NodeResourceTopology
object publishes, so a take keeps per-NUMA-node amounts only where every order it could take in leaves the same
(tests/unit/test_numa_across.py checks that against every order). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class Amounts:
    """One resource on the node during an admission: per zone what is free and what init containers left for
    reuse (None: not known per zone, after an allocation over several NUMA nodes), and the totals, always known."""

    free: list[int] | None
    reuse: list[int] | None
    total_free: int
    total_reuse: int
    # Whether the totals apart are known: kubelet's CPU allocation mixes reusable and free CPUs, and after a
    # mix that is not forced only their sum is (what full-pcpus-only's check, which counts the free ones, needs).
    split: bool = True

    @classmethod
    def of(cls, free: Sequence[int], reuse: Sequence[int]) -> Amounts:
        return cls(list(free), list(reuse), sum(free), sum(reuse))

    @property
    def known(self) -> bool:
        return self.free is not None and self.reuse is not None

    def take(self, want: int, first: int | None, init: bool, reuse_first: bool) -> None:
        """Take ``want`` (the caller checked the total): the reusable first where kubelet does so (devices:
        ``devicesToAllocate``), then from the zones of ``first`` before the others, in an order kubelet's cores or
        device IDs decide (CPUs: ``takeByTopology`` mixes reusable and free ones). What an init container takes is
        left for reuse after it; what another takes of the reusable is not. Per zone it stays known only where the
        order cannot matter (everything taken from a set, or from one zone holding one kind of amount)."""
        from_reuse = min(want, self.total_reuse) if reuse_first else None
        if self.free is not None and self.reuse is not None:
            free, reuse = self.free, self.reuse
            took_free = [0] * len(free)
            took_reuse = [0] * len(free)
            steps = [(reuse, took_reuse, from_reuse)] if from_reuse is not None else []
            zones = range(len(free))
            inside = [z for z in zones if first is not None and first >> z & 1]
            outside = [z for z in zones if z not in inside]
            if _took(steps, want - (from_reuse or 0), inside, outside, free, reuse, took_free, took_reuse,
                     mixed=from_reuse is None, init=init):
                for z in zones:
                    free[z] -= took_free[z]
                    reuse[z] -= took_reuse[z]
                    if init:
                        reuse[z] += took_free[z] + took_reuse[z]
                from_reuse = sum(took_reuse)
            else:
                self.free = self.reuse = None
                if from_reuse is None:
                    from_reuse = _reuse_taken(want, inside, outside, free, reuse)
        if from_reuse is None:
            # Known in total only: how much of the reusable went is known where nothing is left to choose from;
            # else only the sum of free and reusable is (an init container's CPUs stay reusable: it keeps).
            if self.total_reuse and self.total_free and want < self.total_free + self.total_reuse:
                self.total_free += self.total_reuse - (0 if init else want) - (want if init else 0)
                self.total_reuse = want if init else 0
                self.split = False
                return
            from_reuse = min(want, self.total_reuse) if not self.total_free else max(0, want - self.total_free)
        self.total_free -= want - from_reuse
        self.total_reuse -= from_reuse
        if init:
            self.total_reuse += want


def _took(steps: list[tuple[list[int], list[int], int]], want: int, inside: list[int], outside: list[int],
          free: list[int], reuse: list[int], took_free: list[int], took_reuse: list[int], mixed: bool,
          init: bool) -> bool:
    """Fill ``took_free``/``took_reuse`` for ``Amounts.take``: the reusable step (if any), then ``want`` from the
    zones ``inside`` before those ``outside`` (free ones, and with ``mixed`` the reusable too, in an order not
    known). False where the split per zone is not determined. An ``init`` container's take of reusable amounts
    leaves them reusable wherever it took them, so only its free ones need to be determined."""
    for amounts, taken, count in steps:
        holding = [z for z, v in enumerate(amounts) if v > 0]
        if count == sum(amounts):
            for z in holding:
                taken[z] = amounts[z]
        elif len(holding) == 1 or init:
            _fill(taken, amounts, holding, count)
        elif count:
            return False
    left = want
    for group in (inside, outside):
        have = sum(free[z] - took_free[z] + (reuse[z] - took_reuse[z] if mixed else 0) for z in group)
        n = min(left, have)
        left -= n
        if not n:
            continue
        if n == have:
            for z in group:
                took_free[z] = free[z]
                if mixed:
                    took_reuse[z] = reuse[z]
            continue
        holding = [z for z in group if free[z] - took_free[z] > 0 or (mixed and reuse[z] - took_reuse[z] > 0)]
        if mixed and init and not any(free[z] - took_free[z] for z in holding):
            _fill(took_reuse, [reuse[z] - took_reuse[z] for z in range(len(reuse))], holding, n)
            continue
        if len(holding) != 1:
            return False
        z = holding[0]
        if mixed and reuse[z] and free[z]:
            return False
        if mixed and reuse[z]:
            took_reuse[z] += n
        else:
            took_free[z] += n
    return True


def _reuse_taken(want: int, inside: list[int], outside: list[int], free: list[int], reuse: list[int]) -> int | None:
    """How much of the reusable a CPU take (free and reusable mixed) took in all, where the zones it took from
    are not determined but the kinds are: a group of zones is taken whole, or holds one kind. None: not known."""
    taken = 0
    for group in (inside, outside):
        group_free, group_reuse = sum(free[z] for z in group), sum(reuse[z] for z in group)
        n = min(want, group_free + group_reuse)
        want -= n
        if n == group_free + group_reuse or not group_free:
            taken += min(n, group_reuse)
        elif group_reuse and n:
            return None
    return taken


def _fill(taken: list[int], amounts: list[int], holding: list[int], count: int) -> None:
    """Take ``count`` from the ``holding`` zones in their order (where the order is one of several, the caller
    knows it makes no difference)."""
    for z in holding:
        n = min(count, amounts[z])
        taken[z] += n
        count -= n
