"""``limits-missing``: without a positive cpu and memory limit on every container the Pod is not
Guaranteed (``ComputePodQOS``: a zero limit is ignored, so it counts as missing)."""

from __future__ import annotations

from collections.abc import Mapping

from webhook.config import Policy
from webhook.podspec import COMPUTE, Amount, PodSpec
from webhook.rules.base import Rule, Violation, clean, pod_label

RULE_ID = "limits-missing"


def _scan(label: str, container: str | None, res_path: str, requests: Mapping[str, Amount],
          limits: Mapping[str, Amount]) -> list[Violation]:
    found = []
    for resource in COMPUTE:
        if not clean(requests, limits, resource):
            continue
        limit = limits.get(resource)
        if limit is not None and limit.positive:
            continue
        request = requests.get(resource)
        what = f"{resource} limit is 0, which counts as none" if limit is not None else f"no {resource} limit"
        if request is not None and request.positive and not request.defaulted:
            fix = f"set resources.limits.{resource} to {request.show()} (its request)"
        else:
            fix = f"set resources.limits.{resource} (the request defaults to it)"
        found.append(Violation(RULE_ID, f"{res_path}.limits.{resource}",
                               f"{label}: {what}, so the Pod is not Guaranteed; {fix}", container))
    return found


def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    if pod.pod_level_set:
        # The pod-level block decides the QoS class alone (ComputePodQOS).
        return _scan(pod_label(pod), None, f"{pod.path}.resources", pod.pod_requests, pod.pod_limits)
    found = []
    for c in pod.all_containers:
        found += _scan(c.label(), c.name, f"{c.path}.resources", c.requests, c.limits)
    return found


RULE = Rule(RULE_ID, True, "a container has no cpu or memory limit", check)
