"""``dra-unaligned``: a Pod that gets exclusive CPUs from the static CPU Manager (Guaranteed, whole CPUs) and
takes devices through DRA runs with its CPUs and memory on NUMA nodes chosen without those devices: kubelet's
Topology Manager has no DRA hint provider in v1.36 (``webhook.core.dra_requests``), and ``single-numa-node`` does
not refuse it. Advisory by default (``policy.dra: warn``); ``policy.dra: deny`` refuses it.

Its devices come through ``spec.resourceClaims``, or through an extended resource that a DeviceClass maps to DRA
(``spec.extendedResourceName``, or the implicit ``deviceclass.resource.kubernetes.io/<class>``; from 1.36, where
``DRAExtendedResource`` is on: ``Semantics.dra_extended_resources``). The CEL form sees
the claims only: which extended resources DeviceClasses map is cluster state an admission policy cannot read
(the webhook and the CLI read it with ``policy.deviceClasses: true``).
"""

from __future__ import annotations

from webhook.core.config import DEVICE_CLASSES, DRA, Policy
from webhook.core.demands import demands, dra_advisory, dra_judged, dra_use, may_align
from webhook.core.dra_requests import NUMA_ATTRIBUTE, DeviceClasses
from webhook.core.dracpu import claim_requests, cpu_request
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.podspec import PodSpec
from webhook.core.rules import cel
from webhook.core.rules.base import PolicyRefusal, Rule, Text, Violation

RULE_ID = "dra-unaligned"
DENY = "deny"

# The first 120 characters say it (an admission warning is cut there).
UNALIGNED = Text("{label}: its exclusive CPUs and memory are not NUMA-aligned with its DRA devices ({how}): "
                 "kubelet's Topology Manager has no DRA hint provider; use the device plugin on pinned nodes, or "
                 f"matchAttribute: {NUMA_ATTRIBUTE} and qos-guard verify (policy.{DRA.name}: off to stop this)")
CLAIMS = Text("{path}.resourceClaims: {names}")
# What ``qos-guard policy`` says to ``policy.deviceClasses: true`` (the CEL form sees the claims only).
DEVICE_CLASSES_REFUSAL = PolicyRefusal(
    f"policy.{DEVICE_CLASSES.name}",
    "the cluster's DeviceClasses are not available to an admission policy (it cannot read the cluster: "
    "dra-unaligned's CEL sees spec.resourceClaims only); use the webhook (enforcement: webhook) or remove "
    f"policy.{DEVICE_CLASSES.name}")


def exclusive_cpus(pod: PodSpec) -> bool:
    """Would the static CPU Manager give some container exclusive CPUs (Guaranteed, a whole cpu request)?"""
    return may_align(pod) and any(d.cpus for d in demands(pod).containers)


def cpus_from_dra(pod: PodSpec, facts: Facts) -> bool:
    """Does the cluster say that the Pod's CPUs come from a DRA CPU claim (``dra.cpu``)? Its nodes then run
    the CPU Manager ``none`` (the driver's requirement) and ``dra-cpu-unpaired`` judges the alignment."""
    dra = facts.dra
    known = dra.cpu_claims if dra is not None else None
    if dra is None or known is None:
        return False
    specs = dra.claim_specs
    for source in pod.claim_sources.values():
        n = known.get(source)
        spec = specs.get(source) if specs is not None else None
        # a count not known (a device's size unreadable) is still CPUs from the driver when a request asks them
        if (n is not None and n > 0) or (source in known and n is None and spec is not None
                                         and any(cpu_request(r, dra.cpu_classes)
                                                 for r in claim_requests(spec))):
            return True
    return False


def cpus_unknown(pod: PodSpec, facts: Facts) -> bool:
    """Does a claim of the Pod ask CPUs the facts cannot tell, for a reason said (``DraFacts.unknown_why``, by
    ``dra-cpu-not-mirrored``)? They may be the driver's: then this rule's way out would be wrong."""
    return facts.dra is not None and any(s in facts.dra.unknown_why for s in pod.claim_sources.values())


def findings(pod: PodSpec, policy: Policy, classes: DeviceClasses | None,
             facts: Facts | None = None) -> list[Violation]:
    use = dra_use(pod, classes)
    if not use or not exclusive_cpus(pod) or (facts is not None and (cpus_from_dra(pod, facts) or cpus_unknown(
            pod, facts))):
        return []
    how = []
    if use.claims:
        how.append(pod.claims_named(use.claims))  # CLAIMS, or the object's fields that make the claims
    how += [f"{r} (DeviceClass {c})" for r, c in sorted(use.resources.items())]
    return [Violation(use.path, UNALIGNED(label=f"pod ({dotted(pod.path)})", how="; ".join(how)),
                      rule=RULE_ID, advisory=dra_advisory(policy))]


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    return findings(pod, policy, facts.device_classes, facts)


def to_cel(mutated: bool) -> str:
    """Only with ``policy.dra: deny`` (an admission policy has no advisory channel: its findings are refusals or,
    in a warn binding, warnings for every rule alike), for ``spec.resourceClaims``; Guaranteed and a whole cpu
    as the static CPU Manager reads them (no pod-level block: the managers skip such Pods)."""
    # per template ``p`` (``variables.pods``): its claims, and the facts of its containers (``b.path``)
    names = ("p.spec.?resourceClaims.orValue([]).filter(c, c.?name.orValue('') != '')"
             ".map(c, c.name)")
    blocks = "variables.facts.filter(fs, !fs[0].b.pod && fs[0].b.path == p.path)"
    if mutated:  # the mutation sets each request to its limit (``f.eff``: the limit it leaves)
        guaranteed = f"{blocks}.all(fs, fs.all(f, f.eff != ''))"
        whole = f"{blocks}.exists(fs, fs[0].eff != '' && quantity(fs[0].eff).isInteger())"
    else:
        guaranteed = (f"{blocks}.all(fs, fs.all(f, f.lpos && (f.q == '' || "
                      "quantity(f.q).compareTo(quantity(f.l)) == 0)))")
        whole = f"{blocks}.exists(fs, fs[0].lpos && quantity(fs[0].l).isInteger())"
    condition = (f"{cel.setting(DRA)} == '{DENY}' && size({names}) > 0 && !p.qos && "
                 f"{guaranteed} && {whole}")
    return cel.each_pod(RULE_ID, condition, UNALIGNED.cel(
        label="p.prefix + 'pod (' + p.path + ')'",
        how=CLAIMS.cel(path="p.path", names=f"{names}.join(', ')")))


RULE = Rule(
    RULE_ID, check=check, cel=to_cel,
    summary="a Pod with exclusive CPUs takes devices through DRA (`spec.resourceClaims`, or an extended resource "
            "a DeviceClass maps to DRA): kubelet does not align them (advisory; `policy.dra: deny` refuses)",
    severity="medium",
    enabled=dra_judged,
)
