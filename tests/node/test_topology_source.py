"""The agent as the node's topology source (``qos-guard agent --publish-topology``) on the real kubelet with two
(fake) NUMA nodes, and the Deployment loop of kubernetes/kubernetes#84869 it lets qos-guard stop.

The agent runs on the node as an operator's host process (root, the node's kubeconfig, the fake sysfs): its
NodeResourceTopology is compared with what the kubelet says (GetAllocatableResources, the Node's allocatable,
configz) and with what the readers make of it (``webhook/cluster/nrt.py`` for ``numa: auto``, the extender's
``read_nrt`` and fingerprint, the fit of ``webhook/core/numa.py``); its delay after an allocation change is
measured against kubelet's own PodResources ``List``. Then the article's Pod (Guaranteed, 1 CPU, the device
plugin's GPU; the only free exclusive CPU, 1, on NUMA 1) in a one-replica Deployment:

(a) GPU on NUMA 0, the default scheduler: kubelet fails each Pod with TopologyAffinityError and the ReplicaSet makes
    another (counted over ``LOOP_WINDOW`` seconds: 30, not the issue's 60, for CI's time; every one deleted after);
(b) the webhook with ``numa: auto`` reading the agent's NRT (``qos-guard serve`` on the node's shell, as
    tests/e2e/test_numa.py runs it: Pods here cannot reach the API server on loopback): refused at admission (the
    ReplicaSet's FailedCreate);
(c) through ``qos-guard extender`` (a second kube-scheduler, as tests/e2e/test_extender.py starts it), in a
    namespace that webhook does not judge: Pending with the extender's reason in FailedScheduling, none failed;
(d) the GPU moved to NUMA 1: that same Pod is scheduled, runs aligned, and the agent says so."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests import waiting
from tests.e2e.conftest import (
    Cluster,
    chart_identity,
    webhook_outside,
)
from tests.e2e.test_extender import scheduler, start_extender
from tests.e2e.test_numa import NUMA_AUTO, NUMA_LABEL
from tests.e2e.test_numa import RELEASE as NUMA_RELEASE
from tests.node.conftest import parse_cpus, pod, report
from tests.node.node import NODE_NAME, Node, fake_numa_wrapper, start_topology_agent
from tests.node.numa import GPU, device_plugin, fake_sysfs
from tests.node.test_placement import gpu_pod
from webhook.cluster.client import Lister
from webhook.cluster.nrt import read_topology
from webhook.cluster.watch import ApiTransport
from webhook.core.cpupinner import AGENT_SOURCE, CPU_MANAGER, Pinner, read_pinner
from webhook.core.numa import fit_node
from webhook.extender.fingerprint import ATTRIBUTE, fingerprint
from webhook.extender.reservations import BoundPod, pod_demands, read_nrt, reflected, signed_sets
from webhook.node.allocation import Allocatable
from webhook.node.kubelet import PodResourcesClient
from webhook.node.sysfs import NodeFacts
from webhook.node.topology_report import Owner, build_topology

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]

FAKE = {0: [0], 1: [1]}
CRD = Path(__file__).parents[2] / "charts" / "qos-guard" / "files" / "topology.node.k8s.io_noderesourcetopologies.yaml"
NRT = f"/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/{NODE_NAME}"
LOOP_WINDOW = 30  # seconds the default scheduler's loop is watched (the issue: 60; CI's budget is tight)
SCHEDULER = "qos-guard-numa"


@dataclass
class Setup:
    node: Node
    c: Cluster
    sys_root: Path
    agent: subprocess.Popen[bytes]
    metrics: str
    log: Path
    api: Lister

    def nrt(self) -> dict[str, Any] | None:
        status, body = self.api.send("GET", NRT, [], None, None)
        return body if status == 200 else None

    def agent_cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.agent.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def available(obj: dict[str, Any] | None, zone: str, resource: str) -> str | None:
    for z in (obj or {}).get("zones", []):
        if z["name"] == zone:
            for r in z["resources"]:
                if r["name"] == resource:
                    return str(r["available"])
    return None


def wait_for(what: str, check: Callable[[], Any], timeout: float, log: Path | None = None) -> Any:
    """``waiting.result`` polled every 0.2 s, showing the end of the agent's ``log`` when it fails."""
    return waiting.result(what, check, within=timeout, every=0.2,
                          seen=(lambda: f"agent log:\n{log.read_text()[-3000:]}") if log else None)


@pytest.fixture(scope="module")
def setup(node: Node) -> Iterator[Setup]:
    """The NRT CRD, the kubelet on two fake NUMA nodes (Memory Manager None, as tests/node/test_placement.py runs
    it there), and the agent publishing the node's NodeResourceTopology; all undone on exit."""
    c = node.cluster
    c.kubectl("apply", "-f", str(CRD), check=True)
    c.kubectl("wait", "--for=condition=Established", "crd/noderesourcetopologies.topology.node.k8s.io",
              "--timeout=60s", check=True)
    with contextlib.ExitStack() as stack:
        sys_root = stack.enter_context(fake_sysfs(node.folder / "fake-sys-nrt", FAKE))
        stack.callback(node.restart_kubelet)
        node.restart_kubelet({"memoryManagerPolicy": "None", "reservedMemory": None},
                             wrapper=fake_numa_wrapper(sys_root / "devices" / "system" / "node"))
        log = node.folder / "agent-nrt.log"
        stack.callback(c.kubectl, "delete", "--raw", NRT)
        agent, metrics = start_topology_agent(stack, node, sys_root, log)
        s = Setup(node, c, sys_root, agent, metrics, log, Lister(str(c.kubeconfig)))
        # One Pod that runs throughout (in the shared pool): NFD signs no empty List, so a node with no active Pod
        # has no fingerprint to compare.
        bystander = c.namespace("nrt-bystander")
        c.kubectl("apply", "-n", bystander, "-f", "-", stdin=pod("bystander", "100m"), check=True)
        stack.callback(c.kubectl, "delete", "namespace", bystander, "--wait=false")
        c.kubectl("wait", "-n", bystander, "--for=condition=Ready", "pod/bystander", "--timeout=120s", check=True)
        wait_for("the agent's NRT with the policy from configz",
                 lambda: any(a["name"] == "topologyManagerPolicy" for a in (s.nrt() or {}).get("attributes", [])),
                 60, log)
        yield s


def test_1_the_nrt_is_what_the_fit_expects(setup: Setup) -> None:
    s, c = setup, setup.c
    with device_plugin(c, s.node.folder, "gpu-0=0"):
        obj = wait_for("the GPU in the NRT", lambda: available(s.nrt(), "node-0", GPU) == "1" and s.nrt(), 10, s.log)
        node = c.get("node", NODE_NAME)
        with PodResourcesClient(s.node.pod_resources_socket) as kubelet:
            allocatable = kubelet.allocatable()
        # What numa: auto reads of it (webhook/cluster/nrt.py), against the kubelet's own answers.
        topo = read_topology(ApiTransport(str(c.kubeconfig))).topologies[NODE_NAME]
        assert (topo.policy, topo.scope) == ("single-numa-node", "container")  # kubelet's configz
        assert [z.numa for z in topo.zones] == sorted(FAKE)
        per_zone = {z.numa: {k: v // 1000 for k, v in z.allocatable.items()} for z in topo.zones}
        # CPU 0 is reserved (systemReserved 100m): CPU 1, on NUMA 1, is all the static CPU Manager hands out.
        assert sorted(allocatable.cpus) == [1]
        assert per_zone == {0: {GPU: 1}, 1: {"cpu": 1}}, obj["zones"]
        assert sum(z.get(GPU, 0) for z in per_zone.values()) == int(node["status"]["allocatable"][GPU])
        # NFD: no cpu where only a device is; the agent's zone attribute cpus says NUMA 0's one CPU (reserved) is
        # there, which numa: auto reads as its capacity (kubelet's CPU hints count it), none allocatable.
        assert [r["name"] for r in obj["zones"][0]["resources"]] == [GPU], obj["zones"]
        assert [z.capacity.get("cpu", 0) // 1000 for z in topo.zones] == [1, 1]
        # The fit: the article's Pod fits no NUMA node (single-numa-node refuses it), a CPU-only Pod fits NUMA 1.
        article, plain = pod_demands(gpu_pod("article")), pod_demands(pod("plain", "1"))
        assert article is not None and plain is not None
        refused, fits = fit_node(article, topo), fit_node(plain, topo)
        assert not refused.fits and fits.fits and fits.placed == {"app": 1}, (refused, fits)
        # The extender's reading: free now = available; the fingerprint counts List's Pods, as the extender counts
        # the Pods the API binds to the node.
        def signed() -> tuple[Any, list[Any]] | None:
            with PodResourcesClient(s.node.pod_resources_socket) as kubelet:
                pods = kubelet.list()
            st = read_nrt(s.nrt() or {})
            want = fingerprint((p.namespace, p.name) for p in pods) if pods else None  # NFD signs no empty List
            return (st, pods) if st is not None and st.fingerprint == want else None

        state, listed = wait_for("the NRT's fingerprint = that of kubelet's List", signed, 10, s.log)
        bound = bound_pods(c)
        assert listed and reflected(state, bound), (state.fingerprint, [b.key for b in bound])
        # Who pins: this kubelet runs the static CPU Manager and the node publishes no dra.cpu device (its
        # ResourceSlices, the test GPU driver's at most): cpuPinner cpu-manager, from both sources.
        pinner = wait_for("the agent's cpuPinner", lambda: read_pinner(s.nrt() or {}), 70, s.log)
        assert pinner == Pinner(CPU_MANAGER, AGENT_SOURCE), pinner
        owner = obj["metadata"]["ownerReferences"]
        assert owner == [{"apiVersion": "v1", "kind": "Node", "name": NODE_NAME, "uid": node["metadata"]["uid"]}]
        report(f"nrt 1: the agent's NRT: {json.dumps(obj['zones'])}; attributes "
               f"{json.dumps(obj['attributes'])}; owner Node uid {owner[0]['uid']}")
        report(f"nrt 1: numa: auto reads zones {per_zone} (policy {topo.policy}/{topo.scope}); the fit: article Pod "
               f"(1 CPU + 1 {GPU}) fits={refused.fits}, a 1-CPU Pod fits on NUMA {fits.placed['app']}; "
               f"fingerprint {state.fingerprint} = List's {len(listed)} Pods = the API's bound Pods")
    # The garbage collector deletes an object of this shape with its Node (kube-controller-manager runs here).
    c.kubectl("apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "Node", "metadata": {"name": "nrt-gc-probe"}},
              check=True)
    probe = c.get("node", "nrt-gc-probe")
    made = build_topology("nrt-gc-probe", NodeFacts({0: frozenset({0})}), Allocatable(frozenset({0})), [], None,
                          None, Owner("nrt-gc-probe", probe["metadata"]["uid"]))
    c.kubectl("apply", "-f", "-", stdin=made, check=True)
    c.kubectl("delete", "node", "nrt-gc-probe", "--wait=true", check=True)
    started = time.monotonic()
    wait_for("the probe's NRT deleted with its Node", lambda: c.kubectl(
        "get", "noderesourcetopologies.topology.node.k8s.io", "nrt-gc-probe").returncode != 0, 60)
    report(f"nrt 1: an NRT owned by a deleted Node was garbage-collected {time.monotonic() - started:.1f} s after")


@contextlib.contextmanager
def numa_webhook(c: Cluster, folder: Path) -> Iterator[Path]:
    """``qos-guard serve`` with ``numa: auto`` on the node's shell, as tests/e2e/test_numa.py runs it (the chart's
    ServiceAccount and RBAC for it, a token for them), judging the namespaces labelled ``NUMA_LABEL``; its log."""
    kubeconfig = chart_identity(c, folder, NUMA_RELEASE, *NUMA_AUTO)
    with webhook_outside(c, folder, NUMA_RELEASE, NUMA_LABEL, {"policy": {"numa": "auto"}}, *NUMA_AUTO,
                         kubeconfig=kubeconfig):
        yield folder / "serve" / "server.log"


def measure(s: Setup, in_list: Callable[[list[Any]], bool], in_nrt: Callable[[dict[str, Any] | None], bool],
            timeout: float = 90) -> tuple[float, float]:
    """When kubelet's List first showed the change, and when the NRT did (monotonic seconds)."""
    seen_list = seen_nrt = 0.0
    with PodResourcesClient(s.node.pod_resources_socket) as kubelet:

        def both() -> bool:
            nonlocal seen_list, seen_nrt
            if not seen_list and in_list(kubelet.list()):
                seen_list = time.monotonic()
            if not seen_nrt and in_nrt(s.nrt()):
                seen_nrt = time.monotonic()
            return bool(seen_list and seen_nrt)

        waiting.eventually("the change in kubelet's List and in the NRT", both, within=timeout, every=0.02,
                           seen=lambda: f"List at {seen_list}, NRT at {seen_nrt} (0: not yet): {s.nrt()}")
    return seen_list, seen_nrt


def test_2_the_nrt_follows_an_allocation_within_a_second(setup: Setup) -> None:
    s, c = setup, setup.c
    ns = c.namespace("nrt-delay")  # not opted in: nothing but kubelet decides

    def pinned(pods: list[Any]) -> bool:
        return any(p.namespace == ns and any(x.cpus == frozenset({1}) for x in p.containers) for p in pods)

    cpu_before, wall_before = s.agent_cpu_seconds(), time.monotonic()
    created = time.monotonic()
    c.kubectl("apply", "-n", ns, "-f", "-", stdin=pod("pinned", "1"), check=True)
    start_list, start_nrt = measure(s, pinned, lambda o: available(o, "node-1", "cpu") == "0")
    c.kubectl("delete", "pod", "pinned", "-n", ns, "--wait=false", check=True)
    deleted = time.monotonic()
    stop_list, stop_nrt = measure(s, lambda pods: not pinned(pods), lambda o: available(o, "node-1", "cpu") == "1")
    cpu = (s.agent_cpu_seconds() - cpu_before) / (time.monotonic() - wall_before)
    c.kubectl("wait", "--for=delete", "pod/pinned", "-n", ns, "--timeout=60s")
    report(f"nrt 2: pinned Pod started: the NRT's node-1 cpu available 1 -> 0 {start_nrt - start_list:.2f} s after "
           f"kubelet's List showed CPU 1 allocated ({start_nrt - created:.1f} s after the create)")
    report(f"nrt 2: pinned Pod stopped: node-1 cpu available 0 -> 1 {stop_nrt - stop_list:.2f} s after List "
           f"released it ({stop_nrt - deleted:.1f} s after the delete); the agent's CPU meanwhile {cpu * 1000:.0f} "
           "ms a second (PodResources polled every 0.25 s, its judging loop every 2 s)")
    assert start_nrt - start_list < 1.0 and stop_nrt - stop_list < 1.0


def deployment(name: str, scheduler_name: str | None = None) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": name}}, "spec": gpu_pod(name)["spec"]}
    if scheduler_name:
        template["spec"]["schedulerName"] = scheduler_name
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": template}}


def pods_of(c: Cluster, ns: str) -> list[dict[str, Any]]:
    return list(c.get("pods", "-n", ns)["items"])


def event_lines(c: Cluster, ns: str, reason: str) -> list[str]:
    items = c.get("events", "-n", ns, "--field-selector", f"reason={reason}")["items"]
    return [f"{e['involvedObject']['kind']}/{e['involvedObject']['name']} {e['reason']}: {e['message']}"
            for e in items]


def clean(c: Cluster, ns: str) -> None:
    """The Deployment and every Pod of ``ns`` gone: the failed ones (hundreds after the loop; no container runs)
    removed from the API at once, the others stopped gracefully."""
    c.kubectl("delete", "deployment", "--all", "-n", ns, "--wait=false", check=True)
    wait_for("the ReplicaSets gone", lambda: not c.get("replicasets", "-n", ns)["items"], 60)
    c.kubectl("delete", "pods", "-n", ns, "--field-selector", "status.phase=Failed", "--force", "--grace-period=0",
              "--wait=false", check=True)
    c.kubectl("delete", "pods", "--all", "-n", ns, "--grace-period=2", "--wait=false", check=True)
    wait_for(f"every Pod of {ns} gone", lambda: not pods_of(c, ns), 120)


def test_3_the_deployment_loop_and_how_qos_guard_ends_it(setup: Setup, tmp_path: Path) -> None:
    s, c = setup, setup.c
    with contextlib.ExitStack() as stack:
        numa0 = contextlib.ExitStack()
        stack.enter_context(numa0)
        numa0.enter_context(device_plugin(c, s.node.folder, "gpu-0=0"))
        # (a) the default scheduler: the loop of kubernetes/kubernetes#84869.
        loop = c.namespace("nrt-loop")
        c.kubectl("apply", "-n", loop, "-f", "-", stdin=deployment("article"), check=True)
        time.sleep(LOOP_WINDOW)
        items = pods_of(c, loop)
        failed = [p for p in items if p["status"].get("reason") == "TopologyAffinityError"]
        assert len(failed) >= 2 and not [p for p in items if p["status"].get("phase") == "Running"]
        report(f"loop a: default scheduler, {GPU} on NUMA 0, free CPU on NUMA 1: the ReplicaSet left {len(failed)} "
               f"TopologyAffinityError Pods in {LOOP_WINDOW} s (kubectl get pods -n {loop}: {len(items)} Pods, "
               f"{len(failed)} Failed)")
        report(f"loop a: kubelet: {failed[0]['status'].get('message', '')}")
        # (b) the webhook with numa: auto, reading the agent's NRT (served from the node's shell: Pods here cannot
        # reach the API server, which listens on loopback, and the webhook reads it), turned on for the looping
        # namespace: the ReplicaSet's next Pods are refused at admission (FailedCreate) and the loop stops.
        started = time.monotonic()
        log = stack.enter_context(numa_webhook(c, tmp_path / "numa-webhook"))
        c.kubectl("label", "namespace", loop, "qos-guard.io/mode=enforce", f"{NUMA_LABEL}=true", "--overwrite",
                  check=True)
        tried: list[str] = []

        def refused_at_apply() -> subprocess.CompletedProcess[str] | None:
            # --dry-run=server: admission runs (the webhooks too), nothing is stored.
            proc = c.kubectl("apply", "--dry-run=server", "-n", loop, "-f", "-", stdin=deployment("article-new"))
            tried[:] = [proc.stdout + proc.stderr]
            return proc if "denied the request" in proc.stderr else None

        try:
            applied = wait_for("a new Deployment refused", refused_at_apply, 60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its last answer: {tried}; the webhook's log:\n"
                                 f"{log.read_text()[-3000:]}") from None
        refusal = wait_for("the ReplicaSet's FailedCreate", lambda: [
            e for e in event_lines(c, loop, "FailedCreate") if "numa-unfit" in e], 60)
        counted = len(pods_of(c, loop))
        time.sleep(5)
        after = pods_of(c, loop)
        assert len(after) == counted and all(p["status"].get("phase") == "Failed" for p in after), (counted, len(after))
        report(f"loop b: numa: auto on the agent's NRT (refusing {time.monotonic() - started:.0f} s after the webhook "
               f"started): no new Pod in 5 s ({len(after)}, all Failed, left by the loop); {refusal[0][:700]}")
        report(f"loop b: $ kubectl apply -n {loop} (a new Deployment): {applied.stderr.strip()[:700]}")
        # With the loop stopped, the failed Pods stay bound to the node; the NRT signs the Pods of kubelet's List
        # (from v1.34 the active ones only, on v1.33 the failed ones too), and the extender's count of the Pods
        # bound there is one of those two sets: their fingerprints agree.
        agree = wait_for("the NRT's fingerprint = the extender's", lambda: (lambda st, b: (st, b) if st and
                         reflected(st, b) else None)(read_nrt(s.nrt() or {}), bound_pods(c)), 10, s.log)
        bound = agree[1]
        signed = next(pods for pods in signed_sets(agree[0], bound)
                      if fingerprint(p.key for p in pods) == agree[0].fingerprint)
        report(f"loop b: the NRT's {ATTRIBUTE} equals the extender's count of the {len(signed)} Pods kubelet lists "
               f"({sum(not b.terminal for b in signed)} active) of the {len(bound)} bound to the node")
        clean(c, loop)
        # (c) through the extender; the webhook only warns.
        warn = c.namespace("nrt-extender", "warn")
        extender = start_extender(c, tmp_path / "extender")
        stack.callback(extender.stop)
        stack.enter_context(scheduler(c, tmp_path / "scheduler", SCHEDULER, extender))
        c.kubectl("apply", "-n", warn, "-f", "-", stdin=deployment("article", SCHEDULER), check=True)
        reason = wait_for("FailedScheduling with the extender's reason", lambda: [
            e for e in event_lines(c, warn, "FailedScheduling") if "qos-guard" in e], 60)
        time.sleep(10)
        items = pods_of(c, warn)
        assert len(items) == 1 and items[0]["status"].get("phase") == "Pending", items
        assert not items[0]["spec"].get("nodeName")
        report(f"loop c: through the extender: 1 Pod Pending, 0 failed; {reason[0][:700]}")
        pending = items[0]["metadata"]["name"]
        # (d) the GPU on NUMA 1: the same Pod is placed, kubelet aligns it, the agent says so.
        numa0.close()
        stack.enter_context(device_plugin(c, s.node.folder, "gpu-1=1"))
        # kube-scheduler keeps a Pod an extender found unresolvable in its unschedulable queue (up to 5 min, its
        # podMaxInUnschedulablePodsDuration) even after the Node changes; if it is still there after 20 s it is
        # deleted and the ReplicaSet's next Pod is placed at once.
        waited = time.monotonic()
        requeued = "the same Pod"
        try:
            running = wait_for("the Pending Pod running", lambda: [
                p for p in pods_of(c, warn) if p["status"].get("phase") == "Running"], 20)
        except AssertionError:
            c.kubectl("delete", "pod", pending, "-n", warn, "--wait=false", check=True)
            requeued = f"{pending} still Pending after 20 s, deleted; the ReplicaSet's next Pod"
            running = wait_for("the ReplicaSet's next Pod running", lambda: [
                p for p in pods_of(c, warn) if p["status"].get("phase") == "Running"], 90)
        pending = running[0]["metadata"]["name"]
        requeued += f" Running {time.monotonic() - waited:.0f} s after the move"
        aligned = wait_for("the agent's aligned series", lambda: [
            line for line in requests.get(s.metrics, timeout=5).text.splitlines()
            if line.startswith("qos_guard_container_numa_aligned") and pending in line
            and line.endswith(" 1.0")], 30, s.log)
        obj = s.nrt()
        assert available(obj, "node-1", GPU) == "0" and available(obj, "node-1", "cpu") == "0"
        report(f"loop d: {GPU} moved to NUMA 1: {requeued}, {warn}/{pending} scheduled through the extender; "
               f"agent: {aligned[0]}")
        uid = running[0]["metadata"]["uid"]
        clean(c, warn)
        # kubelet releases the Pod's CPU 1 in two checkpoint writes (staticPolicy.RemoveContainer: the assignment
        # deleted, then the shared pool widened); a restart between them (test 4's) leaves a checkpoint kubelet
        # refuses to start with ("current set of available CPUs ... doesn't match"): wait for both.
        wait_for("kubelet's CPU Manager checkpoint with the Pod's CPU back in the shared pool", lambda: (lambda st: (
            uid not in st.get("entries", {}) and 1 in parse_cpus(st["defaultCpuSet"])))(s.node.cpu_manager_state()),
            60)


def test_4_kubelet_restarted_with_another_policy(setup: Setup) -> None:
    """The agent reads kubelet's configz again when kubelet restarts (its PodResources socket is a new file): the
    NRT says the new policy within seconds of the new kubelet's Node being Ready, never the old one afterwards;
    then back to single-numa-node. Timed from the restart's return (Node Ready, socket there)."""
    s = setup

    def policy() -> str | None:
        for a in (s.nrt() or {}).get("attributes", []):
            if a["name"] == "topologyManagerPolicy":
                return str(a["value"])
        return None

    wrapper = fake_numa_wrapper(s.sys_root / "devices" / "system" / "node")
    took: dict[str, float] = {}
    try:
        for name in ("best-effort", "single-numa-node"):
            s.node.restart_kubelet({"memoryManagerPolicy": "None", "reservedMemory": None,
                                    "topologyManagerPolicy": name}, wrapper=wrapper)
            def says(n: str = name) -> bool:
                return policy() == n

            took[name] = waiting.eventually(f"the NRT saying {name}", says, 60, 0.2,
                                            seen=lambda: s.log.read_text()[-2000:])
    finally:
        s.node.restart_kubelet({"memoryManagerPolicy": "None", "reservedMemory": None}, wrapper=wrapper)
    assert "kubelet restarted" in s.log.read_text()
    report("kubelet restarted with another Topology Manager policy: the NRT said best-effort "
           f"{took['best-effort']:.1f} s after the new kubelet was Ready, single-numa-node again "
           f"{took['single-numa-node']:.1f} s after the next restart")


def bound_pods(c: Cluster) -> list[BoundPod]:
    """The Pods the API binds to the node, as the extender sees them."""
    return [BoundPod(p["metadata"]["namespace"], p["metadata"]["name"], NODE_NAME, 0.0,
                     terminal=p["status"].get("phase") in ("Succeeded", "Failed"))
            for p in c.get("pods", "--all-namespaces", "--field-selector", f"spec.nodeName={NODE_NAME}")["items"]]
