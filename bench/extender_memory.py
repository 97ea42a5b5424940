"""``make bench``, the extender's memory at fleet scale: ``qos-guard extender`` (gunicorn's master and its gevent
worker, its two reflectors through the Kubernetes client, as the chart runs it over plain HTTP on loopback) listing
5,000 NodeResourceTopology objects and 100,000 bound Pods, then relisting both in full (the watches answered 410
Gone, as after an API server restart past the watch cache's window), and its RSS, PSS and peak (VmHWM) after the
first list and after the relist, against the chart's memory limit of the extender container; then ``--calls``
``prioritize`` calls over every node, each a Pod shape of the topology differential not judged before (the app keeps
the Judges of the last 32 shapes, each with a verdict per free shape and the fleet's rows: ``extender.fleet_rows``),
and the same again. Each NRT's first zone has its ``allocatable`` memory less the node's index modulo 500, in MiB,
``available``: the 5,000 nodes are about as many free shapes, as a fleet's NRTs that count their Pods are.

The API server here is a stand-in that serves those lists page by page (``limit``/``continue``, 100 a page, as the
reflector asks) and the watches: 100,000 Pods in a real API server take tens of minutes and gigabytes to create on
this machine, and what is measured is the extender's side of the list, which is the same bytes either way. The
Pods are the size the API server sends (metadata with labels, an owner and managedFields: about 2 KB each), half of
them aligned (Guaranteed with whole CPUs), 20 per node.

    .venv/bin/python -m bench.extender_memory [--nodes 5000] [--pods-per-node 20] [--calls 64]
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import requests
import yaml

from tests.serving import free_port, process_tree
from webhook.extender.reservations import pod_demands

sched: Any = importlib.import_module("bench.scheduler")
e2e: Any = importlib.import_module("tests.e2e.test_extender")
grammar: Any = importlib.import_module("tests.fidelity.topology_grammar")
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "performance" / "extender-memory.json"
NRT_PATH = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
PODS_PATH = "/api/v1/pods"
PAGE = 100


def pod(i: int, node: str) -> dict[str, Any]:
    aligned = i % 2 == 0
    resources = ({"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "2", "memory": "4Gi"}} if aligned
                 else {"requests": {"cpu": "100m", "memory": "128Mi"}})
    name = f"app-{i // 1000:03d}-{i:06d}"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": f"team-{i % 50:02d}", "uid": f"00000000-0000-4000-8000-{i:012d}",
        "resourceVersion": str(1000 + i), "creationTimestamp": "2026-12-01T10:00:00Z",
        "labels": {"app": f"app-{i // 1000:03d}", "pod-template-hash": "7d9f8b6c5d"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"app-{i // 1000:03d}-7d9f8b6c5d",
                             "uid": f"10000000-0000-4000-8000-{i // 1000:012d}", "controller": True,
                             "blockOwnerDeletion": True}],
        "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                           "time": "2026-12-01T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {
                               "f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                                              "f:ownerReferences": {".": {}, 'k:{"uid":"x"}': {}}},
                               "f:spec": {"f:containers": {'k:{"name":"app"}': {
                                   ".": {}, "f:image": {}, "f:name": {}, "f:resources": {".": {}, "f:limits": {},
                                                                                         "f:requests": {}}}}}}},
                          {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                           "time": "2026-12-01T10:00:05Z", "fieldsType": "FieldsV1", "subresource": "status",
                           "fieldsV1": {"f:status": {"f:conditions": {}, "f:phase": {}, "f:podIP": {}}}}]},
        "spec": {"nodeName": node, "schedulerName": "qos-guard-numa",
                 "containers": [{"name": "app", "image": "registry.example/app:1.2.3", "resources": resources}]},
        "status": {"phase": "Running", "qosClass": "Guaranteed" if aligned else "Burstable", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-12-01T10:00:01Z"}]}}


def counting(nrt: dict[str, Any], i: int) -> dict[str, Any]:
    """``nrt`` with its first zone's available memory less ``i`` modulo 500 steps of 1 MiB: a free shape per node."""
    for res in nrt["zones"][0]["resources"]:
        if res["name"] == "memory":
            res["available"] = str(max(0, int(res["allocatable"]) - (i % 500) * (1 << 20)))
    return nrt


def shapes(kinds: list[Any], count: int) -> list[dict[str, Any]]:
    """``count`` Pods of the topology differential that align something, of distinct shapes."""
    rng = random.Random(64)
    out: dict[Any, dict[str, Any]] = {}
    while len(out) < count:
        pod_ = grammar.pod(rng, kinds[rng.randrange(len(kinds))][0])
        wants = pod_demands(pod_)
        if wants is not None:
            out.setdefault(repr(wants), pod_)
    return list(out.values())


class Stand:
    """The stand-in API server: lists by page, watches that wait until ``relist`` is set, then answer 410."""

    def __init__(self, nodes: int, per_node: int) -> None:
        kinds = e2e.machines(60, seed=32)
        self.nrts = [counting(e2e.nrt(f"m-{i:05d}", kinds[i % len(kinds)][1], scope="container" if i % 3 else "pod"), i)
                     for i in range(nodes)]
        self.kinds = kinds
        self.count = nodes * per_node
        self.per_node = per_node
        self.relist = threading.Event()
        self.lists = {NRT_PATH: 0, PODS_PATH: 0}  # complete lists served
        stand = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path not in stand.lists:
                    self.send_response(404)
                    self.end_headers()
                    return
                if query.get("watch") in ("1", "true"):
                    stand.watch(self, url.path)
                    return
                start = int(query.get("continue") or 0)
                total = len(stand.nrts) if url.path == NRT_PATH else stand.count
                end = min(total, start + int(query.get("limit") or total))
                items = [stand.nrts[i] if url.path == NRT_PATH else stand.pod(i) for i in range(start, end)]
                meta = {"resourceVersion": "5000"} | ({"continue": str(end)} if end < total else {})
                if end >= total:
                    stand.lists[url.path] += 1
                body = json.dumps({"kind": "List", "apiVersion": "v1", "metadata": meta, "items": items}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def pod(self, i: int) -> dict[str, Any]:
        return pod(i, f"m-{i // self.per_node:05d}")

    def watch(self, handler: BaseHTTPRequestHandler, path: str) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        handler.wfile.flush()
        if self.lists[path] > 1:  # relisted: an open watch with nothing to say, until the server stops
            while True:
                time.sleep(5)
        self.relist.wait()
        gone = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "code": 410, "reason": "Expired",
                                            "message": "too old resource version"}}
        handler.wfile.write(json.dumps(gone).encode() + b"\n")
        handler.wfile.flush()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


def wait_for(what: str, done: Any, within: float) -> float:
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > within:
            raise RuntimeError(f"{what}: not within {within} s")
        time.sleep(0.5)
    return round(time.monotonic() - started, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--calls", type=int, default=64, help="prioritize calls of new Pod shapes, twice")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    stand = Stand(args.nodes, args.pods_per_node)
    limit = sched.chart_limits()["extender"]
    with tempfile.TemporaryDirectory(prefix="qos-guard-bench-extender-memory-") as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "stand",
            "clusters": [{"name": "stand", "cluster": {"server": stand.url}}],
            "users": [{"name": "stand", "user": {"token": "bench"}}],
            "contexts": [{"name": "stand", "context": {"cluster": "stand", "user": "stand"}}]}))
        port = free_port()
        log = (Path(tmp) / "extender.log").open("wb")
        proc = subprocess.Popen([sys.executable, "-m", "webhook.cli", "extender", "--plain", "--bind",
                                 f"127.0.0.1:{port}", "--kubeconfig", str(kubeconfig)], stdout=log,
                                stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            try:
                return requests.get(url + "/readyz", timeout=5).status_code == 200
            except requests.RequestException:
                return False

        try:
            listed = wait_for("the first list", ready, 1800)
            first = sched.steady(lambda: process_tree(proc.pid))
            print(f"  listed {args.nodes} NRTs and {stand.count} bound Pods in {listed} s: {first}", flush=True)
            stand.relist.set()
            wait_for("the relist", lambda: stand.lists[PODS_PATH] >= 2 and stand.lists[NRT_PATH] >= 2, 1800)
            relisted = wait_for("ready after the relist", ready, 600)
            after = sched.steady(lambda: process_tree(proc.pid))
            metrics = requests.get(url + "/metrics", timeout=10).text
            print(f"  after the full relist ({relisted} s more): {after}", flush=True)
            names = [n["metadata"]["name"] for n in stand.nrts]
            took = []
            for _ in range(2):
                for shape in shapes(stand.kinds, args.calls):
                    started = time.monotonic()
                    answer = requests.post(url + "/prioritize", json={"Pod": shape, "NodeNames": names}, timeout=60)
                    took.append(time.monotonic() - started)
                    answer.raise_for_status()
            judged = sched.steady(lambda: process_tree(proc.pid))
            print(f"  after {len(took)} prioritize calls of new Pod shapes (p50 {sorted(took)[len(took) // 2]:.3f} s): "
                  f"{judged}", flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
            log.close()
        tail = (Path(tmp) / "extender.log").read_text()[-2000:]
    pods_line = next((line for line in metrics.splitlines() if line.startswith("qos_guard_extender_pods ")), "")
    result = {"date": time.strftime("%Y-%m-%d"), "nodes": args.nodes, "boundPods": stand.count,
              "inView": pods_line.split()[-1] if pods_line else "", "listedSeconds": listed,
              "afterList": first, "afterRelist": after, "afterCalls": judged, "calls": len(took),
              "chartLimit": limit, "withinLimit": max(after["peakMiB"], judged["peakMiB"]) < sched.mib(limit),
              "logTail": tail[-500:]}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "logTail"}))


if __name__ == "__main__":
    main()
