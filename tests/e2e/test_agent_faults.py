"""The NodeResourceTopology publisher under faults of the API side, on a real kube-apiserver, each with the time
until the object is right again (measured, printed in the summary): its CRD deleted and installed again; the API
server answering 429 (with ``Retry-After: 1``, as its max-in-flight filter does) for 60 s, then 500 for 60 s, then
not reachable for 20 s (a restart), with the publisher's requests during each counted by a loopback proxy in front
of the API server and held to the backoff's bound; the Node deleted and created again (a new uid).

The publisher is the agent's own code and thread (``TopologyPublisher.start``, default poll and backoff) with the
token and RBAC of the chart's agent (tests/e2e/test_agent_privilege.py makes them); kubelet's PodResources socket
and sysfs are fakes (the real kubelet, and kubelet restarted with another policy, are the node tier's)."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests import waiting
from tests.e2e.conftest import Cluster
from tests.e2e.test_agent_privilege import NRT_CRD, installed_agent, node
from tests.nodelogic.fakes import Kubelet, container, serve
from tests.nodelogic.test_topology_report import sysfs
from webhook.cluster.backoff import Backoff
from webhook.cluster.client import Lister
from webhook.node.podresources import api_pb2
from webhook.node.topology_publisher import RESYNC, TopologyPublisher
from webhook.serving.certs import write_bundle

pytestmark = pytest.mark.timeout(900)
OWN, OTHER = "e2e-faults-a", "e2e-faults-b"
NRT = f"/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies/{OWN}"


@dataclass
class Proxy:
    """HTTPS on loopback, forwarding to the API server as it is, or answering ``fault`` itself: ``(429, 1)`` a
    status and its Retry-After, ``"down"`` closing every connection unanswered. Each request is recorded."""

    upstream: str
    ca: str
    fault: tuple[int, int | None] | str | None = None
    seen: list[tuple[float, str, str, int]] = field(default_factory=list)

    def start(self, folder: Path) -> str:
        pki = write_bundle(folder, ["127.0.0.1"], 2, keep_ca_key=False)
        outer, session = self, requests.Session()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fault = outer.fault
                if fault == "down":
                    outer.seen.append((time.monotonic(), self.command, self.path, 0))
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if isinstance(fault, tuple):
                    status, retry = fault
                    reply = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                        "message": "injected by the test's proxy", "code": status}).encode()
                    self.send_response(status)
                    if retry is not None:
                        self.send_header("Retry-After", str(retry))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                    outer.seen.append((time.monotonic(), self.command, self.path, status))
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                got = session.request(self.command, outer.upstream + self.path, headers=headers, data=body,
                                      verify=outer.ca, timeout=30)
                outer.seen.append((time.monotonic(), self.command, self.path, got.status_code))
                self.send_response(got.status_code)
                for k, v in got.headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(got.content)))
                self.end_headers()
                self.wfile.write(got.content)

            do_GET = do_PATCH = do_POST = do_PUT = do_DELETE = _any

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki.cert, pki.key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.pki = pki
        return f"https://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Running:
    cluster: Cluster
    proxy: Proxy
    kubelet: Kubelet
    publisher: TopologyPublisher
    logged: list[str]

    def nrt(self) -> dict[str, Any] | None:
        proc = self.cluster.kubectl("get", "--raw", NRT)
        return yaml.safe_load(proc.stdout) if proc.returncode == 0 else None

    def cpu_available(self) -> str | None:
        for zone in (self.nrt() or {}).get("zones", []):
            for r in zone["resources"]:
                if zone["name"] == "node-1" and r["name"] == "cpu":
                    return str(r["available"])
        return None

    def owner_uid(self) -> str | None:
        refs = ((self.nrt() or {}).get("metadata") or {}).get("ownerReferences") or [{}]
        uid = refs[0].get("uid")
        return str(uid) if uid else None

    def allocate(self, cpus: list[int]) -> str:
        """kubelet's List now shows a container on ``cpus``; what node-1's cpu available becomes."""
        self.kubelet.pods = [api_pb2.PodResources(name="p", namespace="ns", containers=[container("c", cpus)])]
        return "0" if 1 in cpus else "1"

    def log(self) -> str:
        return "\n".join(self.logged[-20:])


@pytest.fixture(scope="module")
def running(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    folder = tmp_path_factory.mktemp("agent-faults")
    with installed_agent(cluster, folder, "faults", "e2e-agent-faults", OWN, OTHER) as agent:
        yield from _running(cluster, agent.bound, folder)


def _running(cluster: Cluster, bound: Path, folder: Path) -> Iterator[Running]:
    config = yaml.safe_load(bound.read_text())
    proxy = Proxy(config["clusters"][0]["cluster"]["server"], config["clusters"][0]["cluster"]["certificate-authority"])
    config["clusters"][0]["cluster"]["server"] = proxy.start(folder / "pki")
    config["clusters"][0]["cluster"]["certificate-authority"] = str(proxy.pki.ca)
    (folder / "kubeconfig").write_text(yaml.safe_dump(config))
    fake = Kubelet()
    socket = folder / "kubelet.sock"
    server = serve(socket, fake)
    logged: list[str] = []
    publisher = TopologyPublisher(Lister(str(folder / "kubeconfig")), OWN, socket, sysfs(folder / "sys"),
                                  lambda line: logged.append(f"{time.monotonic():.1f} {line}"),
                                  policy="single-numa-node", scope="container")
    stop = threading.Event()
    publisher.start(stop)
    r = Running(cluster, proxy, fake, publisher, logged)
    try:
        waiting.eventually("the first NodeResourceTopology", lambda: r.cpu_available() == "1", 30, seen=r.log)
        yield r
    finally:
        stop.set()
        publisher.join(10)
        server.stop(None)
        proxy.stop()


def test_1_the_crd_deleted_and_installed_again(running: Running, measured: Callable[[str], None]) -> None:
    r, c = running, running.cluster
    c.kubectl("delete", "-f", str(NRT_CRD), "--wait=true", check=True)
    time.sleep(5)
    c.kubectl("apply", "--server-side", "-f", str(NRT_CRD), check=True)
    c.kubectl("wait", "--for=condition=Established", "crd/noderesourcetopologies.topology.node.k8s.io",
              "--timeout=60s", check=True)
    took = waiting.eventually("the NRT back after its CRD", lambda: r.cpu_available() == "1", RESYNC + 45, 0.5,
                              seen=r.log)
    assert r.publisher.alive()
    measured(f"CRD deleted, installed again 5 s later: the NRT right {took:.1f} s after the CRD was "
                   f"Established (bound: the 60 s resync, plus a backoff of at most 30 s if the resync met the gap)")


@pytest.mark.parametrize(("fault", "name"), [((429, 1), "429 with Retry-After: 1"), ((500, None), "500")])
def test_2_an_api_server_answering_errors_for_60_s(running: Running, fault: tuple[int, int | None],
                                                  name: str, measured: Callable[[str], None]) -> None:
    """A change the publisher must write arrives as the fault starts: its requests during the 60 s stay within
    the backoff's bound (on main: one every 0.25 s, 240), and the change is in the object soon after."""
    r = running
    before = len(r.proxy.seen)
    r.proxy.fault = fault
    started = time.monotonic()
    want = r.allocate([1] if r.cpu_available() == "1" else [])
    time.sleep(60)
    r.proxy.fault = None
    ended = time.monotonic()
    during = [s for s in r.proxy.seen[before:] if started <= s[0] < ended]
    took = waiting.eventually(f"the NRT right after {name}", lambda: r.cpu_available() == want, 60, 0.2, seen=r.log)
    bound = Backoff().bound(60) + 1  # + the Node's read, once a minute
    assert 2 <= len(during) <= bound, during
    assert sum(name.split()[0] in line for line in r.logged) >= 1 and r.publisher.alive()
    measured(f"API server answering {name} for 60 s: {len(during)} requests from the publisher "
                   f"({len(during) / 60:.2f}/s; bound {bound}; 240 at the old fixed 0.25 s), the NRT right "
                   f"{took:.1f} s after the fault ended")


def test_3_an_api_server_not_reachable_for_20_s(running: Running, measured: Callable[[str], None]) -> None:
    r = running
    before = len(r.proxy.seen)
    r.proxy.fault = "down"
    started = time.monotonic()
    want = r.allocate([1] if r.cpu_available() == "1" else [])
    time.sleep(20)
    r.proxy.fault = None
    ended = time.monotonic()
    during = [s for s in r.proxy.seen[before:] if started <= s[0] < ended]
    took = waiting.eventually("the NRT right after the outage", lambda: r.cpu_available() == want, 60, 0.2,
                              seen=r.log)
    # Each attempt is one connection: urllib3's own retries are off (webhook/cluster/client.py _configuration),
    # so the publisher's backoff alone spaces them.
    attempts = Backoff().bound(20) + 1
    assert len(during) <= attempts, during
    measured(f"API server unreachable for 20 s (connections closed unanswered): {len(during)} connections "
                   f"(at most {attempts} attempts of the publisher, one connection each), the NRT "
                   f"right {took:.1f} s after")


def test_4_the_node_deleted_and_created_again(running: Running, measured: Callable[[str], None]) -> None:
    r, c = running, running.cluster
    c.kubectl("delete", "node", OWN, check=True)
    c.kubectl("apply", "-f", "-", stdin=node(OWN), check=True)
    created = time.monotonic()
    uid = c.get("node", OWN)["metadata"]["uid"]
    took = waiting.result("the NRT owned by the new Node", lambda: r.owner_uid() == uid, RESYNC + 45, 0.5,
                          seen=r.log)
    assert took
    elapsed = time.monotonic() - created
    measured(f"Node deleted and created again: the NRT owned by the new uid {elapsed:.1f} s after "
                   f"(bound: the 60 s resync)")
