"""``smt-misaligned``: with the static policy option ``full-pcpus-only`` kubelet refuses a container whose
cpu count is not a multiple of the SMT level (``SMTAlignmentError``, policy_static.go)."""

from __future__ import annotations

from webhook.core.config import Policy
from webhook.core.podspec import CPU, PodSpec
from webhook.core.quantity import is_whole_cpu
from webhook.core.rules.base import Rule, Violation

RULE_ID = "smt-misaligned"


def check(pod: PodSpec, policy: Policy) -> list[Violation]:
    smt = policy.smt_alignment
    if smt <= 1:
        return []
    found = []
    for c in pod.all_containers:
        block = c.resources
        if c.name in policy.fractional_cpu_containers or not block.clean(CPU):
            continue
        picked = block.sizing_cpu()
        if picked is None or picked[1].quantity is None or not is_whole_cpu(picked[1].quantity):
            continue  # cpu-not-integer or limits-missing already says what is wrong
        kind, amount = picked
        cpus = amount.milli // 1000
        if cpus % smt == 0:
            continue
        down, up = cpus - cpus % smt, cpus - cpus % smt + smt
        choice = f"use {down} or {up}" if down else f"use {up}"
        found.append(Violation(
            RULE_ID, amount.path,
            f"{block.label}: cpu {kind} {cpus} is not a multiple of {smt} (full-pcpus-only fails with "
            f"SMTAlignmentError); {choice}", c.name))
    return found


RULE = Rule(RULE_ID, False, "cpu is not a multiple of policy.smtAlignment", check)
