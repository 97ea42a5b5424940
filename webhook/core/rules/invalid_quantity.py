"""``invalid-quantity``: a cpu or memory value the API server would refuse to decode or validate."""

from __future__ import annotations

from webhook.core.config import Policy
from webhook.core.podspec import COMPUTE, CPU, Amount, Block, PodSpec
from webhook.core.rules.base import Rule, Violation

RULE_ID = "invalid-quantity"


def _problem(amount: Amount) -> str:
    if amount.error is not None or amount.quantity is None:
        return f"is not a valid Kubernetes quantity ({amount.error})"
    return "is negative; requests and limits must be >= 0"


def _scan(block: Block) -> list[Violation]:
    found = []
    for kind, source in (("limit", block.limits), ("request", block.requests)):
        for resource in COMPUTE:
            amount = source.get(resource)
            if amount is None or amount.defaulted or not amount.invalid:
                continue  # a defaulted request is a copy of its limit: report the limit once
            example = "2 or 2000m" if resource == CPU else "4Gi or 4096Mi"
            found.append(Violation(
                RULE_ID, amount.path,
                f'{block.label}: {resource} {kind} "{amount.raw}" {_problem(amount)}; use e.g. {example}',
                block.container))
    return found


def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    return [v for block in pod.blocks() for v in _scan(block)]


RULE = Rule(RULE_ID, True, "a cpu or memory value is not a Kubernetes quantity", check)
