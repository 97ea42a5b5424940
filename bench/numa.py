"""``make bench``, ``policy.numa: auto``: what judging NUMA fit against the cluster's real topology costs a
``/validate`` answer. The goal: within 10 % of ``/validate`` without it, because the topology cache, not the
API server, answers.

A real control plane (etcd, kube-apiserver: tests/e2e) holds the NodeResourceTopology CRD and ``NODES`` nodes
of three hardware shapes, each with its NodeResourceTopology object. Two servers run side by side, the same
configuration but for ``policy.numa: auto`` (its cache watching that control plane), and answer the same
AdmissionReviews in interleaved rounds: the corpus's Pods and workloads plus inference Pods that fit, that fit
nowhere, and that pick nodes by nodeSelector. Results: docs/performance/numa.md and numa.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from bench import load
from bench.corpus import ROOT, admission_review, corpus_objects
from bench.server import serve
from tests.e2e.conftest import control_plane

NODES = 300
SHAPES = {  # per NUMA zone: the article's GPU server, a big CPU box, a small node
    "gpu": [{"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "4"}] * 2,
    "cpu": [{"cpu": "48", "memory": "192Gi"}] * 4,
    "small": [{"cpu": "8", "memory": "32Gi"}],
}
GOAL = 1.10  # numa: auto's p50 and p99 at most this many times those without, and throughput at least 1/GOAL


@dataclass
class Results:
    date: str = ""
    nodes: int = 0
    bodies: int = 0
    saturation: dict[str, list[float]] = field(default_factory=dict)  # server -> req/s per round
    latency: dict[str, list[dict[str, float]]] = field(default_factory=dict)  # server -> {p50, p99, ...} per round
    cpu_us: dict[str, list[float]] = field(default_factory=dict)  # server -> its CPU time per request, per round
    errors: dict[str, int] = field(default_factory=dict)
    rate: int = 0


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of ``pids`` so far (/proc/PID/stat)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def node_topology(name: str, zones: list[dict[str, str]]) -> dict[str, Any]:
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": name},
            "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"},
                           {"name": "topologyManagerScope", "value": "container"}],
            "zones": [{"name": f"node-{i}", "type": "Node",
                       "resources": [{"name": k, "capacity": v, "allocatable": v, "available": v}
                                     for k, v in z.items()]} for i, z in enumerate(zones)]}


def inference_pods() -> list[dict[str, Any]]:
    """Pods the rule has work with: fitting, fitting nowhere (every node judged), selecting a pool."""
    out = []
    for name, cpu, gpu, pool in (("fits", "16", "2", None), ("too-many-cpus", "64", "0", None),
                                 ("too-many-gpus", "16", "5", None), ("gpu-pool", "24", "1", "gpu"),
                                 ("small-pool", "12", "0", "small")):
        limits = {"cpu": cpu, "memory": "16Gi"} | ({"nvidia.com/gpu": gpu} if gpu != "0" else {})
        spec: dict[str, Any] = {"containers": [{"name": "vllm", "image": "vllm:1", "resources": {
            "limits": limits, "requests": dict(limits)}}]}
        if pool:
            spec["nodeSelector"] = {"pool": pool}
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
    return out


def _available(metrics_url: str) -> bool:
    text = requests.get(metrics_url + "/metrics", timeout=5).text
    return "qos_guard_numa_topology_available 1.0" in text


def run(seconds: float, repeats: int, rate: int, nodes: int, connections: int, out: Path | None) -> Results:
    res = Results(date=time.strftime("%Y-%m-%d"), nodes=nodes, rate=rate)
    with tempfile.TemporaryDirectory(prefix="qos-guard-bench-numa-") as tmp:
        work = Path(tmp)
        objects = corpus_objects() + inference_pods() * 20
        bodies = work / "bodies.jsonl"
        bodies.write_bytes(b"\n".join(admission_review(o) for o in objects) + b"\n")
        res.bodies = len(objects)
        with control_plane(work / "control-plane") as cluster:
            crd = ROOT / "charts" / "qos-guard" / "files" / "topology.node.k8s.io_noderesourcetopologies.yaml"
            cluster.kubectl("apply", "-f", str(crd), check=True)
            cluster.kubectl("wait", "--for", "condition=Established", "--timeout", "60s",
                            "crd/noderesourcetopologies.topology.node.k8s.io", check=True)
            shapes = list(SHAPES)
            docs: list[dict[str, Any]] = []
            for i in range(nodes):
                shape = shapes[i % len(shapes)]
                name = f"{shape}-{i}"
                docs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": shape}}})
                docs.append(node_topology(name, SHAPES[shape]))
            for start in range(0, len(docs), 200):
                cluster.kubectl("apply", "-f", "-", stdin=docs[start:start + 200], check=True)
            plain_cfg, auto_cfg = work / "plain.yaml", work / "auto.yaml"
            plain_cfg.write_text(yaml.safe_dump({}))
            auto_cfg.write_text(yaml.safe_dump({"policy": {"numa": "auto"}}))
            servers = {"without": serve(work / "plain", 2, "--config", str(plain_cfg)),
                       "numa: auto": serve(work / "auto", 2, "--config", str(auto_cfg),
                                           "--kubeconfig", str(cluster.kubeconfig))}
            try:
                deadline = time.monotonic() + 60
                while not _available(servers["numa: auto"].metrics):
                    assert time.monotonic() < deadline, "the topology cache did not sync within 60 s"
                    time.sleep(0.5)
                for srv in servers.values():  # warm up every worker
                    load.run(srv.port, srv.ca, "/validate", bodies, min(seconds, 1.0), connections)
                names = list(servers)
                for rep in range(repeats):
                    for name in names if rep % 2 == 0 else names[::-1]:  # neither always goes first
                        srv = servers[name]
                        r = load.run(srv.port, srv.ca, "/validate", bodies, seconds, connections)
                        res.saturation.setdefault(name, []).append(r.rate)
                        res.errors[name] = res.errors.get(name, 0) + r.errors
                        pids = srv.tree()
                        before = cpu_seconds(pids)
                        r = load.run(srv.port, srv.ca, "/validate", bodies, seconds, connections, rate=rate)
                        used = cpu_seconds(pids) - before
                        res.latency.setdefault(name, []).append({"p50": r.p50, "p99": r.p99, "p999": r.p999,
                                                                 "achieved": r.rate})
                        res.cpu_us.setdefault(name, []).append(used / max(r.rate * seconds, 1) * 1e6)
                        res.errors[name] += r.errors
            finally:
                for srv in servers.values():
                    srv.stop()
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "numa.json").write_text(json.dumps(asdict(res), indent=2) + "\n")
        (out / "numa.md").write_text(markdown(res, seconds, repeats))
    return res


def _med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratios(res: Results) -> dict[str, float]:
    """numa: auto ÷ without, the median of the rounds' ratios (each round runs both servers back to back, so a
    ratio compares like with like on a machine whose load changes): p50, p99 and CPU per request (lower is
    better), throughput (higher is better)."""
    a, b = res.latency.get("numa: auto", []), res.latency.get("without", [])

    def paired(x: list[float], y: list[float]) -> float:
        return _med([i / j for i, j in zip(x, y, strict=False) if j])

    return {
        "p50": paired([r["p50"] for r in a], [r["p50"] for r in b]),
        "p99": paired([r["p99"] for r in a], [r["p99"] for r in b]),
        "cpu": paired(res.cpu_us.get("numa: auto", []), res.cpu_us.get("without", [])),
        "throughput": paired(res.saturation.get("numa: auto", []), res.saturation.get("without", [])),
    }


def markdown(res: Results, seconds: float, repeats: int) -> str:
    r = ratios(res)
    lines = ["# `policy.numa: auto`: what the real topology costs `/validate`", "",
             f"Measured by `make bench` (`python -m bench.numa`) on {res.date}: a real kube-apiserver holding "
             f"{res.nodes} nodes of three shapes with their NodeResourceTopology objects; two `qos-guard serve` "
             "(2 gevent workers, TLS), the same configuration but for `policy.numa: auto`, answering the same "
             f"{res.bodies} AdmissionReviews (the corpus and inference Pods that fit, fit nowhere, or select a "
             f"pool) in {repeats} interleaved rounds of {seconds:.0f} s. The machine is shared with other work: "
             "compare the ratios, taken within one run.", "",
             f"| server | req/s (closed loop) | p50 ms at {res.rate}/s | p99 ms | p99.9 ms | server CPU µs/request "
             "| failed |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name in ("without", "numa: auto"):
        lat = res.latency.get(name, [])
        lines.append(f"| {name} | {_med(res.saturation.get(name, [])):,.0f} | {_med([x['p50'] for x in lat]):.2f} | "
                     f"{_med([x['p99'] for x in lat]):.2f} | {_med([x['p999'] for x in lat]):.2f} | "
                     f"{_med(res.cpu_us.get(name, [])):,.0f} | {res.errors.get(name, 0)} |")
    met = r["p50"] <= GOAL and r["p99"] <= GOAL and r["throughput"] >= 1 / GOAL
    lines += ["", "Medians over rounds; the ratios are the medians of each round's ratio (both servers back to back).",
              "", f"Goal: `/validate` with `numa: auto` within 10 % of `/validate` without it: p50 × {r['p50']:.2f}, "
                  f"p99 × {r['p99']:.2f}, throughput × {r['throughput']:.2f} (server CPU per request × "
                  f"{r['cpu']:.2f}) — {'met' if met else '**missed**'}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.numa")
    parser.add_argument("--smoke", action="store_true", help="seconds-long run (make test keeps it working)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "performance"))
    args = parser.parse_args(argv)
    # seconds per run, rounds, offered rate, nodes, connections: many short rounds, as the machine's load moves
    settings = (1.0, 1, 100, 30, 2) if args.smoke else (4.0, 12, 500, NODES, 4)
    res = run(*settings, Path(args.out))
    print((Path(args.out) / "numa.md").read_text())
    return 1 if sum(res.errors.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
