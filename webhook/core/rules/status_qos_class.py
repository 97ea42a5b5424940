"""``status-qos-class``: on create the API server keeps a client-supplied ``status.qosClass``
(``GetPodQOS`` in the pod strategy's ``PrepareForCreate``, pkg/registry/core/pod/strategy.go), so a
Guaranteed spec carrying ``status.qosClass: Burstable`` (a copy of ``kubectl get -o yaml``) is stored
Burstable and never pinned. A spec that is not Guaranteed is reported by the other rules instead."""

from __future__ import annotations

from webhook.core.config import Policy
from webhook.core.podspec import GUARANTEED, PodSpec, qos_class
from webhook.core.rules.base import Rule, Violation

RULE_ID = "status-qos-class"


def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    declared = pod.declared_qos
    if declared is None or declared == GUARANTEED or qos_class(pod) != GUARANTEED:
        return []
    return [Violation(
        RULE_ID, (*pod.path[:-1], "status", "qosClass"),
        f'pod (status.qosClass): "{declared}" is kept by the API server on create, so the Pod is stored '
        f"{declared} and never pinned; remove status from the manifest")]


RULE = Rule(RULE_ID, True, "a Pod manifest carries status.qosClass other than Guaranteed", check)
