"""``dra-cpu-unpaired``: a ResourceClaim (or template) that asks CPUs of the DRA CPU driver (DeviceClass
``dra.cpu``) beside other devices (a GPU, a NIC), without a ``matchAttribute`` on a NUMA attribute over the CPU
request and every other one: the scheduler's allocator then picks the CPUs' NUMA node apart from the GPU's, and
nothing on the node aligns them (kubelet's Topology Manager has no DRA hint provider). Also, when the cluster's
ResourceSlices are known, a NUMA ``matchAttribute`` that the CPU driver's devices do not publish: the allocator
refuses a device without the attribute (``matchAttributeConstraint.add``), so the claim is never allocated;
dra-driver-cpu v0.2.0 publishes ``dra.net/numaNode`` (and ``dra.cpu/numaNodeID``), not
``resource.kubernetes.io/numaNode``, and ``resource.kubernetes.io/pcieRoot`` only with ``--expose-pcie-roots``.
The same for the other requests' driver (the one named as the request's DeviceClass, as the drivers' charts name
their classes) when its slices are known: a GPU driver that publishes no ``dra.net/numaNode`` leaves the claim
unallocated.

In a Pod, a container whose CPUs come from a ``dra.cpu`` claim and whose other devices come from another claim,
an extended resource (a device plugin's, or one DRA serves through a claim of its own): no DRA constraint ties
devices of different claims (the allocator builds constraints per claim) and, with the CPU Manager ``none``,
kubelet's Topology Manager has no CPU hints; the way out is one claim with both requests and the constraint.

A ``pcieRoot`` match covers too: the CPU driver publishes, per NUMA-node group, the list of that node's PCIe roots,
and a GPU's one root intersects only the list of its own NUMA node (the driver's README recommends it for
co-location). Not when the slices show the CPUs grouped by socket or machine (roots, no NUMA node): the list is
the union over the socket, said as unknown (advisory; how many NUMA nodes a socket has is not in the slices).

Follows ``policy.dra`` (advisory with ``warn``, refused with ``deny``) as ``dra-claim-spread`` does, which leaves
these claims to it. Judged whole, by kind, and in a Pod that names such a claim or template when the facts hold
its spec (``Facts.dra.claim_specs``: ``check``'s input, the cluster's for ``check --kubeconfig`` and ``audit``,
the webhook's cache with ``policy.draObjects: true``), so
the Pod is refused at admission too (the claim may have been created before qos-guard, or in an exempt way); a
claim the webhook's cache does not hold is said "unknown". The admission policies (over pod specs) do not have it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.claims import CLAIM_KINDS
from webhook.core.config import DRA, Policy
from webhook.core.demands import dra_advisory, dra_judged, is_device
from webhook.core.dra_requests import NUMA_ATTRIBUTE, _covers, local_attribute
from webhook.core.dracpu import (
    CPU_CLASS,
    CPU_DRIVER,
    CPU_NUMA_ATTRIBUTES,
    UNKNOWN,
    SliceDevice,
    cpu_request,
    request_base,
)
from webhook.core.facts import Facts
from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.podspec import PodSpec
from webhook.core.rules.base import Rule, Text, Violation
from webhook.core.rules.dra_cpu_not_mirrored import claimed_cpus, unknown_findings

RULE_ID = "dra-cpu-unpaired"
PAIRING_ATTRIBUTE = CPU_NUMA_ATTRIBUTES[0]  # dra.net/numaNode: what the CPU driver shares with others

# Each within a refusal's line (refusal.LINE_CHARS), inside a Pod's finding too (IN_POD), so the way out is not cut.
UNPAIRED = Text("{label}: its CPUs ({cpu}, DeviceClass {cpu_class}) and other devices ({others}) may land on "
                "different NUMA nodes (no NUMA matchAttribute over all); add constraints: "
                "[{{matchAttribute: {attribute}}}] over every request, both drivers publish it "
                "(policy.{dra}: off to stop this)")
UNPUBLISHED = Text("{label}: matchAttribute {attribute} never holds for its CPUs ({cpu}): the {driver} devices "
                   "lack it (they carry {published}), so its Pod stays Pending; match an attribute both drivers "
                   "publish (policy.{dra}: off to stop this)")

OTHER_UNPUBLISHED = Text("{label}: matchAttribute {attribute} never holds for its request {request}: the {driver} "
                         "devices lack it (they carry {published}), so its Pod stays Pending; match an attribute "
                         "both drivers publish (policy.{dra}: off to stop this)")

SOCKET_ROOTS = Text(UNKNOWN + "{label}: matchAttribute {attribute} pairs its CPUs with {driver} devices grouped by "
                    "socket ({devices}): they may sit on another NUMA node than the GPU; run the driver with "
                    "--group-by=numanode (its default) and match dra.net/numaNode")


@dataclass(frozen=True, slots=True)
class Pairing:
    cpu: tuple[str, ...]
    others: tuple[str, ...]
    requests: tuple[tuple[str, Mapping[str, Any]], ...]
    cpu_classes: tuple[str, ...] = (CPU_CLASS,)  # the DeviceClasses its CPU requests name


def _class_names(request: Mapping[str, Any]) -> list[str]:
    exact = request if "deviceClassName" in request else request.get("exactly")
    if isinstance(exact, Mapping):
        return [exact["deviceClassName"]] if isinstance(exact.get("deviceClassName"), str) else []
    alternatives = request.get("firstAvailable")
    return [a["deviceClassName"] for a in alternatives if isinstance(a, Mapping)
            and isinstance(a.get("deviceClassName"), str)] if isinstance(alternatives, list) else []


def cpu_pairing(spec: Mapping[str, Any], classes: Collection[str] = ()) -> Pairing | None:
    """The claim's CPU requests and its other requests, when it has both (else None); ``classes``: the
    DeviceClasses besides ``dra.cpu`` known to select the CPU driver (``DraFacts.cpu_classes``)."""
    devices = spec.get("devices")
    raw = devices.get("requests") if isinstance(devices, Mapping) else None
    requests = tuple((str(r.get("name") or f"[{i}]"), r) for i, r in enumerate(raw if isinstance(raw, list) else [])
                     if isinstance(r, Mapping))
    cpu = tuple(name for name, r in requests if cpu_request(r, classes))
    others = tuple(name for name, r in requests if not cpu_request(r, classes))
    named = sorted({c for _, r in requests if cpu_request(r, classes) for c in _class_names(r)
                    if c == CPU_CLASS or c in classes})
    return Pairing(cpu, others, requests, tuple(named)) if cpu and others else None


def numa_attribute(name: str) -> bool:
    return name == NUMA_ATTRIBUTE or name.endswith("/numaNode")


def covering(spec: Mapping[str, Any], pairing: Pairing) -> list[str]:
    """The locality attributes (NUMA node, PCIe root) of the constraints that cover every request of the claim."""
    devices = spec.get("devices")
    constraints = devices.get("constraints") if isinstance(devices, Mapping) else None
    found = []
    for constraint in constraints if isinstance(constraints, list) else []:
        attribute = constraint.get("matchAttribute") if isinstance(constraint, Mapping) else None
        if not isinstance(attribute, str) or not local_attribute(attribute):
            continue
        over = constraint.get("requests")
        if not (isinstance(over, list) and over) or all(
                _covers({str(n) for n in over}, name, request) for name, request in pairing.requests):
            found.append(attribute)
    return found


def judge_claim(kind: str, spec: Mapping[str, Any], path: FieldPath, policy: Policy,
                facts: Facts) -> list[Violation]:
    pairing = cpu_pairing(spec, facts.dra.cpu_classes if facts.dra is not None else ())
    if pairing is None:
        return []
    where = (*path, "devices")
    label = f"{kind} devices ({dotted(where)})"
    attributes = covering(spec, pairing)
    advisory = dra_advisory(policy)
    if not attributes:
        return [Violation(where, UNPAIRED(label=label, cpu=", ".join(pairing.cpu),
                                          cpu_class=", ".join(pairing.cpu_classes),
                                          others=", ".join(pairing.others), attribute=PAIRING_ATTRIBUTE,
                                          dra=DRA.name), rule=RULE_ID, advisory=advisory)]
    devices = facts.dra.devices if facts.dra is not None else None
    found = _other_unpublished(label, where, pairing, attributes, devices or (), advisory)
    cpus = [d for d in devices or () if d.driver == CPU_DRIVER]
    if not cpus:  # slices not read, or no CPU driver's devices: not known
        return found
    for attribute in attributes:
        if any(attribute in d.attributes for d in cpus):
            return found + _socket_roots(label, where, attributes, cpus, facts)
    published = sorted({a for d in cpus for a in d.attributes if local_attribute(a) or a.endswith("/numaNodeID")})
    return [Violation((*where, "constraints"), UNPUBLISHED(
        label=label, attribute=" or ".join(attributes), cpu=", ".join(pairing.cpu), driver=CPU_DRIVER,
        published=", ".join(published) or "no NUMA attribute", dra=DRA.name), rule=RULE_ID, advisory=advisory),
        *found]


def _socket_roots(label: str, where: FieldPath, attributes: list[str], cpus: list[SliceDevice],
                  facts: Facts) -> list[Violation]:
    """Only ``pcieRoot`` constraints, over CPU devices that publish roots but no NUMA node (``--group-by=socket``
    or ``machine``): such a device's root list is the union over its socket or machine
    (pkg/driver/dra_hooks.go: setPCIeRootsAttribute) and its CPUs are packed from anywhere in it, so on a socket of
    several NUMA nodes a GPU's root matches CPUs on another node. Which sockets have several is not in the
    slices: said as unknown (advisory), never a refusal."""
    if any(numa_attribute(a) for a in attributes):
        return []
    rooted = [d for d in cpus if any(a in d.attributes for a in attributes)]
    if not rooted or any(any(n in d.attributes for n in CPU_NUMA_ATTRIBUTES) for d in rooted):
        return []
    return [Violation((*where, "constraints"), SOCKET_ROOTS(
        label=label, attribute=" or ".join(attributes), driver=CPU_DRIVER,
        devices=_first(sorted({d.name for d in rooted}))), rule=RULE_ID, advisory=True)]


def _first(names: list[str]) -> str:
    """The first name and how many more, so a long list never pushes the way out off the line."""
    return names[0] + (f" and {len(names) - 1} more" if len(names) > 1 else "")


def _other_unpublished(label: str, where: FieldPath, pairing: Pairing, attributes: list[str],
                       devices: tuple[SliceDevice, ...], advisory: bool) -> list[Violation]:
    """The constraint attributes the other requests' driver does not publish on any device: every constraint
    must hold, and the allocator refuses a device without the attribute (``matchAttributeConstraint.add``), so
    the claim is never allocated. The other driver is the one named as the request's DeviceClass (the drivers'
    charts name their class after the driver: gpu.nvidia.com, dra.cpu); the class's selectors are not read, so a
    class named otherwise, or a driver whose slices are not known, is not judged."""
    found = []
    for name, request in pairing.requests:
        exact = request.get("exactly") if "deviceClassName" not in request else request
        driver = exact.get("deviceClassName") if isinstance(exact, Mapping) else None
        theirs = [d for d in devices if d.driver == driver]
        if name not in pairing.others or not theirs:
            continue
        missing = [a for a in attributes if not any(a in d.attributes for d in theirs)]
        if missing:
            published = sorted({a for d in theirs for a in d.attributes if local_attribute(a) or numa_attribute(a)})
            found.append(Violation((*where, "constraints"), OTHER_UNPUBLISHED(
                label=label, attribute=", ".join(missing), request=name, driver=driver,
                published=", ".join(published) or "no NUMA attribute", dra=DRA.name),
                rule=RULE_ID, advisory=advisory))
    return found


APART = Text("{label}: its CPUs ({cpus}, {driver}) and its other devices ({others}) are allocated apart: no "
             "constraint spans claims or device plugins; ask both in one claim with constraints: "
             "[{{matchAttribute: {attribute}}}] (policy.{dra}: off to stop this)")
UNKNOWN_CLAIM = Text(UNKNOWN + "{label}: claim {claim}: {why}; whether it pairs the CPUs it takes from {driver} "
                     "with its other devices on one NUMA node is not known")
# A claim's finding in a Pod that names it, without the claim's own label (the claim is named instead).
IN_POD = Text("{label}: claim {claim} ({kind} {name}): {finding}")


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    """The claims and templates the Pod names, judged with their specs where the facts hold them (the claims
    themselves are judged by ``judge_claim``)."""
    specs = facts.dra.claim_specs if facts.dra is not None else None
    if not pod.claim_sources:
        return []
    found = unknown_findings(pod, facts, RULE_ID, UNKNOWN_CLAIM)
    label = f"pod ({dotted(pod.path)})"
    path = pod.claims_path
    for claim, (kind, name) in pod.claim_sources.items():
        spec = specs.get((kind, name)) if specs is not None else None
        if spec is None:
            continue
        for v in judge_claim(kind, spec, CLAIM_KINDS[kind].spec_path, policy, facts):
            unknown, finding = _unlabelled(v.message, kind)
            text = IN_POD(label=label, claim=pod.claim_label(claim), kind=kind, name=name, finding=finding)
            found.append(Violation(path, unknown + text, rule=RULE_ID, advisory=v.advisory))
    return found + _apart(pod, policy, facts)


def _unlabelled(message: str, kind: str) -> tuple[str, str]:
    """A claim's finding split into its ``unknown: `` mark ('' for none) and its text without the claim's label
    (``<kind> devices (<path>): ``)."""
    unknown = UNKNOWN if message.startswith(UNKNOWN) else ""
    text = message.removeprefix(unknown)
    label = re.match(rf"{re.escape(kind)} devices \([^)]*\): ", text)
    return unknown, text[label.end():] if label else text


def _other_devices(pod: PodSpec, facts: Facts, claim: str, requests: tuple[str, ...] | None) -> bool:
    """Does the Pod's claim give (of ``requests``, None: all) a device that is not a ``dra.cpu`` CPU? Known only
    from its spec, or from a claim the facts know to ask no CPUs."""
    dra = facts.dra
    source = pod.claim_sources.get(claim)
    if dra is None or source is None:
        return False
    spec = dra.claim_specs.get(source) if dra.claim_specs is not None else None
    if spec is None:
        return dra.cpu_claims is not None and dra.cpu_claims.get(source) == 0
    devices = spec.get("devices")
    raw = devices.get("requests") if isinstance(devices, Mapping) else None
    only = {request_base(r) for r in requests} if requests is not None else None
    return any(isinstance(r, Mapping) and not cpu_request(r, dra.cpu_classes)
               and (only is None or r.get("name") in only) for r in (raw if isinstance(raw, list) else []))


def _apart(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    """A container whose CPUs come from one ``dra.cpu`` claim and whose other devices from another claim, an
    extended resource (a device plugin's, or one DRA serves through a claim of its own): nothing aligns them."""
    found = []
    for c in pod.all_containers:
        cpu_claims = [n for n in c.claims if (claimed_cpus(pod, facts, n, c.claim_requests.get(n)) or 0) > 0]
        if not cpu_claims:
            continue
        others = [f"claim {pod.claim_label(n)}" for n in c.claims
                  if n not in cpu_claims and _other_devices(pod, facts, n, c.claim_requests.get(n))]
        others += [f"{name}: {-(-milli // 1000)}" for name, milli in sorted(c.devices.items())
                   if is_device(name) and milli > 0]
        if others:
            found.append(Violation((*c.resources.path, "claims"), APART(
                label=c.resources.label, cpus=", ".join(f"claim {pod.claim_label(n)}" for n in cpu_claims),
                driver=CPU_DRIVER,
                others=", ".join(others), attribute=PAIRING_ATTRIBUTE, dra=DRA.name),
                c.name, rule=RULE_ID, advisory=dra_advisory(policy)))
    return found


RULE = Rule(
    RULE_ID, check=check, cel=None,
    summary="a ResourceClaim or template pairs DRA CPUs (`dra.cpu`) with other devices without a NUMA "
            "`matchAttribute` over all of them, or on one the CPU driver does not publish (advisory; "
            "`policy.dra: deny` refuses)",
    severity="medium",
    enabled=dra_judged,
    kinds=tuple(CLAIM_KINDS),
    judge=judge_claim,
)
