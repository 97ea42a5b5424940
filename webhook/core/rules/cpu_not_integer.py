"""``cpu-not-integer``: the static CPU Manager gives exclusive cores only to a whole number of CPUs
(pkg/kubelet/cm/cpumanager/policy_static.go ``guaranteedCPUs``); anything else runs in the shared pool."""

from __future__ import annotations

from webhook.core.config import Policy
from webhook.core.podspec import CPU, Block, PodSpec
from webhook.core.quantity import is_whole_cpu
from webhook.core.rules.base import Rule, Violation

RULE_ID = "cpu-not-integer"


def whole_cpu_choices(milli: int) -> str:
    low, high = milli // 1000, -(-milli // 1000)
    return "use 1" if low == 0 else f"use {low} or {high}"


def _scan(block: Block) -> list[Violation]:
    sizing = block.sizing_cpu() if block.clean(CPU) else None
    if sizing is None:
        return []
    kind, amount = sizing
    if amount.quantity is None or is_whole_cpu(amount.quantity):
        return []
    scope = "pod-level " if block.container is None else ""
    return [Violation(RULE_ID, amount.path,
                      f"{block.label}: {scope}cpu {kind} {amount.show()} is not a whole number of CPUs; "
                      f"{whole_cpu_choices(amount.milli)}", block.container)]


def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    return [v for block in pod.blocks() if block.container not in policy.fractional_cpu_containers
            for v in _scan(block)]


RULE = Rule(RULE_ID, True, "a container's cpu is not a whole number of CPUs", check)
