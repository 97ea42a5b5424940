"""``core.numa_across``: kubelet's hint merge and allocation where restricted and best-effort admit what no NUMA
node holds, on hand-worked cases (tests/fidelity/test_topology.py holds it to kubelet's own code)."""

from __future__ import annotations

import itertools

from hypothesis import example, given, settings
from hypothesis import strategies as st

from webhook.core.numa_across import Hint, Node, Want, admit, cpu_hints, merge
from webhook.core.numa_amounts import Amounts
from webhook.core.numa_masks import Unknown
from webhook.core.numa_memory import FOREIGN, Memory, memory_masks
from webhook.core.numatopology import CPUManager

GIB = 1 << 30


def node(policy: str = "restricted", cpus: tuple[int, ...] = (32, 32), free: tuple[int, ...] | None = None,
         gpus: tuple[int, ...] | None = None, memory: tuple[int, ...] | None = None,
         options: frozenset[str] = frozenset(), sockets: tuple[int, ...] | None = (0, 1)) -> Node:
    zones = len(cpus)
    free = free or cpus
    devices = {"gpu": Amounts.of(list(gpus), [0] * zones)} if gpus else {}
    mem = Memory({"memory": list(memory)}, {"memory": list(memory)}, [0] * zones) if memory else None
    return Node(zones, list(cpus), Amounts.of(list(free), [0] * zones), {"gpu": list(gpus)} if gpus else {},
                devices, mem, policy, CPUManager(options, 1, 0), sockets, True)


def app(cpus: int, gpus: int = 0, memory: int = 0) -> Want:
    return Want("app", cpus, {"memory": memory} if memory else {}, {"gpu": gpus} if gpus else {})


def test_a_merged_hint_is_preferred_only_where_every_resource_prefers_the_same_numa_nodes() -> None:
    """48 CPUs prefer both NUMA nodes, one GPU its own: their AND is NUMA node 0, not preferred (the masks differ),
    so restricted refuses; with two GPUs, one per NUMA node, both prefer {0, 1} and it is admitted."""
    refused = admit(node(gpus=(1, 0)), [app(48, 1)], 0)
    assert refused.failed == 0 and refused.reason.startswith("TopologyAffinityError"), refused
    assert admit(node(gpus=(1, 1)), [app(48, 2)], 0).failed is None
    assert admit(node("best-effort", gpus=(1, 0)), [app(48, 1)], 0).failed is None  # best-effort admits


def test_align_by_socket_prefers_every_hint_within_the_fewest_sockets() -> None:
    """The node tier's machine: one socket of two NUMA nodes of one CPU, CPU 0 reserved, a GPU on each NUMA node.
    One CPU prefers NUMA node 1 alone, two GPUs both: restricted refuses; align-by-socket makes {0, 1} (one socket)
    preferred for the CPU too, and it is admitted."""
    machine = {"cpus": (1, 1), "free": (0, 1), "gpus": (1, 1), "sockets": (0, 0)}
    plain = node(**machine)  # type: ignore[arg-type]
    assert [(h.mask, h.preferred) for h in cpu_hints(plain, 1)] == [(0b10, True), (0b11, False)]
    assert admit(plain, [app(1, 2)], 0).reason.startswith("TopologyAffinityError")
    by_socket = node(**machine, options=frozenset({"align-by-socket"}))  # type: ignore[arg-type]
    assert [(h.mask, h.preferred) for h in cpu_hints(by_socket, 1)] == [(0b10, True), (0b11, True)]
    assert admit(by_socket, [app(1, 2)], 0).failed is None
    unknown = node(**{**machine, "sockets": None}, options=frozenset({"align-by-socket"}))  # type: ignore[arg-type]
    try:
        admit(unknown, [app(1, 2)], 0)
    except Unknown as exc:
        assert "socket" in str(exc)
    else:
        raise AssertionError("align-by-socket without the sockets must not be guessed")


def test_a_numa_node_of_a_single_numa_allocation_joins_no_group() -> None:
    """The Memory Manager: once NUMA node 0 holds a container's memory alone, no hint spanning it is given; a hint of
    that group alone is given again for it."""
    mem = Memory({"memory": [64 * GIB, 64 * GIB]}, {"memory": [60 * GIB, 64 * GIB]}, [0b01, 0])
    hinted, smallest = memory_masks(mem, 2, {"memory": 80 * GIB})
    assert hinted == [] and smallest == 2
    assert memory_masks(mem, 2, {"memory": 8 * GIB}) == ([0b01, 0b10], 1)
    grouped = Memory({"memory": [64 * GIB, 64 * GIB]}, {"memory": [10 * GIB, 40 * GIB]}, [0b11, 0b11])
    assert memory_masks(grouped, 2, {"memory": 8 * GIB}) == ([0b11], 1)  # 1: allocatable, single NUMA nodes


def test_a_later_container_whose_hint_turns_on_cpus_taken_across_numa_nodes_is_not_known() -> None:
    """restricted: 40 CPUs across both NUMA nodes (memory there too), then 8 more: which NUMA nodes still have 8
    free turns on which CPUs kubelet took first (cores, not published)."""
    machine = node(memory=(64 * GIB, 64 * GIB))
    wide = Want("app", 40, {"memory": 100 * GIB}, {})
    assert admit(node(memory=(64 * GIB, 64 * GIB)), [wide], 0).failed is None
    try:
        admit(machine, [wide, app(8, memory=GIB)], 0)
    except Unknown as exc:
        assert "which CPUs" in str(exc)
    else:
        raise AssertionError("the second container's verdict is not known")
    # Too few CPUs left on the node fails whatever the hint (best-effort): known.
    spent = admit(node("best-effort", memory=(64 * GIB, 64 * GIB)), [wide, app(30, memory=GIB)], 0)
    assert spent.failed == 1 and spent.reason == "UnexpectedAdmissionError: 30 CPUs asked, 24 free on the node"


def test_amounts_stay_known_per_numa_node_only_where_the_order_cannot_matter() -> None:
    one = Amounts.of([10, 6], [0, 0])
    one.take(4, 0b01, init=False, reuse_first=False)
    assert one.free == [6, 6] and one.total_free == 12
    both = Amounts.of([10, 6], [0, 0])
    both.take(12, 0b11, init=False, reuse_first=False)
    assert both.free is None and both.total_free == 4
    spill = Amounts.of([10, 6], [0, 0])
    spill.take(12, 0b01, init=False, reuse_first=False)  # all of NUMA node 0, then 2 of the only other
    assert spill.free == [0, 4]
    devices = Amounts.of([2, 2], [1, 0])
    devices.take(2, 0b10, init=False, reuse_first=True)  # the reusable one first, then NUMA node 1's
    assert devices.free == [2, 1] and devices.reuse == [0, 0]


def _every_take(free: list[int], reuse: list[int], want: int, first: int | None, init: bool,
                reuse_first: bool) -> set[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every (free, reuse) per zone a take may leave, in any order kubelet's cores or device IDs could decide:
    devices take the reusable first (from any zone), then free ones; CPUs mix both; either takes the zones of
    ``first`` before the others. The reference ``Amounts.take`` must agree with wherever it says it knows."""
    zones = range(len(free))
    inside = [z for z in zones if first is not None and first >> z & 1]
    outside = [z for z in zones if z not in inside]
    mixed = not reuse_first
    from_reuse = min(want, sum(reuse)) if reuse_first else 0
    out = set()
    for took_reuse in itertools.product(*(range(v + 1) for v in reuse)):
        if reuse_first and sum(took_reuse) != from_reuse:
            continue
        for took_free in itertools.product(*(range(v + 1) for v in free)):
            left = want - from_reuse
            ok = sum(took_free) + (sum(took_reuse) if mixed else 0) == left
            for group in (inside, outside):  # a zone outside only once those inside give nothing more
                have = sum(free[z] + (reuse[z] if mixed else 0) for z in group)
                took = sum(took_free[z] + (took_reuse[z] if mixed else 0) for z in group)
                ok = ok and took == min(left, have)
                left -= took
            if ok:
                # What an init container takes stays reusable after it.
                out.add((tuple(f - t for f, t in zip(free, took_free, strict=True)),
                         tuple(r0 - r + (t + r if init else 0) for r0, t, r in zip(reuse, took_free, took_reuse,
                                                                                  strict=True))))
    return out


@settings(max_examples=400)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2)), min_size=1, max_size=3), st.integers(0, 15),
       st.integers(0, 7), st.booleans(), st.booleans(), st.booleans())
# An init container's take of one of two reusable CPUs leaves them as they were, wherever it took it.
@example([(0, 1), (0, 1)], 1, 0, False, True, False)
# NUMA nodes 0 and 1 hold reusable CPUs only: which of them gave one is not known, that it was reusable is.
@example([(0, 1), (0, 1), (1, 0)], 1, 0b011, True, False, False)
def test_a_take_is_known_per_numa_node_exactly_where_every_order_leaves_the_same(
        zones: list[tuple[int, int]], asked: int, mask: int, has_first: bool, init: bool, reuse_first: bool) -> None:
    """``Amounts.take`` (and ``_took``, branch by branch): per NUMA node it says what is left only where every order
    kubelet could take in leaves the same, and then says that; the totals apart (``split``) likewise."""
    free, reuse = [f for f, _ in zones], [r for _, r in zones]
    want = asked % (sum(free) + sum(reuse) + 1)  # the caller checked the total
    first = mask & ((1 << len(zones)) - 1) if has_first else None
    amounts = Amounts.of(free, reuse)
    amounts.take(want, first, init, reuse_first)
    outcomes = _every_take(free, reuse, want, first, init, reuse_first)
    assert outcomes, "the reference finds no way to take what the caller checked is there"
    per_zone = outcomes
    if amounts.known:
        assert per_zone == {(tuple(amounts.free or ()), tuple(amounts.reuse or ()))}
    else:
        assert len(per_zone) > 1, f"{free=} {reuse=} {want=} {first=}: every order leaves {per_zone}, yet not known"
    totals = {(sum(f), sum(r)) for f, r in per_zone}
    if amounts.split:
        assert totals == {(amounts.total_free, amounts.total_reuse)}
    else:
        assert len(totals) > 1, f"{free=} {reuse=} {want=} {first=}: the totals are {totals}, yet not known apart"
    assert {f + r for f, r in totals} == {amounts.total_free + amounts.total_reuse}


def _kubelet_merge(lists: list[list[Hint] | None], zones: int) -> Hint:
    """policy.go's HintMerger.Merge, permutation by permutation (the reference for ``merge``)."""
    every = (1 << zones) - 1
    filtered = [[Hint(None, True)] if h is None else h or [Hint(None, False)] for h in lists]
    narrowest = [min(m.mask.bit_count() for m in h if m.mask is not None) for h in filtered
                 if any(m.mask is not None for m in h)]
    best_count = max(narrowest, default=0)

    def narrower(a: int, b: int) -> bool:
        return a.bit_count() < b.bit_count() if a.bit_count() != b.bit_count() else a < b

    def compare(cur: Hint | None, cand: Hint) -> Hint | None:
        assert cand.mask is not None
        if cand.mask == 0:
            return cur
        if cur is None:
            return cand
        assert cur.mask is not None
        masks = cand if cand.mask != cur.mask and narrower(cand.mask, cur.mask) else cur
        if not cur.preferred and cand.preferred:
            return cand
        if cur.preferred and not cand.preferred:
            return cur
        if cur.preferred:
            return masks
        c, n = cur.mask.bit_count(), cand.mask.bit_count()
        if c > best_count:
            return masks
        if c == best_count:
            return cur if n != best_count else masks
        if n > best_count:
            return cur
        if n == best_count:
            return cand
        return cand if n > c else cur if n < c else masks

    best: Hint | None = None
    for perm in itertools.product(*filtered):
        named = [h.mask for h in perm if h.mask is not None]
        preferred = all(h.preferred for h in perm) and all(m == named[0] for m in named)
        mask = every
        for m in named:
            mask &= m
        best = compare(best, Hint(mask, preferred))
    return best or Hint(every, False)


hint_lists = st.lists(st.none() | st.lists(st.builds(Hint, st.none() | st.integers(1, 7), st.booleans()),
                                          max_size=4), max_size=4)


@given(hint_lists)
def test_merge_is_the_hint_mergers_answer_without_every_permutation(lists: list[list[Hint] | None]) -> None:
    assert merge(lists, 3) == _kubelet_merge(lists, 3)
    fast = merge(lists, 3, full=False)
    assert fast == _kubelet_merge(lists, 3) if fast.preferred else fast == Hint(None, False)


def test_without_hints_the_memory_manager_takes_its_own_best_numa_nodes() -> None:
    """topologyManagerPolicy none: no merged hint; the Memory Manager takes its own default (preferred, then the
    narrowest: NUMA node 0 for 8Gi), and refuses where no NUMA nodes hold the memory at all."""
    none = node("none", memory=(64 * GIB, 64 * GIB))
    assert admit(none, [app(4, memory=8 * GIB)], 0).failed is None
    assert none.memory is not None and none.memory.free["memory"] == [56 * GIB, 64 * GIB]
    assert none.memory.cells == [0b01, 0]
    refused = admit(node("none", memory=(64 * GIB, 64 * GIB)), [app(4, memory=200 * GIB)], 0)
    assert refused.failed == 0 and "failed to get the default NUMA affinity" in refused.reason


def test_none_counts_no_numa_nodes_and_more_than_eight_are_judged_only_past_the_memory_manager() -> None:
    """kubelet's Topology Manager refuses to start past 8 NUMA nodes (max-allowable-numa-nodes) unless its policy is
    none, where only the Memory Manager iterates NUMA masks: 12 NUMA nodes under none without it are judged (too few
    CPUs refused), with it or under restricted they are not known."""
    wide = (4,) * 12
    assert admit(node("none", cpus=wide, sockets=None), [app(40)], 0).failed is None
    short = admit(node("none", cpus=wide, sockets=None), [app(60)], 0)
    assert short.failed == 0 and short.reason == "UnexpectedAdmissionError: 60 CPUs asked, 48 free on the node"
    for machine in (node("restricted", cpus=wide, sockets=None),
                    node("none", cpus=wide, sockets=None, memory=(GIB,) * 12)):
        try:
            admit(machine, [app(40)], 0)
        except Unknown as exc:
            assert "max-allowable-numa-nodes" in str(exc)
        else:
            raise AssertionError("more than 8 NUMA nodes are not judged there")


def test_other_pods_memory_groups_are_not_guessed() -> None:
    """NUMA node 0 already holds other Pods' memory (the Memory Manager's groups are not published): a hint over it
    is not known, one elsewhere is."""
    mem = Memory({"memory": [64 * GIB, 64 * GIB]}, {"memory": [32 * GIB, 64 * GIB]}, [FOREIGN, 0])
    try:
        memory_masks(mem, 2, {"memory": 8 * GIB})
    except Unknown as exc:
        assert "other Pods" in str(exc)
    else:
        raise AssertionError("a NUMA node holding other Pods' memory joins groups nobody publishes")
