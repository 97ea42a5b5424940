"""What every rule shares: the violation record and the rule record."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from webhook.core.config import Policy
from webhook.core.fieldpath import FieldPath
from webhook.core.podspec import PodSpec


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule: ``path`` is the offending field (or where a missing one belongs)."""

    rule: str
    path: FieldPath
    message: str
    container: str | None = None

    @property
    def subject(self) -> FieldPath:
        """The path with ``requests``/``limits`` left out: what the violation is about, so that a fix
        that moves it from the request to the limit is not mistaken for a fix."""
        return tuple(seg for seg in self.path if seg not in ("requests", "limits"))


Check = Callable[[PodSpec, Policy], list[Violation]]


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    default_on: bool
    summary: str
    check: Check
