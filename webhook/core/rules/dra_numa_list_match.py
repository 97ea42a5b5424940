"""``dra-numa-list-match``: a claim's ``matchAttribute`` on a NUMA node attribute (``resource.kubernetes.io/numaNode``
or a driver's ``<domain>/numaNode``) that some device in the cluster publishes as a list of more than one node. With
``DRAListTypeAttributes`` the allocator matches list values when they *intersect* (``matchAttributeConstraint``
keeps the running intersection in ``k8s.io/dynamic-resource-allocation/structured``), so a GPU that publishes
``numaNode: [0, 1, 2, 3]`` matches CPUs on any of those nodes: the constraint holds and the devices are not on
one NUMA node. ``pcieRoot`` lists are left alone: the CPU driver's grouped device lists its own NUMA node's roots,
and a GPU's single root intersects only the list of its own node, which is the alignment asked.

Needs the cluster's ResourceSlices (``Facts.dra.devices``); without them it says nothing. Follows ``policy.dra``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.claims import CLAIM_KINDS
from webhook.core.config import DRA, Policy
from webhook.core.demands import dra_advisory, dra_judged
from webhook.core.dracpu import multi_valued
from webhook.core.facts import Facts
from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.podspec import PodSpec
from webhook.core.rules.base import Rule, Text, Violation
from webhook.core.rules.dra_cpu_unpaired import numa_attribute

RULE_ID = "dra-numa-list-match"
SHOWN = 1  # a device or two fill the line: the first one, then how many more

LIST_MATCH = Text("{label}: matchAttribute {attribute} may span NUMA nodes: {devices} publish it as a list, and "
                  "lists match if they intersect; match a single-valued attribute such as dra.net/numaNode "
                  "(policy.{dra}: off to stop this)")


def judge_claim(kind: str, spec: Mapping[str, Any], path: FieldPath, policy: Policy,
                facts: Facts) -> list[Violation]:
    devices = facts.dra.devices if facts.dra is not None else None
    if devices is None:
        return []
    raw = spec.get("devices")
    constraints = raw.get("constraints") if isinstance(raw, Mapping) else None
    found = []
    for i, constraint in enumerate(constraints if isinstance(constraints, list) else []):
        attribute = constraint.get("matchAttribute") if isinstance(constraint, Mapping) else None
        if not isinstance(attribute, str) or not numa_attribute(attribute):
            continue
        listed = multi_valued(devices, attribute)
        if not listed:
            continue
        shown = "; ".join(f"{d.describe()} ({', '.join(map(str, d.attributes[attribute]))})"
                          for d in listed[:SHOWN])
        if len(listed) > SHOWN:
            shown += f" and {len(listed) - SHOWN} more"
        where = (*path, "devices", "constraints", i, "matchAttribute")
        label = f"{kind} devices ({dotted((*path, 'devices'))})"  # the attribute says which constraint
        found.append(Violation(where, LIST_MATCH(label=label, attribute=attribute,
                                                 devices=shown, dra=DRA.name),
                               rule=RULE_ID, advisory=dra_advisory(policy)))
    return found


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    return []  # a pod spec has no claim spec: claims are judged by ``judge_claim``


RULE = Rule(
    RULE_ID, check=check, cel=None,
    summary="a claim's NUMA `matchAttribute` is on an attribute some device publishes as a list of several "
            "nodes: lists match when they intersect (advisory; `policy.dra: deny` refuses)",
    severity="medium",
    enabled=dra_judged,
    kinds=tuple(CLAIM_KINDS),
    judge=judge_claim,
)
