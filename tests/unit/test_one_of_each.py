"""Jobs written once: one CPU-list grammar, one byte formatter, one opted-in namespace selector."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from webhook.core import demands, engine, quantity
from webhook.core.cpuset import CPUSetError, parse_cpuset, parse_kernel_list
from webhook.core.rules import numa_unfit
from webhook.node import cpulist, observe, verdict_text


@given(st.integers(0, 1 << 50) | st.sampled_from([0, 1, 1023, 1024, 3 << 30, 5 << 40, (1 << 40) * 1024]))
def test_one_byte_formatter(n: int) -> None:
    """What the formatter writes reads back (as the API server reads it) as the same number of bytes, in the
    largest binary unit that is exact, and every module that shows bytes uses this one formatter."""
    text = quantity.format_bytes(n)
    assert quantity.parse_quantity(text).milli == n * 1000, text
    written = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti)?", text)
    assert written, text
    number, unit = int(written[1]), written[2]
    if unit != "Ti":  # else a larger exact unit would have been chosen (Ti is the largest written)
        assert number % 1024 != 0 or number == 0, text
    assert quantity.format_milli_bytes(n * 1000) == text
    assert quantity.format_milli_bytes(n * 1000 - 1) == text  # rounded up, as Value()
    # the names those modules imported (not re-exported, so read from the module's namespace)
    for module in (demands, numa_unfit, verdict_text):
        assert vars(module)["format_bytes"] is quantity.format_bytes, module.__name__
    assert quantity.format_bytes(64 * 2**20) == "64Mi" and quantity.format_bytes(1000) == "1000"


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
