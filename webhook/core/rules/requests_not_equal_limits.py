"""``requests-not-equal-limits``: a request that differs from its limit makes the Pod Burstable."""

from __future__ import annotations

from webhook.core.config import Policy
from webhook.core.podspec import COMPUTE, Block, PodSpec
from webhook.core.rules.base import Rule, Violation

RULE_ID = "requests-not-equal-limits"


def _scan(block: Block) -> list[Violation]:
    found = []
    for resource in COMPUTE:
        request, limit = block.requests.get(resource), block.limits.get(resource)
        if request is None or limit is None or not limit.positive or not block.clean(resource):
            continue
        if request.milli == limit.milli:
            continue
        found.append(Violation(
            RULE_ID, request.path,
            f"{block.label}: {resource} request {request.show()} differs from its limit {limit.show()}; "
            f"set resources.requests.{resource} to {limit.show()}", block.container))
    return found


def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    return [v for block in pod.qos_blocks() for v in _scan(block)]


RULE = Rule(RULE_ID, True, "a cpu or memory request differs from its limit", check)
