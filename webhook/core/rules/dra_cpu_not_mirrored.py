"""``dra-cpu-not-mirrored``: a container whose CPUs come from a DRA CPU claim (``dra.cpu``,
``kubernetes-sigs/dra-driver-cpu``) must state the same CPUs in its cpu requests and limits (or the Pod in its
pod-level ``spec.resources``): kubelet computes the QoS class and the cgroup's CPU quota from requests and
limits only, never from claims (the driver's README, "Workload Configuration Requirements"; KEP-5517 is what
would change that). Without them the Pod is BestEffort or Burstable however its cpuset is pinned, and the
scheduler's cpu accounting does not see the CPUs the claim holds.

Needs to know what the claims ask (``Facts.dra.cpu_claims``: ``check`` reads the ResourceClaims and templates in
its input, ``--kubeconfig`` and ``audit`` the cluster's, the webhook its cache with ``policy.draObjects: true``); a
claim it does not know is unknown: where the caller holds every claim (the webhook's synced cache) or knows why it
holds none (not synced, refused), that is said as an advisory "unknown: ..." finding, never a pass; elsewhere it
says nothing. The admission policies cannot read claims, so they do not have it.
"""

from __future__ import annotations

from webhook.core.config import Policy
from webhook.core.dracpu import CPU_DRIVER, UNKNOWN, unknown_claims
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.podspec import Amount, Block, PodSpec
from webhook.core.rules.base import Rule, Text, Violation

RULE_ID = "dra-cpu-not-mirrored"
CPU = "cpu"

NOT_MIRRORED = Text("{label}: its DRA CPU claims ({claims}) ask {cpus} CPUs of {driver}, but {where} has "
                    "requests.cpu {request} and limits.cpu {limit}: kubelet takes the QoS class and the CPU quota "
                    "from requests and limits, never from claims, so the Pod is not Guaranteed for {cpus} CPUs "
                    "(and the scheduler counts other CPUs than the claim holds); set requests.cpu and limits.cpu "
                    "to {cpus}{pod_level}; it costs no CPU the claim does not already hold")
POD_LEVEL = Text(" (or spec.resources to the sum of the Pod's claimed CPUs plus its shared ones)")
POD_BUDGET = Text("{label}: its containers' DRA CPU claims ask {cpus} CPUs of {driver}, but spec.resources has "
                  "requests.cpu {request} and limits.cpu {limit}: kubelet takes the QoS class and the CPU quota from "
                  "the pod-level block, never from claims; set both to at least {cpus} (the claimed CPUs plus the "
                  "shared ones its other containers use), equal")

UNKNOWN_CLAIM = Text(UNKNOWN + "{label}: claim {claim}: {why}; whether the CPUs it takes from {driver} are mirrored "
                     "in requests and limits is not known")


def unknown_findings(pod: PodSpec, facts: Facts, rule: str, text: Text) -> list[Violation]:
    """One advisory "unknown" finding per claim of the Pod the facts cannot judge (``unknown_claims``)."""
    label = f"pod ({dotted(pod.path)})"
    return [Violation((*pod.path, "resourceClaims"), text(label=label, claim=name, why=why, driver=CPU_DRIVER),
                      rule=rule, advisory=True)
            for name, why in unknown_claims(facts.dra, pod.claim_sources)]


def _shown(amount: Amount | None) -> str:
    return "unset" if amount is None else amount.show()


def _mirrors(block: Block, cpus: int) -> bool:
    request, limit = block.requests.get(CPU), block.limits.get(CPU)
    return request is not None and limit is not None and request.milli == limit.milli == cpus * 1000


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    if not pod.claim_sources:
        return []
    found = unknown_findings(pod, facts, RULE_ID, UNKNOWN_CLAIM)
    known = facts.dra.cpu_claims if facts.dra is not None else None
    if known is None:
        return found
    total = 0
    pod_level = pod.pod_level if pod.pod_level is not None and pod.pod_level_decides else None
    for c in pod.all_containers:
        sources = [pod.claim_sources.get(name) for name in c.claims]
        counts = [known.get(s) if s is not None else None for s in sources]
        if not c.claims or any(n is None for n in counts):
            if c.claims:  # a claim it cannot tell: the Pod's total is not known either
                total = -1
            continue
        cpus = sum(n for n in counts if n is not None)
        if cpus == 0:
            continue
        total = total + cpus if total >= 0 else total
        res = c.resources
        written = res.requests.get(CPU) is not None or res.limits.get(CPU) is not None
        if pod_level is not None and not written:
            continue  # the pod-level block carries them (judged below)
        if not _mirrors(res, cpus):
            claims = ", ".join(f"{n} ({pod.claim_sources[n][1]})" for n in c.claims)
            found.append(Violation(
                (*res.path, "limits", CPU), NOT_MIRRORED(
                    label=res.label, claims=claims, cpus=cpus, driver=CPU_DRIVER, where="the container",
                    request=_shown(res.requests.get(CPU)), limit=_shown(res.limits.get(CPU)),
                    pod_level=POD_LEVEL() if pod.kube.pod_level_resources else ""),
                c.name, rule=RULE_ID))
    if pod_level is not None and total > 0:
        request, limit = pod_level.requests.get(CPU), pod_level.limits.get(CPU)
        if request is None or limit is None or request.milli != limit.milli or limit.milli < total * 1000:
            found.append(Violation((*pod_level.path, "limits", CPU), POD_BUDGET(
                label=f"pod ({dotted(pod.path)})", cpus=total, driver=CPU_DRIVER, request=_shown(request),
                limit=_shown(limit)), rule=RULE_ID))
    return found


RULE = Rule(
    RULE_ID, check=check, cel=None, facts_only="the CPUs each ResourceClaim and template asks through dra.cpu",
    summary="a container's CPUs come from a DRA CPU claim (`dra.cpu`) but its cpu requests and limits (or the "
            "pod-level ones) do not state them: kubelet's QoS class and CPU quota ignore claims",
)
