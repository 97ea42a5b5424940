"""``dra-cpu-pinner-mismatch``: a Pod that asks exclusive CPUs of the one pinner its cluster's nodes do not run.
The static CPU Manager and the DRA CPU driver (``dra.cpu``) are mutually incompatible (the driver requires
``cpuManagerPolicy: none``), so each node pins through one of them:

- a Pod that asks the CPU Manager for exclusive CPUs (Guaranteed, whole cpu) and takes no DRA CPU claim, in a
  cluster where no node pins through the CPU Manager and some node's CPUs belong to the DRA driver: it runs on
  the shared pool wherever it lands; ask the CPUs through a ``dra.cpu`` claim instead (mirrored in requests and
  limits);
- a Pod whose CPUs come from a ``dra.cpu`` claim, in a cluster where a node that publishes ``dra.cpu`` devices
  also runs the static CPU Manager: the two pin the same containers there (``qos-guard nodes`` flags the node,
  ``cpu-pinners-conflict``).

Which node runs which comes from the cluster, never guessed: the ResourceSlices (``Facts.dra.devices``) and each
kubelet's configz (``Facts.dra.cpu_managers``, read by ``check --kubeconfig`` and ``audit`` when some node
publishes ``dra.cpu`` devices; for a node whose configz cannot be read, the ``cpuPinner`` its agent published in
its NodeResourceTopology, ``webhook.core.cpupinner``, said in a notice). Without both it says nothing; the first
case also needs every node's configz (a node not read could pin through the CPU Manager). Judged over all nodes:
a Pod's node selector is not narrowed here. Follows ``policy.dra``.
"""

from __future__ import annotations

from webhook.core.config import DRA, Policy
from webhook.core.demands import dra_advisory, dra_judged
from webhook.core.dracpu import CPU_CLASS, CPU_DRIVER, pinners, unknown_claims
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.podspec import PodSpec
from webhook.core.rules.base import Rule, Text, Violation
from webhook.core.rules.dra_unaligned import cpus_from_dra, exclusive_cpus

RULE_ID = "dra-cpu-pinner-mismatch"
SHOWN = 3

NO_CPU_MANAGER = Text("{label}: it asks the CPU Manager for exclusive CPUs, but {driver} pins the CPUs of {nodes} "
                      "(cpuManagerPolicy none), so it gets the shared pool; claim them (DeviceClass {cpu_class}), "
                      "mirrored in requests and limits (policy.{dra}: off to stop this)")
BOTH_PIN = Text("{label}: its CPUs come from a {driver} claim, but {nodes} also run the static CPU Manager: both "
                "pin its containers there; set cpuManagerPolicy: none on them (qos-guard nodes: "
                "cpu-pinners-conflict) (policy.{dra}: off to stop this)")


def _names(nodes: tuple[str, ...]) -> str:
    more = f" and {len(nodes) - SHOWN} more" if len(nodes) > SHOWN else ""
    return ("node " if len(nodes) == 1 else "nodes ") + ", ".join(nodes[:SHOWN]) + more


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    who = pinners(facts.dra) if facts.dra is not None else None
    if who is None:
        return []
    label = f"pod ({dotted(pod.path)})"
    if cpus_from_dra(pod, facts):
        if not who.both:
            return []
        return [Violation(pod.claims_path, BOTH_PIN(label=label, driver=CPU_DRIVER,
                                                                  nodes=_names(who.both), dra=DRA.name),
                          rule=RULE_ID, advisory=dra_advisory(policy))]
    if not who.complete or who.static or not who.dra or not exclusive_cpus(pod) or \
            unknown_claims(facts.dra, pod.claim_sources):
        return []  # a claim not known may hold its CPUs (dra-cpu-not-mirrored says it is unknown)
    first = next((c for c in pod.all_containers if c.resources.limits.get("cpu") is not None), None)
    where = (*first.resources.path, "limits", "cpu") if first is not None else pod.path
    return [Violation(where, NO_CPU_MANAGER(label=label, nodes=_names(who.dra + who.both), driver=CPU_DRIVER,
                                            cpu_class=CPU_CLASS, dra=DRA.name),
                      first.name if first is not None else None, rule=RULE_ID, advisory=dra_advisory(policy))]


RULE = Rule(
    RULE_ID, check=check, cel=None, facts_only="the cluster's ResourceSlices and every kubelet's configz",
    summary="a Pod asks exclusive CPUs of the CPU Manager where only the DRA CPU driver pins, or takes DRA CPUs "
            "where nodes also run the static CPU Manager (from ResourceSlices and configz; advisory; "
            "`policy.dra: deny` refuses)",
    severity="medium",
    enabled=dra_judged,
)
