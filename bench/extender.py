"""``make bench``, the extender in process: what one ``filter`` and one ``prioritize`` call cost with every node a
candidate, at 1,000, 5,000 and 10,000 nodes with 20 bound Pods each (half of them aligned), through the Flask app's
test client (the judging and the body's JSON both ways; no TLS, no API server). The nodes are the topology
differential's machines (tests/fidelity/topology_grammar.py, 60 of them, each repeated), their NRTs read as the
running extender reads them; each NRT's fingerprint counts its node's Pods but on one node in ten, where the last
two Pods bound are not counted yet (reservations), and its zones' available is what the Pods it counts leave (so
the 5,000 nodes are about 4,900 free shapes, as a fleet's NRTs are). The Pods asked about are the differential's
shapes.

A second fleet (``across``, its own rows): the same nodes, but on ``ACROSS_SHARE`` of the machines (40 %: two kinds
in five) kubelet runs the Topology Manager's ``restricted`` or ``best-effort`` policy, where a free shape the Pod
does not fit on one NUMA node is judged across NUMA nodes in Python (``core.numa_across``); the differential's Pods
fit one NUMA node on some free shapes and not on others. Its rows say how many such rows a new Pod shape hands over.

Also what a watch event costs (a Pod bound, then deleted) and the memory the view takes (tracemalloc). With
``--baseline REV`` the same scenario runs against that revision's extender too (a git worktree of it), side by
side: the before and after of one run. The end-to-end figures with the real kube-scheduler are bench/scheduler.py's.

    .venv/bin/python -m bench.extender [--nodes 1000,5000,10000] [--calls 100] [--baseline REV]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from webhook.extender.fingerprint import fingerprint
from webhook.extender.reservations import BoundPod, NodeState, free_now, pod_demands, read_nrt

# The differential's generators are test code, not held to mypy --strict as bench is: imported by name.
grammar: Any = importlib.import_module("tests.fidelity.topology_grammar")
e2e: Any = importlib.import_module("tests.e2e.test_extender")
# The extender in its parts (this tree); a baseline's older tree has them in one module: by name, for both.
try:
    served: Any = importlib.import_module("webhook.serving.extender_cache")
    app: Any = importlib.import_module("webhook.serving.extender_app")
except ModuleNotFoundError:
    served = app = importlib.import_module("webhook.serving.extender")
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "performance" / "extender.json"
MARKDOWN = OUT.with_suffix(".md")
# The hand-written analysis after the generated tables, which a run keeps.
KEPT = "<!-- Above this line: written by `python -m bench.extender`. Below it: by hand, kept by the bench. -->"
PODS_PER_NODE = 20
TARGET_P99_MS = 10.0
ACROSS_SHARE = 0.4  # the ``across`` fleet: of every five machine kinds, one restricted, one best-effort
FLEETS = {"single": "", "across": "40 % restricted/best-effort"}  # a fleet's label in the tables


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def burstable(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "bench"},
            "spec": {"containers": [{"name": "app", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}}


def policy_of(kind: int, fleet: str) -> str:
    """A machine kind's Topology Manager policy: ``single-numa-node`` throughout the ``single`` fleet; in the
    ``across`` fleet one kind in five ``restricted`` and one ``best-effort`` (``ACROSS_SHARE``), as a fleet's
    machine pools each run one kubelet configuration."""
    if fleet == "across":
        return {1: "restricted", 3: "best-effort"}.get(kind % 5, "single-numa-node")
    return "single-numa-node"


def scenario(nodes: int, rng: random.Random, fleet: str = "single") -> tuple[dict[str, Any],
                                                                          dict[str, list[BoundPod]], list[Any]]:
    """The NRT objects by node, the bound Pods by node (20 each, every other one aligned), the Pod shapes; the
    machines' policies by ``fleet`` (``policy_of``). The same nodes, Pods and shapes in either fleet."""
    kinds = e2e.machines(60, seed=32)
    now = time.time()
    nrts: dict[str, Any] = {}
    pods: dict[str, list[BoundPod]] = {}
    for i in range(nodes):
        spec, zones = kinds[i % len(kinds)]
        name = f"node-{i:05d}"
        on_node = []
        for j in range(PODS_PER_NODE):
            aligned = j % 2 == 0
            shape = grammar.pod(rng, spec) if aligned else burstable(f"b-{i}-{j}")
            wants = pod_demands(shape) if aligned else None
            recent = i % 10 == 0 and j >= PODS_PER_NODE - 2
            on_node.append(BoundPod("bench", f"p-{i:05d}-{j:02d}", name, now - (5 if recent else 3600),
                                    wants=wants, uid=f"u-{i}-{j}"))
        counted = on_node[:-2] if i % 10 == 0 else on_node
        obj = e2e.nrt(name, zones, policy=policy_of(i % len(kinds), fleet), scope="container" if i % 3 else "pod")
        # What the exporter counts is taken: each zone's available is its allocatable less the counted Pods, each
        # where kubelet would have put it (so nodes differ as a fleet's do: about one free shape per node).
        state = read_nrt(obj)
        assert state is not None
        left = {z.numa: z.allocatable for z in free_now(NodeState(state.empty, state.empty), counted).zones}
        for numa, zone in enumerate(obj["zones"]):
            for res in zone["resources"]:
                res["available"] = str(left[numa].get(res["name"], 0) // 1000)
        obj.setdefault("attributes", []).append(
            {"name": "nodeTopologyPodsFingerprint", "value": fingerprint(p.key for p in counted)})
        nrts[name] = obj
        pods[name] = on_node
    asked = [grammar.pod(rng, kinds[rng.randrange(len(kinds))][0]) for _ in range(64)]
    return nrts, pods, asked


def read_states(nrts: dict[str, Any]) -> dict[str, Any]:
    """The NRTs as the extender reads them, equal shapes interned (this tree's sink, or an older one's cache)."""
    module: Any = served  # an older tree's module has no NrtSink: its cache's reader then
    sink = module.NrtSink(module.View(), 1 << 30) if hasattr(module, "NrtSink") else \
        module.ExtenderCache(transport=None)
    read = sink.read if hasattr(sink, "read") else sink._nrt
    return {name: read(obj) for name, obj in nrts.items()}


class HandedOver:
    """Counts the rows ``fit_rows`` judged across NUMA nodes (``numa_handover``): on a machine whose policy admits
    across NUMA nodes, the rows the single-NUMA pass did not place (failed, refused or not known after). A wrapper
    of ``fleet_verdicts.fit_rows`` (a numpy pass per call: microseconds against the milliseconds it counts)."""

    def __init__(self) -> None:
        self.rows = 0
        self.module: Any = None
        try:
            self.module = importlib.import_module("webhook.extender.fleet_verdicts")
        except ModuleNotFoundError:
            return
        if not hasattr(self.module, "fit_rows"):
            self.module = None
            return
        inner = self.module.fit_rows

        def counted(wants: Any, free: Any, machine: Any, column: Any, machines: Any, across: Any = None) -> Any:
            fits = inner(wants, free, machine, column, machines, across)
            if across is not None and any(across):
                on = [a is not None for a in across]
                self.rows += sum(1 for r, m in enumerate(machine.tolist())
                                 if on[m] and (int(fits.failed[r]) != -1 or r in fits.unknown))
            return fits

        self.module.fit_rows = counted


def measure(nodes: int, calls: int, fleet: str = "single") -> dict[str, Any]:
    rng = random.Random(32)
    nrts, pods, asked = scenario(nodes, rng, fleet)
    tracemalloc.start()
    states = read_states(nrts)
    view = served.View(states, pods)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del nrts
    assert all(s is not None for s in states.values()) and read_nrt is not None
    gc.freeze()  # as the extender does once its view is complete
    client = app.create_extender_app(lambda: view).test_client()
    names = list(states)
    result: dict[str, Any] = {"nodes": nodes, "boundPods": nodes * PODS_PER_NODE,
                              "viewMiB": round(current / (1 << 20), 1)}
    if fleet != "single":
        result["fleet"] = fleet
    # The first call reads every node's NRT and Pods into its cache (a relist's first call); then the Pods of one
    # template one after another (a rollout: names differ, what they align does not), then a different shape of
    # the differential's each call. Wall time and the thread's CPU time: on a shared machine the first includes
    # the other tenants' load, the second does not.
    started = time.perf_counter()
    client.post("/filter", data=json.dumps({"Pod": asked[-1], "NodeNames": names}), content_type="application/json")
    result["firstCallMs"] = round((time.perf_counter() - started) * 1000, 1)
    handed = HandedOver() if fleet != "single" else None
    for mode in ("template", "mixed"):
        for verb in ("filter", "prioritize"):
            wall, cpu, over = [], [], []
            for c in range(calls):
                shape = json.loads(json.dumps(asked[0 if mode == "template" else c % len(asked)]))
                shape.setdefault("metadata", {})["name"] = f"asked-{c}"
                body = json.dumps({"Pod": shape, "NodeNames": names})
                before = handed.rows if handed is not None else 0
                started, thread = time.perf_counter(), time.thread_time()
                answer = client.post(f"/{verb}", data=body, content_type="application/json")
                cpu.append((time.thread_time() - thread) * 1000)
                wall.append((time.perf_counter() - started) * 1000)
                if handed is not None and handed.module is not None:
                    over.append(handed.rows - before)
                assert answer.status_code == 200, answer.data[:300]
            result[f"{verb}/{mode}"] = {"p50Ms": round(quantile(wall, 0.5), 2), "p99Ms": round(quantile(wall, 0.99), 2),
                                        "cpuP50Ms": round(quantile(cpu, 0.5), 2),
                                        "cpuP99Ms": round(quantile(cpu, 0.99), 2), "calls": len(wall)}
            if over:
                result[f"{verb}/{mode}"]["handedOver"] = int(quantile([float(n) for n in over], 0.5))
    if hasattr(view, "put_pod"):  # a watch event: this tree's incremental view
        took = []
        for k in range(2000):
            pod = BoundPod("bench", f"event-{k}", names[k % len(names)], time.time(), wants=None, uid=f"e{k}")
            started = time.perf_counter()
            view.put_pod(pod)
            view.drop_pod(pod.key)
            took.append((time.perf_counter() - started) * 1e6 / 2)
        result["eventUs"] = {"p50": round(quantile(took, 0.5), 1), "p99": round(quantile(took, 0.99), 1)}
    return result


def run_here(sizes: list[int], calls: int, fleets: list[str]) -> list[dict[str, Any]]:
    out = []
    for fleet, nodes in [(f, n) for f in fleets for n in sizes]:
        r = measure(nodes, calls, fleet)
        out.append(r)
        line = "; ".join(f"{k} p50 {v['p50Ms']} ms p99 {v['p99Ms']} ms (CPU p50 {v['cpuP50Ms']} p99 {v['cpuP99Ms']})"
                         for k, v in r.items() if isinstance(v, dict) and "p50Ms" in v)
        print(f"  {nodes} nodes ({fleet}), {r['boundPods']} bound Pods: first call {r['firstCallMs']} ms; {line}; view "
              f"{r['viewMiB']} MiB" + (f"; a watch event p50 {r['eventUs']['p50']} us" if "eventUs" in r else ""),
              flush=True)
    return out


def run_baseline(rev: str, sizes: list[int], calls: int, fleets: list[str]) -> list[dict[str, Any]]:
    """This script, run against ``rev``'s webhook package (a detached worktree of it)."""
    with tempfile.TemporaryDirectory(prefix="qos-guard-bench-extender-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), rev], check=True)
        try:
            (tree / "bench" / "extender.py").write_text(Path(__file__).read_text())
            out = Path(tmp) / "out.json"
            env = dict(os.environ, PYTHONPATH=str(tree))
            subprocess.run([sys.executable, "-m", "bench.extender", "--nodes", ",".join(map(str, sizes)),
                            "--calls", str(calls), "--fleets", ",".join(fleets), "--json", str(out)],
                           cwd=tree, env=env, check=True)
            return list(json.loads(out.read_text()))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1000,5000,10000")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--fleets", default="single,across",
                        help="single: every machine single-numa-node; across: 40 %% restricted or best-effort")
    parser.add_argument("--baseline", help="a git revision to measure beside this tree")
    parser.add_argument("--baseline-calls", type=int, default=10, help="calls per figure at the baseline")
    parser.add_argument("--json", help="write only the measurements here (what --baseline reads)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    fleets = args.fleets.split(",")
    if not fleets or any(f not in FLEETS for f in fleets):
        parser.error(f"--fleets: a comma-separated list of {', '.join(FLEETS)}, not {args.fleets!r}")
    print("extender, in process, every node a candidate:", flush=True)
    results = run_here(sizes, args.calls, fleets)
    if args.json:
        Path(args.json).write_text(json.dumps(results))
        return
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "podsPerNode": PODS_PER_NODE,
                              "targetP99Ms": TARGET_P99_MS, "results": results}
    if args.baseline:
        print(f"the same at {args.baseline}:", flush=True)
        report["baseline"] = {"revision": args.baseline, "results": run_baseline(args.baseline, sizes,
                                                                                       args.baseline_calls, fleets)}
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    MARKDOWN.write_text(with_kept(markdown(report), MARKDOWN.read_text() if MARKDOWN.exists() else ""))
    print(markdown(report))
    print(f"written to {OUT.relative_to(ROOT)} and {MARKDOWN.relative_to(ROOT)}")


def with_kept(generated: str, old: str) -> str:
    """The new tables, then what the old file had by hand after the ``KEPT`` line (nothing when it has none)."""
    _, mark, kept = old.partition(KEPT)
    return f"{generated}\n{mark}{kept}" if mark else generated


def markdown(report: dict[str, Any]) -> str:
    """The tables of docs/performance/extender.md: each figure, this tree and the baseline, the goal met or not."""
    lines = [f"# The extender in process ({report['date']})", "",
             "`python -m bench.extender` (bench/extender.py; in `make bench`): one `filter` and one `prioritize` "
             f"call with every node a candidate, {report['podsPerNode']} bound Pods per node (every other one "
             "aligned; on one node in ten the NRT does not count the last two yet), through the Flask app's test "
             "client on the shared 2-CPU machine. *template*: the Pods of one template one after another (a "
             "rollout); *mixed*: a different shape of the topology differential each call. Rows marked "
             f"*{FLEETS['across']}*: the same nodes with one machine kind in five `restricted` and one "
             "`best-effort` (what no NUMA node holds is judged across NUMA nodes, in Python); *handed over*: "
             "such rows a new Pod shape had judged so, per call (p50). Wall time includes "
             "the machine's other tenants; CPU time is the calling thread's own.", "",
             "| tree | nodes | call | p50 ms | p99 ms | CPU p50 ms | CPU p99 ms | p99 ≤ "
             f"{report['targetP99Ms']:g} ms (CPU) |", "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |"]
    trees = [("this tree", report["results"])]
    if "baseline" in report:
        trees.append((f"`{report['baseline']['revision']}`", report["baseline"]["results"]))
    for tree, results in trees:
        for r in results:
            for key, v in r.items():
                if isinstance(v, dict) and "p50Ms" in v:
                    cpu = v.get("cpuP99Ms", v["p99Ms"])
                    lines.append(f"| {tree} | {r['nodes']:,} | {called(r, key, v)} | {v['p50Ms']} | {v['p99Ms']} | "
                                 f"{v.get('cpuP50Ms', '—')} | {v.get('cpuP99Ms', '—')} | "
                                 f"{'met' if cpu <= report['targetP99Ms'] else '**missed**'} |")
    lines += ["", "| tree | nodes | bound Pods | first call ms (every node read) | a watch event p50 µs | the view "
              "(tracemalloc) MiB |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for tree, results in trees:
        for r in results:
            lines.append(f"| {tree} | {nodes_of(r)} | {r['boundPods']:,} | {r.get('firstCallMs', '—')} | "
                         f"{r.get('eventUs', {}).get('p50', '—')} | {r['viewMiB']} |")
    return "\n".join(lines) + "\n"


def called(r: dict[str, Any], key: str, v: dict[str, Any]) -> str:
    """A call's name in the tables: the ``across`` fleet's marked, with the rows it handed over."""
    if r.get("fleet", "single") == "single":
        return key
    handed = f", {v['handedOver']} handed over" if "handedOver" in v else ""
    return f"{key}, *{FLEETS[r['fleet']]}*{handed}"


def nodes_of(r: dict[str, Any]) -> str:
    return f"{r['nodes']:,}" + ("" if r.get("fleet", "single") == "single" else f" *{FLEETS[r['fleet']]}*")


if __name__ == "__main__":
    main()
