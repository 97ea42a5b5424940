"""``cpu-not-integer``: the static CPU Manager gives exclusive cores only to a whole number of CPUs
(pkg/kubelet/cm/cpumanager/policy_static.go ``guaranteedCPUs``); anything else runs in the shared pool."""

from __future__ import annotations

from webhook.core.config import Policy
from webhook.core.facts import Facts
from webhook.core.podspec import PodSpec
from webhook.core.quantity import is_whole_cpu
from webhook.core.resourceblock import CPU, Block
from webhook.core.rules import cel
from webhook.core.rules.base import USE, USE_EITHER, Rule, Text, Violation
from webhook.core.rules.sidecars import is_sidecar, mesh_hint, mesh_hint_cel, share_hint, share_hint_cel, sized

RULE_ID = "cpu-not-integer"

FRACTIONAL = Text("{label}: {scope}cpu {kind} {amount} is not a whole number of CPUs; {choice}{share}{mesh}")
POD_LEVEL = "pod-level "


def whole_cpu_choices(milli: int) -> str:
    low, high = milli // 1000, -(-milli // 1000)
    return USE(n=1) if low == 0 else USE_EITHER(low=low, high=high)


def _scan(block: Block, is_sidecar: bool = False) -> list[Violation]:
    sizing = block.sizing_cpu() if block.clean(CPU) else None
    if sizing is None:
        return []
    kind, amount = sizing
    if amount.quantity is None or is_whole_cpu(amount.quantity):
        return []
    scope = POD_LEVEL if block.container is None else ""
    choice = whole_cpu_choices(amount.milli)
    choice = sized(block, CPU, f": {choice}") or choice  # an operator's container: the field that sizes it
    return [Violation(amount.path, FRACTIONAL(
        label=block.label, scope=scope, kind=kind, amount=amount.show(), choice=choice,
        share=share_hint(block.container, is_sidecar), mesh=mesh_hint(block.container, CPU, block.path)),
        block.container, rule=RULE_ID)]


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    """Each container (a sidecar's message says how it alone could share CPUs), then the pod-level block."""
    found: list[Violation] = []
    for index, c in enumerate(pod.all_containers):
        if c.name not in policy.fractional_cpu_containers:
            found += _scan(c.resources, is_sidecar(index, c.name, c.init))
    if pod.pod_level is not None:
        found += _scan(pod.pod_level)
    return found


def whole_cpu_choices_cel(amount: str) -> str:
    """``whole_cpu_choices`` in CEL, for the (fractional) quantity string ``amount``."""
    low = f"int(quantity({amount}).asApproximateFloat())"
    one, either = USE.cel(n="'1'"), USE_EITHER.cel(low=f"string({low})", high=f"string({low} + 1)")
    return f"{low} == 0 ? {one} : {either}"


def to_cel(mutated: bool) -> str:
    amount, kind = cel.cpu_sizing(mutated)
    choice = whole_cpu_choices_cel(amount)
    return cel.each_fact(
        RULE_ID, f"f.r == 'cpu' && !f.b.frac && (!f.b.pod || f.b.qos) && {amount} != '' && "
                 f"!quantity({amount}).isInteger()",
        FRACTIONAL.cel(label="f.b.label", scope=f"f.b.pod ? '{POD_LEVEL}' : ''", kind=kind, amount=amount,
                       choice=choice, share=share_hint_cel("f.b"), mesh=mesh_hint_cel("f.b.name", "'cpu'")))


RULE = Rule(
    RULE_ID, check=check, cel=to_cel,
    summary="a container's cpu (its limit, or its request where no limit is set) is not a whole number of CPUs; "
            "`policy.fractionalCPUContainers` exempts names",
)
