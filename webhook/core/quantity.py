"""Kubernetes ``resource.Quantity``: parsing, milli round-up, comparison and the whole-CPU test.

Ported from k8s.io/apimachinery/pkg/api/resource/quantity.go (``parseQuantityString``,
``ParseQuantity``) and suffix.go (``quantitySuffixer.interpret``). Values are kept exactly, as integer
milli-units: the API server rounds every request and limit up to milli scale before admission
(pkg/apis/core/v1/defaults.go ``SetDefaults_ResourceList``), so nothing finer is ever observable.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

__all__ = [
    "Quantity",
    "QuantityError",
    "is_whole_cpu",
    "parse_quantity",
    "parse_quantity_nano",
    "quantity_from_value",
]

# quantity.go: maxAllowed, the cap applied to BinarySI amounts (2^63-1).
_MAX_INT64 = (1 << 63) - 1
# Upstream has no bound: it keeps values as inf.Dec and its ParseQuantity rounds them to nano with exact
# big-integer arithmetic, so a 10,000-digit value is valid there (and 1e2147483647 takes the API server
# longer than any request timeout). qos-guard evaluates values exactly up to this many digits and refuses
# larger ones as too large to evaluate: the bound keeps every milli value printable (Python's default
# ``sys.get_int_max_str_digits()`` is 4,300) and a request cheap, and no node has 10^4000 CPUs or bytes.
_MAX_DIGITS = 4000
# Significant digits (after leading and trailing zeros) evaluated exactly; longer numbers are refused.
_MAX_INPUT_DIGITS = 20_000

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_INT64_MAX = (1 << 63) - 1
# quantity.go maxInt64Factors: decimal digits an int64 always holds; decides upstream's fast path.
_MAX_INT64_FACTORS = 18
_NANO = -9
# The white space Quantity.UnmarshalJSON trims (strings.TrimSpace, unicode.IsSpace) that can reach it: it
# sees the raw JSON text, and JSON escapes control characters (\t, \n, ...), as Go's encoder (kubectl) also
# escapes U+2028 and U+2029, so "\t1" arrives as the six characters "\t1" and is refused. Python's
# str.strip() would also strip U+001C..U+001F, which Go keeps.
_GO_SPACE = " \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"


def _int32(value: int) -> int:
    """Go's int32 conversion (two's complement wrap-around)."""
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


class QuantityError(ValueError):
    """A string that ``resource.ParseQuantity`` would refuse; the message says why."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """A parsed quantity: ``milli`` is the exact value after the API server's round-up to milli."""

    milli: int
    text: str

    def ceil_units(self) -> int:
        """``Quantity.Value()``: the value rounded up (away from zero) to a whole unit."""
        q, r = divmod(abs(self.milli), 1000)
        units = q + (1 if r else 0)
        return units if self.milli >= 0 else -units

    def __str__(self) -> str:
        return self.text


def is_whole_cpu(q: Quantity) -> bool:
    """kubelet's test for exclusive CPUs (pkg/kubelet/cm/cpumanager/policy_static.go ``guaranteedCPUs``):
    ``cpuQuantity.Value()*1000 == cpuQuantity.MilliValue()``, and a positive amount."""
    return q.milli > 0 and q.ceil_units() * 1000 == q.milli


def format_milli(milli: int) -> str:
    """Canonical text for a cpu amount: ``2`` for whole units, ``1500m`` otherwise."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def format_bytes(value: int) -> str:
    """Bytes as people write them in a Pod spec: 67108864 -> ``64Mi``, in the largest exact binary unit (up to
    ``Ti``), else plain bytes. The one byte formatter: numa-unfit's messages, the demands, the node agent."""
    for suffix, shift in (("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if value >= 1 << shift and value % (1 << shift) == 0:
            return f"{value >> shift}{suffix}"
    return str(value)


def format_milli_bytes(milli: int) -> str:
    """``format_bytes`` of an amount in milli-units (rounded up to a whole byte, as kubelet's ``Value()``)."""
    return format_bytes(-(-milli // 1000))


def _split(text: str) -> tuple[bool, str, str, str]:
    """``parseQuantityString``: sign, numerator, denominator and suffix, with upstream's quirks
    (``.``, ``+`` and ``5.`` are accepted; trailing garbage after an exponent is not)."""
    positive = True
    pos, end = 0, len(text)
    if text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(f'unexpected "{text[pos]}" at position {pos + 1}')
    return positive, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int]:
    """``quantitySuffixer.interpret``: (base, exponent) for a suffix. An exponent is read as an int64
    (``strconv.ParseInt``) and then converted to int32, so ``e4294967296`` is ``e0`` (suffix.go)."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix]
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if body and all(c in _DIGITS for c in body) and -_INT64_MAX - 1 <= int(digits) <= _INT64_MAX:
            return 10, _int32(int(digits))
    raise QuantityError(f'unknown suffix "{suffix}"')


def _exponent10(base: int, exponent: int, num: str, denom: str) -> int | None:
    """The power of ten applied to the digits ``num + denom`` as ``ParseQuantity`` computes it, or ``None``
    when it takes the ``inf.Dec`` path (no fast int64 path). Both paths do int32 arithmetic on the scale;
    the results differ only where the int32 wraps."""
    if base == 10:
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
        scale = _int32(exponent - len(denom))
        if precision >= 0 and scale >= _NANO:
            return scale
        return None
    if exponent >= 0 and not denom:
        # 1Mi (2^20) has ~6 digits of decimal precision: int32(float32(exponent)*3/10) in quantity.go.
        precision = 15 - len(num) - (exponent * 3) // 10 - 1
        if precision >= 0:
            mantissa = 1 << exponent
            if int(num) * mantissa <= _INT64_MAX:  # int64Multiply did not overflow
                return 0
    return None


def _int(digits: str) -> int:
    """``int(digits)`` for any length: Python refuses to convert more than 4,300 digits at once."""
    value = 0
    for i in range(0, len(digits), 4000):
        chunk = digits[i:i + 4000]
        value = value * 10 ** len(chunk) + int(chunk)
    return value


def _ceil_scaled(digits: str, exp10: int, exp2: int, unit_digits: int = 3, cap: int | None = None) -> int:
    """ceil(int(digits) * 2**exp2 * 10**exp10 * 10**unit_digits), exactly, for a non-negative value (in milli
    units by default, nano with ``unit_digits=9``); at most ``cap``."""
    digits = digits.lstrip("0")
    if not digits:
        return 0
    stripped = digits.rstrip("0")
    exp10 += len(digits) - len(stripped)
    digits = stripped
    # Order of magnitude of the value: 10**(magnitude-1) <= value < 10**magnitude (2**exp2 <= 10**19).
    magnitude = len(digits) + exp10 + (exp2 * 3 + 9) // 10
    if cap is not None and magnitude > len(str(cap)):
        return cap
    if magnitude > _MAX_DIGITS:
        raise QuantityError(f"value is too large (more than {_MAX_DIGITS} digits)")
    if magnitude < -unit_digits - 1:
        return 1  # far below one unit of the scale: rounds up to the smallest representable amount
    if len(digits) > _MAX_INPUT_DIGITS:
        raise QuantityError(f"more than {_MAX_INPUT_DIGITS} significant digits")
    numerator = _int(digits) << exp2
    shift = exp10 + unit_digits
    if shift >= 0:
        return numerator * int(10**shift)
    whole, rest = divmod(numerator, int(10 ** (-shift)))
    return whole + (1 if rest else 0)


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str) -> Quantity:
    return _parse(text)


def parse_quantity(text: str) -> Quantity:
    """Parse like ``resource.ParseQuantity`` and apply the API server's milli round-up.

    Valid results are memoised (bounded): a cluster uses few distinct values ("1", "2Gi", "500m"), and the
    webhook parses several per request. Long strings skip the cache so it cannot be filled with junk, and
    so do short strings naming huge values (``1e3999``), so the cache stays small.
    """
    if isinstance(text, str) and 0 < len(text) <= 32:
        if "e" in text or "E" in text:
            q = _parse(text)
            if q.milli.bit_length() > 128:
                return q
        return _parse_cached(text)
    return _parse(text)


def _parse(text: str) -> Quantity:
    return Quantity(_parse_scaled(text, 3), text)


def parse_quantity_nano(text: str) -> int:
    """``resource.ParseQuantity`` alone, in nano units: it rounds up to nano, and no API server rounds the
    value further. For quantities kubelet reads from its own configuration (``systemReserved``), which it
    adds before rounding the sum (``GetNodeAllocatableReservation``)."""
    return _parse_scaled(text, 9)


def _parse_scaled(text: str, unit_digits: int) -> int:
    if not isinstance(text, str):
        raise QuantityError(f"expected a string, got {type(text).__name__}")
    if not text:
        raise QuantityError("empty string")
    positive, num, denom, suffix = _split(text)
    base, exponent = _interpret(suffix)
    fast = _exponent10(base, exponent, num, denom) if text != "0" else 0
    if fast is None and not any(c in _DIGITS for c in text[: len(text) - len(suffix)]):
        # The inf.Dec path parses the number text itself, which has no digit: "Pi", "+Ei", "e-10", ".Pi".
        # (The fast int64 path reads it as 0, so "Gi", "m" and "e3" are a valid zero.)
        raise QuantityError("unable to parse numeric part of quantity")
    if base == 10:
        if fast is None:  # inf.Dec: SetScale(Scale() + Scale(exponent).infScale()), int32 arithmetic
            fast = -_int32(len(denom) + _int32(-exponent))
        scaled = _ceil_scaled(num + denom, fast, 0, unit_digits)
    else:
        # quantity.go caps BinarySI amounts at maxAllowed (2^63-1).
        cap = _MAX_INT64 * 10**unit_digits
        scaled = min(_ceil_scaled(num + denom, -len(denom), exponent, unit_digits, cap=cap), cap)
    return scaled if positive else -scaled


def quantity_from_value(value: object) -> Quantity:
    """A quantity as it appears in a manifest: YAML/JSON strings and numbers are accepted (the API
    server decodes a JSON number by its text), ``null`` is the zero quantity (``UnmarshalJSON``)."""
    if value is None:
        return Quantity(0, "0")
    if isinstance(value, bool):
        raise QuantityError(f"expected a quantity, got the boolean {str(value).lower()}")
    if isinstance(value, int):
        return parse_quantity(str(value))
    if isinstance(value, float):
        text = repr(value)
        if text in ("inf", "-inf", "nan"):
            raise QuantityError(f"{text} is not a quantity")
        return parse_quantity(text)
    if isinstance(value, str):
        # Quantity.UnmarshalJSON trims surrounding white space (strings.TrimSpace) before parsing.
        trimmed = value.strip(_GO_SPACE)
        if trimmed != value:
            return Quantity(parse_quantity(trimmed).milli, value)
        return parse_quantity(value)
    kind = "a mapping" if isinstance(value, dict) else "a list" if isinstance(value, list) else type(value).__name__
    raise QuantityError(f"expected a quantity string, got {kind}")
