"""``pod-level-resources``: kubelet's CPU and Memory Managers skip Pods whose ``spec.resources`` sets cpu,
memory or hugepages (``IsPodLevelResourcesSet``) unless the node enables the ``PodLevelResourceManagers``
feature (off by default in every supported minor); on 1.33 the API server drops the block, so nothing is
skipped (``PodSpec.pod_level_set``).

Not for a Pod whose CPUs come from a ``dra.cpu`` claim (``Facts.dra``): the driver's nodes run the CPU Manager
``none`` and the Memory Manager ``None`` (docs/howto/dra-cpu.md), so there is nothing for them to skip, and the
driver's README prefers the pod-level block (its "Option A") to state the claimed CPUs. The CEL form cannot read
claims, so the generated policies still refuse such a Pod (docs/howto/admission-policies.md: where they differ)."""

from __future__ import annotations

from webhook.core.config import POD_LEVEL, Policy
from webhook.core.facts import Facts
from webhook.core.podspec import PodSpec
from webhook.core.rules import cel
from webhook.core.rules.base import Rule, Text, Violation
from webhook.core.rules.dra_unaligned import cpus_from_dra

RULE_ID = "pod-level-resources"
ALLOW = "allow"

SKIPPED = Text("{label}: pod-level cpu, memory or hugepages make kubelet's CPU and Memory Managers skip the Pod "
               "(unless nodes enable PodLevelResourceManagers); set them per container, or allow with "
               f"policy.{POD_LEVEL.name}: {ALLOW}")


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    level = pod.pod_level
    if level is None or not pod.pod_level_set or policy.pod_level_resources == ALLOW or cpus_from_dra(pod, facts):
        return []
    return [Violation(level.path, SKIPPED(label=level.label), rule=RULE_ID)]


def to_cel(mutated: bool) -> str:
    return cel.each_pod(RULE_ID, f"p.level && {cel.setting(POD_LEVEL)} != '{ALLOW}'",
                        SKIPPED.cel(label="p.label"))


RULE = Rule(
    RULE_ID, check=check, cel=to_cel,
    summary="`spec.resources` sets pod-level cpu, memory or hugepages (`policy.podLevelResources: allow` to permit)",
)
