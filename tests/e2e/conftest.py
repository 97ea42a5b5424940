"""A real control plane for end-to-end tests: etcd and kube-apiserver on loopback (as controller-runtime's
envtest, without a kubelet), the real ``kubectl``, and ``qos-guard serve`` registered through the chart's own
webhook configurations. Binaries come from ``hack/build-tools.sh``; if one cannot be built the run fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests import waiting
from tests.binaries import ROOT, binary
from tests.serving import Server, free_port, start_server
from webhook.core.facts import Facts
from webhook.core.kubeversion import Semantics, semantics, served_minor
from webhook.serving.certs import write_bundle

CHART = ROOT / "charts" / "qos-guard"
RELEASE_NAMESPACE = "qos-guard"
WEBHOOK_CONFIG = "qos-guard"  # the chart's full name for release "qos-guard"
TOKEN = "qos-guard-e2e-admin-token"
SERVICE_CIDR = "10.0.0.0/24"
KUBERNETES_SERVICE_IP = "10.0.0.1"  # the `kubernetes` Service's ClusterIP: the first address of SERVICE_CIDR


def wait_until_ready(what: str, ready: Any, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    """``ready()`` true within ``timeout`` seconds (a connection refused meanwhile is not yet); fails at once,
    with the log's end, when ``proc`` exits."""
    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log.read_text()[-6000:]}")
        try:
            return bool(ready())
        except (requests.RequestException, OSError):
            return False

    waiting.eventually(f"{what} ready", up, timeout, every=0.2, seen=lambda: log.read_text()[-6000:])


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _kubectl_cap(args: tuple[str, ...]) -> float:
    """The subprocess's own limit: 60 s, or 30 s past a ``--timeout=`` (or ``--request-timeout=``) kubectl is
    given (``120s``, ``2m``), so that ``kubectl wait --timeout=120s`` reports its own timeout instead of being
    killed at 60 s."""
    for a in args:
        m = re.fullmatch(r"--(?:request-)?timeout=(\d+)(s|m)", a)
        if m:
            return max(60.0, int(m.group(1)) * (60 if m.group(2) == "m" else 1) + 30.0)
    return 60.0


@dataclass
class Cluster:
    """The running control plane and how to talk to it."""

    url: str
    kubeconfig: Path
    folder: Path
    env: dict[str, str] = field(default_factory=dict)
    restart_apiserver: Callable[..., None] | None = None  # control_plane's: stop it, start it again
    etcd: str = ""  # etcd's client URL (its v3 JSON gateway: tests/e2e/test_pager.py compacts through it)
    _discovery: dict[str, dict[str, Any] | None] = field(default_factory=dict, repr=False)

    def version(self) -> str:
        """kube-apiserver's gitVersion, as its /version says."""
        return str(self._version()["gitVersion"])

    def _version(self) -> dict[str, Any]:
        if "/version" not in self._discovery:
            self._discovery["/version"] = json.loads(self.kubectl("get", "--raw", "/version", check=True).stdout)
        found = self._discovery["/version"]
        assert found is not None
        return found

    def semantics(self) -> Semantics:
        """The minor this API server runs, read from /version as ``serve`` reads it: what the tests that call
        the engine or the app in-process judge at (their default is the newest supported minor, which is not
        necessarily the server's)."""
        return semantics(served_minor(self._version()))

    def facts(self) -> Facts:
        """``Facts`` naming this API server's minor, for ``evaluate`` beside it (as ``serve`` builds them)."""
        return Facts(kubernetes=self.semantics())

    def _resources(self, group_version: str) -> dict[str, Any] | None:
        """The API server's discovery document of ``group_version`` (None where it serves no such version), read
        once: for the built-in APIs asked about, which do not change while the server runs."""
        if group_version not in self._discovery:
            path = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
            proc = self.kubectl("get", "--raw", path)
            self._discovery[group_version] = json.loads(proc.stdout) if proc.returncode == 0 else None
        return self._discovery[group_version]

    def serves(self, group_version: str, plural: str) -> bool:
        """The API server serves ``plural`` in ``group_version`` (its discovery, as clients see it)."""
        found = self._resources(group_version)
        return found is not None and any(r.get("name") == plural for r in found.get("resources", []))

    def unserved(self, group_version: str, plural: str, feature: str) -> str | None:
        """Why ``feature`` cannot run on this API server (it does not serve ``plural`` in ``group_version``,
        and which other versions of the group serve it, read from discovery), or None when it can."""
        if self.serves(group_version, plural):
            return None
        group = group_version.rpartition("/")[0]
        listed = json.loads(self.kubectl("get", "--raw", "/apis", check=True).stdout)
        versions = [v["groupVersion"] for g in listed.get("groups", []) if g["name"] == group
                    for v in g.get("versions", [])]
        elsewhere = [v for v in versions if v != group_version and self.serves(v, plural)]
        where = (f"it serves them only in {', '.join(elsewhere)}" if elsewhere else
                 f"nor in any other version of {group}" if group else "")
        return (f"{feature}: kube-apiserver {self.version()} does not serve {plural} in {group_version} with its "
                f"default feature gates and runtime config" + (f" ({where})" if where else ""))

    def require(self, group_version: str, plural: str, feature: str) -> None:
        """Skip the test, with the reason, where the API server does not serve what ``feature`` needs."""
        reason = self.unserved(group_version, plural, feature)
        if reason is not None:
            pytest.skip(reason)

    def kubectl(self, *args: str, stdin: Any = None, check: bool = False) -> subprocess.CompletedProcess[str]:
        data = stdin if stdin is None or isinstance(stdin, str) else yaml.safe_dump_all(
            stdin if isinstance(stdin, list) else [stdin])
        deadline = time.monotonic() + 60
        while True:
            proc = subprocess.run([binary("kubectl"), "--kubeconfig", str(self.kubeconfig), *args], input=data,
                                  capture_output=True, text=True, timeout=_kubectl_cap(args), env=self.env)
            # kubectl wait on an object created a moment ago whose status.conditions is still null fails at once
            # instead of waiting (".status.conditions accessor error: <nil> is of the type <nil>"): ask again.
            if not (args[:1] == ("wait",) and "accessor error: <nil>" in proc.stderr
                    and time.monotonic() < deadline):
                break
            time.sleep(0.5)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{proc.stderr}")
        return proc

    def get(self, *args: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.kubectl("get", *args, "-o", "json", check=True).stdout)
        return out

    def qos_guard(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "webhook.cli", *args], capture_output=True, text=True,
                              timeout=120, env=self.env, cwd=self.folder)

    def kubeconfig_as(self, account: str, namespace: str, path: Path, duration: str = "1h") -> Path:
        """A kubeconfig at ``path`` that authenticates with a token of ``namespace/account``: what a Pod running
        as that ServiceAccount may do, no more (the admin's certificate is left out)."""
        token = self.kubectl("create", "token", account, "-n", namespace, "--duration", duration,
                             check=True).stdout.strip()
        config = yaml.safe_load(self.kubeconfig.read_text())
        config["users"] = [{"name": account, "user": {"token": token}}]
        for context in config["contexts"]:
            context["context"]["user"] = account
        path.write_text(yaml.safe_dump(config))
        return path

    def namespace(self, name: str, mode: str | None = None) -> str:
        labels = {"qos-guard.io/mode": mode} if mode else {}
        self.kubectl("apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": name, "labels": labels}}, check=True)
        return name


@contextlib.contextmanager
def control_plane(folder: Path, extra_args: Sequence[str] = ()) -> Iterator[Cluster]:
    """etcd and kube-apiserver on loopback in ``folder``, stopped on exit; ``extra_args`` go to the API server
    (tests/node adds what a cluster with a kubelet needs; a second one serves tests that need an API server
    with nothing else registered, e.g. the admission-policy tests)."""
    etcd_bin, apiserver_bin = binary("etcd"), binary("kube-apiserver")
    binary("kubectl")
    # 10.0.0.1: the `kubernetes` Service's ClusterIP (the first of --service-cluster-ip-range), in the serving
    # certificate as kube-apiserver's own always has it: tests/node routes its Pods' in-cluster clients there.
    pki = write_bundle(folder / "pki", ["localhost", "127.0.0.1", KUBERNETES_SERVICE_IP], 2, keep_ca_key=False)
    sa_key = folder / "pki" / "sa.key"
    sa_key.write_bytes(rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
    (folder / "tokens.csv").write_text(f'{TOKEN},e2e-admin,e2e-admin,"system:masters"\n')

    client_port, peer_port, api_port = free_port(), free_port(), free_port()
    etcd_log = folder / "etcd.log"
    etcd = subprocess.Popen(
        [etcd_bin, "--name=e2e", f"--data-dir={folder / 'etcd'}",
         f"--listen-client-urls=http://127.0.0.1:{client_port}",
         f"--advertise-client-urls=http://127.0.0.1:{client_port}",
         f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
         f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
         f"--initial-cluster=e2e=http://127.0.0.1:{peer_port}",
         "--unsafe-no-fsync=true", "--log-level=warn"],
        stdout=etcd_log.open("wb"), stderr=subprocess.STDOUT)
    api_log = folder / "kube-apiserver.log"
    apiserver: subprocess.Popen[bytes] | None = None
    try:
        wait_until_ready("etcd", lambda: requests.get(f"http://127.0.0.1:{client_port}/health", timeout=1).ok, etcd,
                         etcd_log)
        command = [apiserver_bin, f"--etcd-servers=http://127.0.0.1:{client_port}",
             "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
             f"--tls-cert-file={pki.cert}", f"--tls-private-key-file={pki.key}",
             f"--token-auth-file={folder / 'tokens.csv'}", "--authorization-mode=RBAC",
             f"--service-account-key-file={sa_key}", f"--service-account-signing-key-file={sa_key}",
             "--service-account-issuer=https://kubernetes.default.svc",
             f"--service-cluster-ip-range={SERVICE_CIDR}", f"--cert-dir={folder / 'cert-dir'}",
             # No controller-manager makes `default` ServiceAccounts; every webhook plugin stays on.
             "--disable-admission-plugins=ServiceAccount",
             # The `kubernetes` Service gets no endpoints: nothing here reaches the API server through it (the
             # node tests' Pods are given its address), and kube-apiserver >= 1.37 refuses to start with the
             # lease reconciler on a loopback address ("cannot use public IP 127.0.0.1 with endpoint
             # reconciler"). The flag and its value exist on every minor the tiers run.
             "--endpoint-reconciler-type=none",
             "--enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook", *extra_args]
        apiserver = subprocess.Popen(command, stdout=api_log.open("wb"), stderr=subprocess.STDOUT)
        url = f"https://127.0.0.1:{api_port}"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        wait_until_ready("kube-apiserver", lambda: requests.get(f"{url}/readyz", headers=headers, verify=str(pki.ca),
                                                     timeout=2).ok, apiserver, api_log, timeout=120)

        def restart(down: float = 0.0) -> None:
            """Stop the API server (SIGTERM, as a rollout of it does), wait ``down`` seconds, start it again on the
            same port and etcd, and wait until it is ready: its clients' watches break and resume."""
            nonlocal apiserver
            assert apiserver is not None
            stop_process(apiserver)
            time.sleep(down)
            apiserver = subprocess.Popen(command, stdout=api_log.open("ab"), stderr=subprocess.STDOUT)
            wait_until_ready("kube-apiserver (restarted)", lambda: requests.get(
                f"{url}/readyz", headers=headers, verify=str(pki.ca), timeout=2).ok, apiserver, api_log, timeout=120)

        kubeconfig = folder / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
            "clusters": [{"name": "e2e", "cluster": {"server": url, "certificate-authority": str(pki.ca)}}],
            "users": [{"name": "admin", "user": {"token": TOKEN}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "admin"}}],
        }))
        env = dict(os.environ, KUBECONFIG=str(kubeconfig), HOME=str(folder), PYTHONPATH=str(ROOT))
        c = Cluster(url, kubeconfig, folder, env, restart, etcd=f"http://127.0.0.1:{client_port}")
        # The default namespace exists once the bootstrap controller has run.
        wait_until_ready("namespace default", lambda: c.kubectl("get", "namespace", "default").returncode == 0,
              apiserver, api_log)
        yield c
    finally:
        if apiserver is not None:
            stop_process(apiserver)
        stop_process(etcd)
        shutil.rmtree(folder / "etcd", ignore_errors=True)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with control_plane(tmp_path_factory.mktemp("control-plane")) as c:
        yield c


@dataclass
class Webhook:
    """qos-guard serving on loopback, registered with the API server."""

    server: Server
    cert_dir: Path
    url: str
    fresh_config_error: str  # what the API server said before `certs --patch-webhooks` ran


def render_webhook_configurations(url: str) -> list[dict[str, Any]]:
    """The chart's two webhook configurations, pointed at ``url`` (release qos-guard in qos-guard)."""
    proc = subprocess.run([binary("helm"), "template", "qos-guard", str(CHART), "--namespace", RELEASE_NAMESPACE,
                           "--set", f"webhook.url={url}", "--show-only", "templates/webhooks.yaml"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    return [d for d in docs if d["kind"].endswith("WebhookConfiguration")]


def chart_objects(release: str, *args: str) -> list[dict[str, Any]]:
    """``helm template`` of the chart as ``release`` in ``RELEASE_NAMESPACE``, parsed."""
    proc = subprocess.run([binary("helm"), "template", release, str(CHART), "--namespace", RELEASE_NAMESPACE,
                           *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def chart_identity(cluster: Cluster, folder: Path, release: str, *chart_values: str) -> Path:
    """The chart's ServiceAccount and RBAC for ``release`` (with ``chart_values``) applied, and a kubeconfig at
    ``folder/kubeconfig`` with a token of that account: a webhook outside the cluster reads what the chart's
    Pod may read, no more."""
    cluster.namespace(RELEASE_NAMESPACE)
    rbac = chart_objects(release, *chart_values, "--show-only", "templates/serviceaccount.yaml",
                         "--show-only", "templates/rbac.yaml")
    cluster.kubectl("apply", "-f", "-", stdin=rbac, check=True)
    folder.mkdir(parents=True, exist_ok=True)
    return cluster.kubeconfig_as(release, RELEASE_NAMESPACE, folder / "kubeconfig", duration="2h")


@contextlib.contextmanager
def webhook_outside(cluster: Cluster, folder: Path, release: str, label: str, config: dict[str, Any],
                    *chart_values: str, kubeconfig: Path | None = None, workers: int = 2) -> Iterator[Server]:
    """``qos-guard serve`` with ``config`` on loopback, outside the cluster, registered through the chart's own
    webhook configurations (release ``release``, ``chart_values``) for the namespaces labelled ``label``: a CA
    from ``qos-guard certs``, its caBundle written by ``certs --patch-webhooks``. ``kubeconfig``: what the
    webhook reads the cluster with (``chart_identity``). Unregistered and stopped afterwards."""
    folder.mkdir(parents=True, exist_ok=True)
    config_file = folder / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    cert_dir = folder / "pki"
    certs = ["certs", "--service", release, "--namespace", RELEASE_NAMESPACE, "--extra-san", "127.0.0.1",
             "--output-dir", str(cert_dir), "--days", "2"]
    made = cluster.qos_guard(*certs)
    assert made.returncode == 0, made.stderr
    flags = ["--config", str(config_file)] + (["--kubeconfig", str(kubeconfig)] if kubeconfig else [])
    server = start_server(folder / "serve", *flags, cert_dir=cert_dir, workers=workers)
    try:
        webhooks = [d for d in chart_objects(
            release, *chart_values, "--set", f"webhook.url=https://127.0.0.1:{server.port}",
            "--set", f"webhook.namespaceSelector.matchExpressions[0].key={label}",
            "--set", "webhook.namespaceSelector.matchExpressions[0].operator=Exists",
            "--show-only", "templates/webhooks.yaml") if d["kind"].endswith("WebhookConfiguration")]
        cluster.kubectl("apply", "-f", "-", stdin=webhooks, check=True)
        proc = cluster.qos_guard(*certs, "--force", "--patch-webhooks", release, "--kubeconfig",
                                 str(cluster.kubeconfig))
        assert proc.returncode == 0, proc.stderr
        yield server
    finally:
        cluster.kubectl("delete", "validatingwebhookconfiguration,mutatingwebhookconfiguration", release,
                        "--ignore-not-found")
        server.stop()


def violating_pod(name: str, cpu: str = "1500m") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1",
                                     "resources": {"limits": {"cpu": cpu, "memory": "1Gi"}}}]}}


def compliant_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "registry.invalid/app:1",
                                     "resources": {"limits": {"cpu": "2", "memory": "1Gi"},
                                                   "requests": {"cpu": "2", "memory": "1Gi"}}}]}}


@pytest.fixture(scope="session")
def webhook(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Webhook]:
    folder = tmp_path_factory.mktemp("webhook")
    cert_dir = folder / "pki"
    certs_args = ["certs", "--service", "qos-guard", "--namespace", RELEASE_NAMESPACE, "--extra-san", "127.0.0.1",
                  "--output-dir", str(cert_dir), "--days", "2"]
    proc = cluster.qos_guard(*certs_args)
    assert proc.returncode == 0, proc.stderr
    server = start_server(folder / "serve", cert_dir=cert_dir)
    url = f"https://127.0.0.1:{server.port}"
    try:
        cluster.namespace(RELEASE_NAMESPACE)
        # The chart's configurations as rendered: their caBundle is the chart's own generated CA, which did
        # not sign our certificate, so the API server cannot call the webhook yet ...
        cluster.kubectl("apply", "-f", "-", stdin=render_webhook_configurations(url), check=True)
        probe = cluster.namespace("e2e-probe", "enforce")
        fresh = cluster.kubectl("apply", "--dry-run=server", "-n", probe, "-f", "-", stdin=compliant_pod("probe"))
        # ... until `certs --patch-webhooks` writes a new pair and its CA (the server reloads the files; --force,
        # as certs never replaces a CA without it).
        proc = cluster.qos_guard(*certs_args, "--force", "--patch-webhooks", WEBHOOK_CONFIG, "--kubeconfig",
                                 str(cluster.kubeconfig))
        assert proc.returncode == 0, proc.stderr
        def probe_admitted() -> subprocess.CompletedProcess[str]:
            return cluster.kubectl("apply", "--dry-run=server", "-n", probe, "-f", "-", stdin=compliant_pod("probe"))

        waiting.eventually("the webhook reachable after patching", lambda: probe_admitted().returncode == 0, 30,
                           every=0.5, seen=lambda: probe_admitted().stderr)
        yield Webhook(server, cert_dir, url, fresh.stderr if fresh.returncode else "")
    finally:
        server.stop()
