"""The chart's second scheduler as the chart renders it (``helm template``: its KubeSchedulerConfiguration, its
certificates' Secret, the extender's arguments), run out of cluster against the real API server with nothing but
the chart's ServiceAccount and RBAC (the e2e tier has no kubelet to run the Deployment):

- the extender started with the chart's arguments answers ``/healthz`` and ``/readyz`` to anyone (kubelet's
  probes send no certificate), refuses ``/filter`` and ``/prioritize`` without a client certificate (403) and a
  certificate of another CA at the handshake, and answers the chart's client certificate; the real kube-scheduler
  with the chart's ``tlsConfig`` is answered and binds where the Pod fits one NUMA node;
- leader election, as an upgrade runs it: two kube-scheduler processes with the chart's configuration (the old
  Pod, leading, and the new one, started beside it by the rollout's surge); during a burst of Pods the old one is
  stopped (SIGTERM, as kubelet stops a replaced Pod): only the Lease holder ever binds, the standby takes the
  Lease and binds the rest, and no bind of one falls in the other's time as leader (their logs, the Lease
  sampled every 0.1 s).

One extender serves both schedulers here (in the chart each Pod has its own, on its own loopback).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import functools
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests import waiting
from tests.binaries import binary
from tests.e2e import test_extender
from tests.e2e.conftest import CHART, Cluster, stop_process, wait_until_ready
from tests.e2e.test_extender import (
    GIB,
    GPU,
    NAMESPACE,
    SCHEDULER,
    Api,
    add_node,
    bound_to,
    delete_pods,
    events,
    failed_scheduling,
    gpu_pod,
    pods,
)
from tests.serving import free_port
from webhook.serving.certs import write_bundle

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RELEASE_NS = "qos-guard"
KLOG = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) ")
BOUND = re.compile(r'"Successfully bound pod to node" pod="[^/"]+/([^"]+)"')  # -v=2
TRIED = re.compile(r'"Attempting to schedule pod" pod="[^/"]+/([^"]+)"')  # -v=3: a scheduling cycle begins
# client-go's leader election (tools/leaderelection/leaderelection.go) logs with klog's printf up to v0.34
# (kube-scheduler 1.33, 1.34): ``attempting to acquire leader lease NS/NAME...``, ``successfully acquired lease
# NS/NAME``; structured from v0.35: ``"Attempting to acquire leader lease..." lock="NS/NAME"``, ``"Successfully
# acquired lease" lock="NS/NAME"``. Group 1 or 2 is the lock, whichever the release spells.
ATTEMPTING = re.compile(r'ttempting to acquire leader lease(?: (\S+?)\.\.\.$|\.\.\." lock="([^"]+)")')
ACQUIRED = re.compile(r'uccessfully acquired lease(?: (\S+)$|" lock="([^"]+)")')
LOCK = f"{RELEASE_NS}/{SCHEDULER}"
# The fixture: the NRT CRD and test_extender's namespace; afterwards its nodes and the CRD gone again.
api = test_extender.api


@dataclass
class Rendered:
    """The chart's scheduler objects, with the files and ports moved to this machine."""

    objects: list[dict[str, Any]]
    config: dict[str, Any]  # the KubeSchedulerConfiguration, its tlsConfig files under ``pki``
    extender_args: list[str]  # the chart's, its files under ``pki`` and its port free
    pki: Path
    url: str
    kubeconfig: Path


def render(cluster: Cluster, folder: Path) -> Rendered:
    """``helm template`` of the scheduler with the chart's defaults; its RBAC applied, and a kubeconfig with a
    token of its ServiceAccount."""
    cluster.namespace(RELEASE_NS)
    proc = subprocess.run([binary("helm"), "template", "qos-guard", str(CHART), "--namespace", RELEASE_NS,
                           "--set", "scheduler.enabled=true", "--show-only", "templates/scheduler.yaml"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    objects = [d for d in yaml.safe_load_all(proc.stdout) if d]
    pki = folder / "pki"
    pki.mkdir(parents=True, exist_ok=True)
    secret = next(o for o in objects if o["kind"] == "Secret")
    for key, value in secret["data"].items():
        (pki / key).write_bytes(base64.b64decode(value))
    config: dict[str, Any] = yaml.safe_load(next(o for o in objects if o["kind"] == "ConfigMap")["data"]["config.yaml"])
    (ext,) = config["extenders"]
    assert ext["urlPrefix"] == "https://127.0.0.1:8444" and ext["enableHTTPS"] is True
    port = free_port()  # the chart's port may be taken on this machine: the same configuration on a free one
    ext["urlPrefix"] = url = f"https://127.0.0.1:{port}"
    ext["tlsConfig"] = {k: v.replace("/etc/qos-guard-scheduler-tls/", f"{pki}/") for k, v in ext["tlsConfig"].items()}
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    extender = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "extender")
    args = [a.replace("/etc/qos-guard-extender/", f"{pki}/").replace(":8444", f":{port}") for a in extender["args"]]
    assert f"--client-ca-file={pki}/ca.crt" in args and not any(a.startswith("--plain") for a in args), args
    rbac = [o for o in objects if o["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                                  "RoleBinding")]
    cluster.kubectl("apply", "-f", "-", stdin=rbac, check=True)
    kubeconfig = cluster.kubeconfig_as("qos-guard-scheduler", RELEASE_NS, folder / "kubeconfig")
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    return Rendered(objects, config, args, pki, url, kubeconfig)


def unrender(cluster: Cluster, rendered: Rendered) -> None:
    rbac = [o for o in rendered.objects if o["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                                                           "Role", "RoleBinding")]
    cluster.kubectl("delete", "--ignore-not-found", "-f", "-", stdin=rbac)
    cluster.kubectl("delete", "lease", SCHEDULER, "-n", RELEASE_NS, "--ignore-not-found")


@contextlib.contextmanager
def chart_extender(cluster: Cluster, rendered: Rendered, folder: Path) -> Iterator[Path]:
    """``qos-guard extender`` with the chart's arguments (and the ServiceAccount's kubeconfig)."""
    log = folder / "extender.log"
    proc = subprocess.Popen([sys.executable, "-m", "webhook.cli", *rendered.extender_args,
                             "--kubeconfig", str(rendered.kubeconfig)],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, env=cluster.env, cwd=folder)
    try:
        wait_until_ready("the chart's extender", lambda: requests.get(
            rendered.url + "/readyz", verify=str(rendered.pki / "ca.crt"), timeout=2).ok, proc, log)
        yield log
    finally:
        stop_process(proc)


def start_scheduler(folder: Path, rendered: Rendered) -> tuple[subprocess.Popen[bytes], Path, int]:
    """kube-scheduler with the chart's configuration (its serving port on a free loopback port: two run here)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(rendered.config))
    log = folder / "kube-scheduler.log"
    kubeconfig = rendered.kubeconfig
    port = free_port()
    proc = subprocess.Popen([binary("kube-scheduler"), f"--config={path}", "--bind-address=127.0.0.1",
                             f"--secure-port={port}", f"--cert-dir={folder / 'certs'}",
                             f"--authentication-kubeconfig={kubeconfig}",
                             f"--authorization-kubeconfig={kubeconfig}", "-v=3"],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)
    wait_until_ready(f"kube-scheduler in {folder.name}", lambda: lease_said(ATTEMPTING, log) is not None,
                     proc, log, timeout=60)
    return proc, log, port


def ready(port: int) -> bool:
    """kube-scheduler's ``/readyz`` (the chart's readinessProbe; served without authentication)."""
    return requests.get(f"https://127.0.0.1:{port}/readyz", verify=False, timeout=5).status_code == 200


def args_for(pod: dict[str, Any], nodes: list[str]) -> bytes:
    return json.dumps({"Pod": pod, "NodeNames": nodes}).encode()


def test_the_charts_extender_answers_only_the_schedulers_client_certificate(
        cluster: Cluster, api: Api, tmp_path: Path) -> None:
    rendered = render(cluster, tmp_path)
    ca = str(rendered.pki / "ca.crt")
    client = (str(rendered.pki / "client.crt"), str(rendered.pki / "client.key"))
    other = write_bundle(tmp_path / "other", ["qos-guard-numa"], 2, keep_ca_key=False)  # a CA not trusted
    add_node(api, "z-fits", [{"cpu": 4, "memory": 16 * GIB, GPU: 1}, {"cpu": 4, "memory": 16 * GIB}], "chart")
    add_node(api, "z-split", [{"cpu": 2, "memory": 16 * GIB, GPU: 1}, {"cpu": 6, "memory": 16 * GIB}], "chart")
    body = args_for(gpu_pod("probe", 4, pool="chart"), ["z-fits", "z-split"])
    try:
        with chart_extender(cluster, rendered, tmp_path) as extender_log:
            seen: dict[str, str] = {}
            for path in ("/healthz", "/readyz"):  # kubelet's probes: no certificate
                answer = requests.get(rendered.url + path, verify=ca, timeout=5)
                assert answer.status_code == 200, (path, answer.status_code, answer.text)
                seen[f"GET {path}, no certificate"] = str(answer.status_code)
            for verb in ("filter", "prioritize"):
                answer = requests.post(f"{rendered.url}/{verb}", data=body, verify=ca, timeout=5,
                                       headers={"Content-Type": "application/json"})
                assert answer.status_code == 403, (verb, answer.status_code, answer.text)
                assert answer.json()["error"] == "client certificate required", answer.text
                seen[f"POST /{verb}, no certificate"] = f"{answer.status_code} {answer.json()['error']}"
            with pytest.raises(requests.exceptions.ConnectionError):  # an SSLError, or a reset after the alert
                requests.post(rendered.url + "/filter", data=body, verify=ca, timeout=5,
                              cert=(str(other.cert), str(other.key)))
            seen["POST /filter, another CA's certificate"] = "refused at the TLS handshake"
            answer = requests.post(rendered.url + "/filter", data=body, verify=ca, timeout=5, cert=client,
                                   headers={"Content-Type": "application/json"})
            assert answer.status_code == 200, answer.text
            seen["POST /filter, the scheduler's certificate"] = f"200 NodeNames {answer.json()['NodeNames']}"
            print("\nthe extender as the chart configures it:")
            for what, said in seen.items():
                print(f"  {what}: {said}")
            proc, scheduler_log, _ = start_scheduler(tmp_path / "scheduler", rendered)
            try:
                for i in range(2):
                    api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", gpu_pod(f"chart-{i}", 4, pool="chart"))
                waiting.eventually("the first bound", functools.partial(bound_to, api, "chart-0"), within=60)
                waiting.eventually("the second refused", functools.partial(failed_scheduling, api, "chart-1"),
                                   within=60)
                assert bound_to(api, "chart-0") == "z-fits"
                said = next(e for e in events(api, "chart-1") if e.startswith("FailedScheduling"))
                assert "1 qos-guard: container" in said and "1 Insufficient example.com/gpu" in said, said
                print(f"the chart's scheduler (its configuration, tlsConfig and RBAC): chart-0 on z-fits; "
                      f"chart-1: {said[:160]}...")
            finally:
                stop_process(proc)
            assert lease_said(ACQUIRED, scheduler_log) is not None, scheduler_log.read_text()[-2000:]
            for written in (extender_log, scheduler_log):  # the chart's RBAC is enough: nothing refused to either
                forbidden = [line for line in written.read_text().splitlines() if "forbidden" in line.lower()]
                assert not forbidden, forbidden[:3]
    finally:
        delete_pods(api)
        unrender(cluster, rendered)


def klog_time(line: str) -> float | None:
    """The epoch seconds of a klog line's header (``I1201 22:01:02.345678 ...``), this year."""
    found = KLOG.match(line)
    if found is None:
        return None
    month, day, hour, minute, second, micro = (int(g) for g in found.groups())
    stamp = datetime.datetime(datetime.datetime.now().year, month, day, hour, minute, second, micro)
    return stamp.timestamp()


def first_said(log: Path, pattern: re.Pattern[str]) -> dict[str, float]:
    """Pod name -> when this scheduler's log first said ``pattern`` of it."""
    out: dict[str, float] = {}
    for line in log.read_text().splitlines():
        found = pattern.search(line)
        when = klog_time(line)
        if found and when is not None:
            out.setdefault(found.group(1), when)
    return out


def binds(log: Path) -> dict[str, float]:
    """Pod name -> when this scheduler bound it (its ``-v=2`` line)."""
    return first_said(log, BOUND)


def tried(log: Path) -> dict[str, float]:
    """Pod name -> when this scheduler began its first scheduling cycle for it (its ``-v=3`` line)."""
    return first_said(log, TRIED)


def lease_said(pattern: re.Pattern[str], log: Path) -> float | None:
    """When the log first says ``pattern`` (attempting, acquired) of the chart's Lease, in either spelling."""
    for line in log.read_text().splitlines():
        found = pattern.search(line)
        if found and LOCK in found.groups():
            return klog_time(line)
    return None


def acquired(log: Path) -> float | None:
    return lease_said(ACQUIRED, log)


class LeaseWatch:
    """The Lease's holder sampled every 0.1 s: (time, holderIdentity) at each change."""

    def __init__(self, api: Api) -> None:
        self.api, self.changes = api, [(time.time(), "")]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.wait(0.1):
            lease = self.api("GET", f"/apis/coordination.k8s.io/v1/namespaces/{RELEASE_NS}/leases/{SCHEDULER}",
                             ok=(200, 404))
            holder = str((lease or {}).get("spec", {}).get("holderIdentity") or "")
            if holder != self.changes[-1][1]:
                self.changes.append((time.time(), holder))

    def __enter__(self) -> LeaseWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)


def test_an_upgrade_never_runs_two_active_schedulers(cluster: Cluster, api: Api, tmp_path: Path) -> None:
    rendered = render(cluster, tmp_path)
    assert rendered.config["leaderElection"] == {"leaderElect": True, "resourceLock": "leases",
                                                 "resourceName": SCHEDULER, "resourceNamespace": RELEASE_NS}
    for i in range(4):
        add_node(api, f"r-{i}", [{"cpu": 64, "memory": 256 * GIB, GPU: 32}], "rollout")
    count, stop_after = 120, 30
    names = [f"burst-{i}" for i in range(count)]
    old_proc = new_proc = None
    try:
        with chart_extender(cluster, rendered, tmp_path), LeaseWatch(api) as lease:
            old_proc, old_log, _ = start_scheduler(tmp_path / "old", rendered)
            waiting.eventually("the old Pod leads", lambda: acquired(old_log) is not None, within=60)
            new_proc, new_log, new_port = start_scheduler(tmp_path / "new", rendered)  # the rollout's surge
            # The standby is Ready (or the rollout, maxUnavailable 0, would never stop the old Pod) and not leading.
            waiting.eventually("the standby ready", functools.partial(ready, new_port), within=60, every=0.5)
            time.sleep(3)  # a retry period (2 s) and more: the standby asked for the Lease and was refused
            assert acquired(new_log) is None and ready(new_port)
            creating = threading.Thread(target=lambda: [api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods",
                                                            gpu_pod(name, 1, pool="rollout")) for name in names])
            creating.start()  # the burst goes on while the old Pod is stopped
            waiting.eventually(f"{stop_after} bound", lambda: len(binds(old_log)) >= stop_after, within=120,
                               every=0.05)
            stopped_at = time.time()
            stop_process(old_proc)  # kubelet stops the replaced Pod: SIGTERM
            waiting.eventually("the new Pod leads", lambda: acquired(new_log) is not None, within=60)
            creating.join(120)
            waiting.eventually("every Pod bound", lambda: sum(bool(p["spec"].get("nodeName")) for p in pods(api))
                               == count, within=180, every=0.5)
            time.sleep(0.5)
        old, new = binds(old_log), binds(new_log)
        old_tried, new_tried = tried(old_log), tried(new_log)
        took_over = acquired(new_log)
        assert took_over is not None
        assert old and new, (len(old), len(new))
        assert not set(old) & set(new)
        # A Binding the old Pod had asked of the extender when SIGTERM came is made, but kube-scheduler may exit
        # (OnStoppedLeading: os.Exit(0); in 1.33 at once, from 1.34 after its secure server's graceful shutdown)
        # before that binding goroutine logs it: bound by the old, the only one that began a cycle for it.
        in_flight = set(old_tried) - set(old) - set(new_tried)
        assert set(old) | set(new) | in_flight == set(names), sorted(set(names) - set(old) - set(new))[:5]
        assert max(old.values()) < took_over, "the old scheduler bound a Pod after the new one took the Lease"
        assert min(new.values()) >= took_over, "the standby bound a Pod before it held the Lease"
        assert max(old_tried.values()) < took_over, "the old scheduler began a cycle after the new took the Lease"
        assert min(new_tried.values()) >= took_over, "the standby began a cycle before it held the Lease"
        holders = [h for _, h in lease.changes if h]
        assert len(holders) == 2 and holders[0] != holders[1], lease.changes  # old, then new: never back
        for pod in pods(api):  # each Pod on a node of the burst, bound once
            assert pod["spec"]["nodeName"].startswith("r-"), pod["metadata"]["name"]
        print(f"\nan upgrade during a burst of {count} Pods (the chart's configuration, two kube-schedulers):")
        print(f"  old (leader): {len(old)} bound, the last {max(old.values()) - stopped_at:+.2f} s from its SIGTERM; "
              f"{len(in_flight)} more bound by the extender for it after it exited (its bind in flight, not logged)")
        print(f"  new (standby): took the Lease {took_over - stopped_at:+.2f} s after; {len(new)} bound, the first "
              f"{min(new.values()) - took_over:+.2f} s after taking it")
        print(f"  Lease holders seen: {' -> '.join(h.split('_')[-1][:8] for h in holders)}; "
              f"bound by both: 0; after the new took the Lease, bound by the old: 0")
    finally:
        for proc in (old_proc, new_proc):
            if proc is not None:
                stop_process(proc)
        delete_pods(api)
        unrender(cluster, rendered)
