"""The peers' latency and memory (``bench/peers.py``): a compliant Pod CREATE through the API server at fixed
offered rates, each contender in turn, and the PSS of each contender's processes."""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from bench import load
from bench.kyverno_server import KYVERNO_VERSION, Kyverno, Unavailable
from bench.server import memory_mib, process_tree

CONTENDERS = {"peer-none": "no admission", "peer-webhook": "qos-guard webhook (enforce)",
              "peer-vap": "qos-guard ValidatingAdmissionPolicy (enforce)",
              "peer-map": "qos-guard MutatingAdmissionPolicy + VAP (mutate)",
              "peer-kyverno": f"Kyverno {KYVERNO_VERSION} (library policy + whole-CPU check, Enforce)"}
RATES = (25, 50, 100, 200, 400)
P99_BOUND_MS = 100.0


def pod_body(name: str = "peer", cpu: str = "2") -> dict[str, Any]:
    """A compliant Pod (Guaranteed, whole CPUs): every contender admits it after judging it in full."""
    res = {"cpu": cpu, "memory": "1Gi"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": f"{name}-"},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1",
                                     "resources": {"requests": dict(res), "limits": dict(res)}}]}}


def pss_mib(pids: list[int]) -> float:
    """Proportional set size of ``pids`` in MiB: pages shared between them (a gunicorn master and its workers)
    counted once, so a tree of processes compares fairly with one process. VmRSS where smaps_rollup is absent."""
    total = 0.0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) / 1024
                    break
        except OSError:
            total += memory_mib([pid], "VmRSS")
    return total


class Sampler:
    """The largest memory (PSS, MiB) of each process group while load runs, sampled every 100 ms."""

    def __init__(self, groups: dict[str, Callable[[], list[int]]]) -> None:
        self.groups, self.peak = groups, dict.fromkeys(groups, 0.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for name, pids in self.groups.items():
                self.peak[name] = max(self.peak[name], pss_mib(pids()))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def _wait_for(what: str, ok: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not in effect after {timeout:.0f} s")
        time.sleep(0.5)


def _by_rate(steps: list[dict[str, Any]]) -> dict[int, dict[str, float]]:
    """Medians over the repeats of each rate step."""
    import statistics
    out: dict[int, dict[str, float]] = {}
    for rate in sorted({s["rate"] for s in steps}):
        runs = [s for s in steps if s["rate"] == rate]
        out[rate] = {k: statistics.median(s[k] for s in runs) for k in ("achieved", "p50", "p99", "p999")}
        out[rate]["errors"] = sum(s["errors"] for s in runs)
        out[rate]["repeats"] = len(runs)
    return out


def latency(seconds: float, rates: tuple[int, ...], connections: int, repeats: int,
            with_kyverno: bool = True) -> dict[str, Any]:
    """Set up every contender on one control plane and measure them, interleaved."""
    from tests.e2e.conftest import TOKEN, control_plane, render_webhook_configurations
    from tests.serving import start_server

    result: dict[str, Any] = {"rows": {ns: {"label": label} for ns, label in CONTENDERS.items()}}
    with tempfile.TemporaryDirectory(prefix="qos-guard-peers-") as tmp, control_plane(Path(tmp) / "cp") as cluster:
        work = Path(tmp)
        for ns, mode in (("peer-none", None), ("peer-webhook", "enforce"), ("peer-vap", "enforce"),
                         ("peer-map", "mutate"), ("peer-kyverno", None)):
            cluster.namespace(ns, mode)
        cluster.namespace("qos-guard")
        config = work / "config.yaml"
        config.write_text(yaml.safe_dump({"exemptions": {"namespaces": ["peer-webhook"]}}))
        printed = cluster.qos_guard("policy", "--mode", "all", "--config", str(config))
        if printed.returncode != 0:
            raise RuntimeError(printed.stderr)
        cluster.kubectl("apply", "-f", "-", stdin=printed.stdout, check=True)
        certs = cluster.qos_guard("certs", "--extra-san", "127.0.0.1", "--output-dir", str(work / "pki"))
        from tests.cgroup import chart_workers
        server = start_server(work / "serve", workers=chart_workers(), cert_dir=work / "pki")  # as the chart runs it
        kyverno = Kyverno(cluster, work)
        try:
            configs = render_webhook_configurations(f"https://127.0.0.1:{server.port}")
            for conf in configs:
                for hook in conf["webhooks"]:
                    hook["clientConfig"]["caBundle"] = certs.stdout.strip()
                    for expr in hook.get("namespaceSelector", {}).get("matchExpressions", []):
                        if expr["key"] == "kubernetes.io/metadata.name":  # only peer-webhook is the webhook's
                            expr["values"] = [*expr["values"], "peer-vap", "peer-map"]
            cluster.kubectl("apply", "-f", "-", stdin=configs, check=True)
            kyverno_error = None
            if with_kyverno:
                try:
                    kyverno.start()
                except Unavailable as exc:
                    kyverno_error = str(exc)
            else:
                kyverno_error = "not run (--no-kyverno)"
            if kyverno_error:
                result["rows"]["peer-kyverno"]["error"] = kyverno_error
            ca = str(cluster.folder / "pki" / "ca.crt")
            port = int(cluster.url.rsplit(":", 1)[1])
            targets = [ns for ns in CONTENDERS if not (ns == "peer-kyverno" and kyverno_error)]
            refused = _refusals(cluster, targets)
            for ns in targets:
                result["rows"][ns]["refuses_violating_pod"] = refused[ns]
            api = _apiserver_pids(cluster)
            groups: dict[str, Callable[[], list[int]]] = {
                "peer-webhook": lambda: process_tree(server.proc.pid), "peer-kyverno": kyverno.pids,
                "kube-apiserver": lambda: api}
            result["idle_mib"] = {k: pss_mib(v()) for k, v in groups.items()}
            bodies = work / "pod.jsonl"
            bodies.write_text(json.dumps(pod_body()) + "\n")
            for ns in targets:  # warm: connections, informers, caches
                load.run(port, ca, f"/api/v1/namespaces/{ns}/pods?dryRun=All", bodies, 2.0, connections, rate=20,
                         token=TOKEN, expect=201, host="127.0.0.1")
            with Sampler(groups) as sampler:
                for rep in range(repeats):
                    for step, rate in enumerate(rates):
                        shift = (step + rep) % len(targets)
                        for ns in targets[shift:] + targets[:shift]:
                            r = load.run(port, ca, f"/api/v1/namespaces/{ns}/pods?dryRun=All", bodies, seconds,
                                         connections, rate=rate, token=TOKEN, expect=201, host="127.0.0.1")
                            result["rows"][ns].setdefault("steps", []).append(
                                {"rate": rate, "achieved": round(r.rate, 1), "p50": r.p50, "p99": r.p99,
                                 "p999": r.p999, "errors": r.errors, "requests": r.requests})
            result["load_peak_mib"] = sampler.peak
            for ns in targets:
                row = result["rows"][ns]
                row["by_rate"] = _by_rate(row["steps"])
                held = [rate for rate, m in row["by_rate"].items()
                        if m["p99"] <= P99_BOUND_MS and m["errors"] == 0 and m["achieved"] >= 0.95 * rate]
                row["held_rate"] = max(held, default=0)
        finally:
            kyverno.stop()
            server.stop()
    return result


def _apiserver_pids(cluster: Any) -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"secure-port={cluster.url.rsplit(':', 1)[1]}"], capture_output=True,
                         text=True)
    return [int(p) for p in out.stdout.split()]


def _refusals(cluster: Any, namespaces: list[str]) -> dict[str, bool]:
    """Each contender refuses a Pod with a fractional CPU (the setup is in effect before anything is timed);
    the one without admission stores it."""
    bad = pod_body("bad", cpu="1500m")
    out: dict[str, bool] = {}
    for ns in namespaces:
        def refused(ns: str = ns) -> bool:
            proc = cluster.kubectl("create", "--dry-run=server", "-n", ns, "-f", "-", stdin=bad)
            return bool(proc.returncode != 0)

        if ns != "peer-none":
            _wait_for(f"admission in {ns}", refused)
        out[ns] = refused()
    return out
