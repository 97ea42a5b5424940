"""``limits-missing``: without a positive cpu and memory limit in every block that decides the QoS class
the Pod is not Guaranteed (``ComputePodQOS``: a zero limit is ignored, so it counts as missing)."""

from __future__ import annotations

from webhook.core.config import Policy
from webhook.core.podspec import COMPUTE, Block, PodSpec
from webhook.core.rules.base import Rule, Violation

RULE_ID = "limits-missing"


def _scan(block: Block) -> list[Violation]:
    if block.container is None and not block.requests and not block.limits:
        # ``resources: {}`` (or hugepages only): present at all, the pod-level block decides the class alone.
        return [Violation(RULE_ID, block.path,
                          f"{block.label}: a pod-level resources block without cpu and memory limits decides "
                          "the QoS class alone, so the Pod is not Guaranteed; remove it or set its cpu and "
                          "memory limits")]
    found = []
    for resource in COMPUTE:
        if not block.clean(resource):
            continue
        limit = block.limits.get(resource)
        if limit is not None and limit.positive:
            continue
        request = block.requests.get(resource)
        what = f"{resource} limit is 0, which counts as none" if limit is not None else f"no {resource} limit"
        if request is not None and request.positive and not request.defaulted:
            fix = f"set resources.limits.{resource} to {request.show()} (its request)"
        else:
            fix = f"set resources.limits.{resource} (the request defaults to it)"
        found.append(Violation(RULE_ID, (*block.path, "limits", resource),
                               f"{block.label}: {what}, so the Pod is not Guaranteed; {fix}", block.container))
    return found


def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    return [v for block in pod.qos_blocks() for v in _scan(block)]


RULE = Rule(RULE_ID, True, "a container has no cpu or memory limit", check)
