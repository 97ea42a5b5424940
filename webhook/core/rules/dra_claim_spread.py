"""``dra-claim-spread``: a ResourceClaim or ResourceClaimTemplate that asks several devices (several requests, a
``count`` above 1, or ``allocationMode: All``) with no ``matchAttribute`` constraint on
``resource.kubernetes.io/numaNode`` or ``resource.kubernetes.io/pcieRoot`` (or a driver's ``<domain>/numaNode``)
over all its requests: the scheduler may allocate its devices on different NUMA nodes, and nothing on the node
aligns them (``webhook.core.dra_requests``). Advisory by default (``policy.dra: warn``); ``policy.dra: deny``
refuses it.

Judged whole, by kind (``claims.CLAIM_KINDS``), not as a pod spec; the admission policies match pod specs
only, so they do not have it (the webhook, ``check`` and ``audit`` do).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.claims import CLAIM_KINDS
from webhook.core.config import DRA, Policy
from webhook.core.demands import dra_advisory, dra_judged
from webhook.core.dra_requests import NUMA_ATTRIBUTE, claim_spread
from webhook.core.facts import NO_FACTS, Facts
from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.podspec import PodSpec
from webhook.core.rules.base import Rule, Text, Violation
from webhook.core.rules.dra_cpu_unpaired import cpu_pairing

RULE_ID = "dra-claim-spread"

SPREAD = Text("{label}: {devices} devices ({requests}) may be allocated on different NUMA nodes: no matchAttribute "
              f"constraint on {NUMA_ATTRIBUTE} or pcieRoot; add constraints: [{{{{matchAttribute: "
              f"{NUMA_ATTRIBUTE}}}}}] to keep them on one (policy.{DRA.name}: off to stop this)")


def judge_claim(kind: str, spec: Mapping[str, Any], path: FieldPath, policy: Policy,
                facts: Facts = NO_FACTS) -> list[Violation]:
    """The finding for one claim spec (``spec`` of a ResourceClaim, ``spec.spec`` of a template). A claim that
    pairs the DRA CPU driver's CPUs with other devices is ``dra-cpu-unpaired``'s to judge."""
    classes = facts.dra.cpu_classes if facts.dra is not None else ()
    if not dra_judged(policy) or cpu_pairing(spec, classes) is not None:
        return []
    spread = claim_spread(spec)
    if spread is None:
        return []
    where = (*path, "devices")
    return [Violation(where, SPREAD(label=f"{kind} devices ({dotted(where)})", devices=spread.devices,
                                    requests=", ".join(spread.requests)),
                      rule=RULE_ID, advisory=dra_advisory(policy))]


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    return []  # a pod spec has no claim spec: claims are judged by ``judge_claim``


RULE = Rule(
    RULE_ID, check=check, cel=None,
    summary="a ResourceClaim or ResourceClaimTemplate asks several devices with no NUMA or PCIe `matchAttribute` "
            "constraint: they may land on different NUMA nodes (advisory; `policy.dra: deny` refuses)",
    severity="medium",
    enabled=dra_judged,
    kinds=tuple(CLAIM_KINDS),
    judge=judge_claim,
)
