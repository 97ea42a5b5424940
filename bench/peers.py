"""qos-guard beside what an operator would deploy instead for this job, on one real API server (``make bench``
only; results in ``docs/performance/peers.md`` and ``peers.json``).

One etcd + kube-apiserver (the e2e control plane), one namespace per contender, each selected only by its own
admission: ``peer-none`` (no admission), ``peer-webhook`` (``qos-guard serve``, enforce), ``peer-vap``
(qos-guard's generated ValidatingAdmissionPolicy, enforce), ``peer-map`` (its MutatingAdmissionPolicy and the
mutate-mode ValidatingAdmissionPolicy) and ``peer-kyverno`` (Kyverno's admission controller, built from the
Go module proxy at ``KYVERNO_VERSION`` by ``hack/build-tools.sh kyverno``, with the policy library's "Require
QoS Guaranteed" and the whole-CPU check in bench/kyverno/).

Measured, interleaved in one run (every rate step visits every contender, in rotated order):

- latency of a compliant Pod CREATE through the API server (``dryRun=All``: admission runs in full, nothing is
  stored, so etcd and its growing size weigh the same on every row), p50/p99 at fixed offered rates (open
  loop, bench/loadgen), and the highest rate each holds with p99 <= 100 ms;
- memory (PSS: pages shared by a gunicorn master and its worker counted once) of each contender's processes at
  idle and the peak under that load (the policies run inside kube-apiserver: its own figures are given for
  them); qos-guard's replica runs as the chart runs it (its default workers);
- correctness: ``qos-guard check`` and the Kyverno CLI over the same objects from the differential generator
  (tests/fidelity/grammar.py) that Kubernetes' own code judged (the oracle): the share each gets right, where
  right is "allowed" exactly when the API server stores the object Guaranteed and kubelet's static CPU
  Manager pins every container.

When Kyverno cannot be built or run here, its rows stay, holding the exact error.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from bench import load
from bench.corpus import ROOT
from bench.server import memory_mib, process_tree

KYVERNO_VERSION = "v1.14.4"
HERE = Path(__file__).resolve().parent
POLICIES = [HERE / "kyverno" / "require-qos-guaranteed.yaml", HERE / "kyverno" / "require-whole-cpus.yaml"]
CONTENDERS = {"peer-none": "no admission", "peer-webhook": "qos-guard webhook (enforce)",
              "peer-vap": "qos-guard ValidatingAdmissionPolicy (enforce)",
              "peer-map": "qos-guard MutatingAdmissionPolicy + VAP (mutate)",
              "peer-kyverno": f"Kyverno {KYVERNO_VERSION} (library policy + whole-CPU check, Enforce)"}
RATES = (25, 50, 100, 200, 400)
P99_BOUND_MS = 100.0


class Unavailable(Exception):
    """A contender that cannot be built or run here: its row keeps this message."""


def kyverno_tools() -> tuple[str, str]:
    proc = subprocess.run(["bash", str(ROOT / "hack" / "build-tools.sh"), "kyverno"], capture_output=True,
                          text=True, timeout=7200)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or len(lines) < 2:
        raise Unavailable(f"hack/build-tools.sh kyverno failed (exit {proc.returncode}): "
                          f"{proc.stderr.strip()[-2000:]}")
    return lines[-2], lines[-1]


def kyverno_source() -> Path:
    """The released module (its CRDs and default ConfigMaps), from the Go module cache."""
    proc = subprocess.run(["go", "mod", "download", "-json", f"github.com/kyverno/kyverno@{KYVERNO_VERSION}"],
                          capture_output=True, text=True, timeout=600, env=dict(os.environ, GOFLAGS="-mod=mod"))
    if proc.returncode != 0:
        raise Unavailable(f"go mod download github.com/kyverno/kyverno@{KYVERNO_VERSION}: {proc.stderr.strip()}")
    return Path(json.loads(proc.stdout)["Dir"])


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pod_body(name: str = "peer", cpu: str = "2") -> dict[str, Any]:
    """A compliant Pod (Guaranteed, whole CPUs): every contender admits it after judging it in full."""
    res = {"cpu": cpu, "memory": "1Gi"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": f"{name}-"},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1",
                                     "resources": {"requests": dict(res), "limits": dict(res)}}]}}


def library_policy(text: str) -> list[dict[str, Any]]:
    """The library's policy as published, set to Enforce (it ships Audit) and scoped to its namespace."""
    docs = [d for d in yaml.safe_load_all(text) if d]
    for doc in docs:
        doc["spec"]["validationFailureAction"] = "Enforce"
        for rule in doc["spec"]["rules"]:
            for clause in rule["match"].get("any", []):
                clause["resources"]["namespaces"] = ["peer-kyverno"]
    return docs


class Kyverno:
    """Kyverno's admission controller run out of cluster (``--serverIP``) against the control plane."""

    def __init__(self, cluster: Any, folder: Path) -> None:
        self.cluster, self.folder = cluster, folder
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        controller, _cli = kyverno_tools()
        source = kyverno_source()
        c = self.cluster
        crds = sorted((source / "config" / "crds").rglob("*.yaml"))
        for crd in crds:
            out = c.kubectl("apply", "--server-side", "-f", str(crd))
            if out.returncode != 0:
                raise Unavailable(f"applying {crd.name}: {out.stderr.strip()}")
        c.kubectl("create", "namespace", "kyverno")
        install = [d for d in yaml.safe_load_all((source / "config" / "install-latest-testing.yaml").read_text())
                   if d and d.get("kind") == "ConfigMap" and d["metadata"]["name"] in ("kyverno", "kyverno-metrics")]
        for cm in install:
            if cm["metadata"]["name"] == "kyverno":  # its webhooks select only its namespace here
                cm["data"]["webhooks"] = json.dumps({"namespaceSelector": {"matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["peer-kyverno"]}]}})
        c.kubectl("apply", "-f", "-", stdin=install, check=True)
        # The Deployment it looks itself up by (no controller-manager here: it never gets Pods).
        c.kubectl("apply", "-f", "-", check=True, stdin={
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "kyverno-admission-controller", "namespace": "kyverno"},
            "spec": {"selector": {"matchLabels": {"app": "kyverno"}}, "template": {
                "metadata": {"labels": {"app": "kyverno"}},
                "spec": {"containers": [{"name": "kyverno", "image": "registry.invalid/kyverno:1"}]}}}})
        port = _free_port()
        env = dict(os.environ, KYVERNO_NAMESPACE="kyverno", KYVERNO_SERVICEACCOUNT_NAME="kyverno-admission-controller",
                   KYVERNO_ROLE_NAME="kyverno:admission-controller", KYVERNO_DEPLOYMENT="kyverno-admission-controller",
                   KYVERNO_POD_NAME="kyverno-admission-controller-bench", KYVERNO_SVC="kyverno-svc",
                   INIT_CONFIG="kyverno", METRICS_CONFIG="kyverno-metrics")
        log = (self.folder / "kyverno.log").open("wb")
        # The chart's flags (config/install-latest-testing.yaml), out of cluster: the webhook at serverIP.
        self.proc = subprocess.Popen(
            [controller, f"--kubeconfig={c.kubeconfig}", f"--serverIP=127.0.0.1:{port}",
             f"--webhookServerPort={port}", f"--servicePort={port}",
             "--caSecretName=kyverno-svc.kyverno.svc.kyverno-tls-ca",
             "--tlsSecretName=kyverno-svc.kyverno.svc.kyverno-tls-pair",
             "--backgroundServiceAccountName=system:serviceaccount:kyverno:kyverno-background-controller",
             "--reportsServiceAccountName=system:serviceaccount:kyverno:kyverno-reports-controller",
             "--resyncPeriod=15m", "--crdWatcher=false", "--disableMetrics=true", "--admissionReports=true",
             "--maxAdmissionReports=1000", "--autoUpdateWebhooks=true", "--enableConfigMapCaching=true",
             "--controllerRuntimeMetricsAddress=0", "--enableDeferredLoading=true", f"--profilePort={_free_port()}",
             "--maxAPICallResponseLength=2000000", "--loggingFormat=text", "--v=2",
             "--omitEvents=PolicyApplied,PolicySkipped", "--enablePolicyException=false",
             "--protectManagedResources=false",
             "--enableReporting=validate,mutate,mutateExisting,imageVerify,generate"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.folder)
        policies = [d for p in POLICIES for d in library_policy(p.read_text())]
        deadline = time.monotonic() + 300
        while True:
            if self.proc.poll() is not None:
                raise Unavailable(f"kyverno exited {self.proc.returncode}: "
                                  f"{(self.folder / 'kyverno.log').read_text()[-3000:]}")
            applied = c.kubectl("apply", "-f", "-", stdin=policies)
            if applied.returncode == 0 and self._ready([p["metadata"]["name"] for p in policies]):
                return
            if time.monotonic() > deadline:
                log_tail = (self.folder / "kyverno.log").read_text()[-2000:]
                raise Unavailable(f"kyverno did not become ready in 300 s: {applied.stderr.strip()[-500:]} {log_tail}")
            time.sleep(2)

    def _ready(self, names: list[str]) -> bool:
        for name in names:
            out = self.cluster.kubectl("get", "clusterpolicy", name, "-o", "json")
            if out.returncode != 0:
                return False
            conditions = json.loads(out.stdout).get("status", {}).get("conditions", [])
            if not any(cond.get("type") == "Ready" and cond.get("status") == "True" for cond in conditions):
                return False
        hooks = self.cluster.kubectl("get", "validatingwebhookconfigurations", "-o", "name").stdout
        return "kyverno-resource-validating-webhook-cfg" in hooks

    def pids(self) -> list[int]:
        return process_tree(self.proc.pid) if self.proc is not None and self.proc.poll() is None else []

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


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


# ---- correctness over the oracle-judged objects ----

def generated_objects(count: int, seed: int) -> list[dict[str, Any]]:
    """Pods and workloads from the differential generator (Lists are taken item by item, as kubectl sends them)."""
    from tests.fidelity.grammar import ObjectGrammar
    grammar = ObjectGrammar(random.Random(seed))
    out: list[dict[str, Any]] = []
    while len(out) < count:
        obj = grammar.manifest()
        items = obj["items"] if obj["kind"] == "List" else [obj]
        for i, item in enumerate(items):
            item = json.loads(json.dumps(item))
            item.setdefault("metadata", {})["name"] = f"o{len(out)}-{i}"
            item["metadata"]["namespace"] = "peer"
            out.append(item)
    return out[:count]


def correctness(count: int, seed: int, with_kyverno: bool = True) -> dict[str, Any]:
    from tests.fidelity.oracle import Oracle
    from tests.fidelity.test_objects import guaranteed_and_pinned, valid
    objects = generated_objects(count, seed)
    with Oracle("objects") as oracle:
        answers = oracle.ask(objects)
    judged = [(obj, guaranteed_and_pinned(a)) for obj, a in zip(objects, answers, strict=True) if valid(a)]
    result: dict[str, Any] = {"objects": len(objects), "accepted_by_api_server": len(judged), "seed": seed,
                              "should_allow": sum(1 for _, ok in judged if ok)}
    with tempfile.TemporaryDirectory(prefix="qos-guard-peers-check-") as tmp:
        folder = Path(tmp)
        names = [f"{o['kind']}/{o['metadata']['name']}" for o, _ in judged]
        files = []
        for i, (obj, _) in enumerate(judged):  # one file per object: kubectl stops a file at its first error
            path = folder / f"o{i:05d}.json"  # the same JSON text the oracle judged (YAML would round numbers)
            path.write_text(json.dumps(obj))
            files.append(path)
        result["qos-guard check"] = _score(names, _qos_guard_denied(files, names), judged)
        if with_kyverno:
            try:
                result["Kyverno CLI"] = _score(names, _kyverno_denied(files, folder), judged)
            except Unavailable as exc:
                result["Kyverno CLI"] = {"error": str(exc)}
        else:
            result["Kyverno CLI"] = {"error": "not run (--no-kyverno)"}
    return result


def _score(names: list[str], denied: set[str], judged: list[tuple[dict[str, Any], bool]]) -> dict[str, Any]:
    """How many answers match Kubernetes', and the misses that are qos-guard's documented divergences
    (tests/fidelity/divergences.py: bounds and one deliberate choice)."""
    from tests.fidelity.test_objects import _known
    right = false_allow = false_deny = documented = 0
    for name, (obj, should_allow) in zip(names, judged, strict=True):
        allows = name not in denied
        if allows == should_allow:
            right += 1
            continue
        documented += _known(obj, None) is not None
        if allows:
            false_allow += 1
        else:
            false_deny += 1
    return {"right": right, "share": right / len(judged) if judged else 0.0, "allowed_wrongly": false_allow,
            "denied_wrongly": false_deny, "misses_on_documented_divergences": documented}


def _qos_guard_denied(files: list[Path], names: list[str]) -> set[str]:
    """What ``check`` reports a violation for, or cannot read (it exits non-zero on both)."""
    proc = subprocess.run([sys.executable, "-m", "webhook.cli", "check", "--format", "json", *map(str, files)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    report = json.loads(proc.stdout)
    by_file = dict(zip(map(str, files), names, strict=True))
    return {f"{v['kind']}/{v['name']}" for v in report["violations"]} | {
        by_file.get(e.get("file", ""), "") for e in report.get("errors", [])}


def _kyverno_denied(files: list[Path], folder: Path) -> set[str]:
    _controller, cli = kyverno_tools()
    policies = folder / "policies.yaml"
    policies.write_text(yaml.safe_dump_all([d for p in POLICIES for d in yaml.safe_load_all(p.read_text()) if d]))
    denied: set[str] = set()
    for chunk in _chunks(files, 400):
        proc = subprocess.run([cli, "apply", str(policies), "--policy-report", "--output-format", "json",
                               "--continue-on-fail",
                               *(a for f in chunk for a in ("--resource", str(f)))],
                              capture_output=True, text=True, timeout=1200, cwd=folder)
        if not proc.stdout.strip():
            raise Unavailable(f"kyverno apply (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
        denied |= _kyverno_failures(proc.stdout)
    return denied


def _chunks(items: list[Path], size: int) -> Iterator[list[Path]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _kyverno_failures(output: str) -> set[str]:
    """The resources a policy report of ``kyverno apply`` marks fail or error (a denial at admission)."""
    start = output.find("{")
    reports = json.loads(output[start:]) if start >= 0 else {}
    items = reports.get("items", [reports]) if isinstance(reports, dict) else reports
    denied: set[str] = set()
    for report in items:
        for r in report.get("results", []):
            if r.get("result") in ("fail", "error"):
                for res in r.get("resources", []):
                    denied.add(f"{res['kind']}/{res['name']}")
    return denied


def write(result: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "peers.json").write_text(json.dumps(result, indent=2) + "\n")
    lat, corr = result["latency"], result["correctness"]
    lines = ["# qos-guard and its peers on one API server", "",
             f"`python -m bench.peers` (part of `make bench`), {result['date']}, {result['machine']}. One etcd + "
             "kube-apiserver on loopback; a compliant Pod created (`dryRun=All`: admitted in full, not stored) in "
             "each contender's namespace at fixed offered rates, open loop, "
             f"{result['seconds']:.0f} s per step, {result.get('repeats', 1)} rounds over every rate and contender in "
             "rotated order; medians over the rounds. Milliseconds from the scheduled send time to the API server's "
             "answer; held rate: the highest offered rate with p99 ≤ 100 ms, no error and ≥ 95 % of it achieved.",
             "",
             "| contender | held rate/s (p99 ≤ 100 ms) | " + " | ".join(f"p50 / p99 @ {r}/s" for r in result["rates"])
             + " | memory idle MiB (PSS) | memory under load MiB (PSS) |",
             "| --- | ---: | " + " | ".join("---:" for _ in result["rates"]) + " | ---: | ---: |"]
    mem_key = {"peer-webhook": "peer-webhook", "peer-kyverno": "peer-kyverno"}
    for ns, row in lat["rows"].items():
        if "error" in row:
            lines.append(f"| {row['label']} | — | " + " | ".join("—" for _ in result["rates"])
                         + f" | — | — |\n| | *not measured: {row['error'][:600].replace('|', '/')}* |")
            continue
        by_rate = {int(k): v for k, v in row.get("by_rate", {}).items()}
        cells = [f"{by_rate[r]['p50']:.1f} / {by_rate[r]['p99']:.1f}" if r in by_rate else "—" for r in result["rates"]]
        key = mem_key.get(ns)
        idle = f"{lat['idle_mib'][key]:.0f}" if key else "in kube-apiserver"
        peak = f"{lat['load_peak_mib'][key]:.0f}" if key else "in kube-apiserver"
        lines.append(f"| {row['label']} | {row.get('held_rate', 0)} | " + " | ".join(cells) + f" | {idle} | {peak} |")
    lines += ["", "The same CPUs run the load generator, etcd and kube-apiserver too: "
              "where even `no admission` passes 100 ms at p99, the step measured the machine, not admission. "
              "Compare rows within a column (taken in the same rounds), and the held rates with that in mind."]
    lines += ["", f"kube-apiserver (which runs the admission policies itself, and every request of every row): "
              f"{lat['idle_mib']['kube-apiserver']:.0f} MiB idle, {lat['load_peak_mib']['kube-apiserver']:.0f} MiB "
              "peak under the load.", "",
              "## Correctness", "",
              f"{corr['objects']} Pods and workloads from the differential generator (seed {corr['seed']}); "
              f"{corr['accepted_by_api_server']} of them the API server accepts, and Kubernetes' own code (the "
              f"oracle) stores {corr['should_allow']} of those Guaranteed with every container pinned. Right = "
              "allowed exactly those. Each tool reads the same JSON the oracle judged, one file per object. The "
              "last column counts the misses on objects where qos-guard deliberately differs (values beyond "
              "kubelet's int64 arithmetic, a forged `status.qosClass: Guaranteed`; tests/fidelity/divergences.py).",
              "",
              "| tool | right | share | allowed wrongly | denied wrongly | misses on qos-guard's documented "
              "divergences |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for tool in ("qos-guard check", "Kyverno CLI"):
        r = corr[tool]
        if "error" in r:
            lines.append(f"| {tool} | — | — | — | — | — |\n| | *not measured: {r['error'][:600].replace('|', '/')}* |")
        else:
            lines.append(f"| {tool} | {r['right']} | {r['share']:.1%} | {r['allowed_wrongly']} | "
                         f"{r['denied_wrongly']} | {r['misses_on_documented_divergences']} |")
    lines += ["", "The Kyverno policies: bench/kyverno/require-qos-guaranteed.yaml (the policy library's, as "
              "published, Apache-2.0; set to Enforce) and bench/kyverno/require-whole-cpus.yaml (the whole-CPU "
              "check as a Kyverno user writes it).", ""]
    (out / "peers.md").write_text("\n".join(lines))


def write_plot(result: dict[str, Any], path: Path) -> None:
    """p50 and p99 against the offered rate for each contender, and each tool's share right."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (lat, corr) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [2, 1]})
    for row in result["latency"]["rows"].values():
        by_rate = sorted((int(k), v) for k, v in row.get("by_rate", {}).items())
        if not by_rate:
            continue
        rates = [r for r, _ in by_rate]
        line = lat.plot(rates, [m["p99"] for _, m in by_rate], marker="o", label=f"{row['label']} p99")
        lat.plot(rates, [m["p50"] for _, m in by_rate], marker=".", linestyle="--", color=line[0].get_color())
    lat.axhline(P99_BOUND_MS, color="grey", linewidth=0.8)
    lat.set(xlabel="offered Pod creates/s", ylabel="ms (dashed: p50)", title="Pod CREATE through kube-apiserver",
            xscale="log", yscale="log")
    lat.legend(fontsize=7)
    tools = [t for t in ("qos-guard check", "Kyverno CLI") if "share" in result["correctness"][t]]
    corr.bar(tools, [100 * result["correctness"][t]["share"] for t in tools])
    corr.set(ylabel="% of objects judged as Kubernetes does", ylim=(0, 100), title="Correctness against the oracle")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.peers")
    parser.add_argument("--seconds", type=float, default=6.0, help="length of each rate step per contender")
    parser.add_argument("--rates", default=",".join(map(str, RATES)))
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2, help="rounds over every rate and contender")
    parser.add_argument("--objects", type=int, default=2000, help="objects for the correctness comparison")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--no-kyverno", action="store_true", help="qos-guard's rows only (no Kyverno build)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "performance"))
    args = parser.parse_args(argv)
    rates = tuple(int(r) for r in args.rates.split(","))
    import platform
    result = {"date": time.strftime("%Y-%m-%d"), "seconds": args.seconds, "rates": list(rates),
              "machine": f"{len(os.sched_getaffinity(0))} CPUs (1-minute load average {os.getloadavg()[0]:.2f} "
                         f"before the run), Python {platform.python_version()}, kube-apiserver v1.36.3",
              "repeats": args.repeats,
              "latency": latency(args.seconds, rates, args.connections, args.repeats, not args.no_kyverno),
              "correctness": correctness(args.objects, args.seed, not args.no_kyverno)}
    write(result, Path(args.out))
    write_plot(result, Path(args.out) / "peers.png")
    print((Path(args.out) / "peers.md").read_text())
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
