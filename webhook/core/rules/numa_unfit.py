"""``numa-unfit``: with the Topology Manager's ``single-numa-node`` policy a container (scope
``container``) or the whole Pod (scope ``pod``) must fit in one NUMA node, or kubelet fails the Pod
with ``TopologyAffinityError``."""

from __future__ import annotations

from collections.abc import Mapping

from webhook.core.config import NUMA, NumaPolicy, Policy
from webhook.core.fieldpath import dotted
from webhook.core.podspec import CPU, MEMORY, PodSpec, effective_requests
from webhook.core.quantity import format_milli
from webhook.core.rules.base import Rule, Text, Violation

RULE_ID = "numa-unfit"

UNFIT = Text("{label}: {total}needs {over}; kubelet's single-numa-node policy would fail it with "
             "TopologyAffinityError")
OVER = Text("{need} (a NUMA node has {cap})")
IN_TOTAL = "in total "


def format_bytes(milli: int) -> str:
    value = -(-milli // 1000)
    for suffix, size in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if value >= size and value % size == 0:
            return f"{value // size}{suffix}"
    return str(value)


def _show(resource: str, milli: int) -> str:
    if resource == CPU:
        return f"{format_milli(milli)} CPUs"
    if resource == MEMORY:
        return f"{format_bytes(milli)} memory"
    return f"{format_milli(milli)} {resource}"


def _overflow(needs: Mapping[str, int], numa: NumaPolicy) -> list[str]:
    capacity: dict[str, int | None] = {CPU: numa.cpus, MEMORY: numa.memory, **numa.devices}
    over = []
    for resource, cap in capacity.items():
        if cap is not None and needs.get(resource, 0) > cap:
            over.append(OVER(need=_show(resource, needs[resource]), cap=_show(resource, cap)))
    return over



def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    numa = policy.numa
    if numa is None:
        return []
    found = []
    if numa.scope == "container":
        for c in pod.all_containers:
            block = c.resources
            needs = {k: a.milli for k, a in block.requests.items() if a.positive}
            needs.update({k: a.milli for k, a in block.limits.items() if a.positive and k not in needs})
            needs.update(c.devices)
            over = _overflow(needs, numa)
            if over:
                found.append(Violation(RULE_ID, block.path, UNFIT(label=block.label, total="", over=", ".join(over)),
                                       c.name))
        return found
    total = effective_requests(pod.containers, pod.init_containers)
    if pod.pod_level is not None:
        total.update({k: a.milli for k, a in pod.pod_level.requests.items() if a.positive})
    over = _overflow(total, numa)
    if over:
        found.append(Violation(RULE_ID, pod.path, UNFIT(label=f"pod ({dotted(pod.path)})", total=IN_TOTAL,
                                                        over=", ".join(over))))
    return found


RULE = Rule(RULE_ID, "a container or the Pod needs more than one NUMA node has", check, None, severity="medium",
            enabled=lambda policy: policy.numa is not None,
            policy_refusal=f"policy.{NUMA.name}: {RULE_ID} is not available as an admission policy (the pod scope "
                           "sums exact quantities over init containers and sidecars, which CEL cannot fold); use "
                           f"the webhook (enforcement: webhook) or remove policy.{NUMA.name}")
