"""CPU lists as k8s.io/utils/cpuset reads and prints them (``reservedSystemCPUs``, cgroup and sysfs lists)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.cpuset import CPUSet, CPUSetError, parse_cpuset


@pytest.mark.parametrize(("text", "cpus", "shown"), [
    ("", [], ""),
    ("0", [0], "0"),
    ("0-3,8", [0, 1, 2, 3, 8], "0-3,8"),
    ("3,1,2", [1, 2, 3], "1-3"),            # String() merges what Parse took in any order
    ("0-1", [0, 1], "0-1"),                 # a run of two is still a range
    ("2-2", [2], "2"),                      # start == end is accepted
    ("0-2,1-4", [0, 1, 2, 3, 4], "0-4"),    # overlaps merge
    ("+1-+3", [1, 2, 3], "1-3"),            # strconv.Atoi takes a sign
    ("0--0", [0], "0"),                     # ... so "0" to "-0" is a range
    ("007", [7], "7"),
])
def test_parse_as_upstream(text: str, cpus: list[int], shown: str) -> None:
    parsed = parse_cpuset(text)
    assert list(parsed) == cpus and parsed.size == len(cpus) and str(parsed) == shown


@pytest.mark.parametrize("text", ["1,", ",1", " 1", "1 ", "1-", "-1", "5-3", "0--1", "1_0", "a", "١", "1-2-3",
                                  "9223372036854775808", "0x1"])
def test_refused_as_upstream(text: str) -> None:
    with pytest.raises(CPUSetError):
        parse_cpuset(text)


def test_a_huge_range_costs_nothing() -> None:
    """Upstream loops over every element; ranges are kept merged here, and size is not len()."""
    s = parse_cpuset("0-9223372036854775807")
    assert s.size == 1 << 63 and str(s) == "0-9223372036854775807" and (1 << 62) in s


@given(st.sets(st.integers(0, 300), max_size=60))
def test_printed_sets_read_back(cpus: set[int]) -> None:
    s = CPUSet.of(cpus)
    assert set(s) == cpus and s.size == len(cpus) and bool(s) == bool(cpus)
    assert parse_cpuset(str(s)) == s


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 20)), max_size=12))
def test_ranges_in_any_order_are_their_union(ranges: list[tuple[int, int]]) -> None:
    text = ",".join(f"{lo}-{lo + n}" for lo, n in ranges)
    expected = {c for lo, n in ranges for c in range(lo, lo + n + 1)}
    assert set(parse_cpuset(text)) == expected


@given(st.text(alphabet="0123456789-,+ x", max_size=20))
def test_any_text_is_a_set_or_a_named_error(text: str) -> None:
    try:
        parse_cpuset(text)
    except CPUSetError as exc:
        assert repr(text) in str(exc)
