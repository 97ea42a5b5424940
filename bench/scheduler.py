"""``make bench``, the second scheduler: what the extender costs the real kube-scheduler v1.36.3, and what it holds
in memory at 5,000 nodes.

- Throughput, in one run, rounds alternating: ``PODS`` Pods created while no scheduler runs, then a
  kube-scheduler started with one profile, once without the extender (``default-scheduler``) and once through
  ``qos-guard extender`` (filter, prioritize, ``nodeCacheCapable``), over ``NODES`` Node objects with no kubelet
  and their NodeResourceTopology objects (tests/e2e/test_extender.py's harness). The Pods are Guaranteed, 1 or 2
  exclusive CPUs, a GPU in one of four, and all fit: the figure is Pods bound per second, from the first binding
  to the last, as a watch of the Pods sees them; each with the scheduler's API client at kube-scheduler's
  defaults (qps 50, burst 100: the chart leaves them so) and unthrottled (qps 5000).
- Memory: ``MEMORY_NODES`` Node objects (status with capacity, allocatable, Ready) and their NRTs of the topology
  differential's 60 machine shapes, and one bound Pod per ten nodes (the extender's reservations), in a real API
  server; ``qos-guard extender`` started against it, synced (a ``filter`` call for a Pod no NUMA node can hold
  refuses every node: all NRTs are listed), then the RSS, PSS and peak (VmHWM) of its processes (gunicorn's
  master and its one worker); then kube-scheduler, with the extender, over the same nodes: its own. Both against
  the chart's memory limits of the scheduler Pod's two containers (charts/qos-guard/values.yaml).

Results: docs/performance/scheduler.json and scheduler.md.

    .venv/bin/python -m bench.scheduler [--nodes 200] [--pods 1000] [--rounds 2] [--memory-nodes 5000] [--smoke]
"""

from __future__ import annotations

import argparse
import base64
import importlib
import json
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from tests.binaries import binary
from tests.e2e.conftest import CHART, control_plane
from tests.serving import memory_mib, process_tree

# Test code, not held to mypy --strict as bench is: imported by name (as bench/extender.py does).
e2e: Any = importlib.import_module("tests.e2e.test_extender")
grammar: Any = importlib.import_module("tests.fidelity.topology_grammar")

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "bench-scheduler"
GIB = 1 << 30
ZONE = {"cpu": 16, "memory": 64 * GIB, "example.com/gpu": 2}  # two per node: 32 CPUs, 4 GPUs


@dataclass
class Results:
    date: str = ""
    nodes: int = 0
    pods: int = 0
    rounds: int = 0
    rate: dict[str, list[float]] = field(default_factory=dict)  # profile -> Pods bound per second, per round
    from_start: dict[str, list[float]] = field(default_factory=dict)  # ... from the scheduler's start
    bound: dict[str, list[int]] = field(default_factory=dict)
    misplaced: dict[str, list[int]] = field(default_factory=dict)  # bound where no NUMA node could hold them
    memory_nodes: int = 0
    memory_pods: int = 0
    sync_seconds: float = 0.0  # from the extender's start to its first filter that refuses every node
    extender: dict[str, float] = field(default_factory=dict)  # rss, pss, peak (MiB), over its processes
    scheduler: dict[str, float] = field(default_factory=dict)
    limits: dict[str, str] = field(default_factory=dict)  # the chart's, per container


@dataclass(frozen=True)
class Settings:
    nodes: int = 1000
    pods: int = 2000
    rounds: int = 1
    memory_nodes: int = 5000


SMOKE = Settings(nodes=4, pods=12, rounds=1, memory_nodes=40)


def parallel(api: Any, calls: Iterable[tuple[str, str, Any]], threads: int = 8) -> None:
    """(method, path, body) through the API's session, ``threads`` at a time; every answer must be a success."""
    def one(call: tuple[str, str, Any]) -> None:
        method, path, body = call
        patch = method == "PATCH"
        api(method, path, body, patch=patch)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, calls))


def pod(i: int, profile: str, rng: random.Random) -> dict[str, Any]:
    limits = {"cpu": str(rng.choice((1, 2))), "memory": f"{rng.choice((1, 2))}Gi"}
    if i % 4 == 0:
        limits["example.com/gpu"] = "1"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"t-{i:05d}", "namespace": NAMESPACE},
            "spec": {"schedulerName": profile, "nodeSelector": {e2e.POOL: "throughput"},
                     "tolerations": [e2e.TOLERATION],
                     "containers": [{"name": "app", "image": "registry.invalid/app:1",
                                     "resources": {"limits": limits, "requests": dict(limits)}}]}}


class Binds:
    """A watch of the namespace's Pods (its own connection): when each was first seen with a ``spec.nodeName``.
    The API server ends it after ``within`` seconds; ``close`` only stops the counting (closing a response another
    thread reads from blocks on its TLS lock)."""

    def __init__(self, api: Any, within: float) -> None:
        self.times: dict[str, float] = {}
        self.stopped = threading.Event()
        listed = api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", limit="1")
        session = requests.Session()
        session.headers.update(api.session.headers)
        self.response = session.get(f"{api.url}/api/v1/namespaces/{NAMESPACE}/pods", stream=True,
                                    timeout=within + 30, verify=api.ca,
                                    params={"watch": "1", "timeoutSeconds": str(int(within) + 5),
                                            "resourceVersion": listed["metadata"]["resourceVersion"]})
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self.response.iter_lines():
                if self.stopped.is_set():
                    return
                if not line:
                    continue
                obj = json.loads(line).get("object", {})
                name = obj.get("metadata", {}).get("name")
                if name and obj.get("spec", {}).get("nodeName") and name not in self.times:
                    self.times[name] = time.monotonic()
        except (requests.RequestException, ValueError, AttributeError):
            return

    def close(self) -> None:
        self.stopped.set()


# The scheduler's API client: kube-scheduler's own defaults (what the chart's configuration leaves them at), and
# limits high enough that the client never waits, so that the scheduling itself is measured.
CLIENTS = {"client qps 50, burst 100 (kube-scheduler's defaults, as the chart runs it)": (50, 100),
           "client qps 5000 (unthrottled)": (5000, 5000)}


def scheduler_config(cluster: Any, profile: str, extender: Any, qps: int, burst: int) -> dict[str, Any]:
    """tests/e2e/test_extender.py's configuration (one profile; the extender as the chart names it, over TLS
    here) with the client's ``qps`` and ``burst``."""
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(cluster.kubeconfig), "qps": qps, "burst": burst},
        "leaderElection": {"leaderElect": False}, "profiles": [{"schedulerName": profile}]}
    if extender is not None:
        config["extenders"] = [{
            "urlPrefix": extender.url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "bindVerb": "bind",
            "weight": 5,
            "nodeCacheCapable": True, "enableHTTPS": True, "httpTimeout": "5s", "ignorable": False,
            "tlsConfig": {"caData": base64.b64encode(extender.ca.read_bytes()).decode()}}]
    return config


def throughput_round(api: Any, cluster: Any, folder: Path, profile: str, extender: Any, count: int,
                     res: Results, label: str, client: tuple[int, int]) -> None:
    rng = random.Random(32)
    parallel(api, (("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod(i, profile, rng)) for i in range(count)))
    within = max(120, count / 5)
    binds = Binds(api, within + 90)
    started = time.monotonic()
    with e2e.scheduler(cluster, folder, profile, extender, given=scheduler_config(cluster, profile, extender,
                                                                                  *client)):
        deadline = time.monotonic() + within
        while len(binds.times) < count and time.monotonic() < deadline:
            time.sleep(0.2)
    binds.close()
    res.misplaced.setdefault(label, []).append(misplaced(api, binds.times))
    times = sorted(binds.times.values())[:count]
    bound = len(times)
    rate = (bound - 1) / (times[-1] - times[0]) if bound > 1 and times[-1] > times[0] else 0.0
    res.rate.setdefault(label, []).append(round(rate, 1))
    res.from_start.setdefault(label, []).append(round(bound / (times[-1] - started), 1) if times else 0.0)
    res.bound.setdefault(label, []).append(bound)
    print(f"  {label}: {bound} of {count} bound, {rate:.1f} Pods/s from the first binding to the last", flush=True)
    api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods", gracePeriodSeconds="0")
    deadline = time.monotonic() + 120
    while api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods", limit="1")["items"] and time.monotonic() < deadline:
        time.sleep(0.5)


def misplaced(api: Any, times: dict[str, float]) -> int:
    """The Pods bound where, with the Pods bound there before them (in the order the watch saw them bound), no
    NUMA node of the node can hold them: kubelet would fail them with TopologyAffinityError."""
    from webhook.core.numa import fit_node
    from webhook.extender.reservations import BoundPod, free_now, pod_demands, read_nrt

    listed = api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
    by_node: dict[str, list[dict[str, Any]]] = {}
    for obj in listed:
        if obj["spec"].get("nodeName") and obj["metadata"]["name"] in times:
            by_node.setdefault(obj["spec"]["nodeName"], []).append(obj)
    state = read_nrt(e2e.nrt("n", [ZONE, ZONE]))
    assert state is not None
    wrong = 0
    for on_node in by_node.values():
        on_node.sort(key=lambda o: times[o["metadata"]["name"]])
        before: list[BoundPod] = []
        for obj in on_node:
            wants = pod_demands(obj)
            if wants is not None:
                if not fit_node(wants, free_now(state, before)).fits:
                    wrong += 1
                    continue
                before.append(BoundPod(NAMESPACE, obj["metadata"]["name"], "n", 0.0, wants=wants))
    return wrong


def smaps(pids: list[int]) -> dict[str, float]:
    """RSS and PSS (smaps_rollup) and the peak resident (VmHWM) summed over ``pids``, in MiB."""
    rss = pss = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                key, _, rest = line.partition(":")
                if key in ("Rss", "Pss"):
                    value = int(rest.split()[0])
                    rss, pss = (rss + value, pss) if key == "Rss" else (rss, pss + value)
        except OSError:
            continue
    return {"rssMiB": round(rss / 1024, 1), "pssMiB": round(pss / 1024, 1),
            "peakMiB": round(memory_mib(pids, "VmHWM"), 1), "processes": len(pids)}


def steady(pids: Any, within: float = 60) -> dict[str, float]:
    """``smaps`` once the resident size stops growing (two readings 2 s apart within 1 %), or after ``within``."""
    deadline = time.monotonic() + within
    last = smaps(pids())
    while time.monotonic() < deadline:
        time.sleep(2)
        now = smaps(pids())
        if abs(now["rssMiB"] - last["rssMiB"]) <= 0.01 * max(last["rssMiB"], 1):
            return now
        last = now
    return last


def memory(api: Any, cluster: Any, folder: Path, count: int, res: Results) -> None:
    kinds = e2e.machines(60, seed=32)
    rng = random.Random(5000)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    names = [f"m-{i:05d}" for i in range(count)]
    nodes, nrts, pods = [], [], []
    for i, name in enumerate(names):
        spec, zones = kinds[i % len(kinds)]
        total: dict[str, int] = {"pods": 110}
        for z in zones:
            for k, v in z.items():
                total[k] = total.get(k, 0) + v
        amounts = {k: str(v) for k, v in total.items()}
        nodes.append(("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {e2e.POOL: "memory", "kubernetes.io/hostname": name}},
            "spec": {"taints": [e2e.TAINT]},
            "status": {"capacity": amounts, "allocatable": amounts, "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bench: no kubelet",
                 "lastHeartbeatTime": now, "lastTransitionTime": now}]}}))
        nrts.append(("POST", "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies",
                     e2e.nrt(name, zones, scope="container" if i % 3 else "pod")))
        if i % 10 == 0:
            shape = grammar.pod(rng, spec)
            body = json.loads(json.dumps(shape))
            body["metadata"] = {"name": f"held-{i:05d}", "namespace": NAMESPACE}
            body["spec"]["nodeName"] = name
            pods.append(("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body))
    started = time.monotonic()
    parallel(api, nodes + nrts + pods)
    res.memory_nodes, res.memory_pods = count, len(pods)
    print(f"  {count} Nodes, {count} NRTs and {len(pods)} bound Pods created in {time.monotonic() - started:.0f} s",
          flush=True)
    sample = api("GET", f"/api/v1/nodes/{names[0]}")
    assert sample["status"].get("allocatable"), "the API server dropped the Node's status on create"
    started = time.monotonic()
    extender = e2e.start_extender(cluster, folder / "extender")
    impossible = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": NAMESPACE,
                                                                  "uid": "probe"},
                  "spec": {"containers": [{"name": "app", "resources": {
                      "limits": {"cpu": "4096", "memory": "1Gi"}, "requests": {"cpu": "4096", "memory": "1Gi"}}}]}}
    body = json.dumps({"Pod": impossible, "NodeNames": names})
    try:
        while True:
            answer = requests.post(f"{extender.url}/filter", data=body, verify=str(extender.ca), timeout=120,
                                   headers={"Content-Type": "application/json"}).json()
            refused = len(answer.get("FailedNodes") or {}) + len(answer.get("FailedAndUnresolvableNodes") or {})
            if refused == count:
                break
            if time.monotonic() - started > 600:
                raise RuntimeError(f"the extender refused {refused} of {count} nodes after 600 s")
            time.sleep(0.2)
        res.sync_seconds = round(time.monotonic() - started, 1)
        res.extender = steady(lambda: process_tree(extender.proc.pid))
        print(f"  qos-guard extender: synced in {res.sync_seconds} s; {res.extender}", flush=True)
        log = folder / "scheduler"
        with e2e.scheduler(cluster, log, e2e.SCHEDULER, extender):
            pid = scheduler_pid(log / "config.yaml")
            res.scheduler = steady(lambda: [pid], within=90)
        print(f"  kube-scheduler: {res.scheduler}", flush=True)
    finally:
        extender.stop()


def scheduler_pid(config: Path) -> int:
    """The kube-scheduler process started with ``--config=config`` (tests/e2e/test_extender.py starts it)."""
    wanted = f"--config={config}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if wanted in (entry / "cmdline").read_bytes().split(b"\0"):
                    return int(entry.name)
            except OSError:
                continue
    raise RuntimeError(f"no kube-scheduler with {wanted.decode()}")


def chart_limits() -> dict[str, str]:
    values = yaml.safe_load((CHART / "values.yaml").read_text())["scheduler"]
    return {"kube-scheduler": values["resources"]["limits"]["memory"],
            "extender": values["extender"]["resources"]["limits"]["memory"]}


def mib(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return float(quantity[:-2]) * factor
    return float(quantity) / (1 << 20)


def markdown(res: Results) -> str:
    def med(values: list[float]) -> float:
        return round(statistics.median(values), 1) if values else float("nan")

    lines = [f"# The second scheduler: throughput and memory ({res.date})", "",
             "`python -m bench.scheduler` (bench/scheduler.py; in `make bench`): the real kube-scheduler v1.36.3 "
             "over Node objects with no kubelet and their NodeResourceTopology objects, in a real API server "
             "(etcd, kube-apiserver) on the same shared 2-CPU machine.", "",
             f"## Throughput: {res.pods} Pods over {res.nodes} nodes, {res.rounds} rounds each, alternating", "",
             "| profile, the scheduler's API client | Pods/s bound (median) | per round | from the scheduler's start "
             "| bound | misplaced |",
             "| --- | ---: | --- | --- | --- | ---: |"]
    for label in res.rate:
        lines.append(f"| {label} | {med(res.rate[label])} | {', '.join(map(str, res.rate[label]))} | "
                     f"{', '.join(map(str, res.from_start[label]))} | "
                     f"{', '.join(f'{b}/{res.pods}' for b in res.bound[label])} | "
                     f"{sum(res.misplaced.get(label, []))} |")
    lines += ["", "Through the extender, the scheduler hands each binding to it (`bindVerb: bind`): it holds the Pod "
              "on its node before it POSTs the Binding, and a `filter` call waits (on an event, at most 1 s, counted "
              "when it runs out) only until the Pods it kept nodes for before are bound, so that each Pod is judged "
              "against the reservations of the ones before it. Misplaced: bound where, with the Pods bound there "
              "before them, no NUMA node could hold them (the placement model over the node's NRT)."]
    lines += ["", f"## Memory at {res.memory_nodes} nodes ({res.memory_nodes} NRTs, {res.memory_pods} bound Pods "
              "held as reservations)", "",
              f"The extender listed every NRT and Pod {res.sync_seconds} s after it started (its first `filter` "
              "that refused every node).", "",
              "| container | RSS | PSS | peak (VmHWM) | processes | chart limit | within |",
              "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name, figures in (("extender", res.extender), ("kube-scheduler", res.scheduler)):
        limit = res.limits.get(name, "")
        within = "yes" if limit and figures and figures["peakMiB"] < mib(limit) else "NO"
        lines.append(f"| {name} | {figures.get('rssMiB')} MiB | {figures.get('pssMiB')} MiB | "
                     f"{figures.get('peakMiB')} MiB | {figures.get('processes')} | {limit} | {within} |")
    lines += ["", "PSS counts a page shared by gunicorn's master and its worker once (as the container's memory "
              "cgroup does); RSS counts it in each; the peak is the sum of each process's own."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.scheduler", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="seconds, a handful of nodes and Pods")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--pods", type=int)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--memory-nodes", type=int)
    parser.add_argument("--out", default=str(ROOT / "docs" / "performance"))
    args = parser.parse_args(argv)
    # SIGTERM (timeout, Ctrl-C's cousin) unwinds, so the control plane, extender and scheduler are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    base = SMOKE if args.smoke else Settings()
    s = Settings(args.nodes or base.nodes, args.pods or base.pods, args.rounds or base.rounds,
                 args.memory_nodes or base.memory_nodes)
    res = Results(date=time.strftime("%Y-%m-%d"), nodes=s.nodes, pods=s.pods, rounds=s.rounds,
                  limits=chart_limits())
    binary("kube-scheduler")
    with tempfile.TemporaryDirectory(prefix="qos-guard-bench-scheduler-") as tmp:
        work = Path(tmp)
        with control_plane(work / "control-plane") as cluster:
            crd = CHART / "files" / "topology.node.k8s.io_noderesourcetopologies.yaml"
            cluster.kubectl("apply", "-f", str(crd), check=True)
            cluster.kubectl("wait", "--for", "condition=Established",
                            "crd/noderesourcetopologies.topology.node.k8s.io", "--timeout", "60s", check=True)
            cluster.namespace(NAMESPACE)
            api = e2e.Api(cluster)
            print(f"throughput: {s.pods} Pods over {s.nodes} nodes, {s.rounds} rounds", flush=True)
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda i: e2e.add_node(api, f"t-{i:04d}", [ZONE, ZONE], "throughput"),
                              range(s.nodes)))
            extender = e2e.start_extender(cluster, work / "extender")
            try:
                for r in range(s.rounds):
                    for c, (client, limits) in enumerate(CLIENTS.items()):
                        for label, profile, through in (("default scheduler", "default-scheduler", None),
                                                        ("through the extender", e2e.SCHEDULER, extender)):
                            throughput_round(api, cluster, work / f"round-{r}-{c}-{profile}", profile, through,
                                             s.pods, res, f"{label}, {client}", limits)
            finally:
                extender.stop()
            print(f"memory: {s.memory_nodes} nodes", flush=True)
            memory(api, cluster, work / "memory", s.memory_nodes, res)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scheduler.json").write_text(json.dumps(asdict(res), indent=2) + "\n")
    (out / "scheduler.md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
