"""What qos-guard is for, proven on a real kubelet: a Pod it admits or patches gets an exclusive CPU from the
static CPU Manager, read back from the container's cgroup and from inside it (``/proc/1/status``), as an
operator checks by hand. The webhook answering is the chart's own Deployment, from the repository's Dockerfile,
reached by the API server through the chart's Service."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import waiting
from tests.e2e.conftest import RELEASE_NAMESPACE, Cluster
from tests.node.conftest import (
    DENIED,
    Release,
    admits,
    app_container_ids,
    cgroup_cpus,
    cgroup_file,
    container_cgroup_cpus,
    delete_and_release,
    exec_cpus,
    parse_cpus,
    pod,
    report,
    wait_running,
)
from tests.node.node import Node

# The first test also starts the node (and builds what `make test` did not build yet).
pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]


def apply(c: Cluster, ns: str, obj: dict[str, Any]) -> Any:
    return c.kubectl("apply", "-n", ns, "-f", "-", stdin=obj)


def assert_pinned(node: Node, ns: str, name: str, scenario: str) -> set[int]:
    """The Pod runs Guaranteed and its container has exactly one CPU, exclusive: it is the CPU Manager's
    assignment, it is out of the shared pool, and no other container of any Pod on the node has it."""
    c = node.cluster
    obj = wait_running(c, ns, name)
    assert obj["status"]["qosClass"] == "Guaranteed"
    inside, cgroup = exec_cpus(c, ns, name), cgroup_cpus(obj)
    state = node.cpu_manager_state()
    assigned = parse_cpus(state["entries"][obj["metadata"]["uid"]]["app"])
    shared = parse_cpus(state["defaultCpuSet"])
    report(f"{scenario}: {ns}/{name} cpuset {sorted(inside)} (cgroup cpuset.cpus {sorted(cgroup)}, "
           f"CPU Manager {sorted(assigned)}, shared pool {sorted(shared)})")
    assert len(inside) == 1 and inside == cgroup == assigned
    assert not inside & shared
    # The Static Memory Manager pinned its memory to one NUMA node too (this machine has one: node 0).
    (block,) = node.memory_manager_state()["entries"][obj["metadata"]["uid"]]["app"]
    assert block["type"] == "memory" and block["numaAffinity"] == [0] and block["size"] == 64 * 2**20
    assert parse_cpus(cgroup_file(obj, "cpuset.mems")) == {0}
    # Every other Pod's container (sandboxes are not the CPU Manager's) leaves the shared pool's new cpuset
    # on the kubelet's next reconcile (cpuManagerReconcilePeriod, 2 s here): allow ten periods.
    me = obj["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]

    def sharing() -> dict[str, list[int]]:
        apps = app_container_ids(c)
        return {apps[cid]: sorted(cpus) for cid, cpus in container_cgroup_cpus().items()
                if cid != me and cid in apps and cpus & inside}

    waiting.eventually(f"no other container on CPU {sorted(inside)}", lambda: not sharing(), within=20,
                       every=0.5, seen=lambda: f"containers still sharing it: {sharing()}")
    return inside


def test_1_enforce_refuses_fractional_and_pins_whole(node: Node, release: Release) -> None:
    c = node.cluster
    ns = c.namespace("node-enforce", "enforce")
    refused = apply(c, ns, pod("pinned", "1500m"))
    assert refused.returncode != 0 and DENIED in refused.stderr and "cpu-not-integer" in refused.stderr
    assert c.kubectl("get", "pod", "pinned", "-n", ns).returncode != 0
    admitted = apply(c, ns, pod("pinned", "1"))
    assert admitted.returncode == 0, admitted.stderr
    assert_pinned(node, ns, "pinned", "1 enforce")
    uid = c.get("pod", "pinned", "-n", ns)["metadata"]["uid"]
    delete_and_release(node, ns, "pod", "pinned", [uid])


def test_2_mutate_patches_requests_and_pins(node: Node, release: Release) -> None:
    c = node.cluster
    ns = c.namespace("node-mutate", "mutate")
    proc = apply(c, ns, pod("patched", "1", memory="64Mi", request_cpu="500m"))
    assert proc.returncode == 0, proc.stderr
    assert "Warning:" in proc.stderr  # kubectl shows what was changed
    resources = c.get("pod", "patched", "-n", ns)["spec"]["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "1", "memory": "64Mi"}
    assert_pinned(node, ns, "patched", "2 mutate")
    uid = c.get("pod", "patched", "-n", ns)["metadata"]["uid"]
    delete_and_release(node, ns, "pod", "patched", [uid])


def test_3_warn_admits_fractional_into_the_shared_pool(node: Node, release: Release) -> None:
    """The control: beside a pinned Pod, a fractional-CPU Pod qos-guard only warns about runs on the shared
    pool (every CPU but the pinned one), though the API server calls it Guaranteed."""
    c = node.cluster
    enforce, warn = c.namespace("node-enforce", "enforce"), c.namespace("node-warn", "warn")
    assert apply(c, enforce, pod("neighbour", "1")).returncode == 0
    pinned = assert_pinned(node, enforce, "neighbour", "3 warn (pinned neighbour)")
    proc = apply(c, warn, pod("fractional", "200m"))
    assert proc.returncode == 0, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("Warning:")]
    assert any("cpu-not-integer" in w for w in warnings), proc.stderr
    print("\n".join(warnings))
    obj = wait_running(c, warn, "fractional")
    assert obj["status"]["qosClass"] == "Guaranteed"  # Guaranteed, yet not pinned: the check matters
    inside, cgroup = exec_cpus(c, warn, "fractional"), cgroup_cpus(obj)
    shared = parse_cpus(node.cpu_manager_state()["defaultCpuSet"])
    online = parse_cpus(Path("/sys/devices/system/cpu/online").read_text())
    report(f"3 warn: {warn}/fractional cpuset {sorted(inside)} (shared pool {sorted(shared)}; "
           f"warning printed: {len(warnings)})")
    assert obj["metadata"]["uid"] not in node.cpu_manager_state().get("entries", {})
    assert inside == cgroup == shared == online - pinned
    uids = [obj["metadata"]["uid"], c.get("pod", "neighbour", "-n", enforce)["metadata"]["uid"]]
    c.kubectl("delete", "pod", "fractional", "-n", warn, "--wait=false")
    delete_and_release(node, enforce, "pod", "neighbour", uids)


def deployment(name: str, cpu: str) -> dict[str, Any]:
    template = pod(name, cpu)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]}}}


def test_4_deployment_rolls_out_pinned_pods(node: Node, release: Release) -> None:
    """Through the real deployment and replicaset controllers and scheduler: the Pods they create are judged
    (the Deployment too) and pinned."""
    c = node.cluster
    ns = c.namespace("node-enforce", "enforce")
    refused = apply(c, ns, deployment("rollout-bad", "500m"))
    assert refused.returncode != 0 and DENIED in refused.stderr and "Deployment" in refused.stderr
    assert apply(c, ns, deployment("rollout", "1")).returncode == 0
    status = c.kubectl("rollout", "status", "-n", ns, "deployment/rollout", "--timeout=120s")
    assert status.returncode == 0, status.stderr
    (obj,) = c.get("pods", "-n", ns, "-l", "app=rollout")["items"]
    owner = obj["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "ReplicaSet" and owner["name"].startswith("rollout-")
    assert_pinned(node, ns, obj["metadata"]["name"], "4 deployment")
    delete_and_release(node, ns, "deployment", "rollout", [obj["metadata"]["uid"]])


def _webhook_pods(c: Cluster) -> list[str]:
    items = c.get("pods", "-n", RELEASE_NAMESPACE, "-l", "app.kubernetes.io/name=qos-guard")["items"]
    # An evicted or failed Pod of the Deployment stays listed until it is collected: only live ones serve.
    return sorted(p["metadata"]["name"] for p in items
                  if not p["metadata"].get("deletionTimestamp")
                  and p.get("status", {}).get("phase") not in ("Failed", "Succeeded"))


def _evict(c: Cluster, name: str) -> Any:
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": RELEASE_NAMESPACE}}
    return c.kubectl("create", "--raw", f"/api/v1/namespaces/{RELEASE_NAMESPACE}/pods/{name}/eviction",
                     "-f", "-", stdin=json.dumps(body))


def test_5_webhook_outage_never_admits_unjudged(node: Node, release: Release) -> None:
    """The chart's two replicas and PodDisruptionBudget: one replica evicted, the other keeps judging; the
    budget refuses evicting the last one; every replica gone, `enforce` fails closed (failurePolicy Fail) and
    `warn` stays open (Ignore). No violating Pod is ever admitted in `enforce`."""
    c = node.cluster
    enforce, warn = c.namespace("node-enforce", "enforce"), c.namespace("node-warn", "warn")
    first, second = _webhook_pods(c)
    waiting.eventually("the PodDisruptionBudget allowing 1 disruption (both replicas counted healthy)",
                       lambda: c.get("pdb", "qos-guard", "-n", RELEASE_NAMESPACE).get("status", {})
                       .get("disruptionsAllowed") == 1, within=60, every=1,
                       seen=lambda: c.get("pdb", "qos-guard", "-n", RELEASE_NAMESPACE))
    evicted = _evict(c, first)
    assert evicted.returncode == 0, evicted.stderr
    blocked = _evict(c, second)
    assert blocked.returncode != 0 and "disruption budget" in blocked.stderr, blocked.stderr
    # While a replacement starts, every answer in enforce is a judgement or a refusal, never an unjudged
    # admission; the remaining replica keeps judging (denials by the policy, compliant Pods admitted).
    judged, admitted, last = [0], [False], [""]

    def recovered() -> bool:
        bad = admits(c, enforce, pod("outage-bad", "1500m"))
        assert bad.returncode != 0, "a violating Pod was admitted during the outage"
        judged[0] += DENIED in bad.stderr
        last[0] = bad.stderr
        admitted[0] = admitted[0] or admits(c, enforce, pod("outage-good", "1")).returncode == 0
        return judged[0] >= 5 and admitted[0]

    waiting.eventually("admission recovered with one replica (5 judged denials, a compliant Pod admitted)",
                       recovered, within=60, every=0,
                       seen=lambda: f"{judged[0]} judged, admitted {admitted[0]}; last answer:\n{last[0]}")
    report(f"5 outage: {first} evicted, {second} kept by the PodDisruptionBudget; admission judged throughout")
    # Every replica gone: fail closed in enforce, open in warn.
    scaled = c.kubectl("scale", "-n", RELEASE_NAMESPACE, "deployment/qos-guard", "--replicas=0")
    assert scaled.returncode == 0, scaled.stderr
    waiting.eventually("the webhook Pods gone", lambda: not (
        _webhook_pods(c) or c.get("pods", "-n", RELEASE_NAMESPACE)["items"]), within=90, every=1,
        seen=lambda: [p["metadata"]["name"] for p in c.get("pods", "-n", RELEASE_NAMESPACE)["items"]])
    try:
        for name, cpu in (("down-bad", "1500m"), ("down-good", "1")):
            proc = admits(c, enforce, pod(name, cpu))
            assert proc.returncode != 0 and "failed calling webhook" in proc.stderr, proc.stderr
        assert admits(c, warn, pod("down-warn", "200m")).returncode == 0
        report("5 outage: no replica left: enforce refused both Pods (fail closed), warn admitted")
    finally:
        c.kubectl("scale", "-n", RELEASE_NAMESPACE, "deployment/qos-guard", "--replicas=2")
        c.kubectl("rollout", "status", "-n", RELEASE_NAMESPACE, "deployment/qos-guard", "--timeout=120s")
