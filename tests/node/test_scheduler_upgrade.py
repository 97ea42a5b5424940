"""``helm upgrade`` of the chart's second scheduler during a burst, on the real node: never two active schedulers.

The scheduler Deployment runs in cluster as the chart renders it (kube-scheduler from the image
hack/node-images.sh builds of the tier's binary, the extender from the repository's Dockerfile), reaching the API
server through the `kubernetes` Service's ClusterIP as in-cluster clients do: this node has no kube-proxy, so the
test puts in the one rule kube-proxy would (a DNAT of the ClusterIP to the API server's loopback address).

While Pods with ``spec.schedulerName: qos-guard-numa`` are created every 0.4 s, a second ``helm upgrade`` changes a
scheduler value (a new Pod template): the Deployment starts the new Pod beside the old one (maxSurge 1,
maxUnavailable 0), kubelet stops the old one, the new one takes the Lease. From the API:

- the Lease's holder goes old -> new exactly once (sampled every 0.1 s; ``leaseTransitions`` +1);
- every burst Pod is bound once, by the extender of one of the two scheduler Pods (their logs: the chart's
  extender makes the Binding), and its ``Scheduled`` Event's ``reportingInstance`` names that Pod; every bind
  of the old one is before the new one's ``acquireTime``, every bind of the new one after it;
- both bound some of the burst (it spans the rollout), and the new Pod is the one left, holding the Lease.

With leader election off in the chart, the new Pod would bind as soon as it started, while the old one still
ran: the Lease would have no holder (the first assertion fails) and binds of the new Pod would fall before the
old one's last (the second).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests import waiting
from tests.binaries import binary, kube_version
from tests.e2e.conftest import CHART, KUBERNETES_SERVICE_IP, RELEASE_NAMESPACE, Cluster
from tests.e2e.test_extender import Api
from tests.e2e.test_scheduler_rollout import ACQUIRED, ATTEMPTING, klog_time
from tests.node.conftest import Release, helm_upgrade_release, report
from tests.node.node import BRIDGE, NODE_NAME, Node

pytestmark = [pytest.mark.node, pytest.mark.timeout(600)]

SCHEDULER = "qos-guard-numa"  # the chart's scheduler.name: the profile and its Lease
DEPLOYMENT = "qos-guard-scheduler"
LABEL = "app.kubernetes.io/component=scheduler"
NAMESPACE = "node-scheduler-upgrade"
PAUSE = "localhost/qos-guard/pause:1"  # PID 1 sleeps: many Pods cost the node almost nothing
NRT_CRD = CHART / "files" / "topology.node.k8s.io_noderesourcetopologies.yaml"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{RELEASE_NAMESPACE}/leases/{SCHEDULER}"
EVERY, MAX_PODS = 0.4, 80  # kubelet's maxPods is 110; the release's own Pods and the two schedulers fit beside


def helm(c: Cluster, *sets: str) -> None:
    """``helm upgrade --reuse-values --wait`` of the release with ``--set`` values."""
    helm_upgrade_release(c, sets, LABEL, timeout="3m")


def iptables(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["iptables", "-t", "nat", *args], capture_output=True, text=True, timeout=30)


@contextlib.contextmanager
def kubernetes_service(c: Cluster) -> Iterator[None]:
    """The one rule kube-proxy would make for the `kubernetes` Service: its ClusterIP:443, from the Pods' bridge,
    to the API server on the host's loopback (route_localnet lets the bridge's packets reach 127.0.0.1)."""
    api = urlsplit(c.url)
    rule = ["PREROUTING", "-i", BRIDGE, "-d", f"{KUBERNETES_SERVICE_IP}/32", "-p", "tcp", "--dport", "443",
            "-j", "DNAT", "--to-destination", f"{api.hostname}:{api.port}"]
    localnet = Path(f"/proc/sys/net/ipv4/conf/{BRIDGE}/route_localnet")
    before = localnet.read_text().strip()
    proc = iptables("-A", *rule)
    assert proc.returncode == 0, f"iptables -t nat -A {' '.join(rule)}: {proc.stderr}"
    try:
        localnet.write_text("1")
        yield
    finally:
        iptables("-D", *rule)
        localnet.write_text(before)


def scheduler_pods(c: Cluster) -> list[dict[str, Any]]:
    return [p for p in c.get("pods", "-n", RELEASE_NAMESPACE, "-l", LABEL)["items"]
            if not p["metadata"].get("deletionTimestamp")]


def ready_pod(c: Cluster) -> str:
    """The one scheduler Pod, Ready."""
    (only,) = [p for p in scheduler_pods(c) if any(
        x["type"] == "Ready" and x["status"] == "True" for x in p["status"].get("conditions", []))]
    return str(only["metadata"]["name"])


def micro(stamp: str) -> float:
    """Epoch seconds of a MicroTime (``2026-12-02T04:30:01.123456Z``)."""
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC).timestamp()


@dataclass
class LeaseWatch:
    """The Lease sampled every 0.1 s: (time, holderIdentity) at each change of holder."""

    api: Api
    changes: list[tuple[float, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.wait(0.1):
            lease = self.api("GET", LEASE, ok=(200, 404)) or {}
            holder = str(lease.get("spec", {}).get("holderIdentity") or "")
            if not self.changes or holder != self.changes[-1][1]:
                self.changes.append((time.time(), holder))

    def holders(self) -> list[str]:
        """The holders in turn (a released Lease's empty holder between two is no holder)."""
        out: list[str] = []
        for _, holder in self.changes:
            if holder and (not out or out[-1] != holder):
                out.append(holder)
        return out


@pytest.fixture(scope="module")
def scheduler(node: Node, release: Release) -> Iterator[Api]:
    """The chart's scheduler on the node, its image built from the tier's kube-scheduler; off again afterwards."""
    c = node.cluster
    assert node.images["kube-scheduler"] == f"localhost/qos-guard/kube-scheduler:{kube_version()}"
    created_crd = c.kubectl("get", "crd", "noderesourcetopologies.topology.node.k8s.io").returncode != 0
    if created_crd:  # the extender lists NodeResourceTopology objects; none exist for this node (it keeps it)
        c.kubectl("apply", "-f", str(NRT_CRD), check=True)
        c.kubectl("wait", "--for", "condition=Established", "crd/noderesourcetopologies.topology.node.k8s.io",
                  "--timeout", "30s", check=True)
    api = Api(c)
    with kubernetes_service(c):
        started = time.monotonic()
        try:
            # The chart's default tag is the control plane's version: the image is found only if it matches.
            helm(c, "scheduler.enabled=true", "scheduler.image.registry=localhost/qos-guard",
                 "scheduler.image.pullPolicy=Never")
            name = ready_pod(c)
            waiting.eventually(f"{name} holding the Lease {SCHEDULER}", lambda: str(
                (api("GET", LEASE, ok=(200, 404)) or {}).get("spec", {}).get("holderIdentity") or "").startswith(
                f"{name}_"), within=60, every=0.5, seen=lambda: api("GET", LEASE, ok=(200, 404)))
            report(f"scheduler upgrade: the chart's scheduler Ready and leading in {time.monotonic() - started:.0f} s")
            yield api
        finally:
            c.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", "--timeout=120s")
            helm(c, "scheduler.enabled=false")
            c.kubectl("delete", "lease", SCHEDULER, "-n", RELEASE_NAMESPACE, "--ignore-not-found")
            if created_crd:
                c.kubectl("delete", "-f", str(NRT_CRD), "--ignore-not-found", "--wait=true", "--timeout=60s")


def burst_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"burst": "upgrade"}},
            "spec": {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 1,
                     "automountServiceAccountToken": False,
                     "containers": [{"name": "app", "image": PAUSE, "imagePullPolicy": "Never",
                                     "resources": {"requests": {"cpu": "5m", "memory": "8Mi"}}}]}}


def scheduled(api: Api) -> dict[str, list[dict[str, Any]]]:
    """Burst Pod -> its ``Scheduled`` Events (events.k8s.io/v1: eventTime, reportingInstance)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for e in api("GET", f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events")["items"]:
        if e.get("reason") == "Scheduled":
            out.setdefault(e["regarding"]["name"], []).append(e)
    return out


def extender_binds(text: str) -> dict[str, float]:
    """Burst Pod -> when this Pod's extender bound it (``kubectl logs --timestamps``: the runtime's time of the
    line it logs after its Binding is created; the chart's extender makes the bind, kube-scheduler records the
    ``Scheduled`` Event after it returns, an Event a scheduler stopped in between never sends)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        stamp, _, message = line.partition(" ")
        if not message.startswith("{"):
            continue
        said = json.loads(message)
        if said.get("verb") == "bind" and not said.get("error") and said["pod"].startswith(f"{NAMESPACE}/"):
            whole, _, fraction = stamp.rstrip("Z").partition(".")
            out[said["pod"].split("/", 1)[1]] = micro(f"{whole}.{fraction[:6] or '0'}Z")
    return out


def bound(api: Api) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"].get("nodeName", "")
            for p in api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]}


def test_an_upgrade_during_a_burst_never_runs_two_active_schedulers(node: Node, scheduler: Api,
                                                                   tmp_path: Path) -> None:
    c, api = node.cluster, scheduler
    c.namespace(NAMESPACE)
    old = ready_pod(c)
    before = api("GET", LEASE)["spec"]
    assert before["holderIdentity"].startswith(f"{old}_"), before
    watch = LeaseWatch(api)
    sampler = threading.Thread(target=watch.run, daemon=True)
    sampler.start()
    names: list[str] = []
    stop = threading.Event()

    def create() -> None:
        while not stop.is_set() and len(names) < MAX_PODS:
            name = f"burst-{len(names)}"
            api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", burst_pod(name))
            names.append(name)
            stop.wait(EVERY)

    creator = threading.Thread(target=create, daemon=True)
    follower: subprocess.Popen[bytes] | None = None
    started = time.monotonic()
    creator.start()
    try:
        waiting.eventually("5 burst Pods bound by the old scheduler", lambda: sum(
            bool(n) for n in bound(api).values()) >= 5, within=60, every=0.2, seen=lambda: bound(api))
        # The old Pod's extender log, followed: kubelet removes it with the Pod.
        old_log = tmp_path / "old-extender.log"
        out = old_log.open("wb")
        follower = subprocess.Popen([binary("kubectl"), "--kubeconfig", str(c.kubeconfig), "logs", "-f",
                                     "--timestamps", "-n", RELEASE_NAMESPACE, old,
                                     "-c", "extender"], stdout=out, stderr=subprocess.STDOUT, env=c.env)
        time.sleep(1)
        upgrade_at = time.time()
        # A changed scheduler value changes the Pod template (checksum/config): the Deployment rolls.
        helm(c, "scheduler.extender.httpTimeout=6s")
        rolled = time.time()
        new = ready_pod(c)
        assert new != old
        waiting.eventually("5 burst Pods created after the rollout bound", lambda: len(
            [e for events in scheduled(api).values() for e in events
             if micro(e["eventTime"]) > rolled]) >= 5, within=60, every=0.2)
        stop.set()
        creator.join(30)
        waiting.eventually(f"all {len(names)} burst Pods bound", lambda: all(
            bound(api).get(n) for n in names), within=90, every=0.5, seen=lambda: {
            n: v for n, v in bound(api).items() if not v})
        time.sleep(1)  # a last sample of the Lease
    finally:
        stop.set()
        watch.stop.set()
        creator.join(30)
        sampler.join(5)
        if follower is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                follower.wait(30)  # its stream ends when the old Pod's extender exits
            follower.kill()
            follower.wait()
            out.close()
    took = time.monotonic() - started

    after = api("GET", LEASE)["spec"]
    holders = watch.holders()
    assert [h.split("_")[0] for h in holders] == [old, new], watch.changes  # old -> new once, never back
    assert after["holderIdentity"] == holders[-1]
    assert after.get("leaseTransitions", 0) == before.get("leaseTransitions", 0) + 1, (before, after)
    took_over = micro(after["acquireTime"])
    assert upgrade_at < took_over < time.time()

    placed = bound(api)
    assert set(placed) == set(names) and all(placed[n] == NODE_NAME for n in names), placed
    # Who bound each Pod: the extender of one of the two scheduler Pods (its log), never both, and the
    # Scheduled Event, where one was recorded, names the same Pod.
    by = {old: extender_binds(old_log.read_text()), new: extender_binds(c.kubectl(
        "logs", "--timestamps", "-n", RELEASE_NAMESPACE, new, "-c", "extender", check=True).stdout)}
    assert not set(by[old]) & set(by[new]), sorted(set(by[old]) & set(by[new]))
    assert set(by[old]) | set(by[new]) == set(names), sorted(set(names) - set(by[old]) - set(by[new]))
    events = scheduled(api)
    instances = {f"{SCHEDULER}-{old}": old, f"{SCHEDULER}-{new}": new}
    unrecorded = []
    for name in names:
        assert len(events.get(name, [])) <= 1, f"{name}: Scheduled Events {events.get(name)}"  # bound once
        if not events.get(name):
            unrecorded.append(name)
            continue
        (event,) = events[name]
        assert event["reportingController"] == SCHEDULER, event
        assert instances.get(event["reportingInstance"]) == (old if name in by[old] else new), (name, event)
    assert len(unrecorded) <= 2, f"no Scheduled Event for {unrecorded}"  # only a stopped scheduler's last
    assert by[old] and by[new], {k: len(v) for k, v in by.items()}
    assert max(by[old].values()) < took_over, "the old scheduler bound a Pod after the new one took the Lease"
    assert min(by[new].values()) >= took_over, "the new scheduler bound a Pod before it held the Lease"
    assert any(t > upgrade_at for t in by[old].values()), "the burst did not span the rollout's start"
    left = scheduler_pods(c)
    assert [p["metadata"]["name"] for p in left] == [new], [p["metadata"]["name"] for p in left]
    # Its log: a standby first (it asked for the Lease and waited), then leading once.
    log = c.kubectl("logs", "-n", RELEASE_NAMESPACE, new, "-c", "kube-scheduler", check=True).stdout.splitlines()
    # Either spelling of client-go's leader election (printf up to kube-scheduler 1.34, structured after).
    asked = [klog_time(line) for line in log if ATTEMPTING.search(line)]
    got = [klog_time(line) for line in log if ACQUIRED.search(line)]
    assert len(asked) == 1 and len(got) == 1 and asked[0] is not None and got[0] is not None, (asked, got)
    standby = got[0] - asked[0]
    assert standby > 0.5, f"the new scheduler led {standby:.2f} s after asking: it never waited as a standby"

    last_old = max(by[old].values())
    report(f"scheduler upgrade: {len(names)} Pods in a burst (one per {EVERY} s), helm upgrade "
           f"{rolled - upgrade_at:.1f} s; Lease {old.rsplit('-', 1)[-1]} -> {new.rsplit('-', 1)[-1]} "
           f"(leaseTransitions +1); old bound {len(by[old])}, its last {took_over - last_old:.2f} s before the new "
           f"took the Lease; new (a standby {standby:.1f} s) bound {len(by[new])}, its first "
           f"{min(by[new].values()) - took_over:+.2f} s after; "
           f"bound by both: 0; without a Scheduled Event: {len(unrecorded)}; test {took:.0f} s")
