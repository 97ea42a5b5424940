"""``cpu-not-integer``: the static CPU Manager gives exclusive cores only to a whole number of CPUs
(pkg/kubelet/cm/cpumanager/policy_static.go ``guaranteedCPUs``); anything else runs in the shared pool."""

from __future__ import annotations

from webhook.core.config import Policy
from webhook.core.podspec import CPU, Block, PodSpec
from webhook.core.quantity import is_whole_cpu
from webhook.core.rules import cel
from webhook.core.rules.base import USE, USE_EITHER, Rule, Text, Violation

RULE_ID = "cpu-not-integer"

FRACTIONAL = Text("{label}: {scope}cpu {kind} {amount} is not a whole number of CPUs; {choice}")
POD_LEVEL = "pod-level "


def whole_cpu_choices(milli: int) -> str:
    low, high = milli // 1000, -(-milli // 1000)
    return USE(n=1) if low == 0 else USE_EITHER(low=low, high=high)


def _scan(block: Block) -> list[Violation]:
    sizing = block.sizing_cpu() if block.clean(CPU) else None
    if sizing is None:
        return []
    kind, amount = sizing
    if amount.quantity is None or is_whole_cpu(amount.quantity):
        return []
    scope = POD_LEVEL if block.container is None else ""
    return [Violation(RULE_ID, amount.path, FRACTIONAL(
        label=block.label, scope=scope, kind=kind, amount=amount.show(), choice=whole_cpu_choices(amount.milli)),
        block.container)]


def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    return [v for block in pod.blocks() if block.container not in policy.fractional_cpu_containers
            for v in _scan(block)]


def to_cel(mutated: bool) -> str:
    amount, kind = cel.cpu_sizing(mutated)
    low = f"int(quantity({amount}).asApproximateFloat())"
    one, either = USE.cel(n="'1'"), USE_EITHER.cel(low=f"string({low})", high=f"string({low} + 1)")
    choice = f"{low} == 0 ? {one} : {either}"
    return cel.each_fact(
        RULE_ID, f"f.r == 'cpu' && !f.b.frac && (!f.b.pod || variables.podQos) && {amount} != '' && "
                 f"!quantity({amount}).isInteger()",
        FRACTIONAL.cel(label="f.b.label", scope=f"f.b.pod ? '{POD_LEVEL}' : ''", kind=kind, amount=amount,
                       choice=choice))


RULE = Rule(RULE_ID, "a container's cpu is not a whole number of CPUs", check, to_cel)
