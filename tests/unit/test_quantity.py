"""Quantity parsing against upstream's own table (k8s.io/apimachinery/pkg/api/resource/quantity_test.go,
``TestQuantityParse`` valid and invalid lists, ``TestParseQuantityString``), plus properties."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.quantity import Quantity, QuantityError, is_whole_cpu, parse_quantity, quantity_from_value

# (input, exact value as upstream's expected decQuantity(mantissa, exponent)) from TestQuantityParse.
UPSTREAM_VALID = [
    ("0", Fraction(0)), ("0n", Fraction(0)), ("0u", Fraction(0)), ("0m", Fraction(0)), ("0Ki", Fraction(0)),
    ("0k", Fraction(0)), ("0Mi", Fraction(0)), ("0M", Fraction(0)), ("0Gi", Fraction(0)), ("0G", Fraction(0)),
    ("0Ti", Fraction(0)), ("0T", Fraction(0)), ("1", Fraction(1)),
    ("1Ki", Fraction(1024)), ("8Ki", Fraction(8 * 1024)), ("7Mi", Fraction(7 * 2**20)),
    ("6Gi", Fraction(6 * 2**30)), ("5Ti", Fraction(5 * 2**40)), ("4Pi", Fraction(4 * 2**50)),
    ("3Ei", Fraction(3 * 2**60)), ("10Ti", Fraction(10 * 2**40)), ("100Ti", Fraction(100 * 2**40)),
    ("5n", Fraction(5, 10**9)), ("4u", Fraction(4, 10**6)), ("3m", Fraction(3, 1000)), ("9", Fraction(9)),
    ("8k", Fraction(8000)), ("50k", Fraction(50000)), ("7M", Fraction(7 * 10**6)), ("6G", Fraction(6 * 10**9)),
    ("5T", Fraction(5 * 10**12)), ("40T", Fraction(4 * 10**13)), ("300T", Fraction(3 * 10**14)),
    ("2P", Fraction(2 * 10**15)), ("1E", Fraction(10**18)),
    ("1E-3", Fraction(1, 1000)), ("1e3", Fraction(1000)), ("1E6", Fraction(10**6)), ("1e9", Fraction(10**9)),
    ("1E12", Fraction(10**12)), ("1e15", Fraction(10**15)), ("1E18", Fraction(10**18)),
    ("1e14", Fraction(10**14)), ("1e13", Fraction(10**13)), ("100.035k", Fraction(100035)),
    ("0.001", Fraction(1, 1000)), ("0.0005k", Fraction(1, 2)), ("0.005", Fraction(5, 1000)),
    ("0.05", Fraction(5, 100)), ("0.5", Fraction(1, 2)), ("0.00050k", Fraction(1, 2)),
    ("0.00500", Fraction(5, 1000)), ("0.05000", Fraction(5, 100)), ("0.50000", Fraction(1, 2)),
    ("0.5e0", Fraction(1, 2)), ("0.5e-1", Fraction(5, 100)), ("0.5e-2", Fraction(5, 1000)),
    ("10.035M", Fraction(10035000)), ("1.2e3", Fraction(1200)), ("1.3E+6", Fraction(1300000)),
    ("1.40e9", Fraction(14 * 10**8)), ("1.53E12", Fraction(153 * 10**10)), ("1.6e15", Fraction(16 * 10**14)),
    ("1.7E18", Fraction(17 * 10**17)), ("9.01", Fraction(901, 100)), ("8.1k", Fraction(8100)),
    ("7.123456M", Fraction(7123456)), ("6.987654321G", Fraction(6987654321)), ("5.444T", Fraction(5444 * 10**9)),
    ("40.1T", Fraction(401 * 10**11)), ("300.2T", Fraction(3002 * 10**11)), ("2.5P", Fraction(25 * 10**14)),
    ("1.01E", Fraction(101 * 10**16)),
    # Things that saturate/round (to nano upstream; then the API server's milli round-up applies).
    ("3.001n", Fraction(4, 10**9)), ("1.1E-9", Fraction(2, 10**9)), ("0.0000000001", Fraction(1, 10**9)),
    ("0.0000000005", Fraction(1, 10**9)), ("0.00000000050", Fraction(1, 10**9)), ("0.5e-9", Fraction(1, 10**9)),
    ("0.9n", Fraction(1, 10**9)), ("0.00000012345", Fraction(124, 10**9)), ("0.00000012354", Fraction(124, 10**9)),
    ("9Ei", Fraction(2**63 - 1)), ("9223372036854775807Ki", Fraction(2**63 - 1)), ("12E", Fraction(12 * 10**18)),
    ("100.035Ki", Fraction(10243584, 100)), ("0.5Mi", Fraction(2**19)), ("0.05Gi", Fraction(536870912, 10)),
    ("0.025Ti", Fraction(274877906944, 10)),
    # Things written by trolls.
    ("0.000000000001Ki", Fraction(2, 10**9)), (".001", Fraction(1, 1000)), (".0001k", Fraction(1, 10)),
    ("1.", Fraction(1)), ("1.G", Fraction(10**9)),
    # TestParseQuantityString: "." and "-." are zero.
    (".", Fraction(0)), ("-.", Fraction(0)),
]

UPSTREAM_INVALID = [
    "", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-",
    " 1", "1 ", "Non-Numeric",
    # resource.ParseQuantity and suffix.go: no case folding, no hex, no milli after an exponent.
    "1K", "1ki", "2e3m", "0x10", "1e",
]


def milli_ceil(value: Fraction) -> int:
    scaled = value * 1000
    return math.ceil(scaled) if scaled >= 0 else -math.ceil(-scaled)


@pytest.mark.parametrize(("text", "value"), UPSTREAM_VALID)
def test_upstream_valid(text: str, value: Fraction) -> None:
    assert parse_quantity(text).milli == milli_ceil(value)
    # TestQuantityParse also tries the negative and the explicitly positive form of every case.
    if not text.startswith("-"):
        assert parse_quantity("+" + text).milli == milli_ceil(value)
        assert parse_quantity("-" + text).milli == -milli_ceil(value)


@pytest.mark.parametrize("text", UPSTREAM_INVALID)
def test_upstream_invalid(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_table_size() -> None:
    assert len(UPSTREAM_VALID) + len(UPSTREAM_INVALID) >= 60


@pytest.mark.parametrize(("a", "b"), [("1Gi", "1024Mi"), ("2", "2000m"), ("1", "1000m"), ("0.5", "500m"),
                                      ("1e3", "1k"), ("1Ki", "1024")])
def test_numeric_equality(a: str, b: str) -> None:
    assert parse_quantity(a).milli == parse_quantity(b).milli


@pytest.mark.parametrize(("text", "whole"), [
    ("2", True), ("2000m", True), ("4e0", True), ("40e-1", True), ("1", True), ("64", True),
    ("1500m", False), ("0.5", False), ("1.0001", False), ("0", False), ("-2", False), ("100m", False),
    ("1001m", False), ("0.0001", False),
])
def test_whole_cpu(text: str, whole: bool) -> None:
    assert is_whole_cpu(parse_quantity(text)) is whole


def test_round_up_to_milli() -> None:
    assert parse_quantity("1.0001").milli == 1001  # rounded up to milli: 1.0001 -> 1001m
    assert parse_quantity("0.1m").milli == 1
    assert parse_quantity("-9.0001").milli == -9001  # away from zero, as Quantity.RoundUp
    assert parse_quantity("1e-2147483647").milli == 1


def test_yaml_scalars() -> None:
    assert quantity_from_value(2).milli == 2000
    assert quantity_from_value(0.5).milli == 500
    assert quantity_from_value(None) == Quantity(0, "0")
    with pytest.raises(QuantityError):
        quantity_from_value(True)
    with pytest.raises(QuantityError):
        quantity_from_value(float("inf"))
    with pytest.raises(QuantityError):
        quantity_from_value(["1"])


SUFFIX: dict[str, int | Fraction] = {
    "": 1, "m": Fraction(1, 1000), "k": 1000, "M": 10**6, "G": 10**9, "Ki": 1024, "Mi": 2**20, "Gi": 2**30,
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "T": 10**12, "Ti": 2**40}


@given(st.integers(0, 10**12), st.integers(0, 10**6 - 1), st.sampled_from(sorted(SUFFIX)), st.booleans())
def test_decimal_strings_match_exact_arithmetic(whole: int, frac: int, suffix: str, negative: bool) -> None:
    text = f"{'-' if negative else ''}{whole}.{frac:06d}{suffix}"
    exact = (whole + Fraction(frac, 10**6)) * SUFFIX[suffix]
    if suffix.endswith("i"):
        exact = min(exact, Fraction(2**63 - 1))
    expected = milli_ceil(-exact if negative else exact)
    assert parse_quantity(text).milli == expected


@given(st.integers(1, 10**9), st.integers(-30, 30))
def test_exponent_form(mantissa: int, exponent: int) -> None:
    exact = Fraction(mantissa) * Fraction(10) ** exponent
    assert parse_quantity(f"{mantissa}e{exponent}").milli == milli_ceil(exact)


@given(st.text(max_size=12))
def test_any_text_parses_or_raises_quantity_error(text: str) -> None:
    try:
        q = parse_quantity(text)
    except QuantityError:
        return
    assert parse_quantity(f"{q.milli}m").milli == q.milli  # the exact milli value is the quantity


# One regression test per divergence the oracle found (tests/fidelity).

def test_exponent_is_truncated_to_int32() -> None:
    """suffix.go interpret: strconv.ParseInt(…, 64) then int32(parsed), so e4294967296 is e0."""
    assert parse_quantity("1e4294967296").milli == 1000
    assert parse_quantity("1e4294967297").milli == 10_000
    assert parse_quantity("1e-4294967296").milli == 1000
    with pytest.raises(QuantityError):
        parse_quantity("1e9223372036854775808")  # beyond int64: ParseInt fails, an unknown suffix


@pytest.mark.parametrize("text", ["Pi", "Ei", "+Pi", "-Ei", "e-10", ".Pi"])
def test_digitless_forms_on_the_inf_dec_path_are_refused(text: str) -> None:
    """ParseQuantity's inf.Dec path parses the number text, which has no digit: ErrNumeric. (A bare ``+`` or
    ``-`` takes the int64 path: a zero, below; the list once held them and sliced them away.)"""
    with pytest.raises(QuantityError, match="numeric part"):
        parse_quantity(text)


@pytest.mark.parametrize("text", ["Gi", "m", "e3", "Ti", "k", "n", "e-9", ".", "-.", "+", "-"])
def test_digitless_forms_on_the_int64_path_are_zero(text: str) -> None:
    """The fast int64 path reads the missing digits as 0: a valid zero."""
    assert parse_quantity(text).milli == 0


@pytest.mark.parametrize(("raw", "milli"), [(" 1", 1000), ("1 ", 1000), ("  2  ", 2000), ("\u00a01Gi", 2**30 * 1000),
                                            ("\u3000500m ", 500), ("\u00851", 1000)])
def test_surrounding_white_space_is_trimmed_as_unmarshal_json_does(raw: str, milli: int) -> None:
    """Quantity.UnmarshalJSON parses strings.TrimSpace(value): " 1" is 1 CPU on the API server."""
    assert quantity_from_value(raw).milli == milli
    assert quantity_from_value(raw).text == raw  # messages show what the manifest says


def test_white_space_that_arrives_escaped_or_is_not_go_space_is_refused() -> None:
    """JSON escapes control characters (and Go's encoder U+2028/U+2029): UnmarshalJSON sees "\\t1" and
    refuses it. unicode.IsSpace is narrower than str.isspace: U+001C and U+200B are not trimmed either."""
    for raw in ("\t1", "1\n", "\r2", "1\u2028", "\x1c1", "1\u200b"):
        with pytest.raises(QuantityError):
            quantity_from_value(raw)


def test_values_beyond_1000_digits_are_valid() -> None:
    """Upstream keeps such values exactly (inf.Dec); qos-guard evaluates them up to its 4,000-digit bound."""
    assert parse_quantity("1e1500").milli == 10**1503
    assert parse_quantity("9" * 1100).milli == int("9" * 1100) * 1000
    assert is_whole_cpu(parse_quantity("1e3000"))
    with pytest.raises(QuantityError, match="too large"):
        parse_quantity("1e4001")


def test_binary_amounts_beyond_the_digit_bound_are_capped_not_refused() -> None:
    """quantity.go caps BinarySI at maxAllowed (2^63-1) whatever the digits: no "too large" for them."""
    assert parse_quantity("9" * 4100 + "Ki").milli == (2**63 - 1) * 1000
    assert parse_quantity("-" + "9" * 4100 + "Mi").milli == -(2**63 - 1) * 1000

