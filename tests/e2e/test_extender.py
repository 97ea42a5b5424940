"""``qos-guard extender`` with the real kube-scheduler (the tier's release, built by hack/build-tools.sh) over the
real API server: Node objects with no kubelet (status patched with capacity, allocatable and a Ready condition; the
``node.kubernetes.io/not-ready`` taint admission adds removed) and NodeResourceTopology objects (the CRD the chart
vendors).

- Pods with ``schedulerName: qos-guard-numa`` are bound only to nodes where they fit one NUMA node; a Pod refused
  everywhere gets ``FailedScheduling`` with the extender's reason per node.
- A burst of Pods of the shapes the topology differential generates (tests/fidelity/topology_grammar.py) over 50
  nodes of its machines, scheduled once by a default kube-scheduler and once through the extender: how many were
  bound where kubelet's single-numa-node policy would fail them (the fit model, the same one held to kubelet's
  own code by tests/fidelity/test_topology.py, replays each node's Pods in the order they were bound, with the
  tier's minor's semantics: those the extender judges with).
- The extender stopped: what ``ignorable`` decides.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests import waiting
from tests.binaries import binary, kube_version
from tests.builders import nrt
from tests.e2e.conftest import CHART, TOKEN, Cluster, stop_process, wait_until_ready
from tests.fidelity import topology_grammar as grammar
from tests.serving import free_port
from webhook.core.kubeversion import DEFAULT, Semantics, parse_minor, semantics
from webhook.core.numa import fit_node
from webhook.extender.fingerprint import ATTRIBUTE, fingerprint
from webhook.extender.reservations import minus, pod_demands, read_nrt
from webhook.extender.scorer import usage
from webhook.serving.certs import write_bundle

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NAMESPACE = "e2e-extender"
POOL = "e2e.qos-guard.io/extender-pool"
SCHEDULER = "qos-guard-numa"
GPU = "example.com/gpu"
GIB, MIB = 1 << 30, 1 << 20
TAINT = {"key": POOL, "value": "true", "effect": "NoSchedule"}
TOLERATION = {"key": POOL, "operator": "Exists", "effect": "NoSchedule"}


class Api:
    """The API server with the admin token (kubectl per object is too slow for 50 nodes and 400 Pods)."""

    def __init__(self, cluster: Cluster) -> None:
        config = yaml.safe_load(cluster.kubeconfig.read_text())
        self.url = config["clusters"][0]["cluster"]["server"]
        self.session = requests.Session()
        # Per request: REQUESTS_CA_BUNDLE in the environment would override a session's own.
        self.ca = config["clusters"][0]["cluster"]["certificate-authority"]
        self.session.headers["Authorization"] = f"Bearer {TOKEN}"

    def __call__(self, method: str, path: str, body: Any = None, patch: bool = False,
                 ok: tuple[int, ...] = (200, 201), **params: str) -> Any:
        headers = {"Content-Type": "application/merge-patch+json" if patch else "application/json"}
        answer = self.session.request(method, self.url + path, data=None if body is None else json.dumps(body),
                                      headers=headers, params=params, timeout=30, verify=self.ca)
        assert answer.status_code in ok, f"{method} {path}: {answer.status_code} {answer.text[:500]}"
        return answer.json() if answer.content else None


def add_node(api: Api, name: str, zones: list[dict[str, int]], pool: str, scope: str = "container") -> None:
    """A Node without a kubelet, Ready, with the zones' sums as its capacity, and its NRT."""
    total: dict[str, int] = {"pods": 110}
    for z in zones:
        for k, v in z.items():
            total[k] = total.get(k, 0) + v
    api("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {POOL: pool, "kubernetes.io/hostname": name}}})
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    amounts = {k: str(v) for k, v in total.items()}
    api("PATCH", f"/api/v1/nodes/{name}/status", {"status": {
        "capacity": amounts, "allocatable": amounts,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e: no kubelet",
                        "lastHeartbeatTime": now, "lastTransitionTime": now}]}}, patch=True)
    # Admission's node.kubernetes.io/not-ready taint off; this module's own on, so that no other test's Pod lands
    # on these nodes while a scheduler runs here.
    api("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": [TAINT]}}, patch=True)
    api("POST", "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies", nrt(name, zones, scope=scope))


def gpu_pod(name: str, cpu: int, scheduler: str = SCHEDULER, pool: str = "small") -> dict[str, Any]:
    limits = {"cpu": str(cpu), "memory": "1Gi", GPU: "1"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"schedulerName": scheduler, "nodeSelector": {POOL: pool}, "tolerations": [TOLERATION],
                     "containers": [{"name": "app", "image": "registry.invalid/app:1",
                                     "resources": {"limits": limits, "requests": dict(limits)}}]}}


@dataclass
class Extender:
    proc: subprocess.Popen[bytes]
    url: str
    ca: Path
    log: Path
    pki: Any = None

    def stop(self) -> None:
        stop_process(self.proc)


def score(extender: Extender, pod: dict[str, Any], node: str) -> int:
    """What the extender's /prioritize gives ``pod`` on ``node``: 0 where it does not fit or the node is unknown. (Not
    /filter: a Pod it keeps is held as a reservation, and would take the zone the test's next Pod is to get.)"""
    r = requests.post(extender.url + "/prioritize", json={"Pod": pod, "NodeNames": [node]},
                      verify=str(extender.ca), timeout=5)
    assert r.status_code == 200, r.text
    return int(r.json()[0]["Score"])


def start_extender(cluster: Cluster, folder: Path, port: int | None = None, timeout: str = "900",
                   pki: Any = None) -> Extender:
    """``qos-guard extender`` over TLS on loopback; ``pki``: an earlier one's (a restart the scheduler trusts)."""
    folder.mkdir(parents=True, exist_ok=True)
    pki = pki or write_bundle(folder / "pki", ["localhost", "127.0.0.1"], 2, keep_ca_key=False)
    port = port or free_port()
    log = folder / "extender.log"
    proc = subprocess.Popen([sys.executable, "-m", "webhook.cli", "extender", "--bind", f"127.0.0.1:{port}",
                             "--cert-file", str(pki.cert), "--key-file", str(pki.key), "--kubeconfig",
                             str(cluster.kubeconfig), "--reservation-timeout", timeout],
                            stdout=log.open("ab"), stderr=subprocess.STDOUT, env=cluster.env, cwd=folder)
    url = f"https://127.0.0.1:{port}"
    wait_until_ready("qos-guard extender", lambda: requests.get(url + "/healthz", verify=str(pki.ca),
                                                                timeout=2).ok, proc, log)
    # It judges with the API server's own minor, and says so before it serves.
    minor = parse_minor(kube_version())
    assert f"judging with Kubernetes {minor} semantics (the API server's /version: {kube_version()}" \
        in log.read_text(), log.read_text()[-2000:]
    return Extender(proc, url, Path(pki.ca), log, pki)


@contextlib.contextmanager
def scheduler(cluster: Cluster, folder: Path, name: str, extender: Extender | None,
              ignorable: bool = False, given: dict[str, Any] | None = None,
              kubeconfig: Path | None = None) -> Iterator[Path]:
    """A kube-scheduler with one profile, ``name``; with ``extender``, through it (filter, prioritize); or with
    the ``given`` configuration, as ``kubeconfig`` (default: the admin's)."""
    folder.mkdir(parents=True, exist_ok=True)
    kubeconfig = kubeconfig or cluster.kubeconfig
    config: dict[str, Any] = given or {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": name}],
    }
    if extender is not None and given is None:
        config["extenders"] = [{
            "urlPrefix": extender.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "bindVerb": "bind",
            "weight": 5, "nodeCacheCapable": True, "enableHTTPS": True, "httpTimeout": "5s", "ignorable": ignorable,
            "tlsConfig": {"caData": base64.b64encode(extender.ca.read_bytes()).decode()}}]
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    log = folder / "kube-scheduler.log"
    proc = subprocess.Popen([binary("kube-scheduler"), f"--config={path}", "--bind-address=127.0.0.1",
                             f"--secure-port={free_port()}", f"--cert-dir={folder / 'certs'}",
                             f"--authentication-kubeconfig={kubeconfig}",
                             f"--authorization-kubeconfig={kubeconfig}", "-v=2"],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        wait_until_ready(f"kube-scheduler {name}", lambda: "Starting Kubernetes Scheduler" in log.read_text()
                         or "Attempting to acquire" in log.read_text(), proc, log, timeout=60)
        yield log
    finally:
        stop_process(proc)


def pods(api: Api) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
    return items


def unschedulable(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in pod.get("status", {}).get("conditions", []))


def settled(api: Api, count: int) -> bool:
    items = pods(api)
    return len(items) == count and all(p["spec"].get("nodeName") or unschedulable(p) for p in items)


def events(api: Api, pod: str) -> list[str]:
    items = api("GET", f"/api/v1/namespaces/{NAMESPACE}/events",
                fieldSelector=f"involvedObject.name={pod}")["items"]
    return [f"{e['reason']}: {e['message']}" for e in items]


def bound_to(api: Api, pod: str) -> str | None:
    node: str | None = api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}")["spec"].get("nodeName")
    return node


def failed_scheduling(api: Api, pod: str) -> bool:
    return any(e.startswith("FailedScheduling") for e in events(api, pod))


def delete_pods(api: Api) -> None:
    api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods", gracePeriodSeconds="0")
    waiting.eventually("the Pods gone", lambda: not pods(api), within=60, every=0.5)


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[Api]:
    """The CRD, the namespace; afterwards the nodes and the CRD gone again (other modules of the session count
    nodes, and tests/e2e/test_numa.py starts without the CRD)."""
    crd = CHART / "files" / "topology.node.k8s.io_noderesourcetopologies.yaml"
    cluster.kubectl("apply", "-f", str(crd), check=True)
    cluster.kubectl("wait", "--for", "condition=Established", "crd/noderesourcetopologies.topology.node.k8s.io",
                    "--timeout", "30s", check=True)
    cluster.namespace(NAMESPACE)
    binary("kube-scheduler")
    client = Api(cluster)
    try:
        yield client
    finally:
        client("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods", gracePeriodSeconds="0")
        client("DELETE", "/api/v1/nodes", labelSelector=POOL)
        cluster.kubectl("delete", "-f", str(crd), "--wait=true", "--timeout=60s")


@pytest.fixture(scope="module")
def extender(cluster: Cluster, api: Api, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Extender]:
    running = start_extender(cluster, tmp_path_factory.mktemp("extender"))
    try:
        yield running
    finally:
        running.stop()


def test_bound_only_where_it_fits_and_refused_with_the_reason_per_node(
        cluster: Cluster, api: Api, extender: Extender, tmp_path: Path) -> None:
    # fits: the GPU's NUMA node has 4 CPUs. split-a, split-b: 8 CPUs and a GPU as a node, but the GPU's NUMA
    # node has 2 of them: the default scheduler's NodeResourcesFit sees room, kubelet would fail the Pod.
    add_node(api, "x-fits", [{"cpu": 4, "memory": 16 * GIB, GPU: 1}, {"cpu": 4, "memory": 16 * GIB}], "small")
    for name in ("x-split-a", "x-split-b"):
        add_node(api, name, [{"cpu": 2, "memory": 16 * GIB, GPU: 1}, {"cpu": 6, "memory": 16 * GIB}], "small")
    # The extender's watch has the last NRT (a node it does not know yet it keeps: unknown never refuses): a
    # 6-CPU Pod without a GPU, which only a split node's second NUMA node holds, scores there (/prioritize, which
    # holds no reservation).
    probe = gpu_pod("probe", 6)
    for amounts in probe["spec"]["containers"][0]["resources"].values():
        del amounts[GPU]

    waiting.eventually("the extender's watch: x-split-b's NRT", lambda: score(extender, probe, "x-split-b") > 0,
                       within=30)
    with scheduler(cluster, tmp_path / "scheduler", SCHEDULER, extender):
        api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", gpu_pod("placed", 4))
        waiting.eventually("the Pod bound", lambda: api(
            "GET", f"/api/v1/namespaces/{NAMESPACE}/pods/placed")["spec"].get("nodeName"), within=60)
        assert api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/placed")["spec"]["nodeName"] == "x-fits"
        # The second: x-fits's one GPU is taken (the scheduler's own filter), the split nodes the extender refuses.
        api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", gpu_pod("refused", 4))
        waiting.eventually("FailedScheduling", lambda: any(e.startswith("FailedScheduling") for e in
                                                           events(api, "refused")), within=60)
        said = next(e for e in events(api, "refused") if e.startswith("FailedScheduling"))
        print(f"\nkubectl get events (Pod refused on every node):\n  {said}")
        assert said.startswith("FailedScheduling: 0/3 nodes are available: "), said
        # Each part fits a NUMA node of a split node (4 CPUs the one without the GPU), never all on one.
        assert ("2 qos-guard: container \"app\" (spec.containers[0]) needs 4 CPUs and 1Gi memory and 1 "
                "example.com/gpu on one NUMA node; this node has each on some NUMA node, never all on one"
                ) in said, said
        assert "1 Insufficient example.com/gpu" in said, said
        assert not api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/refused")["spec"].get("nodeName")
    delete_pods(api)


def test_reservations_go_when_the_nrt_fingerprint_counts_the_pods(
        cluster: Cluster, api: Api, extender: Extender, tmp_path: Path) -> None:
    """Three zones of 4 CPUs and a GPU; the Pods bound take them one each, and the NRT, as an exporter republishes
    it, shows the zones of the Pods its pod-set fingerprint names used: those are counted once (by the NRT),
    the Pods bound after them held as reservations on top, never a Pod the NRT already counts."""
    zone = {"cpu": 4, "memory": 16 * GIB, GPU: 1}
    add_node(api, "f-node", [zone, zone, zone], "fingerprint")
    path = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/f-node"

    def publish(counted: list[str]) -> None:
        obj = api("GET", path)
        used = len(counted)
        for i, z in enumerate(obj["zones"]):
            for res in z["resources"]:
                res["available"] = "0" if i < used and res["name"] in ("cpu", GPU) else res["allocatable"]
        obj["attributes"] = [a for a in obj["attributes"] if a["name"] != ATTRIBUTE] + [
            {"name": ATTRIBUTE, "value": fingerprint((NAMESPACE, n) for n in counted)}]
        api("PUT", path, obj)

    def f_score() -> int:
        """A 4-CPU GPU Pod's score on f-node, as the extender sees it now."""
        return score(extender, gpu_pod("probe", 4, pool="fingerprint"), "f-node")

    def fits_now() -> bool:
        return f_score() > 0

    publish([])
    with scheduler(cluster, tmp_path / "scheduler", SCHEDULER, extender):
        for name in ("f-0", "f-1"):
            api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", gpu_pod(name, 4, pool="fingerprint"))
            waiting.eventually(f"{name} bound", functools.partial(bound_to, api, name), within=60)
        publish(["f-0"])  # the exporter saw f-0 only: f-0 counted by the NRT, f-1 held; the third zone free
        waiting.eventually("the extender's watch: the third zone free", fits_now, within=10,
                           seen=lambda: f"/prioritize scores f-node {f_score()}")
        api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", gpu_pod("f-2", 4, pool="fingerprint"))
        waiting.eventually("f-2 bound", functools.partial(bound_to, api, "f-2"), within=60)
        waiting.eventually("the extender: no room left on f-node", lambda: not fits_now(), within=10,
                           seen=lambda: f"/prioritize scores f-node {f_score()}")
        api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", gpu_pod("f-3", 4, pool="fingerprint"))
        waiting.eventually("f-3 refused", functools.partial(failed_scheduling, api, "f-3"), within=60)
        stale = next(e for e in events(api, "f-3") if e.startswith("FailedScheduling"))
        # Three GPUs are bound on a node of three: kube-scheduler's own NodeResourcesFit refuses f-3 before it asks
        # the extender (which said above that no zone is free); either refusal names the missing GPU.
        assert "none has that free now" in stale or "Insufficient example.com/gpu" in stale, stale
        # f-3 goes before f-2 does: kube-scheduler retries a refused Pod at once when a Pod bound to the node is
        # deleted, and f-3 would take the zone f-2 frees before the probe below could see it free (it did: the
        # extender's filter kept f-node for f-3 and its bind held the zone within 0.4 s of the deletion).
        api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/f-3", gracePeriodSeconds="0")
        api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/f-2", gracePeriodSeconds="0")
        publish(["f-0", "f-1"])  # both counted: the reservations go, the NRT alone says what is free
        waiting.eventually("the extender's watch: a zone free on f-node again", fits_now, within=10,
                           seen=lambda: f"/prioritize scores f-node {f_score()}")
        api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", gpu_pod("f-4", 4, pool="fingerprint"))
        waiting.eventually("f-4 bound", functools.partial(bound_to, api, "f-4"), within=120)
        waiting.eventually("the extender: no room left on f-node once f-4 is held", lambda: not fits_now(),
                           within=10, seen=lambda: f"/prioritize scores f-node {f_score()}")
        metrics = requests.get(extender.url + "/metrics", verify=str(extender.ca), timeout=5).text
        # Every NRT named a set of the Pods the extender saw there first: none was subtracted twice.
        assert "qos_guard_extender_fingerprint_unmatched_total 0" in metrics, metrics
        print(f"\nNRT fingerprint of f-0 only: f-2 bound beside f-1's reservation, f-3 {stale.split(': ', 1)[0]}; "
              f"of f-0 and f-1 with f-2 gone: a zone free, f-4 bound to {bound_to(api, 'f-4')}")
    delete_pods(api)


def machines(count: int, seed: int) -> list[tuple[dict[str, Any], list[dict[str, int]]]]:
    """The differential's machines, as the zones an exporter would publish (reserved CPUs from NUMA node 0)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        spec = grammar.machine(rng)
        zones = []
        for i, n in enumerate(spec["numa"]):
            huge2, huge1 = n["hugepages2Mi"] * 2 * MIB, n["hugepages1Gi"] * GIB
            zone = {"cpu": max(0, n["cpus"] - (spec["reservedCPUs"] if i == 0 else 0)),
                    "memory": n["memory"] - n["reservedMemory"] - huge2 - huge1}
            if huge2:
                zone["hugepages-2Mi"] = huge2
            if huge1:
                zone["hugepages-1Gi"] = huge1
            zone.update({k: v for k, v in n["devices"].items() if v})
            zones.append(zone)
        out.append((spec, zones))
    return out


def tier_semantics() -> Semantics:
    """The semantics of this tier's minor: what the extender judges with (it reads the API server's /version),
    and what kubelet of that minor would do with the Pods bound here."""
    return semantics(parse_minor(kube_version()))


def misplaced(api: Api, topologies: dict[str, Any], kube: Semantics | None = None) -> tuple[int, int, int]:
    """(Pods bound where single-numa-node would fail them, Pods bound, Pods left pending): each node's Pods in
    the order they were bound (resourceVersion), each fitted to what the ones before it left, as kubelet of
    ``kube``'s minor fits them (default: the tier's; e.g. a container asking 0 of a device plugin's resource
    constrains nothing below 1.36)."""
    kube = kube or tier_semantics()
    by_node: dict[str, list[dict[str, Any]]] = {}
    pending = 0
    for p in pods(api):
        node = p["spec"].get("nodeName")
        if node:
            by_node.setdefault(node, []).append(p)
        else:
            pending += 1
    wrong = bound = 0
    for node, placed in by_node.items():
        topo = topologies[node].free
        for p in sorted(placed, key=lambda p: int(p["metadata"]["resourceVersion"])):
            bound += 1
            wants = pod_demands(p, kube)
            if wants is None:
                continue
            fit = fit_node(wants, topo)
            if not fit.fits:
                wrong += 1
                continue
            topo = minus(topo, usage(wants, fit, topo))
    return wrong, bound, pending


def burst(api: Api, shapes: list[dict[str, Any]], scheduler_name: str, start: int = 0) -> int:
    """Create the Pods at once (threads of the API's session); how many the API server accepted."""
    from concurrent.futures import ThreadPoolExecutor

    def create(item: tuple[int, dict[str, Any]]) -> bool:
        i, shape = item
        body = json.loads(json.dumps(shape))
        body["metadata"] = {"name": f"b-{i:03d}", "namespace": NAMESPACE}
        body["spec"]["schedulerName"] = scheduler_name
        body["spec"]["nodeSelector"] = {POOL: "burst"}
        body["spec"]["tolerations"] = [TOLERATION]
        answer = api.session.post(f"{api.url}/api/v1/namespaces/{NAMESPACE}/pods", data=json.dumps(body),
                                  headers={"Content-Type": "application/json"}, timeout=30, verify=api.ca)
        return answer.status_code == 201

    with ThreadPoolExecutor(8) as pool:
        return sum(pool.map(create, enumerate(shapes, start)))


@pytest.mark.timeout(900)  # three profiles, each given up to 300 s to settle
def test_a_burst_default_scheduler_against_the_extender(cluster: Cluster, api: Api, extender: Extender,
                                                        tmp_path: Path) -> None:
    # The same extender with reservations held for a millisecond: every Pod judged against the NRT alone.
    forgetful = start_extender(cluster, tmp_path / "forgetful", timeout="0.001")
    nodes = machines(50, seed=32)
    topologies = {}
    rng = random.Random(3200)
    shapes = []
    for i, (spec, zones) in enumerate(nodes):
        name = f"burst-{i:02d}"
        scope = rng.choice(["container", "pod"])
        add_node(api, name, zones, "burst", scope)
        state = read_nrt(nrt(name, zones, scope=scope))
        assert state is not None
        topologies[name] = state
        shapes += [grammar.pod(rng, spec) for _ in range(8)]
    rng.shuffle(shapes)
    results = {}
    newest: dict[str, int] = {}  # misplaced, judged with the newest minor's semantics instead of the tier's
    runs = (("default-scheduler", None, "default"), (SCHEDULER, forgetful, "forgetful"),
            (SCHEDULER, extender, "extender"))
    for run, (profile, through, label) in enumerate(runs):
        if label == "extender":
            forgetful.stop()
        with scheduler(cluster, tmp_path / f"scheduler-{run}", profile, through):
            started = time.monotonic()
            created = burst(api, shapes, profile)
            waiting.eventually(f"every Pod bound or unschedulable ({profile})",
                               functools.partial(settled, api, created), within=300, every=1.0)
            took = time.monotonic() - started
            wrong, bound, pending = misplaced(api, topologies)
            results[label] = (wrong, created, bound, pending, took)
            if label == "extender" and tier_semantics() != DEFAULT:  # the referee's minor matters: shown
                newest[label] = misplaced(api, topologies, DEFAULT)[0]
        delete_pods(api)
    (d_wrong, n, d_bound, d_pending, d_took), (e_wrong, _, e_bound, e_pending, e_took) = \
        results["default"], results["extender"]
    f_wrong, _, f_bound, f_pending, f_took = results["forgetful"]
    print(f"\n{n} Pods of the differential's shapes over 50 nodes of its machines, created in a burst:")
    print(f"  default scheduler:                 {d_bound} bound, {d_pending} pending, {d_took:.1f} s")
    print(f"  extender without reservations:     {f_bound} bound, {f_pending} pending, {f_took:.1f} s, "
          f"{f_wrong} misplaced")
    print(f"  extender:                          {e_bound} bound, {e_pending} pending, {e_took:.1f} s")
    print(f"misplaced: default scheduler {d_wrong} of {n}, extender {e_wrong} of {n} (as kubelet "
          f"{tier_semantics()} fits them)")
    if newest:
        print(f"  the extender's placements as kubelet {DEFAULT} would fit them: {newest['extender']} misplaced "
              f"(not this cluster's rules: the extender judges with {tier_semantics()}'s)")
    calls = [json.loads(line) for line in extender.log.read_text().splitlines()
             if line.startswith("{") and '"verb": ' in line]

    def quantiles(values: list[float]) -> str:
        ordered = sorted(values)
        p99 = ordered[min(len(ordered) - 1, len(ordered) * 99 // 100)]
        return f"p50 {ordered[len(ordered) // 2]:.2f} ms, p99 {p99:.2f} ms"

    for verb in ("filter", "prioritize"):
        these = [c for c in calls if c["verb"] == verb and c["nodes"] >= 10]
        if these:
            judging = quantiles([c["durationMs"] - c["waitedMs"] for c in these])
            answered = quantiles([c["durationMs"] for c in these])
            print(f"extender {verb} over {len(these)} calls of 10-50 nodes: judging {judging}; answered in "
                  f"{answered} (waiting for the Pod before it to be seen bound included)")
    assert d_wrong > 0, "the burst should put some Pods where the default scheduler cannot see NUMA"
    assert f_wrong > 0, "judged against a stale NRT alone, a burst packs Pods onto the last free zones"
    assert e_wrong == 0
    assert e_bound > 0


def cpu_pod(name: str, cpu: int, pool: str) -> dict[str, Any]:
    """A Guaranteed Pod of exclusive CPUs and no device, for the second scheduler."""
    pod = gpu_pod(name, cpu, pool=pool)
    for c in pod["spec"]["containers"]:
        for part in ("limits", "requests"):
            c["resources"][part].pop(GPU)
    return pod


@pytest.mark.timeout(900)
def test_a_rollout_through_restarts_of_the_api_server_and_the_extender(cluster: Cluster, api: Api,
                                                                         tmp_path: Path) -> None:
    """500 Pods through the second scheduler over 260 nodes of two NUMA nodes (6 CPUs and a GPU each): every
    Pod takes 4 CPUs (half of them a GPU too), so a NUMA node holds one, and a node two, while kube-scheduler's
    own NodeResourcesFit sees room for a third (4 of its 12 CPUs free). The NRTs never change (no exporter):
    what the extender holds (the bindings it made, the bound Pods it lists again) is all that stops a third.
    Beside them 40 traps: six NUMA nodes of 3 CPUs each, larger than the others as kube-scheduler counts (18 CPUs,
    6 GPUs), where no NUMA node holds a Pod of 4 CPUs; a control run of the same profile without the extender
    first shows that kube-scheduler puts Pods there, so the count of Pods bound where they cannot fit is a check
    that can fail. The API server is restarted once a third are bound, the extender (same port, same
    certificate) once two thirds are: still no Pod bound where no NUMA node can hold it, no NUMA node given
    twice, every Pod bound."""
    assert cluster.restart_apiserver is not None
    zones = [{"cpu": 6, "memory": 16 * GIB, GPU: 1}, {"cpu": 6, "memory": 16 * GIB, GPU: 1}]
    trap_zones = [{"cpu": 3, "memory": 8 * GIB, GPU: 1} for _ in range(6)]
    names = [f"rs-{i:03d}" for i in range(260)]
    traps = [f"rs-trap-{i:02d}" for i in range(40)]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: add_node(api, n, trap_zones if n in traps else zones, "restart"), names + traps))
    state, trap = read_nrt(nrt(names[0], zones)), read_nrt(nrt(traps[0], trap_zones))
    assert state is not None and trap is not None
    topologies = {n: state for n in names} | {n: trap for n in traps}
    shapes = [gpu_pod(f"r-{i:03d}", 4, pool="restart") if i % 2 else cpu_pod(f"r-{i:03d}", 4, "restart")
              for i in range(500)]
    for shape in shapes[:2]:  # a trap holds no Pod of the rollout, even alone
        wants = pod_demands(shape, tier_semantics())
        assert wants is not None and not fit_node(wants, trap.free).fits and fit_node(wants, state.free).fits

    def bound_count() -> int:
        return sum(1 for p in pods(api) if p["spec"].get("nodeName"))

    def never() -> int:
        """Pods bound to a node where no NUMA node can hold them even alone (where single-numa-node fails them
        with TopologyAffinityError whatever else is there)."""
        out = 0
        for p in pods(api):
            node, wants = p["spec"].get("nodeName"), pod_demands(p, tier_semantics())
            out += bool(node) and (wants is None or not fit_node(wants, topologies[node].free).fits)
        return out

    # The control: the same profile, NUMA-blind (no extender), 60 Pods of the rollout's shapes.
    with scheduler(cluster, tmp_path / "control", SCHEDULER, None):
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda body: api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body), shapes[:60]))
        waiting.eventually("the control's Pods bound", lambda: bound_count() == 60, within=120, every=0.5)
    blind = never()
    delete_pods(api)
    first = start_extender(cluster, tmp_path / "extender")
    second: Extender | None = None
    marks: dict[str, float] = {}

    try:
        with scheduler(cluster, tmp_path / "scheduler", SCHEDULER, first):
            started = time.monotonic()

            def create(wave: list[dict[str, Any]]) -> None:
                with ThreadPoolExecutor(8) as pool:
                    list(pool.map(lambda body: api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body), wave))

            # In waves, so that each restart falls inside the rollout however fast the Pods bind (a rollout
            # created whole was once all bound before the poll saw two thirds): Pods are still to come, and
            # some pending, when the API server and the extender go.
            create(shapes[:250])
            waiting.eventually("a third of the Pods bound", lambda: bound_count() >= 170, within=300, every=0.5)
            marks["API server stopped at"] = bound_count()
            cluster.restart_apiserver(2.0)
            marks["API server back at"] = bound_count()
            create(shapes[250:400])
            waiting.eventually("two thirds of the Pods bound", lambda: bound_count() >= 340, within=300, every=0.5)
            first.stop()
            marks["extender stopped at"] = bound_count()
            time.sleep(2.0)
            second = start_extender(cluster, tmp_path / "extender-2", port=int(first.url.rsplit(":", 1)[1]),
                                    pki=first.pki)
            marks["extender back at"] = bound_count()
            create(shapes[400:])
            waiting.eventually("every Pod bound", lambda: bound_count() == len(shapes), within=400, every=1.0,
                               seen=lambda: f"{bound_count()} of {len(shapes)} bound")
            took = time.monotonic() - started
        wrong, bound, pending = misplaced(api, topologies)
        per_node: dict[str, int] = {}
        for p in pods(api):
            per_node[p["spec"]["nodeName"]] = per_node.get(p["spec"]["nodeName"], 0) + 1
        held = never()
        print(f"\ncontrol (no extender): {blind} of 60 Pods bound where no NUMA node can hold them")
        print(f"{len(shapes)} Pods through the second scheduler over {len(names)} nodes and {len(traps)} traps in "
              f"{took:.1f} s, bound when restarted: {marks}; {bound} bound, {pending} pending, {held} bound where "
              f"no NUMA node can hold them, {wrong} on a NUMA node already given (a node's most: "
              f"{max(per_node.values())})")
        assert blind > 0, "NUMA-blind, kube-scheduler should put some Pods on the traps (the check can fail)"
        # Both restarts fell inside the rollout, not after it.
        assert marks["API server back at"] < len(shapes) and marks["extender back at"] < len(shapes), marks
        assert held == 0
        assert wrong == 0
        assert bound == len(shapes) and pending == 0
        assert max(per_node.values()) <= 2
        assert not set(per_node) & set(traps)
    finally:
        first.stop()
        if second is not None:
            second.stop()
        delete_pods(api)
        api("DELETE", "/api/v1/nodes", labelSelector=f"{POOL}=restart")


def test_the_extender_stopped_ignorable_decides(cluster: Cluster, api: Api, tmp_path: Path) -> None:
    down = start_extender(cluster, tmp_path / "extender")
    down.stop()  # the scheduler is pointed at it, stopped: connection refused
    add_node(api, "y-fits", [{"cpu": 4, "memory": 16 * GIB, GPU: 1}], "down")
    seen: dict[bool, str] = {}
    for ignorable in (False, True):
        name = f"down-{str(ignorable).lower()}"
        with scheduler(cluster, tmp_path / name, SCHEDULER, down, ignorable=ignorable):
            api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", gpu_pod(name, 2, pool="down"))
            if ignorable:
                waiting.eventually("bound without the extender", functools.partial(bound_to, api, name), within=60)
                seen[ignorable] = "bound to " + api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")[
                    "spec"]["nodeName"]
            else:
                waiting.eventually("FailedScheduling", functools.partial(failed_scheduling, api, name), within=60)
                seen[ignorable] = next(e for e in events(api, name) if e.startswith("FailedScheduling"))
                assert not api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")["spec"].get("nodeName")
        delete_pods(api)
    print("\nthe extender stopped:")
    print(f"  ignorable: false -> Pending, {seen[False]}")
    print(f"  ignorable: true  -> {seen[True]} (placed NUMA-blind)")
    # kube-scheduler's HTTPExtender.send error, as the Pod's FailedScheduling Event carries it (pkg/scheduler/
    # extender.go): the filter call to this extender, refused; not any message that happens to name an extender.
    host = down.url.removeprefix("https://")
    assert f'Post "{down.url}/filter": dial tcp {host}: connect: connection refused' in seen[False], seen[False]
    assert seen[True] == "bound to y-fits"
