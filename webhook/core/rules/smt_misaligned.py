"""``smt-misaligned``: with the static policy option ``full-pcpus-only`` kubelet refuses a container whose
cpu count is not a multiple of the SMT level (``SMTAlignmentError``, policy_static.go).

kubelet pins every container of a Guaranteed Pod whose cpu is whole (``guaranteedCPUs``), whatever its name,
so ``policy.fractionalCPUContainers`` does not exempt one here: that setting lets a container's cpu be
fractional (then it runs in the shared pool and this rule has nothing to say), not a whole-CPU one misaligned."""

from __future__ import annotations

from webhook.core.config import SMT, Policy
from webhook.core.facts import Facts
from webhook.core.podspec import PodSpec
from webhook.core.quantity import is_whole_cpu
from webhook.core.resourceblock import CPU
from webhook.core.rules import cel
from webhook.core.rules.base import USE, USE_EITHER, Rule, Text, Violation

RULE_ID = "smt-misaligned"

MISALIGNED = Text("{label}: cpu {kind} {cpus} is not a multiple of {smt} (full-pcpus-only fails with "
                  "SMTAlignmentError); {choice}")


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    smt = policy.smt_alignment
    found = []
    for c in pod.all_containers:
        block = c.resources
        if not block.clean(CPU):
            continue
        picked = block.sizing_cpu()
        if picked is None or picked[1].quantity is None or not is_whole_cpu(picked[1].quantity):
            continue  # cpu-not-integer or limits-missing already says what is wrong
        kind, amount = picked
        cpus = amount.milli // 1000
        if cpus % smt == 0:
            continue
        down, up = cpus - cpus % smt, cpus - cpus % smt + smt
        choice = USE_EITHER(low=down, high=up) if down else USE(n=up)
        found.append(Violation(amount.path, MISALIGNED(
            label=block.label, kind=kind, cpus=cpus, smt=smt, choice=choice), c.name, rule=RULE_ID))
    return found


def to_cel(mutated: bool) -> str:
    amount, kind = cel.cpu_sizing(mutated)
    smt = cel.setting(SMT)
    cpus = f"quantity({amount}).asInteger()"
    down = f"({cpus} - {cpus} % {smt})"
    choice = (f"{down} > 0 ? {USE_EITHER.cel(low=f'string({down})', high=f'string({down} + {smt})')} "
              f": {USE.cel(n=f'string({down} + {smt})')}")
    return cel.each_fact(
        RULE_ID, f"f.r == 'cpu' && !f.b.pod && {smt} > 1 && {amount} != '' && "
                 f"quantity({amount}).isInteger() && {cpus} % {smt} != 0",
        MISALIGNED.cel(label="f.b.label", kind=kind, cpus=f"string({cpus})", smt=f"string({smt})", choice=choice))


RULE = Rule(
    RULE_ID, check=check, cel=to_cel,
    summary="cpu is not a multiple of `policy.smtAlignment` (kubelet's `full-pcpus-only`)",
    severity="medium",
    enabled=lambda policy: policy.smt_alignment > 1,
)
