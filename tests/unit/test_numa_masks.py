"""The NUMA-mask helpers rewritten for speed (``sums``, ``fewest``, ``memory_masks``, the CPU and device hints)
against the step-per-mask loops they replaced, kept here as the reference: any answer that differs, or an
``Unknown`` raised by one and not the other, fails. tests/fidelity/test_topology.py holds the whole model to kubelet."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.core.numa_across import Hint, Node, cpu_hints, device_hints
from webhook.core.numa_amounts import Amounts
from webhook.core.numa_masks import Unknown, fewest, masks, sums, total, width
from webhook.core.numa_memory import FOREIGN, Memory, memory_masks
from webhook.core.numatopology import CPUManager

amounts = st.integers(min_value=0, max_value=64)


def reference_memory_masks(memory: Memory, zones: int, want: Mapping[str, int]) -> tuple[list[int], int]:
    """``memory_masks`` as it was written first: every rule per mask, in calculateHints' order."""
    smallest = zones
    found = []
    allocatable = [([total(memory.allocatable.get(k, [0] * zones), m) for m in range(1 << zones)], v)
                   for k, v in want.items()]
    free = [([total(memory.free.get(k, [0] * zones), m) for m in range(1 << zones)], k, v) for k, v in want.items()]
    for mask in masks(tuple(range(zones))):
        if any(held[mask] < v for held, v in allocatable):
            continue
        smallest = min(smallest, width(mask))
        single = width(mask) == 1
        groups = memory.groups(mask)
        if single and width(groups[0]) > 1:
            continue
        if not single and any(g and g != mask for g in groups):
            continue
        reuse = memory.reuse.get(mask, {})
        if any(held[mask] + reuse.get(k, 0) < v for held, k, v in free):
            continue
        found.append(mask)
    return found, smallest


def reference_hints(capacity: Sequence[int], have: Sequence[int], zones: Sequence[int], reused: int,
                    want: int) -> list[Hint]:
    """``generateCPUTopologyHints`` / ``generateDeviceTopologyHints`` as first written: a step per mask."""
    smallest = len(zones)
    hints = []
    for mask in masks(tuple(zones)):
        if total(capacity, mask) >= want and width(mask) < smallest:
            smallest = width(mask)
        if not reused & ~mask and total(have, mask) >= want:
            hints.append(mask)
    return [Hint(m, width(m) == smallest) for m in hints]


def outcome(f: object, *args: object) -> object:
    try:
        return f(*args)  # type: ignore[operator]
    except Unknown as exc:
        return ("Unknown", str(exc))


@given(st.lists(st.integers(min_value=-5, max_value=1 << 40), max_size=8))
def test_sums_is_every_masks_total(values: list[int]) -> None:
    got = sums(values)
    assert len(got) == 1 << len(values)
    assert all(got[m] == total(values, m) for m in range(1 << len(values)))


@given(st.lists(amounts, min_size=1, max_size=8), st.data())
def test_fewest_is_the_narrowest_mask_that_holds_it(values: list[int], data: st.DataObject) -> None:
    zones = sorted(data.draw(st.sets(st.integers(0, len(values) - 1))))
    want = data.draw(st.integers(min_value=0, max_value=sum(values) + 3))
    widths = [width(m) for m in masks(tuple(zones)) if total(values, m) >= want]
    assert fewest(values, zones, want) == min(widths, default=len(zones))


@st.composite
def memories(draw: st.DrawFn) -> tuple[Memory, int, dict[str, int]]:
    zones = draw(st.integers(min_value=1, max_value=5))
    kinds = draw(st.lists(st.sampled_from(["memory", "hugepages-2Mi", "hugepages-1Gi"]), min_size=1, max_size=3,
                          unique=True))
    allocatable = {k: draw(st.lists(amounts, min_size=zones, max_size=zones)) for k in kinds}
    free = {k: [min(v, draw(amounts)) for v in allocatable[k]] for k in kinds}
    every = (1 << zones) - 1
    cells = draw(st.lists(st.one_of(st.just(0), st.just(FOREIGN), st.integers(1, every)), min_size=zones,
                          max_size=zones))
    reuse = draw(st.dictionaries(st.integers(1, every), st.dictionaries(st.sampled_from(kinds), amounts), max_size=3))
    want = {k: draw(amounts) for k in draw(st.lists(st.sampled_from(kinds), min_size=1, unique=True))}
    return Memory(allocatable, free, cells, reuse), zones, want


@settings(max_examples=400)
@given(memories())
def test_memory_masks_as_first_written(case: tuple[Memory, int, dict[str, int]]) -> None:
    memory, zones, want = case
    assert outcome(memory_masks, memory, zones, want) == outcome(reference_memory_masks, memory, zones, want)


@st.composite
def nodes(draw: st.DrawFn) -> tuple[Node, int]:
    zones = draw(st.integers(min_value=1, max_value=6))
    capacity = draw(st.lists(amounts, min_size=zones, max_size=zones))
    free = [min(c, draw(amounts)) for c in capacity]
    reuse = [draw(st.sampled_from([0, 0, 1, 3])) for _ in range(zones)]
    gpus = draw(st.lists(st.integers(0, 4), min_size=zones, max_size=zones))
    gpus_free = [min(g, draw(st.integers(0, 4))) for g in gpus]
    node = Node(zones, capacity, Amounts.of(free, reuse), {"gpu": gpus}, {"gpu": Amounts.of(gpus_free, reuse)},
                None, "restricted", CPUManager(frozenset(), 1, 0), None, draw(st.booleans()))
    return node, draw(st.integers(min_value=0, max_value=sum(capacity) + 4))


@settings(max_examples=400)
@given(nodes(), st.booleans())
def test_cpu_and_device_hints_as_first_written(case: tuple[Node, int], reusable: bool) -> None:
    node, want = case
    cpu, gpu = node.cpu, node.devices["gpu"]
    assert cpu.free is not None and cpu.reuse is not None and gpu.free is not None and gpu.reuse is not None
    reuse = cpu.reuse if reusable else [0] * node.zones
    held = [z for z in range(node.zones) if node.cpu_capacity[z] > 0]
    assert cpu_hints(node, want, reusable) == reference_hints(
        node.cpu_capacity, [f + r for f, r in zip(cpu.free, reuse, strict=True)], held,
        sum(1 << z for z in range(node.zones) if reuse[z]), want)
    gpus = min(want, 6)
    greuse = gpu.reuse if reusable else [0] * node.zones
    expected: list[Hint] = []
    if gpu.total_free + (gpu.total_reuse if reusable else 0) >= gpus:
        capacity = node.devices_capacity["gpu"]
        having = [z for z in range(node.zones) if capacity[z] > 0 or gpu.free[z] > 0]
        zones = having if node.device_nodes_only and having else list(range(node.zones))
        expected = reference_hints([max(c, f) for c, f in zip(capacity, gpu.free, strict=True)],
                                   [f + r for f, r in zip(gpu.free, greuse, strict=True)], zones,
                                   sum(1 << z for z in range(node.zones) if greuse[z]), gpus)
    assert device_hints(node, "gpu", gpus, reusable) == expected
