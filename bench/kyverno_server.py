"""Kyverno as ``bench/peers.py`` runs it: built at ``KYVERNO_VERSION`` (``hack/build-tools.sh kyverno``), its
admission controller started out of cluster against the benchmark's API server, with the policies of
``bench/kyverno/``."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from bench.corpus import ROOT
from bench.server import process_tree

KYVERNO_VERSION = "v1.14.4"
HERE = Path(__file__).resolve().parent
POLICIES = [HERE / "kyverno" / "require-qos-guaranteed.yaml", HERE / "kyverno" / "require-whole-cpus.yaml"]


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
