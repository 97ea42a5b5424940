"""Linux CPU lists ("0-3,8"), as kubelet reads them: ``reservedSystemCPUs``, the CPU Manager's state, a
cgroup's ``cpuset.cpus`` and sysfs ``cpulist`` files all use this form. The one parser of them: one grammar
(``_parse``), read with upstream's numbers (``parse_cpuset``) or with the kernel's (``parse_kernel_list``: what
the node agent reads from sysfs and cgroup files, bounded).

Ported from k8s.io/utils/cpuset (``Parse``, ``CPUSet.String``), the version k8s.io/kubernetes v1.36 pins.
A set is kept as merged ranges, never as one entry per CPU, so a hostile "0-9223372036854775807" costs
nothing (upstream's ``Parse`` would loop over every element).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

__all__ = ["MAX_ID", "MAX_TEXT", "CPUSet", "CPUSetError", "parse_cpuset", "parse_kernel_list"]

# strconv.Atoi: an optional sign, then ASCII digits, within int64 (Python's int() also takes "1_0", " 1"
# and non-ASCII digits, which Atoi refuses).
_ATOI = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class CPUSetError(ValueError):
    """A CPU list ``cpuset.Parse`` would refuse; the message says which part."""


MAX_ID = 65_535  # kernel lists: CPU and NUMA node ids above this are refused (Linux's NR_CPUS tops out at 8192)
MAX_TEXT = 64 * 1024  # kernel lists: a longer one is refused before it is parsed


def _atoi(text: str, whole: str) -> int:
    if not text:
        raise CPUSetError(f"{whole!r}: an empty element")
    if not _ATOI.fullmatch(text):
        raise CPUSetError(f"{whole!r}: {text!r} is not a CPU number")
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise CPUSetError(f"{whole!r}: {text!r} is out of range")
    return value


@dataclass(frozen=True, slots=True)
class CPUSet:
    """A set of CPU ids as sorted, disjoint, non-adjacent inclusive ranges."""

    ranges: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, cpus: Iterable[int]) -> CPUSet:
        return _merged([(c, c) for c in cpus])

    @property
    def size(self) -> int:
        """How many CPUs (not ``len``: a hostile range can exceed what ``len`` may return)."""
        return sum(hi - lo + 1 for lo, hi in self.ranges)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __contains__(self, cpu: object) -> bool:
        return isinstance(cpu, int) and any(lo <= cpu <= hi for lo, hi in self.ranges)

    def __iter__(self) -> Iterator[int]:
        for lo, hi in self.ranges:
            yield from range(lo, hi + 1)

    def __str__(self) -> str:
        """``CPUSet.String``: "0-2,5"; a run of two is "0-1"; the empty set is ""."""
        return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.ranges)

    def union(self, other: CPUSet) -> CPUSet:
        return _merged([*self.ranges, *other.ranges])


def _merged(ranges: list[tuple[int, int]]) -> CPUSet:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return CPUSet(tuple(out))


def _parse(text: str, number: Callable[[str, str], int], backwards: Callable[[str, int, int], str]) -> CPUSet:
    """The grammar both dialects share: comma-separated elements, each a number or ``lo-hi`` (split at the first
    ``-``), ``lo <= hi``, overlaps merged. ``number(token, element)`` reads one number or raises
    ``CPUSetError``; ``backwards`` words a range that ends before it starts."""
    ranges: list[tuple[int, int]] = []
    for part in text.split(","):
        lo_text, dash, hi_text = part.partition("-")
        lo = number(lo_text, part)
        hi = number(hi_text, part) if dash else lo
        if lo > hi:
            raise CPUSetError(backwards(part, lo, hi))
        ranges.append((lo, hi))
    return _merged(ranges)


def parse_cpuset(text: str) -> CPUSet:
    """``cpuset.Parse``: comma-separated CPU numbers and ``lo-hi`` ranges; "" is the empty set.

    Upstream's quirks are kept: ``strconv.Atoi`` takes a sign (``+1`` is 1, and ``0--0`` is the range 0..0),
    no white space is allowed anywhere, an empty element (``1,``) is an error, overlapping ranges merge.
    """
    if text == "":
        return CPUSet()
    return _parse(text, lambda token, _part: _atoi(token, text),
                  lambda part, lo, hi: f"{text!r}: invalid range {part!r} ({lo} > {hi})")


def _show(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def parse_kernel_list(text: str, what: str = "CPU list", max_id: int = MAX_ID) -> CPUSet:
    """A list as the kernel writes it (sysfs ``cpulist``, cgroup ``cpuset.cpus``): the same grammar, the trailing
    newline ignored, numbers as ASCII digits only (no sign) and at most ``max_id``, the text at most
    ``MAX_TEXT``; the empty list (a NUMA node without CPUs) is the empty set. Errors name ``what``."""
    if len(text) > MAX_TEXT:
        raise CPUSetError(f"{what} is {len(text)} characters long (more than {MAX_TEXT})")
    body = text.strip()
    if not body:
        return CPUSet()

    def number(token: str, part: str) -> int:
        if not (token.isascii() and token.isdigit()):
            raise CPUSetError(f"{what} {_show(body)}: {_show(part)} is not a number or a range a-b")
        if len(token) > 6 or int(token) > max_id:
            raise CPUSetError(f"{what} {_show(body)}: id {_show(token)} in {_show(part)} is above {max_id}")
        return int(token)

    return _parse(body, number, lambda part, lo, hi: f"{what} {_show(body)}: range {_show(part)} ends before it "
                                                     "starts")
