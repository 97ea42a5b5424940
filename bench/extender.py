"""``make bench``, the extender: what one ``filter`` and one ``prioritize`` call cost with 5,000 nodes in the
cache, in process (the Flask app through its test client: the judging, the body's JSON both ways; no TLS, no
API server). The nodes are the topology differential's machines (tests/fidelity/topology_grammar.py, 60 of
them, each repeated), their NRTs read as the running extender reads them (equal shapes interned), and one node in
ten holds a Pod as a reservation; the Pods are the differential's shapes. Also the memory the cache's objects
take (tracemalloc). The end-to-end figures with the real kube-scheduler are tests/e2e/test_extender.py's.

    .venv/bin/python -m bench.extender [--nodes 5000] [--calls 200]
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import time
import tracemalloc
from pathlib import Path
from typing import Any

from webhook.extender.placement import BoundPod, pod_demands
from webhook.serving.extender import ExtenderCache, View, create_extender_app

# The differential's generators are test code, not held to mypy --strict as bench is: imported by name.
grammar: Any = importlib.import_module("tests.fidelity.topology_grammar")
e2e: Any = importlib.import_module("tests.e2e.test_extender")
ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "performance" / "extender.json"


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(32)
    kinds = e2e.machines(60, seed=32)
    cache = ExtenderCache(transport=None)
    tracemalloc.start()
    states = {}
    for i in range(args.nodes):
        _spec, zones = kinds[i % len(kinds)]
        name = f"node-{i:05d}"
        state = cache._nrt(e2e.nrt(name, zones, "container" if i % 3 else "pod"))
        assert state is not None
        states[name] = state
    held: dict[str, list[BoundPod]] = {}
    now = time.time()
    for i in range(0, args.nodes, 10):
        name = f"node-{i:05d}"
        shape = grammar.pod(rng, kinds[i % len(kinds)][0])
        held[name] = [BoundPod("bench", f"held-{i}", name, now, wants=pod_demands(shape), uid=f"u{i}")]
    view = View(states, held)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    client = create_extender_app(lambda: view).test_client()
    names = list(states)
    pods = [grammar.pod(rng, kinds[rng.randrange(len(kinds))][0]) for _ in range(args.calls)]
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "nodes": args.nodes, "reservations": len(held),
                               "shapes": len(kinds), "cacheMiB": round(current / (1 << 20), 1)}
    for verb in ("filter", "prioritize"):
        took = []
        for p in pods:
            body = json.dumps({"Pod": p, "NodeNames": names})
            started = time.perf_counter()
            answer = client.post(f"/{verb}", data=body, content_type="application/json")
            took.append((time.perf_counter() - started) * 1000)
            assert answer.status_code == 200, answer.data[:300]
        results[verb] = {"p50Ms": round(quantile(took, 0.5), 2), "p99Ms": round(quantile(took, 0.99), 2),
                         "calls": len(took)}
        print(f"extender {verb}: {args.nodes} nodes ({len(held)} with a reservation), {len(took)} Pods of the "
              f"differential's shapes: p50 {results[verb]['p50Ms']} ms, p99 {results[verb]['p99Ms']} ms")
    print(f"the cache's NRTs and reservations: {results['cacheMiB']} MiB (tracemalloc)")
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
