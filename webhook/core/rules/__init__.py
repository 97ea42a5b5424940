"""The rule registry: one small pure check per rule id, run in the order of SPEC §3.

Rules that are off by default (``smt-misaligned``, ``numa-unfit``) turn themselves on from the policy
(``smtAlignment > 1``, ``numa`` set), so the registry always runs every rule.
"""

from __future__ import annotations

from webhook.core.config import Policy
from webhook.core.podspec import PodSpec
from webhook.core.rules import (
    cpu_not_integer,
    invalid_quantity,
    limits_missing,
    numa_unfit,
    pod_level_resources,
    requests_not_equal_limits,
    smt_misaligned,
    status_qos_class,
)
from webhook.core.rules.base import Rule, Violation

RULES: tuple[Rule, ...] = (
    limits_missing.RULE,
    requests_not_equal_limits.RULE,
    invalid_quantity.RULE,
    cpu_not_integer.RULE,
    status_qos_class.RULE,
    pod_level_resources.RULE,
    smt_misaligned.RULE,
    numa_unfit.RULE,
)
RULE_IDS: tuple[str, ...] = tuple(rule.id for rule in RULES)


def run_rules(pod: PodSpec, policy: Policy) -> list[Violation]:
    """Every violation of ``pod``, rule by rule."""
    found: list[Violation] = []
    for rule in RULES:
        found.extend(rule.check(pod, policy))
    return found


__all__ = ["RULES", "RULE_IDS", "Rule", "Violation", "run_rules"]
