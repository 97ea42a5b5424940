"""``status-qos-class``: on create the API server keeps a client-supplied ``status.qosClass`` up to 1.36
(``GetPodQOS`` in the pod strategy's ``PrepareForCreate``, pkg/registry/core/pod/strategy.go), so a
Guaranteed spec carrying ``status.qosClass: Burstable`` (a copy of ``kubectl get -o yaml``) is stored
Burstable and never pinned; from 1.37 it resets the status first, and the manifest's class is never
``declared_qos``. A Pod read from the API server (``audit``: ``Facts.stored``) keeps the class it was stored
with at any minor, since kubelet reads it back (``GetPodQOS``): one created on 1.36 with ``spec.resources: {}``
is BestEffort after an upgrade to 1.37. A spec that is not Guaranteed is reported by the other rules instead."""

from __future__ import annotations

from webhook.core.config import KUBERNETES_VERSION, Policy
from webhook.core.facts import Facts
from webhook.core.podspec import GUARANTEED, PodSpec
from webhook.core.qos import qos_class
from webhook.core.rules import cel, limits_missing, requests_not_equal_limits
from webhook.core.rules.base import Rule, Text, Violation
from webhook.core.workloads import POD

RULE_ID = "status-qos-class"

KEPT = Text('pod (status.qosClass): "{declared}" is kept by the API server on create, so the Pod is stored '
            "{declared} and never pinned; remove status from the manifest")
STORED = Text('pod (status.qosClass): the Pod was stored "{declared}" when it was created and kubelet keeps reading '
              "that class, so it is never pinned, although its spec is Guaranteed on this minor; re-create it")


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    declared = pod.declared_qos
    if declared is None or declared == GUARANTEED or qos_class(pod) != GUARANTEED:
        return []
    text = STORED if facts.stored else KEPT
    return [Violation((*pod.path[:-1], "status", "qosClass"), text(declared=declared), rule=RULE_ID)]


def to_cel(mutated: bool) -> str:
    # With no limits-missing and no requests-not-equal-limits the spec is Guaranteed (invalid quantities never
    # reach a policy): a class other than Guaranteed can only have come from the manifest.
    guaranteed = " + ".join(f"size(variables.{cel.variable(r.RULE_ID)})"
                            for r in (limits_missing, requests_not_equal_limits)) + " == 0"
    declared = "object.?status.?qosClass.orValue('" + GUARANTEED + "')"
    # From 1.37 PrepareForCreate resets the status first (``Semantics.keeps_declared_qos``).
    return cel.when(RULE_ID, f"{cel.setting(KUBERNETES_VERSION)} < 37 && "
                             f"request.kind.group == '' && request.kind.kind == '{POD}' && "
                             f"request.operation == 'CREATE' && {declared} != '{GUARANTEED}' && {guaranteed}",
                    KEPT.cel(declared="object.status.qosClass"))


RULE = Rule(
    RULE_ID, check=check, cel=to_cel,
    summary="a Pod manifest with a Guaranteed spec carries `status.qosClass` other than `Guaranteed`, which the "
            "API server keeps on create (mutation removes it)",
)
