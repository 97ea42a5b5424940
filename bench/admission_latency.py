"""The API server's create latency for a Pod with the admission policies, with the webhook, and with neither,
measured side by side in one run on one real etcd + kube-apiserver (``make bench``; results in
``docs/performance/admission-latency.md``).

Three namespaces on the same API server: ``lat-none`` (not opted in), ``lat-policy`` (``enforce``, judged by
the generated ValidatingAdmissionPolicy; the webhook never called: ``webhook.excludeNamespaces``) and
``lat-webhook`` (``enforce``, judged by ``qos-guard serve`` over TLS on loopback; the policies skip it through
``exemptions.namespaces``, a matchCondition). Creates are interleaved in rounds so the machine's noise hits
all three alike; a compliant Pod is created (stored in etcd) and a violating one refused.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests
import yaml

from bench.corpus import ROOT

NAMESPACES = ("lat-none", "lat-policy", "lat-webhook")


def _pod(cpu: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "lat-"},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1",
                                     "resources": {"limits": {"cpu": cpu, "memory": "1Gi"}}}]}}


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"n": len(values), "p50_ms": round(statistics.median(values) * 1000, 2),
            "p90_ms": round(pick(0.9) * 1000, 2), "p99_ms": round(pick(0.99) * 1000, 2)}


def measure(rounds: int) -> dict[str, Any]:
    from tests.e2e.conftest import TOKEN, control_plane, render_webhook_configurations
    from tests.serving import start_server

    with tempfile.TemporaryDirectory(prefix="qos-guard-latency-") as tmp, \
            control_plane(Path(tmp) / "cp") as cluster:
        work = Path(tmp)
        for ns, mode in zip(NAMESPACES, (None, "enforce", "enforce"), strict=True):
            cluster.namespace(ns, mode)
        cluster.namespace("qos-guard")
        config = work / "config.yaml"
        config.write_text(yaml.safe_dump({"exemptions": {"namespaces": ["lat-webhook"]}}))
        printed = cluster.qos_guard("policy", "--mode", "enforce", "--config", str(config))
        assert printed.returncode == 0, printed.stderr
        cluster.kubectl("apply", "-f", "-", stdin=printed.stdout, check=True)
        certs = cluster.qos_guard("certs", "--extra-san", "127.0.0.1", "--output-dir", str(work / "pki"))
        assert certs.returncode == 0, certs.stderr
        server = start_server(work / "serve", cert_dir=work / "pki")
        try:
            configs = render_webhook_configurations(f"https://127.0.0.1:{server.port}")
            bundle = certs.stdout.strip()
            for conf in configs:
                for hook in conf["webhooks"]:
                    hook["clientConfig"]["caBundle"] = bundle
                    selector = hook.get("namespaceSelector", {}).get("matchExpressions", [])
                    for expr in selector:
                        if expr["key"] == "kubernetes.io/metadata.name":
                            expr["values"] = [*expr["values"], "lat-policy"]
            cluster.kubectl("apply", "-f", "-", stdin=configs, check=True)
            return _rounds(cluster.url, TOKEN, str(cluster.folder / "pki" / "ca.crt"), rounds)
        finally:
            server.stop()


def _rounds(url: str, token: str, ca: str, rounds: int) -> dict[str, Any]:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    good, bad = _pod("2"), _pod("1500m")
    expect = {"lat-none": (201, 201), "lat-policy": (201, 403), "lat-webhook": (201, 403)}

    def post(ns: str, body: dict[str, Any]) -> tuple[int, float]:
        started = time.perf_counter()
        resp = session.post(f"{url}/api/v1/namespaces/{ns}/pods", json=body, timeout=30, verify=ca)
        return resp.status_code, time.perf_counter() - started

    deadline = time.monotonic() + 60  # policies and webhook configurations reach admission via informers
    while any(post(ns, bad)[0] != expect[ns][1] for ns in NAMESPACES):
        assert time.monotonic() < deadline, "admission not in effect after 60 s"
        time.sleep(0.5)
    for ns in NAMESPACES:  # warm-up: connections, caches
        for _ in range(20):
            post(ns, good)
    samples: dict[str, dict[str, list[float]]] = {ns: {"create": [], "refuse": []} for ns in NAMESPACES}
    for i in range(rounds):
        order = NAMESPACES if i % 2 == 0 else NAMESPACES[::-1]
        for ns in order:
            for what, body, code in (("create", good, expect[ns][0]), ("refuse", bad, expect[ns][1])):
                status, seconds = post(ns, body)
                assert status == code, f"{ns} {what}: HTTP {status}"
                samples[ns][what].append(seconds)
    return {ns: {what: _percentiles(v) for what, v in parts.items()} for ns, parts in samples.items()}


def write(result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "admission-latency.json").write_text(json.dumps(result, indent=2) + "\n")
    rows = []
    labels = {"lat-none": "neither (namespace not opted in)",
              "lat-policy": "admission policies (CEL in the API server)",
              "lat-webhook": "webhook (qos-guard serve, TLS, loopback)"}
    for ns in NAMESPACES:
        c, r = result["results"][ns]["create"], result["results"][ns]["refuse"]
        rows.append(f"| {labels[ns]} | {c['p50_ms']} | {c['p90_ms']} | {c['p99_ms']} | {r['p50_ms']} | "
                    f"{r['p99_ms']} |")
    (out / "admission-latency.md").write_text(
        "# Pod create latency: admission policies vs webhook vs neither\n\n"
        f"`python -m bench.admission_latency` (part of `make bench`), {result['date']}, {result['cpus']} CPUs "
        "(shared, noisy). One etcd + kube-apiserver on loopback; per namespace "
        f"{result['rounds']} compliant Pods created (stored) and {result['rounds']} violating Pods refused, "
        "interleaved in rounds. Milliseconds, client-side (HTTP request to response).\n\n"
        "| enforcement | create p50 | p90 | p99 | refuse p50 | p99 |\n| --- | --- | --- | --- | --- | --- |\n"
        + "\n".join(rows) + "\n\n"
        "`neither` refuses nothing (its refuse column is a create). The webhook adds a TLS round trip to a "
        "Python process per request; the policies are compiled CEL evaluated in the API server's process.\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.admission_latency")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--out", default=str(ROOT / "docs" / "performance"))
    args = parser.parse_args(argv)
    import os
    result = {"date": time.strftime("%Y-%m-%d"), "cpus": len(os.sched_getaffinity(0)), "rounds": args.rounds,
              "results": measure(args.rounds)}
    write(result, Path(args.out))
    print(json.dumps(result["results"], indent=2))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
