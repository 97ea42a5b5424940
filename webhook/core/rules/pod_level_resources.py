"""``pod-level-resources``: kubelet's CPU and Memory Managers skip Pods whose ``spec.resources`` sets
cpu or memory unless the node enables the ``PodLevelResourceManagers`` feature."""

from __future__ import annotations

from webhook.core.config import Policy
from webhook.core.podspec import PodSpec
from webhook.core.rules.base import Rule, Violation

RULE_ID = "pod-level-resources"


def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    level = pod.pod_level
    if level is None or not level.sets_compute() or policy.pod_level_resources == "allow":
        return []
    return [Violation(
        RULE_ID, level.path,
        f"{level.label}: pod-level cpu/memory make kubelet's CPU and Memory Managers skip the Pod "
        "(unless nodes enable PodLevelResourceManagers); set them per container, or allow with "
        "policy.podLevelResources: allow")]


RULE = Rule(RULE_ID, True, "spec.resources sets pod-level cpu or memory", check)
