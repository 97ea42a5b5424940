"""What every rule shares: the violation record, the rule record, and message templates that render both
as Python text (the engine) and as CEL (the admission policies), so a message is written once."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from string import Formatter
from typing import Any

from webhook.core.config import Policy
from webhook.core.facts import Facts
from webhook.core.fieldpath import FieldPath, Remark
from webhook.core.podspec import PodSpec


@dataclass(frozen=True, slots=True)
class Violation(Remark):
    """One broken rule: ``path`` is the offending field (or where a missing one belongs)."""

    rule: str = field(kw_only=True)
    # Reported, never refused: a warning in admission, a notice in check and audit (numa-unfit on nodes whose
    # Topology Manager admits a Pod across NUMA nodes).
    advisory: bool = field(default=False, kw_only=True)

    @property
    def subject(self) -> FieldPath:
        """The path with ``requests``/``limits`` left out: what the violation is about, so that a fix
        that moves it from the request to the limit is not mistaken for a fix."""
        return tuple(seg for seg in self.path if seg not in ("requests", "limits"))


_SIMPLE = re.compile(r"^([\w.]+|'[^'\\]*')$")


def cel_string(text: str) -> str:
    """A CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True, slots=True)
class Text:
    """A message with ``{named}`` holes: ``text(**values)`` fills them with Python values (the engine),
    ``cel(**expressions)`` with CEL string expressions (the admission policies). Both say the same words."""

    template: str

    def __call__(self, **values: object) -> str:
        return self.template.format(**values)

    def cel(self, **expressions: str) -> str:
        parts: list[str] = []
        literal = ""
        for text, hole, _, _ in Formatter().parse(self.template):
            literal += text
            if hole is not None:
                if literal:
                    parts.append(cel_string(literal))
                literal = ""
                expr = expressions[hole]
                parts.append(expr if _SIMPLE.match(expr) else f"({expr})")
        if literal or not parts:
            parts.append(cel_string(literal))
        return " + ".join(parts)

    def __str__(self) -> str:
        return self.template


# Shared by the rules that propose a whole number of CPUs.
USE = Text("use {n}")
USE_EITHER = Text("use {low} or {high}")

# ``check(pod, policy, facts)``: the Pod, the configured policy, what the cluster says (``NO_FACTS``: nothing).
Check = Callable[[PodSpec, Policy, Facts], list[Violation]]
CelFragment = Callable[[bool], str]
# ``judge(kind, claim_spec, path, policy, facts)``: a rule over ResourceClaims and their templates (``kinds``).
ClaimCheck = Callable[[str, Mapping[str, Any], FieldPath, Policy, Facts], list[Violation]]


def always(policy: Policy) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class PolicyRefusal:
    """Why ``qos-guard policy`` refuses a configuration that turns on a rule CEL cannot express: the key that
    turns it on (the chart's template fails on it) and the message; shown as ``key: message``."""

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule, whole: the engine runs ``check(pod, policy, facts)``; ``qos-guard policy`` assembles ``cel``.

    ``enabled``: whether the configuration turns the rule on (``default_on`` is its answer for the default
    configuration). ``cel(mutated)`` is a CEL ``list<string>`` of ``'rule-id: message'`` written in the
    vocabulary of ``webhook.core.rules.cel``; ``mutated`` judges what the mutation would leave. A rule without
    CEL either needs nothing (``policy_refusal`` None: the API server refuses such objects itself) or makes
    ``qos-guard policy`` refuse a configuration that turns it on, with ``policy_refusal``.
    """

    id: str
    summary: str
    check: Check
    cel: CelFragment | None
    severity: str = "high"  # policy reports; every rule costs exclusive CPUs
    enabled: Callable[[Policy], bool] = always
    policy_refusal: PolicyRefusal | None = None
    # Kinds it judges whole instead of pod specs (``claims.CLAIM_KINDS``); its ``check`` finds nothing in a
    # pod spec, and the admission policies, which match pod specs only, do not have it.
    kinds: tuple[str, ...] = ()
    judge: ClaimCheck | None = None  # how it judges a claim spec of one of ``kinds``
    # A rule that judges only with cluster facts an admission policy cannot read (the claims a Pod names, the
    # kubelets' configz): what they are. Its check says nothing without them, so its CEL form would be "unknown"
    # and it has none; the webhook, check and audit judge it where they have the facts.
    facts_only: str = ""

    @property
    def default_on(self) -> bool:
        return self.enabled(Policy())
