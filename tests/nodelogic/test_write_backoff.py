"""The agent's write loops under a failing API server: the publisher, Events and reports back off exponentially
with jitter, honour ``Retry-After``, log a failure once per change of cause, and the publisher's thread outlives
any exception; the publisher follows the node (kubelet restarted with another policy, hugepages changed, the
Node created again); kubelet's configz read on its own port, with the token, and the way out when refused."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.nodelogic.fakes import Kubelet, serve, topology
from tests.nodelogic.test_topology_report import sysfs
from tests.unit.test_pinning import configz as configz_body
from webhook.cluster.backoff import RETRY_AFTER_CAP, Backoff, Cause, retry_after
from webhook.cluster.client import Reply, Unreachable
from webhook.cluster.configz import KubeletConfigz
from webhook.cluster.reports import FLAVOURS
from webhook.node.agent import Events, Reports
from webhook.node.allocation import Allocatable
from webhook.node.kubelet import PodResourcesClient
from webhook.node.observe import Snapshot
from webhook.node.podresources import api_pb2
from webhook.node.sysfs import NumaLayout
from webhook.node.topology_publisher import REREAD, RESYNC, ApiFailure, TopologyPublisher
from webhook.node.verdict import ContainerVerdict, Problem
from webhook.serving.certs import write_bundle


@given(st.lists(st.floats(0, 0.999), min_size=1, max_size=20), st.none() | st.floats(0, 100))
def test_each_wait_is_half_to_all_of_a_doubling_capped_nominal(draws: list[float], server: float | None) -> None:
    rand = iter(draws)
    backoff = Backoff(base=0.5, cap=30.0, rand=lambda: next(rand))
    for n, draw in enumerate(draws):
        nominal = min(30.0, 0.5 * 2 ** n)
        wait = backoff.failed(100.0, server)
        assert wait == max(nominal / 2 + draw * nominal / 2, server or 0.0)
        assert not backoff.ready(100.0 + wait - 0.001) and backoff.ready(100.0 + wait)
    backoff.succeeded()
    backoff.rand = lambda: 0.999
    assert backoff.ready(0.0) and backoff.failed(0.0) <= 0.5  # back to the first wait


def test_the_bound_is_what_the_shortest_waits_allow() -> None:
    """``bound(T)``: the attempts of a loop failing for T seconds, every draw the shortest (half the nominal)."""
    for seconds in (1.0, 60.0, 600.0):
        backoff = Backoff(rand=lambda: 0.0)
        now, attempts = 0.0, 0
        while now <= seconds:
            attempts += 1
            now += backoff.failed(now)
        assert attempts == Backoff().bound(seconds)
    assert Backoff().bound(60.0) == 9  # 20,000 nodes' agents: at most 9 writes each in a minute of failures


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"Retry-After": "3"}, 3.0), ({"retry-after": " 1 "}, 1.0), ({"Retry-After": "99999"}, RETRY_AFTER_CAP),
    ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, None), ({"Retry-After": "-1"}, None), ({}, None), (None, None)])
def test_retry_after_as_the_api_server_sends_it(headers: dict[str, str] | None, seconds: float | None) -> None:
    assert retry_after(headers) == seconds


def test_a_cause_is_said_once_until_it_changes() -> None:
    cause = Cause()
    assert [cause.failed(k) for k in ("HTTP 500", "HTTP 500", "HTTP 429", "HTTP 429")] == [True, False, True, False]
    assert cause.cleared() and not cause.cleared()


class FailingAPI:
    """An API server answering ``answer(now)`` to every request (a Reply, or an exception to raise), recording when
    each came; a GET of the Node answers ``uid`` while it is set, else 404."""

    def __init__(self, answer: Callable[[float], Reply | Exception],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.answer = answer
        self.clock = clock
        self.uid: str | None = "uid-1"
        self.times: list[float] = []
        self.applied: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def request(self, method: str, path: str, query: list[tuple[str, str]], body: Any,
                content_type: str | None) -> Reply:
        if method == "GET":
            return Reply(200, {"metadata": {"uid": self.uid}}) if self.uid else Reply(404, {"message": "not found"})
        now = self.clock()
        with self.lock:
            self.times.append(now)
        got = self.answer(now)
        if isinstance(got, Exception):
            raise got
        if got.status in (200, 201):
            self.applied.append(json.loads(body))
        return got


@pytest.fixture
def kubelet_socket(tmp_path: Path) -> Iterator[Path]:
    socket = tmp_path / "kubelet.sock"
    server = serve(socket, Kubelet())
    yield socket
    server.stop(None)


def run_for(publisher: TopologyPublisher, seconds: float) -> None:
    stop = threading.Event()
    publisher.start(stop)
    time.sleep(seconds)
    stop.set()
    publisher.join(5)
    assert not publisher.alive()


class VirtualTime:
    """The publisher's clock and its stop event at once: ``wait(s)`` moves the clock on by ``s`` instead of
    sleeping, and the event is set once ``seconds`` have passed. ``TopologyPublisher.run`` then goes through the
    same looks and waits as in real time, in the test's thread and in no time: what is proven is the waits the
    loop asks for, as the API server sees them (the requests' times are this clock's). The thread itself is
    proven in real time by ``test_the_publisher_thread_outlives_any_exception``."""

    def __init__(self, seconds: float) -> None:
        self.now = 1000.0
        self.end = self.now + seconds
        self.waits = 0

    def clock(self) -> float:
        return self.now

    def is_set(self) -> bool:
        return self.now >= self.end

    def set(self) -> None:
        self.end = self.now

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None and timeout >= 0, timeout
        self.waits += 1
        assert self.waits < 100_000, "the publisher's loop does not wait"  # it would spin in real time
        self.now = min(self.now + timeout, self.end)
        return self.is_set()


def test_the_publisher_backs_off_while_the_api_server_fails(kubelet_socket: Path, tmp_path: Path) -> None:
    """500 for 3 s with a 0.05 s poll (60 looks): the writes stay within the backoff's bound, not one per look;
    one log line for the outage, one when it is over, and the object is applied once the API server answers."""
    virtual = VirtualTime(4.5)
    until = virtual.now + 3.0
    api = FailingAPI(lambda now: Reply(500, {"message": "etcdserver: request timed out"}) if now < until
                     else Reply(200, {}), virtual.clock)
    logged: list[str] = []
    publisher = TopologyPublisher(api, "n1", kubelet_socket, sysfs(tmp_path / "sys"), logged.append, poll=0.05,
                                  policy="none", scope="container", clock=virtual.clock)
    publisher.api_backoff = Backoff(base=0.1, cap=0.8)
    publisher.run(virtual)  # type: ignore[arg-type]
    failing = [t for t in api.times if t < until]
    assert 3 <= len(failing) <= publisher.api_backoff.bound(3.0) + 1, len(failing)  # +1: the first, at start
    assert api.applied, logged
    outage = [line for line in logged if "HTTP 500" in line]
    assert len(outage) == 1 and "retried with backoff" in outage[0], logged
    assert sum("working again" in line for line in logged) == 1, logged
    assert publisher.age() < 1.5  # the metric's value once it worked


def test_the_publisher_honours_retry_after(kubelet_socket: Path, tmp_path: Path) -> None:
    """429 with Retry-After: 1, three times: no two writes closer than 1 s, though the backoff alone would retry
    at 0.05-0.2 s; one log line for the three."""
    count = {"n": 0}

    def answer(now: float) -> Reply:
        count["n"] += 1
        if count["n"] <= 3:
            return Reply(429, {"message": "Too many requests, please try again later."}, retry_after=1.0)
        return Reply(201, {})

    virtual = VirtualTime(4.0)
    api = FailingAPI(answer, virtual.clock)
    logged: list[str] = []
    publisher = TopologyPublisher(api, "n1", kubelet_socket, sysfs(tmp_path / "sys"), logged.append, poll=0.05,
                                  policy="none", scope="container", clock=virtual.clock)
    publisher.api_backoff = Backoff(base=0.1, cap=0.8)
    publisher.run(virtual)  # type: ignore[arg-type]
    gaps = [b - a for a, b in zip(api.times, api.times[1:], strict=False)][:3]
    assert len(gaps) == 3 and min(gaps) >= 0.99, gaps
    assert len(api.applied) == 1 and sum("HTTP 429" in line for line in logged) == 1, logged


def test_the_publisher_thread_outlives_any_exception(kubelet_socket: Path, tmp_path: Path) -> None:
    """A defect (here a KeyError from the API client) is logged once with its type, retried with backoff, and the
    object published once it is gone; on main such an exception ended the thread silently."""
    calls = {"n": 0}

    def answer(now: float) -> Reply | Exception:
        calls["n"] += 1
        return KeyError("metadata") if calls["n"] <= 2 else Reply(200, {})

    api = FailingAPI(answer)
    logged: list[str] = []
    publisher = TopologyPublisher(api, "n1", kubelet_socket, sysfs(tmp_path / "sys"), logged.append, poll=0.05,
                                  policy="none", scope="container")
    publisher.api_backoff = Backoff(base=0.1, cap=0.2)
    run_for(publisher, 1.5)
    assert api.applied, logged
    assert sum("unexpected KeyError: 'metadata'" in line for line in logged) == 1, logged


def test_unreachable_and_refusals_are_one_line_each(kubelet_socket: Path, tmp_path: Path) -> None:
    answers: list[Reply | Exception] = [
        *[Unreachable(ConnectionRefusedError(111, "Connection refused"))] * 3,
        *[Reply(404, {"message": "the server could not find the requested resource"})] * 3, Reply(200, {})]

    def answer(now: float) -> Reply | Exception:
        return answers.pop(0) if len(answers) > 1 else answers[0]

    virtual = VirtualTime(2.0)
    api = FailingAPI(answer, virtual.clock)
    logged: list[str] = []
    publisher = TopologyPublisher(api, "n1", kubelet_socket, sysfs(tmp_path / "sys"), logged.append, poll=0.05,
                                  policy="none", scope="container", clock=virtual.clock)
    publisher.api_backoff = Backoff(base=0.02, cap=0.1)
    publisher.run(virtual)  # type: ignore[arg-type]
    assert api.applied
    failures = [line for line in logged if "retried with backoff" in line]
    assert len(failures) == 2, logged
    assert "cannot reach the API server" in failures[0] and "CRD" in failures[1]


class Settings:
    """kubelet's configz as the publisher reads it: ``answer``, counting the reads."""

    def __init__(self, answer: tuple[str, str] | str) -> None:
        self.answer = answer
        self.reads = 0

    def __call__(self) -> tuple[str, str] | str:
        self.reads += 1
        return self.answer


class HugepagesKubelet(Kubelet):
    """A kubelet whose Memory Manager hands out 2 MiB hugepages on NUMA 1 (so the zone shows sysfs's total)."""

    def GetAllocatableResources(self, request: Any, context: Any) -> api_pb2.AllocatableResourcesResponse:
        return api_pb2.AllocatableResourcesResponse(cpu_ids=[1], memory=[api_pb2.ContainerMemory(
            memory_type="hugepages-2Mi", size=2 << 20, topology=topology(1))])


def attributes(obj: dict[str, Any]) -> dict[str, str]:
    return {a["name"]: a["value"] for a in obj["attributes"] if a["name"].startswith("topologyManager")}


def test_the_publisher_follows_kubelet_restarts_the_slow_timer_and_the_node(tmp_path: Path) -> None:
    """kubelet restarted with another policy (a new socket file): read again at the next look; hugepages changed
    in sysfs: seen at ``REREAD``; a configz that cannot be read keeps the last settings (said once); the Node
    created again: owned by the new uid at the next ``RESYNC``; no Node: nothing applied."""
    socket, root = tmp_path / "kubelet.sock", sysfs(tmp_path / "sys")
    api = FailingAPI(lambda now: Reply(200, {}))
    settings = Settings(("single-numa-node", "container"))
    logged: list[str] = []
    publisher = TopologyPublisher(api, "n1", socket, root, logged.append, configz=settings)
    server = serve(socket, Kubelet())
    try:
        with PodResourcesClient(socket) as kubelet:
            assert publisher.step(kubelet, 0.0)
            assert attributes(api.applied[-1]) == {"topologyManagerPolicy": "single-numa-node",
                                                   "topologyManagerScope": "container"}
            assert not publisher.step(kubelet, 1.0) and settings.reads == 1
    finally:
        server.stop(None)
    socket.unlink(missing_ok=True)  # a new socket file: kubelet started again
    settings.answer = ("best-effort", "pod")
    server = serve(socket, HugepagesKubelet())  # kubelet started again, with another policy
    try:
        with PodResourcesClient(socket) as kubelet:
            assert publisher.step(kubelet, 2.0) and settings.reads == 2
            assert attributes(api.applied[-1]) == {"topologyManagerPolicy": "best-effort",
                                                   "topologyManagerScope": "pod"}
            assert any("kubelet restarted" in line for line in logged)
            # Hugepages set aside later (sysfs): in the object after REREAD, not before.
            (root / "devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages").write_text("5\n")
            publisher.step(kubelet, 3.0)
            assert "6291456" in json.dumps(api.applied[-1])  # 3 x 2 MiB, as read at the restart
            settings.answer = "cannot reach kubelet at https://10.0.0.1:10250/configz: refused; set the chart's ..."
            assert publisher.step(kubelet, 3.0 + REREAD)
            assert "10485760" in json.dumps(api.applied[-1])  # 5 x 2 MiB on NUMA 1
            assert attributes(api.applied[-1])["topologyManagerPolicy"] == "best-effort"  # kept, not guessed anew
            assert sum("as last read are kept" in line for line in logged) == 1
            # The Node created again.
            api.uid = "uid-2"
            assert publisher.step(kubelet, 4.0 + REREAD + RESYNC)
            assert api.applied[-1]["metadata"]["ownerReferences"][0]["uid"] == "uid-2"
            assert any("uid uid-1 -> uid-2" in line for line in logged)
            # No Node: nothing is applied (the garbage collector would delete it again).
            api.uid, before = None, len(api.applied)
            with pytest.raises(ApiFailure, match="does not exist"):
                publisher.step(kubelet, 5.0 + REREAD + 2 * RESYNC)
            assert len(api.applied) == before
    finally:
        server.stop(None)


def problem_verdict(pod: str, namespace: str = "ns") -> ContainerVerdict:
    return ContainerVerdict(namespace=namespace, pod=pod, uid=f"uid-{pod}", container="app", pinned=False,
                     exclusive_cpus=frozenset(), cpu_request_milli=1000, cpu_numa=frozenset(), memory=(),
                     devices=(), aligned=None, reason="node-not-pinning", detail="not pinned",
                     problems=(Problem("NotPinned", "not pinned"),))


class EventAPI:
    def __init__(self, answers: list[Reply]) -> None:
        self.answers = answers
        self.posted: list[str] = []

    def request(self, method: str, path: str, query: list[tuple[str, str]], body: Any,
                content_type: str | None) -> Reply:
        self.posted.append(body["metadata"]["name"])
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_events_back_off_and_honour_retry_after() -> None:
    """A 429 ends the cycle's creates (not one request per problem) and none is tried before Retry-After has
    passed; said once; the Events not created are created once the API server takes them."""
    clock = {"now": 0.0}
    api = EventAPI([Reply(429, {"message": "too many requests"}, 5.0), Reply(201, {})])
    events = Events(api, "n1", clock=lambda: clock["now"])  # type: ignore[arg-type]
    verdicts = [problem_verdict(p) for p in ("a", "b", "c")]
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    created, said = events.emit(verdicts, stamp)
    assert (created, len(api.posted)) == (0, 1) and len(said) == 1 and "HTTP 429" in said[0]
    clock["now"] = 4.9
    assert events.emit(verdicts, stamp) == (0, []) and len(api.posted) == 1
    clock["now"] = 5.0
    created, said = events.emit(verdicts, stamp)
    assert created == 3 and said == ["Events are created again"] and len(api.posted) == 4


def test_one_refused_event_does_not_hold_up_the_others() -> None:
    """A 403 for one Event (its namespace being deleted): the next are still created, no backoff, said once."""
    api = EventAPI([Reply(403, {"message": "namespace ns is being terminated"}), Reply(201, {})])
    events = Events(api, "n1", clock=lambda: 0.0)  # type: ignore[arg-type]
    created, said = events.emit([problem_verdict(p) for p in ("a", "b", "c")], datetime(2026, 1, 1, tzinfo=UTC))
    assert created == 2 and len(api.posted) == 3 and events.backoff.ready(0.0)
    assert len(said) == 2 and "HTTP 403" in said[0] and said[1] == "Events are created again"


class ReportAPI:
    def __init__(self, answers: list[Reply]) -> None:
        self.answers = answers
        self.sent: list[tuple[str, str]] = []

    def pages(self, path: str, label_selector: str | None = None) -> Iterator[list[dict[str, Any]]]:
        yield []

    def request(self, method: str, path: str, query: list[tuple[str, str]], body: Any,
                content_type: str | None) -> Reply:
        self.sent.append((method, path))
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_reports_back_off_on_an_overloaded_api_server() -> None:
    """503 on the first namespace's report: the others are not tried that cycle, nor any before the wait is
    over; one line; then all are written."""
    clock = {"now": 0.0}
    api = ReportAPI([Reply(503, {"message": "the server is currently unable to handle the request"}), Reply(200, {})])
    reports = Reports(api, FLAVOURS["openreports"], "n1", clock=lambda: clock["now"])  # type: ignore[arg-type]
    snap = Snapshot(None, Allocatable(frozenset({0, 1})), NumaLayout({0: frozenset({0, 1})}), 2,
                    verdicts=[problem_verdict("a"), problem_verdict("b", "other")])
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    said = reports.write(snap, stamp)
    assert len(api.sent) == 1 and len(said) == 1 and "HTTP 503" in said[0]
    assert reports.write(snap, stamp) == [] and len(api.sent) == 1  # within the wait
    clock["now"] = 60.0
    assert reports.write(snap, stamp) == ["reports are written again"] and len(api.sent) == 3


class KubeletPort:
    """kubelet's authenticated port as far as /configz goes: the bearer token checked, then ``status``/``body``."""

    def __init__(self, folder: Path, token: str) -> None:
        self.pki = write_bundle(folder, ["127.0.0.1"], 2, keep_ca_key=False)
        self.status, self.body = 200, configz_body().encode()
        self.seen: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append(f"{self.path} {self.headers.get('Authorization')}")
                ok = self.headers.get("Authorization") == f"Bearer {token}"
                status, body = (outer.status, outer.body) if ok else (401, b"Unauthorized")
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.pki.cert, self.pki.key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_kubelets_configz_on_its_own_port_with_the_token(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("agent-token\n")
    port = KubeletPort(tmp_path / "pki", "agent-token")
    try:
        got = KubeletConfigz("127.0.0.1", port.port, token=token, ca=port.pki.ca).read()
        assert not isinstance(got, str) and got.topology_manager_policy == "single-numa-node"
        assert port.seen == ["/configz Bearer agent-token"]
        # Without a CA: kubelet's self-signed certificate is accepted (the node's own address).
        unverified = KubeletConfigz("127.0.0.1", port.port, token=token)
        assert not isinstance(unverified.read(), str)
        # kubelet's own refusal when the account lacks nodes/configz (and fine-grained authz is off it checks only
        # nodes/proxy): the way out is the values, never nodes/proxy.
        port.status = 403
        port.body = (b"Forbidden (user=system:serviceaccount:qos-guard:qos-guard-agent, verb=get, resource=nodes, "
                     b"subresource(s)=[proxy])")
        refused = KubeletConfigz("127.0.0.1", port.port, token=token, ca=port.pki.ca).read()
        assert isinstance(refused, str) and "subresource(s)=[proxy]" in refused
        assert "agent.topologyManagerPolicy and agent.topologyManagerScope" in refused
        assert "get on nodes/configz" in refused and "never nodes/proxy" in refused
        # A token kubelet does not take (its authentication.webhook off): said, with the way out.
        token.write_text("another-token")
        unauthorized = KubeletConfigz("127.0.0.1", port.port, token=token, ca=port.pki.ca).read()
        assert isinstance(unauthorized, str) and "did not accept the ServiceAccount token (HTTP 401)" in unauthorized
        assert "agent.topologyManagerPolicy" in unauthorized
        # Outside a Pod (no token file): asked anonymously, and said so when refused.
        anonymous = KubeletConfigz("127.0.0.1", port.port, token=tmp_path / "none", ca=port.pki.ca).read()
        assert isinstance(anonymous, str) and "an anonymous request (no token at" in anonymous
        assert port.seen[-1] == "/configz None"
    finally:
        port.close()
    closed = KubeletConfigz("127.0.0.1", port.port, token=token).read()
    assert isinstance(closed, str) and closed.startswith(f"cannot reach kubelet at https://127.0.0.1:{port.port}")
    assert KubeletConfigz("fd00::1", 10250).url == "https://[fd00::1]:10250/configz"
