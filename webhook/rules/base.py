"""What every rule shares: the violation record and the small helpers rules use to read a container."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from webhook.config import Policy
from webhook.podspec import CPU, Amount, Container, PodSpec

_KIND = re.compile(r"\.(requests|limits)\.")


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: ``path`` is the offending field (or where a missing one belongs)."""

    rule: str
    path: str
    message: str
    container: str | None = None

    @property
    def subject(self) -> str:
        """The path with ``requests``/``limits`` folded away: what the violation is about, so that a
        fix that moves it from the request to the limit is not mistaken for a fix."""
        return _KIND.sub(".", self.path)


Check = Callable[[PodSpec, Policy], list[Violation]]


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    default_on: bool
    summary: str
    check: Check


def is_invalid(amount: Amount) -> bool:
    """Unparsable, or negative (``ValidateNonnegativeQuantity`` refuses it at the API server)."""
    return amount.quantity is None or amount.error is not None or amount.quantity.milli < 0


def clean(requests: Mapping[str, Amount], limits: Mapping[str, Amount], resource: str) -> bool:
    """True when no value of ``resource`` is invalid: an invalid one yields ``invalid-quantity`` only."""
    return not any(
        (amount := source.get(resource)) is not None and is_invalid(amount) for source in (requests, limits)
    )


def container_clean(c: Container, resource: str) -> bool:
    return clean(c.requests, c.limits, resource)


def pod_clean(pod: PodSpec, resource: str) -> bool:
    return clean(pod.pod_requests, pod.pod_limits, resource)


def cpu_amount(requests: Mapping[str, Amount], limits: Mapping[str, Amount]) -> tuple[str, Amount] | None:
    """The cpu the CPU Manager sizes by: the limit, or the request where no limit is set."""
    for kind, source in (("limit", limits), ("request", requests)):
        amount = source.get(CPU)
        if amount is not None and amount.positive:
            return kind, amount
    return None


def pod_label(pod: PodSpec) -> str:
    return f"pod ({pod.path}.resources)"
