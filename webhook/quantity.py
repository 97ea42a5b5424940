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
    "quantity_from_value",
]

# quantity.go: maxAllowed, the cap applied to BinarySI amounts (2^63-1).
_MAX_INT64 = (1 << 63) - 1
# A value whose decimal magnitude exceeds this many digits is refused rather than materialised:
# upstream keeps such numbers symbolic (inf.Dec), Python would have to build a huge integer.
_MAX_DIGITS = 1000
# Significant digits kept before the rest only decides the round-up (the sticky bit).
_KEPT_DIGITS = 200

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_INT32_MAX = (1 << 31) - 1


class QuantityError(ValueError):
    """A string that ``resource.ParseQuantity`` would refuse; the message says why."""


@dataclass(frozen=True, slots=True)
class Quantity:
    """A parsed quantity: ``milli`` is the exact value after the API server's round-up to milli."""

    milli: int
    text: str

    @property
    def is_zero(self) -> bool:
        return self.milli == 0

    @property
    def is_negative(self) -> bool:
        return self.milli < 0

    def ceil_units(self) -> int:
        """``Quantity.Value()``: the value rounded up (away from zero) to a whole unit."""
        q, r = divmod(abs(self.milli), 1000)
        units = q + (1 if r else 0)
        return units if self.milli >= 0 else -units

    def floor_units(self) -> int:
        return self.milli // 1000

    def __str__(self) -> str:
        return self.text


def is_whole_cpu(q: Quantity) -> bool:
    """kubelet's test for exclusive CPUs (pkg/kubelet/cm/cpumanager/policy_static.go ``guaranteedCPUs``):
    ``cpuQuantity.Value()*1000 == cpuQuantity.MilliValue()``, and a positive amount."""
    return q.milli > 0 and q.ceil_units() * 1000 == q.milli


def format_milli(milli: int) -> str:
    """Canonical text for a cpu amount: ``2`` for whole units, ``1500m`` otherwise."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


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
    """``quantitySuffixer.interpret``: (base, exponent) for a suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix]
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if body and all(c in _DIGITS for c in body):
            exponent = int(digits)
            # suffix.go rejects exponents outside int32 instead of truncating them.
            if -_INT32_MAX <= exponent <= _INT32_MAX:
                return 10, exponent
            raise QuantityError(f"exponent {digits} is out of range")
    raise QuantityError(f'unknown suffix "{suffix}"')


def _ceil_milli(digits: str, exp10: int, exp2: int) -> int:
    """ceil(int(digits) * 2**exp2 * 10**exp10 * 1000) for a non-negative value, without building
    numbers larger than the answer needs."""
    digits = digits.lstrip("0")
    if not digits:
        return 0
    # Order of magnitude of the value: 10**(magnitude-1) <= value < 10**magnitude (2**exp2 <= 10**19).
    magnitude = len(digits) + exp10 + (exp2 * 3 + 9) // 10
    if magnitude > _MAX_DIGITS:
        raise QuantityError("value is too large")
    if magnitude < -4:
        return 1  # far below 1m: rounds up to the smallest representable amount
    sticky = False
    if len(digits) > _KEPT_DIGITS:
        sticky = any(c != "0" for c in digits[_KEPT_DIGITS:])
        exp10 += len(digits) - _KEPT_DIGITS
        digits = digits[:_KEPT_DIGITS]
    numerator = int(digits) << exp2
    shift = exp10 + 3
    if shift >= 0:
        return numerator * int(10**shift) + (1 if sticky else 0)
    whole, rest = divmod(numerator, int(10 ** (-shift)))
    return whole + (1 if rest or sticky else 0)


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str) -> Quantity:
    return _parse(text)


def parse_quantity(text: str) -> Quantity:
    """Parse like ``resource.ParseQuantity`` and apply the API server's milli round-up.

    Valid results are memoised (bounded): a cluster uses few distinct values ("1", "2Gi", "500m"), and the
    webhook parses several per request. Long strings skip the cache so it cannot be filled with junk.
    """
    if isinstance(text, str) and 0 < len(text) <= 32:
        return _parse_cached(text)
    return _parse(text)


def _parse(text: str) -> Quantity:
    if not isinstance(text, str):
        raise QuantityError(f"expected a string, got {type(text).__name__}")
    if not text:
        raise QuantityError("empty string")
    positive, num, denom, suffix = _split(text)
    base, exponent = _interpret(suffix)
    if base == 10:
        milli = _ceil_milli(num + denom, exponent - len(denom), 0)
    else:
        milli = _ceil_milli(num + denom, -len(denom), exponent)
        # quantity.go caps BinarySI amounts at maxAllowed (2^63-1).
        milli = min(milli, _MAX_INT64 * 1000)
    return Quantity(milli if positive else -milli, text)


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
        return parse_quantity(value)
    raise QuantityError(f"expected a quantity string, got {type(value).__name__}")
