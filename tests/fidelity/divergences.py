"""Known disagreements between qos-guard and Kubernetes, each a named predicate.

A disagreement the differential tests find is excused only when an entry here matches the object and the
disagreement is the one the entry describes (``shows``: a crash never is, nor a verdict the other way round);
every excused object is counted per entry and the counts are printed at the end of the run, so nothing is
hidden.
Delete an entry when its item is fixed: the tests then fail on any object it used to excuse.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from webhook.core.quantity import QuantityError, quantity_from_value

COMPUTE = ("cpu", "memory")


def verdict_either_way(problem: str) -> bool:
    """A verdict that differs (allowed or denied, or a mutation Kubernetes does not pin); never a crash."""
    return problem.startswith(("qos-guard allows (", "qos-guard denies (", "mutation leaves "))


@dataclass(frozen=True)
class Divergence:
    name: str
    item: str  # what it is: "bound" for a deliberate limit, "deliberate" for a choice, else the area
    applies: Callable[[Any], bool]
    shows: Callable[[str], bool] = verdict_either_way  # the disagreement (``disagreement``'s text) it excuses


def pod_specs(obj: Any) -> Iterator[Mapping[str, Any]]:
    """Every pod spec in a manifest: a Pod's, a workload's template, a List's items'."""
    if not isinstance(obj, Mapping):
        return
    kind = obj.get("kind")
    if kind == "List":
        for item in obj.get("items") or []:
            yield from pod_specs(item)
        return
    spec = obj.get("spec")
    template: Any = None
    if kind == "Pod":
        if isinstance(spec, Mapping):
            yield spec
        return
    if kind == "PodTemplate":
        template = obj.get("template")
    elif kind == "CronJob" and isinstance(spec, Mapping):
        job = spec.get("jobTemplate")
        template = job.get("spec", {}).get("template") if isinstance(job, Mapping) else None
    elif isinstance(spec, Mapping):
        template = spec.get("template")
    if isinstance(template, Mapping) and isinstance(template.get("spec"), Mapping):
        yield template["spec"]


def _pod_level(obj: Any) -> list[Mapping[str, Any]]:
    return [s["resources"] for s in pod_specs(obj) if isinstance(s.get("resources"), Mapping)]


def _names(block: Mapping[str, Any], key: str) -> set[str]:
    value = block.get(key)
    return set(value) if isinstance(value, Mapping) else set()


def guaranteed_status_on_other_spec(obj: Any) -> bool:
    """A client-supplied ``status.qosClass: Guaranteed`` is kept on create, so a Pod whose spec is
    not Guaranteed is stored Guaranteed and pinned; qos-guard judges the spec (and denies)."""
    items = obj.get("items") if isinstance(obj, Mapping) and obj.get("kind") == "List" else [obj]
    return any(isinstance(o, Mapping) and o.get("kind") == "Pod" and isinstance(o.get("status"), Mapping)
               and o["status"].get("qosClass") == "Guaranteed" for o in items or [])


def _compute_values(obj: Any, names: tuple[str, ...] = ("cpu",)) -> Iterator[Any]:
    for spec in pod_specs(obj):
        blocks = [c.get("resources") for key in ("containers", "initContainers")
                  for c in (spec.get(key) or []) if isinstance(c, Mapping)] + [spec.get("resources")]
        for block in blocks:
            if isinstance(block, Mapping):
                for key in ("requests", "limits"):
                    values = block.get(key)
                    if isinstance(values, Mapping):
                        yield from (values[n] for n in names if n in values)


def cpu_beyond_int64_milli(obj: Any) -> bool:
    """kubelet's isIntegralCPUAmount compares int64 ``Value()*1000`` with ``MilliValue()``: beyond 2^63-1
    milli-CPUs (9.2e15 CPUs: 9849T, 8Ei, 1e400) the int64 arithmetic overflows or saturates and decides
    either way. qos-guard compares exactly. No node has that many CPUs."""
    for value in _compute_values(obj):
        try:
            if abs(quantity_from_value(value).milli) > (1 << 63) - 1:
                return True
        except QuantityError:
            continue
    return False


def beyond_digit_bound_value(obj: Any) -> bool:
    """A cpu or memory value beyond qos-guard's 4,000-digit bound (webhook/core/quantity.py ``_MAX_DIGITS``):
    refused as invalid-quantity by qos-guard, evaluated exactly by the API server."""
    for value in _compute_values(obj, COMPUTE):
        try:
            quantity_from_value(value)
        except QuantityError as exc:
            if "too large" in str(exc) or "significant digits" in str(exc):
                return True
    return False


KNOWN_DIVERGENCES: list[Divergence] = [
    Divergence("cpu or memory value of more than 4,000 digits: qos-guard refuses it", "bound",
               beyond_digit_bound_value,
               lambda problem: problem.startswith("qos-guard denies (") and "'invalid-quantity'" in problem),
    Divergence("cpu beyond 2^63-1 milli-CPUs: kubelet's int64 arithmetic overflows", "bound", cpu_beyond_int64_milli),
    # Deliberate: PrepareForCreate keeps a client-supplied status.qosClass, so a Burstable spec carrying
    # ``status.qosClass: Guaranteed`` is stored Guaranteed and kubelet pins it by its requests. qos-guard judges
    # the spec and refuses it: a class forged in the manifest is not a Guaranteed Pod an operator can reason
    # about (its limits are missing or differ from what it is pinned by).
    Divergence("status.qosClass: Guaranteed is kept on create even when the spec is not Guaranteed",
               "deliberate", guaranteed_status_on_other_spec,
               lambda problem: problem.startswith("qos-guard denies (")
               and "Kubernetes: Guaranteed and pinned" in problem),
]


def inexact_json_number(text: str) -> bool:
    """A JSON number Python's json reads as a float that is not the number written (``1.0000000000000001``,
    ``1e400``); the API server parses the digits exactly. Only ``check`` on JSON files sees numbers: the
    API server sends quantities to the webhook as strings."""
    try:
        exact = Decimal(text)
        value = float(text)
    except (InvalidOperation, ValueError):
        return False
    return value != value or value in (float("inf"), float("-inf")) or Decimal(repr(value)) != exact


def beyond_digit_bound(milli: int | None, oracle_unscaled: str | None, oracle_exp: int) -> bool:
    """qos-guard refuses values of more than ``webhook.core.quantity._MAX_DIGITS`` digits (a deliberate bound)."""
    if oracle_unscaled is not None:
        return len(oracle_unscaled.lstrip("-")) + oracle_exp - 3 > 4000
    return milli is not None and len(str(abs(milli))) - 3 > 4000


QUANTITY_DIVERGENCES: list[tuple[str, str]] = [
    ("JSON number that float64 cannot hold exactly (Python json)", "reading files"),
    ("value of more than 4,000 digits: qos-guard refuses it as too large, upstream evaluates it", "bound"),
    ("1.38's ParseQuantity keeps 29 significant digits (rounded away from zero); qos-guard keeps them all, as "
     "1.33-1.37 do: not modelled yet", "1.38 pre-release"),
]


def _significant(milli: str) -> tuple[int, int, int]:
    """``milli`` (an integer's text) as (sign, digits without trailing zeros, power of ten of the last one)."""
    sign = -1 if milli.startswith("-") else 1
    digits = milli.lstrip("-+")
    stripped = digits.rstrip("0") or "0"
    return sign, int(stripped), len(digits) - len(stripped)


def rounded_to_29_digits(ours: str | None, theirs: str | None) -> bool:
    """1.38's Quantity parser (apimachinery v0.38: "Parsing keeps at most 29 significant digits ... and rounds
    any precision beyond this away from zero"): the oracle's milli value is qos-guard's exact one rounded so, to
    at most 29 significant digits, a change in the last of them only (both rounded up to milli after)."""
    if ours is None or theirs is None or ours == theirs:
        return False
    sign, mantissa, power = _significant(theirs)
    our_sign = -1 if ours.startswith("-") else 1
    exact = int(ours.lstrip("-+"))
    if sign != our_sign or len(str(mantissa)) > 29 or len(str(exact)) <= 29:
        return False
    # Away from zero at the 29th significant digit of the exact value, then compared at that precision.
    drop = len(str(exact)) - 29
    kept, rest = divmod(exact, 10 ** drop)
    away = (kept + (1 if rest else 0)) * 10 ** drop
    return bool(away == mantissa * 10**power)


class Tally:
    """Counts of what each differential test checked and excused, printed in the terminal summary."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.excused: Counter[str] = Counter()

    def lines(self) -> list[str]:
        out = [f"{k}: {v}" for k, v in sorted(self.counts.items())]
        out += [f"excused as known divergence [{k}]: {v}" for k, v in sorted(self.excused.items())]
        return out


TALLY = Tally()
