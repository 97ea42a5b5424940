"""``dra-cpu-shared``: a DRA CPU claim (``dra.cpu``) consumed by more than one container. dra-driver-cpu v0.2.0
allows one owner per claim at a time (``pkg/driver/nri_hooks.go``: ``claimTracker.SetOwner`` refuses a second
container, README "Sharing resource claims"): a container that gets the claim's CPU device while another holds
it fails with ``CreateContainerError`` and its Pod never runs.

Three ways a Pod gets there:

- two containers of the Pod that run at once name the claim's CPU request (the whole claim, or its CPU request by
  ``resources.claims[].request``): app containers, and sidecars (init containers with ``restartPolicy: Always``)
  beside them or beside a later init container; a container that names only another request (a GPU) does not get
  the CPU device and is no owner;
- a run-to-completion init container names it and a container started after it does too: no error then, but no
  exclusive CPUs either. containerd (v2.x) calls the NRI plugins' StopContainer when a task exits by itself
  (``internal/cri/server/events.go``: ``task.Delete(ctx, c.nri.WithContainerExit(...))``, ``internal/nri/nri.go``
  ``NotifyContainerExit`` -> ``stopContainer``), and the driver's StopContainer frees the claim
  (``nri_hooks.go:217-223``: ``RemoveResourceClaimAllocation``, ``claimTracker.Cleanup``), handing its CPUs back
  to the shared pool. The next container's CreateContainer pins it on the claim's CPUs but does not reserve them
  again (``nri_hooks.go:176-195``: no ``AddResourceClaimAllocation``; only Prepare and Synchronize add one), so
  the shared-pool containers are given them too (``getSharedContainerUpdates``, ``GetSharedCPUs``);
- a pod template names a ResourceClaim itself (``resourceClaimName``) and its object runs several Pods of it at
  once (replicas > 1, a Job's parallelism > 1: ``target.several_pods``; the kinds whose count is not read
  there are not judged): they all share that one claim, on its one node; a DaemonSet's Pods on the other nodes
  cannot use a claim allocated on one node and stay Pending. A ResourceClaimTemplate gives each Pod its own.

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
from webhook.core.resourceblock import Container
from webhook.core.rules.base import Rule, Text, Violation
from webhook.core.rules.dra_cpu_not_mirrored import claimed_cpus
from webhook.core.target import EVERY_NODE

RULE_ID = "dra-cpu-shared"

# Each within a refusal's line (refusal.LINE_CHARS) so that the way out is not cut.
WAY_OUT = ("give each container its own claim, or name the CPU request in one container only "
           "(resources.claims[].request)")
CONTAINERS = Text("{label}: claim {claim} gives its {driver} CPUs to containers {containers}, which run at once: the "
                  "driver serves one container per claim, the others fail with CreateContainerError; " + WAY_OUT)
SEQUENTIAL = Text("{label}: claim {claim} gives its {driver} CPUs to init container {first}, then to {later}: when "
                  "{first} exits the driver frees them, so {later} runs on CPUs others share; " + WAY_OUT)
PODS = Text("{label}: claim {claim} is the ResourceClaim {name} itself, which the Pods of {several} share, and it "
            "holds {driver} CPUs that the driver gives one container only: every Pod after the first fails with "
            "CreateContainerError; use resourceClaimTemplateName (a ResourceClaimTemplate: one claim per Pod)")
DAEMONSET = Text("{label}: claim {claim} is the ResourceClaim {name} itself, which the DaemonSet's Pods share, and "
                 "it holds {driver} CPUs of one node: its Pods on every other node cannot use it and stay Pending; "
                 "use resourceClaimTemplateName (a ResourceClaimTemplate: one claim per Pod, on its own node)")


def _running_order(pod: PodSpec) -> list[tuple[Container, int, int | None]]:
    """Each container with the span of kubelet's start order it runs through: init container i runs from step i,
    a run-to-completion one until step i + 1 (the next starts once it exits), a sidecar to the end (None), and
    the app containers from the step after the last init container to the end."""
    n = len(pod.init_containers)
    spans = [(c, i, None if c.sidecar else i + 1) for i, c in enumerate(pod.init_containers)]
    return spans + [(c, n, None) for c in pod.containers]


def _overlap(a: tuple[Container, int, int | None], b: tuple[Container, int, int | None]) -> bool:
    """Both run at one moment: each starts before the other ends."""
    return (a[2] is None or b[1] < a[2]) and (b[2] is None or a[1] < b[2])


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    found: list[Violation] = []
    label = f"pod ({dotted(pod.path)})"
    where = pod.claims_path
    for claim, (kind, name) in pod.claim_sources.items():
        named = pod.claim_label(claim)  # an operator's claim: by the object's field that makes it
        owners = [s for s in _running_order(pod) if claim in s[0].claims
                  and (claimed_cpus(pod, facts, claim, s[0].claim_requests.get(claim)) or 0) > 0]
        together = [s[0].name for s in owners if any(_overlap(s, t) for t in owners if t is not s)]
        if together:
            found.append(Violation(where, CONTAINERS(
                label=label, claim=named, driver=CPU_DRIVER, containers=", ".join(together)), rule=RULE_ID))
        elif len(owners) > 1:  # one after another: all but the last are run-to-completion init containers
            found.append(Violation(where, SEQUENTIAL(
                label=label, claim=named, driver=CPU_DRIVER, first=owners[0][0].name,
                later=", ".join(s[0].name for s in owners[1:])), rule=RULE_ID))
        if owners and pod.several and kind == "ResourceClaim":
            if pod.several == EVERY_NODE:
                found.append(Violation(where, DAEMONSET(label=label, claim=named, name=name, driver=CPU_DRIVER),
                                       rule=RULE_ID))
            else:
                found.append(Violation(where, PODS(
                    label=label, claim=named, name=name, several=pod.several, driver=CPU_DRIVER), rule=RULE_ID))
    return found


RULE = Rule(
    RULE_ID, check=check, cel=None, facts_only="the CPUs each ResourceClaim and template asks through dra.cpu",
    summary="a DRA CPU claim (`dra.cpu`) is consumed by several containers, or by every Pod of a workload "
            "(`resourceClaimName` in a pod template): the driver allows one at a time, the rest fail "
            "CreateContainerError (after an init container that used it: not exclusive)",
)
