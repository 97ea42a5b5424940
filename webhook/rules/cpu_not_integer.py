"""``cpu-not-integer``: the static CPU Manager gives exclusive cores only to a whole number of CPUs
(pkg/kubelet/cm/cpumanager/policy_static.go ``guaranteedCPUs``); anything else runs in the shared pool."""

from __future__ import annotations

from collections.abc import Mapping

from webhook.config import Policy
from webhook.podspec import CPU, Amount, PodSpec
from webhook.quantity import format_milli, is_whole_cpu
from webhook.rules.base import Rule, Violation, clean, cpu_amount, pod_label

RULE_ID = "cpu-not-integer"


def whole_cpu_choices(milli: int) -> str:
    low, high = milli // 1000, -(-milli // 1000)
    return "use 1" if low == 0 else f"use {low} or {high}"


def _scan(label: str, container: str | None, requests: Mapping[str, Amount],
          limits: Mapping[str, Amount], scope: str = "") -> list[Violation]:
    if not clean(requests, limits, CPU):
        return []
    found = cpu_amount(requests, limits)
    if found is None:
        return []
    kind, amount = found
    if amount.quantity is None or is_whole_cpu(amount.quantity):
        return []
    shown = amount.show() if not amount.defaulted else format_milli(amount.milli)
    return [Violation(RULE_ID, amount.path,
                      f"{label}: {scope}cpu {kind} {shown} is not a whole number of CPUs; "
                      f"{whole_cpu_choices(amount.milli)}", container)]


def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    found = []
    for c in pod.all_containers:
        if c.name not in policy.fractional_cpu_containers:
            found += _scan(c.label(), c.name, c.requests, c.limits)
    if pod.pod_level_set:
        found += _scan(pod_label(pod), None, pod.pod_requests, pod.pod_limits, scope="pod-level ")
    return found


RULE = Rule(RULE_ID, True, "a container's cpu is not a whole number of CPUs", check)
