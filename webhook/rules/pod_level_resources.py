"""``pod-level-resources``: kubelet's CPU and Memory Managers skip Pods whose ``spec.resources`` sets
cpu or memory unless the node enables the ``PodLevelResourceManagers`` feature."""

from __future__ import annotations

from webhook.config import Policy
from webhook.podspec import PodSpec
from webhook.rules.base import Rule, Violation, pod_label

RULE_ID = "pod-level-resources"


def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    if not pod.pod_level_set or policy.pod_level_resources == "allow":
        return []
    return [Violation(
        RULE_ID, f"{pod.path}.resources",
        f"{pod_label(pod)}: pod-level cpu/memory make kubelet's CPU and Memory Managers skip the Pod "
        "(unless nodes enable PodLevelResourceManagers); set them per container, or allow with "
        "policy.podLevelResources: allow")]


RULE = Rule(RULE_ID, True, "spec.resources sets pod-level cpu or memory", check)
