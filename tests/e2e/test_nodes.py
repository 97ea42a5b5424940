"""``qos-guard nodes`` through a real kube-apiserver: its node proxy, its RBAC, its errors.

There is no kubelet in this tier (tests/node reads a real one). Here each Node object points the API server's
node proxy at a small HTTPS endpoint on this host that answers ``/configz`` as a test sets it, so the replies
a healthy kubelet never gives (refusals, garbage, oversized, hostile text) and pools of several nodes go the
whole way: qos-guard -> API server (authentication, RBAC, node proxy) -> endpoint -> back.
"""

from __future__ import annotations

import contextlib
import json
import re
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.binaries import ROOT
from tests.e2e.conftest import Cluster
from tests.unit.test_pinning import configz
from webhook.serving.certs import write_bundle

FIXTURE_LABEL = "qos-guard.io/e2e-fixture"
POOL = {"node.kubernetes.io/instance-type": "e2e.large", FIXTURE_LABEL: "1"}


def host_address() -> str:
    """An address of this host the API server's node proxy accepts: it refuses loopback and link-local ones
    (``isProxyableHostname``), as a kubelet's InternalIP never is."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True,
                         check=True).stdout
    found: list[str] = re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", out)  # one group: strings
    assert found, f"this host has no global IPv4 address for the node proxy to reach:\n{out}"
    return found[0]


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""


class Endpoint:
    """Answers ``GET /configz`` with ``reply`` over TLS, like a kubelet's port (the API server does not verify
    kubelet certificates unless told a CA)."""

    def __init__(self, address: str, cert: Path, key: Path) -> None:
        self.reply = Reply()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                reply = outer.reply if self.path == "/configz" else Reply(404, b"404 page not found")
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((address, 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Fleet:
    """Node objects in the API server, each with its own endpoint."""

    def __init__(self, cluster: Cluster, folder: Path) -> None:
        self.cluster, self.address = cluster, host_address()
        self.pki = write_bundle(folder / "pki", [self.address], 2, keep_ca_key=False)
        self.endpoints: dict[str, Endpoint] = {}

    def add(self, name: str, labels: dict[str, str], body: bytes | None = None, status: int = 200,
            endpoint: bool = True) -> None:
        port = 1  # nothing listens there: the API server cannot reach that kubelet
        if endpoint:
            self.endpoints[name] = ep = Endpoint(self.address, self.pki.cert, self.pki.key)
            ep.reply = Reply(status, configz().encode() if body is None else body)
            port = ep.port
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                # Never a place for a Pod (other tiers share this API server).
                "spec": {"unschedulable": True,
                         "taints": [{"key": "qos-guard.io/e2e-fixture", "effect": "NoSchedule"}]},
                "status": {"addresses": [{"type": "InternalIP", "address": self.address}],
                           "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
                           "nodeInfo": {"kubeletVersion": "v1.36.3", "machineID": "", "systemUUID": "",
                                        "bootID": "", "kernelVersion": "", "osImage": "",
                                        "containerRuntimeVersion": "", "kubeProxyVersion": "",
                                        "operatingSystem": "linux", "architecture": "amd64"}}}
        self.cluster.kubectl("create", "-f", "-", stdin=node, check=True)

    def set(self, name: str, body: bytes, status: int = 200) -> None:
        self.endpoints[name].reply = Reply(status, body)

    def close(self) -> None:
        self.cluster.kubectl("delete", "nodes", "-l", FIXTURE_LABEL, "--wait=false")
        for ep in self.endpoints.values():
            ep.close()


@pytest.fixture(scope="module")
def fleet(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    f = Fleet(cluster, tmp_path_factory.mktemp("fleet"))
    try:
        f.add("fx-a", POOL)
        f.add("fx-b", POOL, configz(cpuManagerPolicy="none").encode())
        f.add("fx-c", POOL, configz(topologyManagerPolicy="best-effort").encode())
        f.add("fx-solo", {FIXTURE_LABEL: "1", "role": "solo"})
        yield f
    finally:
        f.close()


def nodes(c: Cluster, *args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    return c.qos_guard("nodes", "--kubeconfig", str(kubeconfig or c.kubeconfig), *args)


def as_json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def test_a_pool_read_through_the_api_servers_node_proxy(cluster: Cluster, fleet: Fleet) -> None:
    proc = nodes(cluster, "-l", f"{FIXTURE_LABEL}=1", "--format", "json")
    assert proc.returncode == 1, proc.stderr  # fx-b cannot pin
    doc = as_json(proc)
    verdicts = {n["name"]: n["verdict"] for n in doc["nodes"]}
    assert verdicts == {"fx-a": "pins", "fx-b": "cannot-pin", "fx-c": "pins", "fx-solo": "pins"}
    by_name = {n["name"]: n for n in doc["nodes"]}
    assert by_name["fx-a"]["kubeletVersion"] == "v1.36.3" and by_name["fx-a"]["ready"] is None
    assert [p["rule"] for p in by_name["fx-b"]["problems"]] == ["cpu-manager-none"]
    (pool,) = doc["pools"]
    assert pool["label"] == "node.kubernetes.io/instance-type" and pool["nodes"] == ["fx-a", "fx-b", "fx-c"]
    assert pool["differences"] == {"cpuManagerPolicy": {"none": ["fx-b"], "static": ["fx-a", "fx-c"]},
                                   "topologyManagerPolicy": {"best-effort": ["fx-c"],
                                                             "single-numa-node": ["fx-a", "fx-b"]}}
    text = nodes(cluster, "-l", f"{FIXTURE_LABEL}=1")
    assert text.returncode == 1
    assert re.search(r"^fx-b .* none .* cannot pin$", text.stdout, re.MULTILINE), text.stdout
    assert "node/fx-b: cpu-manager-none: cpuManagerPolicy is none" in text.stdout
    assert "pool/node.kubernetes.io/instance-type=e2e.large: pool-mismatch: its 3 nodes differ" in text.stdout
    assert text.stderr.strip() == "qos-guard: 4 nodes: 3 pin, 1 cannot pin, 0 unreadable; 1 pool differs"


def test_named_nodes_and_selectors(cluster: Cluster, fleet: Fleet) -> None:
    assert nodes(cluster, "fx-a", "fx-c").returncode == 0
    missing = nodes(cluster, "fx-a", "no-such-node", "--format", "json")
    assert missing.returncode == 2
    doc = as_json(missing)
    assert [(n["name"], n["verdict"]) for n in doc["nodes"]] == [("fx-a", "pins"), ("no-such-node", "unreadable")]
    assert 'nodes \\"no-such-node\\" not found' in json.dumps(doc["nodes"][1]["error"])
    none = nodes(cluster, "-l", "qos-guard.io/e2e-fixture=nobody")
    assert none.returncode == 2 and "error: no node matches -l qos-guard.io/e2e-fixture=nobody" in none.stdout
    both = nodes(cluster, "fx-a", "-l", "role=solo")
    assert both.returncode == 2 and "names or -l SELECTOR, not both" in both.stderr
    bad = nodes(cluster, "-l", "role in (")
    assert bad.returncode == 2 and "HTTP 400" in bad.stderr and "Traceback" not in bad.stderr
    assert nodes(cluster, "--pool-label", "a/b/c").returncode == 2
    # Other pool labels: the role pool has one node, so no pool differs and nothing cannot pin.
    assert nodes(cluster, "-l", "role=solo", "--pool-label", "role").returncode == 0


@pytest.mark.parametrize(("status", "body", "said"), [
    (200, b"<html>not a kubelet</html>", "malformed configz reply: the reply is not JSON"),
    (200, b'{"kubeletconfig": {"cpuManagerPolicy": "static\\u001b[2J"}}',
     "malformed configz reply: kubeletconfig.cpuManagerPolicy: unknown value 'static\\x1b[2J'"),
    (200, b"{" + b'"x": 1, ' * 200_000 + b'"kubeletconfig": {}}', "over 1 MiB"),
    (200, b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
    (500, b"kubelet is sad", "the API server could not read it from kubelet (HTTP 500): kubelet is sad"),
    (403, b"Forbidden (user=system:kube-apiserver, verb=get, resource=nodes, subresource(s)=[configz proxy])",
     "forbidden (HTTP 403): Forbidden (user=system:kube-apiserver"),
    (404, b"404 page not found", "enableDebuggingHandlers"),
])
def test_a_bad_reply_is_named_and_the_rest_still_read(cluster: Cluster, fleet: Fleet, status: int, body: bytes,
                                                      said: str) -> None:
    fleet.set("fx-c", body, status)
    try:
        proc = nodes(cluster, "fx-a", "fx-c")
    finally:
        fleet.set("fx-c", configz().encode())
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    assert re.match(r"^fx-a .* pins$", lines[1]) and re.match(r"^fx-c .* unreadable$", lines[2]), proc.stdout
    (error,) = [x for x in lines if x.startswith("node/fx-c: error: ")]
    assert said in error, error
    assert "\x1b" not in proc.stdout


def test_an_unreachable_kubelet_is_named(cluster: Cluster, fleet: Fleet) -> None:
    fleet.add("fx-gone", {FIXTURE_LABEL: "1"}, endpoint=False)
    proc = nodes(cluster, "fx-a", "fx-gone", "--format", "json")
    assert proc.returncode == 2
    gone = as_json(proc)["nodes"][1]
    assert gone["verdict"] == "unreadable"
    assert gone["error"].startswith("cannot read kubelet's configuration: the API server could not read it "
                                    "from kubelet (HTTP 50"), gone["error"]
    cluster.kubectl("delete", "node", "fx-gone", check=True)


# --- who may run it: the ClusterRole the guide gives ---

def readme_cluster_role() -> dict[str, Any]:
    """The ClusterRole of the ``qos-guard nodes`` guide (docs/howto/nodes.md), as an operator copies it."""
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "howto" / "nodes.md").read_text(), re.DOTALL)
    roles = [doc for block in blocks for doc in yaml.safe_load_all(block)
             if isinstance(doc, dict) and doc.get("kind") == "ClusterRole"
             and "nodes/proxy" in json.dumps(doc)]
    assert len(roles) == 1, "the guide shows one ClusterRole for qos-guard nodes"
    return roles[0]


@contextlib.contextmanager
def service_account(c: Cluster, name: str, rules: list[dict[str, Any]] | None) -> Iterator[Path]:
    """A kubeconfig for a new ServiceAccount bound to a ClusterRole of ``rules`` (none: no binding)."""
    c.kubectl("create", "serviceaccount", name, "-n", "default", check=True)
    try:
        if rules is not None:
            role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": name}, "rules": rules}
            binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": name},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                       "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "default"}]}
            c.kubectl("apply", "-f", "-", stdin=[role, binding], check=True)
        yield c.kubeconfig_as(name, "default", c.folder / f"kubeconfig-{name}")
    finally:
        c.kubectl("delete", "clusterrolebinding,clusterrole", name, "--ignore-not-found")
        c.kubectl("delete", "serviceaccount", name, "-n", "default", "--ignore-not-found")


def test_the_readme_cluster_role_is_enough_and_nodes_proxy_is_needed(cluster: Cluster, fleet: Fleet) -> None:
    role = readme_cluster_role()
    with service_account(cluster, "nodes-reader", role["rules"]) as kubeconfig:
        proc = nodes(cluster, "-l", "role=solo", kubeconfig=kubeconfig)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    without_proxy = [r for r in role["rules"] if "nodes/proxy" not in r["resources"]]
    assert without_proxy and without_proxy != role["rules"]
    with service_account(cluster, "nodes-lister", without_proxy) as kubeconfig:
        proc = nodes(cluster, "-l", "role=solo", kubeconfig=kubeconfig)
        assert proc.returncode == 2
        assert ('node/fx-solo: error: cannot read kubelet\'s configuration: forbidden (HTTP 403): nodes "fx-solo" '
                'is forbidden: User "system:serviceaccount:default:nodes-lister" cannot get resource "nodes/proxy"'
                in proc.stdout), proc.stdout
        assert "needs get on nodes/proxy" in proc.stdout
    with service_account(cluster, "nobody", None) as kubeconfig:
        proc = nodes(cluster, kubeconfig=kubeconfig)
        assert proc.returncode == 2 and "HTTP 403" in proc.stderr and "list on nodes" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_context_chooses_the_cluster(cluster: Cluster, fleet: Fleet) -> None:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["clusters"].append({"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}})
    config["contexts"].append({"name": "nowhere", "context": {"cluster": "nowhere", "user": "admin"}})
    config["current-context"] = "nowhere"
    path = cluster.folder / "kubeconfig-two-contexts"
    path.write_text(yaml.safe_dump(config))
    down = nodes(cluster, "-l", "role=solo", kubeconfig=path)
    assert down.returncode == 2 and "cannot reach the API server" in down.stderr
    assert nodes(cluster, "-l", "role=solo", "--context", "e2e", kubeconfig=path).returncode == 0
    unknown = nodes(cluster, "--context", "nope", kubeconfig=path)
    assert unknown.returncode == 2 and "no usable kubeconfig" in unknown.stderr and "nope" in unknown.stderr
