"""``invalid-quantity``: a cpu or memory value the API server would refuse to decode or validate."""

from __future__ import annotations

from collections.abc import Mapping

from webhook.config import Policy
from webhook.podspec import COMPUTE, CPU, Amount, PodSpec
from webhook.rules.base import Rule, Violation, pod_label

RULE_ID = "invalid-quantity"


def _problem(amount: Amount) -> str | None:
    if amount.error is not None or amount.quantity is None:
        return f"is not a valid Kubernetes quantity ({amount.error})"
    if amount.quantity.milli < 0:
        return "is negative; requests and limits must be >= 0"
    return None


def _scan(label: str, container: str | None, requests: Mapping[str, Amount],
          limits: Mapping[str, Amount]) -> list[Violation]:
    found = []
    for kind, source in (("limit", limits), ("request", requests)):
        for resource in COMPUTE:
            amount = source.get(resource)
            if amount is None or amount.defaulted:
                continue  # a defaulted request is a copy of its limit: report the limit once
            problem = _problem(amount)
            if problem:
                example = "2 or 2000m" if resource == CPU else "4Gi or 4096Mi"
                found.append(Violation(
                    RULE_ID, amount.path,
                    f'{label}: {resource} {kind} "{amount.raw}" {problem}; use e.g. {example}', container))
    return found


def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    found = []
    for c in pod.all_containers:
        found += _scan(c.label(), c.name, c.requests, c.limits)
    found += _scan(pod_label(pod), None, pod.pod_requests, pod.pod_limits)
    return found


RULE = Rule(RULE_ID, True, "a cpu or memory value is not a Kubernetes quantity", check)
