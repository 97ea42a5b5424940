"""The rule registry: one unit per rule id (check, messages, CEL, severity, default), run in the order of
docs/contract.md#rules.

Rules that are off by default (``smt-misaligned``, ``numa-unfit``) are turned on by the configuration
(``Rule.enabled``). Adding a rule: a module here with its ``RULE``, listed in ``RULES``, plus its fixtures in
tests/fixtures/rules/<rule-id>/ (CONTRIBUTING.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.config import Policy
from webhook.core.facts import NO_FACTS, Facts
from webhook.core.fieldpath import FieldPath
from webhook.core.podspec import PodSpec
from webhook.core.rules import (
    cpu_not_integer,
    dra_claim_spread,
    dra_cpu_not_mirrored,
    dra_cpu_pinner_mismatch,
    dra_cpu_shared,
    dra_cpu_unpaired,
    dra_numa_list_match,
    dra_unaligned,
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
    dra_unaligned.RULE,
    dra_claim_spread.RULE,
    dra_cpu_not_mirrored.RULE,
    dra_cpu_shared.RULE,
    dra_cpu_unpaired.RULE,
    dra_numa_list_match.RULE,
    dra_cpu_pinner_mismatch.RULE,
)
RULE_IDS: tuple[str, ...] = tuple(rule.id for rule in RULES)
BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}



def run_rules(pod: PodSpec, policy: Policy, facts: Facts = NO_FACTS) -> list[Violation]:
    """Every violation of ``pod``, rule by rule (the rules the policy turns on), against ``facts``."""
    found: list[Violation] = []
    for rule in RULES:
        if rule.enabled(policy):
            found.extend(rule.check(pod, policy, facts))
    return found


def run_claim_rules(kind: str, spec: Mapping[str, Any], path: FieldPath, policy: Policy,
                    facts: Facts = NO_FACTS) -> list[Violation]:
    """Every violation of one claim spec (``kind`` a ``claims.CLAIM_KINDS`` kind), rule by rule."""
    found: list[Violation] = []
    for rule in RULES:
        if rule.judge is not None and kind in rule.kinds and rule.enabled(policy):
            found.extend(rule.judge(kind, spec, path, policy, facts))
    return found


__all__ = ["BY_ID", "RULES", "RULE_IDS", "Rule", "Violation", "run_claim_rules", "run_rules"]
