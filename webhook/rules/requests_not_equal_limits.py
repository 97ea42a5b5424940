"""``requests-not-equal-limits``: a request that differs from its limit makes the Pod Burstable."""

from __future__ import annotations

from collections.abc import Mapping

from webhook.config import Policy
from webhook.podspec import COMPUTE, Amount, PodSpec
from webhook.rules.base import Rule, Violation, clean, pod_label

RULE_ID = "requests-not-equal-limits"


def _scan(label: str, container: str | None, requests: Mapping[str, Amount],
          limits: Mapping[str, Amount]) -> list[Violation]:
    found = []
    for resource in COMPUTE:
        request, limit = requests.get(resource), limits.get(resource)
        if request is None or limit is None or not limit.positive:
            continue
        if not clean(requests, limits, resource) or request.milli == limit.milli:
            continue
        found.append(Violation(
            RULE_ID, request.path,
            f"{label}: {resource} request {request.show()} differs from its limit {limit.show()}; "
            f"set resources.requests.{resource} to {limit.show()}", container))
    return found


def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    if pod.pod_level_set:
        return _scan(pod_label(pod), None, pod.pod_requests, pod.pod_limits)
    found = []
    for c in pod.all_containers:
        found += _scan(c.label(), c.name, c.requests, c.limits)
    return found


RULE = Rule(RULE_ID, True, "a cpu or memory request differs from its limit", check)
