"""Jobs written once (#28): one CPU-list grammar, one byte formatter, one opted-in namespace selector. Where a
copy remains (the node agent's ``size_text``), it is held to the one here until it goes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from webhook.core import demands, engine, quantity
from webhook.core.cpuset import CPUSetError, parse_cpuset, parse_kernel_list
from webhook.core.rules import numa_unfit
from webhook.node import cpulist, observe, verdict_text


@given(st.integers(0, 1 << 50) | st.sampled_from([0, 1, 1023, 1024, 3 << 30, 5 << 40, (1 << 40) * 1024]))
def test_one_byte_formatter(n: int) -> None:
    assert quantity.format_bytes(n) == verdict_text.size_text(n)
    assert quantity.format_milli_bytes(n * 1000) == quantity.format_bytes(n)
    assert quantity.format_milli_bytes(n * 1000 - 1) == quantity.format_bytes(n)  # rounded up, as Value()
    # the names those modules imported (not re-exported, so read from the module's namespace)
    assert vars(demands)["format_bytes"] is quantity.format_bytes
    assert vars(numa_unfit)["format_bytes"] is quantity.format_bytes


def test_one_opted_in_selector() -> None:
    assert engine.MODE_SELECTOR == "qos-guard.io/mode in (enforce,mutate,warn)"
    assert observe.MODE_SELECTOR is engine.MODE_SELECTOR


@given(st.text(alphabet="0123456789-,", max_size=16))
def test_one_cpu_list_grammar(text: str) -> None:
    """Kernel lists are upstream's grammar with narrower numbers: whatever the kernel reading accepts, upstream's
    reads as the same set (the node agent and kubelet cannot disagree about a list both accept)."""
    try:
        kernel = parse_kernel_list(text)
    except CPUSetError:
        return
    assert parse_cpuset(text.strip()) == kernel
    assert cpulist.parse_list(text) == frozenset(kernel)
