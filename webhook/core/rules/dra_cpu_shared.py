"""``dra-cpu-shared``: a DRA CPU claim (``dra.cpu``) consumed by more than one container. dra-driver-cpu v0.2.0
allows one owner per claim (``pkg/driver/nri_hooks.go``: ``claimTracker.SetOwner`` refuses a second container,
README "Sharing resource claims"): every container after the first that gets the claim's CPU device fails with
``CreateContainerError`` and its Pod never runs.

Two ways a Pod gets there:

- two containers of the Pod name the claim's CPU request (the whole claim, or its CPU request by
  ``resources.claims[].request``); a container that names only another request (a GPU) does not get the CPU
  device and is no owner;
- a pod template names a ResourceClaim itself (``resourceClaimName``) and its object runs several Pods of it at
  once (replicas > 1, a Job's parallelism > 1, a DaemonSet: ``workloads.several_pods``; the kinds whose count is
  not read there are not judged): they all share that one claim; a ResourceClaimTemplate gives each Pod its own.

Needs to know what the claims ask (``Facts.dra``, as ``dra-cpu-not-mirrored``); a claim it does not know says
nothing here (``dra-cpu-not-mirrored`` says it is unknown). The admission policies cannot read claims, so they do
not have it (which claims ask ``dra.cpu`` CPUs is cluster state).
"""

from __future__ import annotations

from webhook.core.config import Policy
from webhook.core.dracpu import CPU_DRIVER
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.podspec import PodSpec
from webhook.core.rules.base import Rule, Text, Violation
from webhook.core.rules.dra_cpu_not_mirrored import claimed_cpus

RULE_ID = "dra-cpu-shared"

CONTAINERS = Text("{label}: claim {claim} gives its {driver} CPUs to containers {containers}, but the driver allows "
                  "one container per claim: all but the first fail with CreateContainerError; give each container "
                  "its own claim (one resourceClaims entry per container, from a ResourceClaimTemplate), or name "
                  "the CPU request in one container only (resources.claims[].request)")
PODS = Text("{label}: claim {claim} is the ResourceClaim {name} itself, which the Pods of {several} share, and it "
            "holds {driver} CPUs that the driver gives one container only: every Pod after the first fails with "
            "CreateContainerError; use resourceClaimTemplateName (a ResourceClaimTemplate: one claim per Pod)")


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    found: list[Violation] = []
    label = f"pod ({dotted(pod.path)})"
    for claim, (kind, name) in pod.claim_sources.items():
        owners = [c for c in pod.all_containers
                  if claim in c.claims and (claimed_cpus(pod, facts, claim, c.claim_requests.get(claim)) or 0) > 0]
        if len(owners) > 1:
            found.append(Violation((*pod.path, "resourceClaims"), CONTAINERS(
                label=label, claim=claim, driver=CPU_DRIVER, containers=", ".join(c.name for c in owners)),
                rule=RULE_ID))
        if owners and pod.several and kind == "ResourceClaim":
            found.append(Violation((*pod.path, "resourceClaims"), PODS(
                label=label, claim=claim, name=name, several=pod.several, driver=CPU_DRIVER), rule=RULE_ID))
    return found


RULE = Rule(
    RULE_ID, check=check, cel=None, facts_only="the CPUs each ResourceClaim and template asks through dra.cpu",
    summary="a DRA CPU claim (`dra.cpu`) is consumed by several containers, or by every Pod of a workload "
            "(`resourceClaimName` in a pod template): the driver allows one, the rest fail CreateContainerError",
)
