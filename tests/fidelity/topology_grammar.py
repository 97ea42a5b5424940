"""Seeded random (Pod, machine, policy, scope) cases for the Topology Manager differential test, and the
NodeResourceTopology object an exporter would publish for a machine.

Machines are built as kubelet's unit tests build them (hack/oracle topology mode): 1-8 NUMA nodes of uneven
sizes, SMT or not, reserved CPUs (a count, or reservedSystemCPUs), reserved memory per NUMA node, 2Mi and 1Gi
hugepages, devices of two resources on some NUMA nodes. Pods are sized against the machine so that fitting
and not fitting are both common: init containers, sidecars, fractional CPUs, Burstable Pods, zero-count
devices, hugepages.
"""

from __future__ import annotations

import random
from typing import Any

from webhook.core.cpupinner import AGENT_SOURCE, PINNER_ATTRIBUTE, SOURCE_ATTRIBUTE
from webhook.core.numatopology import (
    CPU_MANAGER_OPTIONS,
    CPU_OPTIONS_ATTRIBUTE,
    FULL_PCPUS_ONLY,
    SIBLINGS_ATTRIBUTE,
    THREADS_ATTRIBUTE,
)

GIB = 1 << 30
MIB = 1 << 20
DEVICES = ("example.com/gpu", "example.com/nic")
POLICIES = ("single-numa-node",) * 8 + ("restricted", "best-effort", "none")


def machine(rng: random.Random, smt: bool | None = None) -> dict[str, Any]:
    """``smt``: two threads per core (True), one (False), else drawn."""
    count = rng.choice([1, 2, 2, 2, 3, 4, 4, 6, 8])
    tpc = rng.choice([1, 1, 2]) if smt is None else 2 if smt else 1
    numa: list[dict[str, Any]] = []
    for i in range(count):
        cpus = rng.choice([2, 4, 4, 6, 8, 8, 12, 16, 24, 32]) * (tpc if rng.random() < 0.5 else 1)
        cpus -= cpus % tpc
        memory_gib = rng.choice([4, 8, 16, 32, 64, 128, 256])
        huge2 = rng.choice([0, 0, 256, 512, 1024])  # pages of 2Mi
        huge1 = rng.choice([0, 0, 0, 1, 2, 4]) if memory_gib >= 16 else 0
        reserved = rng.choice([0, 0, 256 * MIB, 512 * MIB, GIB]) if i else rng.choice([256 * MIB, 512 * MIB, GIB])
        devices = {}
        for res in DEVICES:
            if rng.random() < 0.5:
                devices[res] = rng.choice([0, 1, 2, 2, 4, 8])
        numa.append({"cpus": max(cpus, tpc), "memory": memory_gib * GIB, "reservedMemory": reserved,
                     "hugepages2Mi": huge2, "hugepages1Gi": huge1, "devices": devices})
    spec: dict[str, Any] = {"numa": numa, "threadsPerCore": tpc,
                            "numaPerSocket": rng.choice([1, 1, 2]) if count % 2 == 0 else 1,
                            "reservedCPUs": rng.choice([1, 1, 1, 2, 3])}
    total = sum(n["cpus"] for n in numa)
    spec["reservedCPUs"] = min(spec["reservedCPUs"], total - 1) or 1
    if rng.random() < 0.15 and total > 2:
        spec["reservedSystemCPUs"] = sorted(rng.sample(range(total), rng.choice([1, 2])))
    return spec


def _scaled(rng: random.Random, have: int) -> int:
    """An amount around ``have``: mostly within it, sometimes just over."""
    r = rng.random()
    if r < 0.2:
        return max(1, have + rng.choice([1, 1, 2, have // 4 + 1]))
    if r < 0.45:
        return max(1, have)
    return max(1, int(have * rng.choice([0.1, 0.25, 0.5, 0.75, 0.9])))


# Not tests/builders.pod: a random Pod drawn against the machine, the differential's input.
def pod(rng: random.Random, spec: dict[str, Any]) -> dict[str, Any]:
    """A Pod sized against one NUMA node of the machine (the target), so that fitting and not fitting are
    both common."""
    target = rng.choice(spec["numa"])
    cpus = target["cpus"] - (spec["reservedCPUs"] if target is spec["numa"][0] else 0)
    memory = target["memory"] - target["reservedMemory"] - target["hugepages2Mi"] * 2 * MIB \
        - target["hugepages1Gi"] * GIB
    guaranteed = rng.random() < 0.85
    names = iter(f"c{i}" for i in range(100))

    def container(share: float) -> dict[str, Any]:
        cpu = rng.choice(["500m", "1500m", "250m"]) if rng.random() < 0.08 \
            else str(_scaled(rng, max(1, int(cpus * share))))
        mem = rng.choice(["64Mi", "256Mi", "1Gi"]) if rng.random() < 0.3 \
            else f"{max(1, _scaled(rng, int(memory * share)) // MIB)}Mi"
        limits: dict[str, Any] = {"cpu": cpu, "memory": mem}
        requests: dict[str, Any] = dict(limits)
        if not guaranteed and rng.random() < 0.7:
            requests = {"cpu": "100m", "memory": "64Mi"}
        if rng.random() < 0.25:
            if target["hugepages1Gi"] and rng.random() < 0.5:
                limits["hugepages-1Gi"] = f"{_scaled(rng, int(target['hugepages1Gi'] * share) or 1)}Gi"
            else:
                pages = _scaled(rng, int(target["hugepages2Mi"] * share) or rng.choice([1, 32]))
                limits["hugepages-2Mi"] = f"{2 * pages}Mi"
        for res in DEVICES:
            if rng.random() < 0.3:
                have = target["devices"].get(res, 0)
                limits[res] = str(rng.choice([0, 0, 0, 1]) if not have else _scaled(rng, max(1, int(have * share))))
        for name, value in limits.items():
            if name not in ("cpu", "memory"):
                requests[name] = value
        return {"name": next(names), "image": "busybox", "resources": {"limits": limits, "requests": requests}}

    apps = rng.choice([1, 1, 1, 2, 2, 3])
    share = 1.0 / apps if rng.random() < 0.7 else 1.0
    body: dict[str, Any] = {"containers": [container(share) for _ in range(apps)]}
    inits = rng.choice([0, 0, 0, 1, 1, 2])
    if inits:
        body["initContainers"] = []
        for _ in range(inits):
            c = container(rng.choice([0.3, 0.6, 1.0]))
            if rng.random() < 0.4:
                c["restartPolicy"] = "Always"  # a sidecar
            body["initContainers"].append(c)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": body}


def case(rng: random.Random) -> dict[str, Any]:
    policy = rng.choice(POLICIES)
    spec = machine(rng)
    while policy != "single-numa-node" and len(spec["numa"]) > 4:
        # restricted and best-effort merge every permutation of every provider's hints (HintMerger.Merge):
        # on 6-8 NUMA nodes that is seconds per Pod, for cases only counted for the record.
        spec = machine(rng)
    return {"machine": spec, "policy": policy, "scope": rng.choice(["container", "pod"]), "pod": pod(rng, spec)}


def options_case(rng: random.Random) -> dict[str, Any]:
    """A case whose kubelet runs the static CPU Manager with some of its policy options (each drawn alone,
    so combinations kubelet refuses are drawn too: the oracle says it would not start), the alpha-options gate
    on or off, mostly on SMT machines of several sockets."""
    policy = rng.choice(POLICIES)
    spec = machine(rng, smt=rng.random() < 0.75)
    while policy != "single-numa-node" and len(spec["numa"]) > 4:
        spec = machine(rng, smt=spec["threadsPerCore"] == 2)
    options = {name: "true" for name in CPU_MANAGER_OPTIONS if rng.random() < 0.3}
    if not options:
        options = {FULL_PCPUS_ONLY: "true"}
    gates = {"CPUManagerPolicyAlphaOptions": rng.random() < 0.6}
    return {"machine": spec, "policy": policy, "scope": rng.choice(["container", "pod"]), "pod": pod(rng, spec),
            "cpuManagerPolicyOptions": options, "featureGates": gates}


def cpu_policy_case(rng: random.Random) -> dict[str, Any]:
    """A case whose kubelet runs the CPU Manager policy ``none`` (mostly) or ``static``, and the ``cpuPinner``
    its node's NodeResourceTopology publishes (``webhook.core.cpupinner``: ``none`` or ``dra.cpu`` for ``none``,
    ``cpu-manager`` for ``static``; None, in some ``none`` cases: not published, the policy not known). Some
    ``none`` cases carry an option, which kubelet's none policy refuses (it would not start)."""
    policy = rng.choice(POLICIES)
    spec = machine(rng, smt=rng.random() < 0.5)
    while policy != "single-numa-node" and len(spec["numa"]) > 4:
        spec = machine(rng, smt=spec["threadsPerCore"] == 2)
    cpu_policy = rng.choice(("none", "none", "none", "static"))
    pinner: str | None = "cpu-manager" if cpu_policy == "static" else rng.choice(("none", "dra.cpu"))
    if cpu_policy == "none" and rng.random() < 0.1:
        pinner = None
    options = ({FULL_PCPUS_ONLY: rng.choice(("true", "false"))} if cpu_policy == "none" and rng.random() < 0.05
               else {})
    return {"machine": spec, "policy": policy, "scope": rng.choice(["container", "pod"]), "pod": pod(rng, spec),
            "cpuManagerPolicy": cpu_policy, "cpuPinner": pinner, "cpuManagerPolicyOptions": options}


def reserved_siblings(c: dict[str, Any], answer: dict[str, Any]) -> int:
    """CPUs that share a core with a reserved CPU and are not reserved (the machine numbers a core's threads
    one after another: CPU ``n`` is on core ``n // threadsPerCore``)."""
    tpc = int(c["machine"]["threadsPerCore"])
    reserved = set(answer.get("reservedCPUs") or [])
    return len({cpu // tpc for cpu in reserved}) * tpc - len(reserved)


# Not tests/builders.nrt: capacity and allocatable differ per zone, with costs and kubelet's option attributes.
def nrt(name: str, answer: dict[str, Any], policy: str, scope: str,
        c: dict[str, Any] | None = None) -> dict[str, Any]:
    """The NodeResourceTopology object (v1alpha2) an exporter publishes for this machine: per NUMA node, the
    capacity and what kubelet's resource managers hand out (the oracle reads both from them); with the case
    ``c`` of a kubelet with cpuManagerPolicyOptions, the attributes that carry them, and its ``cpuPinner`` where the
    case publishes one. With the case, each NUMA
    node's socket too, as the agent publishes it (``parent: socket-<id>`` and a ``Socket`` zone per socket): NUMA
    node ``i`` is on socket ``i // numaPerSocket``, as the oracle builds cadvisor's machine (hack/oracle
    topology.go ``machineInfo``)."""
    per = int((c or {}).get("machine", {}).get("numaPerSocket") or 1)
    zones: list[dict[str, Any]] = []
    for i, (cap, alloc) in enumerate(zip(answer["capacity"], answer["allocatable"], strict=True)):
        resources = []
        for res in sorted(set(cap) | set(alloc)):
            q_cap, q_alloc = cap.get(res, "0"), alloc.get(res, "0")
            resources.append({"name": res, "capacity": q_cap, "allocatable": q_alloc, "available": q_alloc})
        zone = {"name": f"node-{i}", "type": "Node", "resources": resources,
                "costs": [{"name": f"node-{j}", "value": 10 if i == j else 20} for j in range(len(answer["capacity"]))]}
        if c is not None:
            zone["parent"] = f"socket-{i // per}"
        zones.append(zone)
    if c is not None:
        zones += [{"name": f"socket-{s}", "type": "Socket"} for s in range((len(zones) + per - 1) // per)]
    attributes = [{"name": "topologyManagerPolicy", "value": policy},
                  {"name": "topologyManagerScope", "value": scope}]
    if c is not None and c.get("cpuPinner"):  # as the agent publishes it (cpu_policy_case)
        attributes += [{"name": PINNER_ATTRIBUTE, "value": c["cpuPinner"]},
                       {"name": SOURCE_ATTRIBUTE, "value": AGENT_SOURCE}]
    if c is not None and c.get("cpuManagerPolicyOptions"):
        options = ",".join(f"{k}={v}" for k, v in sorted(c["cpuManagerPolicyOptions"].items()))
        attributes += [{"name": CPU_OPTIONS_ATTRIBUTE, "value": options},
                       {"name": THREADS_ATTRIBUTE, "value": str(c["machine"]["threadsPerCore"])},
                       {"name": SIBLINGS_ATTRIBUTE, "value": str(reserved_siblings(c, answer))}]
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": name}, "attributes": attributes, "zones": zones}
