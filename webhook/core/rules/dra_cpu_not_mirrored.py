"""``dra-cpu-not-mirrored``: a container whose CPUs come from a DRA CPU claim (``dra.cpu``,
``kubernetes-sigs/dra-driver-cpu``) must state the same CPUs in its cpu requests and limits (or the Pod in its
pod-level ``spec.resources``): kubelet computes the QoS class and the cgroup's CPU quota from requests and
limits only, never from claims (the driver's README, "Workload Configuration Requirements"; KEP-5517 is what
would change that). Without them the Pod is BestEffort or Burstable however its cpuset is pinned, and the
scheduler's cpu accounting does not see the CPUs the claim holds.

A claim that asks a ``dra.cpu/cpu`` capacity that is not a whole number of CPUs (``1500m``) is refused too: the
driver publishes the capacity with no ``requestPolicy``, so the scheduler books ``1500m`` of the device as asked,
and the driver pins ``ConsumedCapacity.Value()`` CPUs, rounded up (2); its containers are judged against the 2 it
pins (``fractional`` cites the upstream lines).

Needs to know what the claims ask (``Facts.dra.cpu_claims``: ``check`` reads the ResourceClaims and templates in
its input, ``--kubeconfig`` and ``audit`` the cluster's, the webhook its cache with ``policy.draObjects: true``); a
claim it does not know is unknown: where the caller holds every claim (the webhook's synced cache, the lists of
``--kubeconfig`` and ``audit``) or knows why it holds none (not synced, refused), that is said as an advisory
"unknown: ..." finding, never a pass; elsewhere (``check``'s files alone) it says nothing. The admission policies
cannot read claims, so they do not have it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from webhook.core.config import Policy
from webhook.core.dracpu import (
    CPU_CAPACITY,
    CPU_DRIVER,
    UNKNOWN,
    asks_capacity,
    claim_cpus,
    claim_requests,
    exact_cpu_request,
    grouped,
    unknown_claims,
    unreadable_size,
)
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.podspec import PodSpec
from webhook.core.quantity import QuantityError, parse_quantity
from webhook.core.resourceblock import Amount, Block
from webhook.core.rules.base import Rule, Text, Violation
from webhook.core.rules.sidecars import sized

RULE_ID = "dra-cpu-not-mirrored"
CPU = "cpu"

# Within a refusal's line (refusal.LINE_CHARS) so that the way out is not cut.
NOT_MIRRORED = Text("{label}: its DRA CPU claims ({claims}) ask {cpus} CPUs of {driver}, but {where} has "
                    "requests.cpu {request} and limits.cpu {limit}: QoS and CPU quota ignore claims; {advice}")
MIRROR = Text("set both to {cpus}{pod_level}, which costs no CPU the claim does not hold")
POD_LEVEL = Text(" (or spec.resources to all the Pod's CPUs)")
POD_BUDGET = Text("{label}: its containers' DRA CPU claims ask {cpus} CPUs of {driver}, but spec.resources has "
                  "requests.cpu {request} and limits.cpu {limit}: kubelet takes the QoS class and the CPU quota from "
                  "the pod-level block, never from claims; set both to at least {cpus} (the claimed CPUs plus the "
                  "shared ones its other containers use), equal")

NO_CAPACITY = Text("{label}: claim {claim}: grouped-mode {driver} CPUs need DRAConsumableCapacity, alpha and off by "
                   "default in {minor}: without it the driver pins no CPU. Use --cpu-device-mode=individual and a "
                   "count, or with the gate on ask capacity.requests (kept in the stored claim, it shows the gate on)")
FRACTIONAL = Text("{label}: claim {claim}: request {request} asks {capacity}: {asked}; the scheduler books that of "
                  "the device, {driver} pins {whole} CPUs (rounded up), so later claims there can fail; ask "
                  "{capacity}: {whole}, no CPU more than it pins now, and state them in requests.cpu and limits.cpu")
UNKNOWN_CLAIM = Text(UNKNOWN + "{label}: claim {claim}: {why}; whether the CPUs it takes from {driver} are mirrored "
                     "in requests and limits is not known")


def unknown_findings(pod: PodSpec, facts: Facts, rule: str, text: Text) -> list[Violation]:
    """One advisory "unknown" finding per claim of the Pod the facts cannot judge (``unknown_claims``)."""
    label = f"pod ({dotted(pod.path)})"
    return [Violation(pod.claims_path, text(label=label, claim=pod.claim_label(name), why=why, driver=CPU_DRIVER),
                      rule=rule, advisory=True)
            for name, why in unknown_claims(facts.dra, pod.claim_sources)]


def _shown(amount: Amount | None) -> str:
    return "unset" if amount is None else amount.show()


def _mirrors(block: Block, cpus: int) -> bool:
    request, limit = block.requests.get(CPU), block.limits.get(CPU)
    return request is not None and limit is not None and request.milli == limit.milli == cpus * 1000


def claimed_cpus(pod: PodSpec, facts: Facts, claim: str, requests: tuple[str, ...] | None) -> int | None:
    """The CPUs of ``dra.cpu`` a container gets from the Pod's claim ``claim``: the whole claim's, or, where it
    names requests (``resources.claims[].request``), only theirs: kubelet hands it only those requests' devices
    and the driver's CDI device answers its CPU request alone (pkg/driver/dra_hooks.go: Requests). None: not
    known (the claim, or the requests of a claim that asks CPUs, not known)."""
    dra = facts.dra
    source = pod.claim_sources.get(claim)
    if dra is None or dra.cpu_claims is None or source is None:
        return None
    whole = dra.cpu_claims.get(source)
    if requests is None or whole == 0:
        return whole
    spec = dra.claim_specs.get(source) if dra.claim_specs is not None else None
    return claim_cpus(spec, dra.devices, requests, dra.cpu_classes) if spec is not None else None


def _requests_of(pod: PodSpec, claim: str) -> tuple[str, ...] | None:
    """The requests of ``claim`` the Pod's containers name together (None: some container takes it whole)."""
    union: list[str] = []
    for c in pod.all_containers:
        if claim not in c.claims:
            continue
        named = c.claim_requests.get(claim)
        if named is None:
            return None
        union += [r for r in named if r not in union]
    return tuple(union)


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    if not pod.claim_sources:
        return []
    found = unknown_findings(pod, facts, RULE_ID, UNKNOWN_CLAIM)
    known = facts.dra.cpu_claims if facts.dra is not None else None
    if known is None:
        return found
    dropped = _gate_dropped(pod, facts)
    found += _unpinned(pod, facts, dropped) + _fractional(pod, facts, dropped) + _unreadable(pod, facts)
    pod_level = pod.pod_level if pod.pod_level is not None and pod.pod_level_decides else None
    for c in pod.all_containers:
        counts = [claimed_cpus(pod, facts, name, c.claim_requests.get(name)) for name in c.claims]
        if not c.claims or any(n is None for n in counts):
            continue
        cpus = sum(n for n in counts if n is not None)
        if cpus == 0:
            continue
        res = c.resources
        written = res.requests.get(CPU) is not None or res.limits.get(CPU) is not None
        if pod_level is not None and not written:
            continue  # the pod-level block carries them (judged below)
        if not _mirrors(res, cpus):
            claims = ", ".join(f"{pod.claim_label(n)} ({pod.claim_sources[n][1]})" for n in c.claims
                               if n in pod.claim_sources)
            found.append(Violation(
                (*res.path, "limits", CPU), NOT_MIRRORED(
                    label=res.label, claims=claims, cpus=cpus, driver=CPU_DRIVER, where="the container",
                    request=_shown(res.requests.get(CPU)), limit=_shown(res.limits.get(CPU)),
                    # an operator's container the object sizes otherwise: that field, or the builder's way out
                    advice=sized(res, CPU, f" to {cpus}") or MIRROR(
                        cpus=cpus, pod_level=POD_LEVEL() if pod.kube.pod_level_resources else "")),
                c.name, rule=RULE_ID))
    # the Pod's total: each claim (each request of it its containers name) once, however many containers name it
    used = [n for n in pod.claim_sources if any(n in c.claims for c in pod.all_containers)]
    totals = [claimed_cpus(pod, facts, n, _requests_of(pod, n)) for n in used]
    total = -1 if any(t is None for t in totals) else sum(t for t in totals if t is not None)
    if pod_level is not None and total > 0:
        request, limit = pod_level.requests.get(CPU), pod_level.limits.get(CPU)
        if request is None or limit is None or request.milli != limit.milli or limit.milli < total * 1000:
            found.append(Violation((*pod_level.path, "limits", CPU), POD_BUDGET(
                label=f"pod ({dotted(pod.path)})", cpus=total, driver=CPU_DRIVER, request=_shown(request),
                limit=_shown(limit)), rule=RULE_ID))
    return found


def _unreadable(pod: PodSpec, facts: Facts) -> list[Violation]:
    """An advisory "unknown" per claim whose CPUs cannot be told because a CPU device's capacity is there but
    unreadable (``dracpu.unreadable_size``): neither one CPU (individual mode) nor a group of known size."""
    dra = facts.dra
    if dra is None or dra.claim_specs is None:
        return []
    found = []
    for name, source in pod.claim_sources.items():
        spec = dra.claim_specs.get(source)
        why = unreadable_size(spec, dra.devices, dra.cpu_classes) if spec is not None else None
        if why is not None and any(name in c.claims for c in pod.all_containers):
            found.append(Violation(pod.claims_path, UNKNOWN_CLAIM(
                label=f"pod ({dotted(pod.path)})", claim=f"{pod.claim_label(name)} ({source[1]})", why=why,
                driver=CPU_DRIVER),
                rule=RULE_ID, advisory=True))
    return found


def fractional(spec: Mapping[str, Any], classes: Collection[str] = ()) -> list[tuple[str, str, int]]:
    """The CPU requests of a claim that ask a ``dra.cpu/cpu`` capacity that is not a whole number of CPUs: (request
    name, the capacity as asked, the whole CPUs the driver pins for one device of it). Upstream: dra-driver-cpu
    v0.2.0 publishes the capacity with no ``requestPolicy`` (pkg/driver/dra_hooks.go:208-209), so the allocator
    books the request as asked (``calculateConsumedCapacity`` returns it as is without a policy,
    k8s.io/dynamic-resource-allocation v0.36.3 structured/internal/incubating/consumable_capacity.go:87-88, into
    the result's ``ConsumedCapacity``, allocator_incubating.go:1430, 388), and the driver pins
    ``ConsumedCapacity[dra.cpu/cpu].Value()`` CPUs (dra_hooks.go:391-393, 420), which rounds up (apimachinery
    resource.Quantity.Value: "rounded up to the nearest integer away from 0")."""
    found = []
    for request in claim_requests(spec):
        exact = exact_cpu_request(request, classes)
        if exact is None or exact.get("allocationMode") == "All":
            continue
        capacity = exact.get("capacity")
        asked = capacity.get("requests") if isinstance(capacity, Mapping) else None
        value = asked.get(CPU_CAPACITY) if isinstance(asked, Mapping) else None
        if value is None:
            continue
        try:
            q = parse_quantity(str(value))
        except QuantityError:
            continue
        if q.milli > 0 and q.milli % 1000:
            shown = str(value) if len(str(value)) <= 20 else str(value)[:17] + "..."
            found.append((str(request.get("name")), shown, q.ceil_units()))
    return found


def _fractional(pod: PodSpec, facts: Facts, dropped: list[str]) -> list[Violation]:
    """A refusal per claim a container uses whose CPU request asks a ``dra.cpu/cpu`` capacity that is not whole
    (``fractional``): dra-driver-cpu v0.2.0 pins it rounded up while the scheduler books it as asked, so
    the count the claim shows is not the CPUs the Pod holds, whatever its containers state. Not for a claim
    ``_gate_dropped`` names (its capacity is dropped: nothing is pinned, ``_unpinned`` says so)."""
    dra = facts.dra
    if dra is None or dra.claim_specs is None:
        return []
    label = f"pod ({dotted(pod.path)})"
    found = []
    for name, source in pod.claim_sources.items():
        spec = dra.claim_specs.get(source)
        claim = f"{pod.claim_label(name)} ({source[1]})"
        if spec is None or name in dropped or not any(name in c.claims for c in pod.all_containers):
            continue
        for request, asked, whole in fractional(spec, dra.cpu_classes):
            found.append(Violation(pod.claims_path, FRACTIONAL(
                label=label, claim=claim, request=request, capacity=CPU_CAPACITY, asked=asked, whole=whole,
                driver=CPU_DRIVER), rule=RULE_ID))
    return found


def _gate_dropped(pod: PodSpec, facts: Facts) -> list[str]:
    """The Pod's grouped-mode claims on a minor where DRAConsumableCapacity is off: the driver pins nothing."""
    dra = facts.dra
    if pod.kube.dra_consumable_capacity or dra is None or dra.claim_specs is None:
        return []
    found = []
    for name, source in pod.claim_sources.items():
        spec = dra.claim_specs.get(source)
        if spec is not None and dra.specs_stored and asks_capacity(spec, dra.cpu_classes):
            continue  # the API server kept capacity.requests: DRAConsumableCapacity is on
        if spec is not None and grouped(spec, dra.devices, dra.cpu_classes):
            found.append(name)
    return found


def _unpinned(pod: PodSpec, facts: Facts, dropped: list[str]) -> list[Violation]:
    """A refusal per claim ``_gate_dropped`` names."""
    return [Violation(pod.claims_path, NO_CAPACITY(
        label=f"pod ({dotted(pod.path)})", claim=f"{pod.claim_label(name)} ({pod.claim_sources[name][1]})",
        driver=CPU_DRIVER, minor=pod.kube.minor), rule=RULE_ID) for name in dropped]


RULE = Rule(
    RULE_ID, check=check, cel=None, facts_only="the CPUs each ResourceClaim and template asks through dra.cpu",
    summary="a container's CPUs come from a DRA CPU claim (`dra.cpu`) but its cpu requests and limits (or the "
            "pod-level ones) do not state them: kubelet's QoS class and CPU quota ignore claims",
)
