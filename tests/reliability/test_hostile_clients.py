"""Hostile clients against one real replica (``qos-guard serve`` as the chart runs it: its workers, TLS, and its
memory limit where a cgroup can hold it), loopback only, each attack
bounded in count and time. Figures go to the end of the pytest summary."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import requests

from bench.attack import KINDS, attack, client_context
from bench.attack import probe as probe_alone
from bench.bodies import bodies
from tests import cgroup, waiting
from tests.builders import container, pod
from tests.helpers import admission_review
from tests.reliability.conftest import FIGURES
from tests.serving import Server, start_server

MIB = 1024 * 1024
STALLED = int(os.environ.get("QOS_GUARD_STALLED", "256"))  # per kind, against one replica
HOLD_SECONDS = 13.0  # longer than the server's 10 s request deadline: closed ones are reopened


def review(obj: dict[str, Any], uid: str = "u-1") -> dict[str, Any]:
    return admission_review(obj, uid=uid, namespace="ns", username="u")


def wide_pod(containers: int = 1, name: str = "p", cpu: str = "1500m") -> dict[str, Any]:
    """A Pod of ``containers`` containers (c0, c1, ...) each with a ``cpu`` limit: its body grows with them."""
    return pod(*(container(f"c{i}", limits={"cpu": cpu, "memory": "1Gi"}, image="x") for i in range(containers)),
               name=name, namespace=None)


# The replica runs with the chart's default workers, in a memory cgroup at the chart's default limit where this
# machine can make one (root, cgroup v1 or v2), as in its Pod: every attack below must pass there; the last
# test checks the kernel's counts.
MEMORY_LIMIT = cgroup.chart_memory_limit() if cgroup.available() is None else None
WORKERS = cgroup.chart_workers()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("hostile"), "--enable-noop", bench=True, workers=WORKERS,
                       memory_limit=MEMORY_LIMIT)
    if srv.cgroup is not None:
        time.sleep(1.0)
        idle = srv.cgroup.usage()
        FIGURES.append(f"memory: the replica (master + {WORKERS} worker(s)) idle in its cgroup: "
                       f"{idle.now / MIB:.0f} MiB (resident: {footprint(srv)['rss_kib'] // 1024} MiB summed over "
                       f"processes, shared pages counted in each); limit {idle.limit / MIB:.0f} MiB")
    yield srv
    srv.stop()


def workers(srv: Server) -> list[int]:
    children = Path(f"/proc/{srv.proc.pid}/task/{srv.proc.pid}/children").read_text().split()
    return [int(c) for c in children]


def footprint(srv: Server) -> dict[str, int]:
    """Threads, open files and resident KiB over the master and its workers."""
    out = {"threads": 0, "fds": 0, "rss_kib": 0}
    for pid in [srv.proc.pid, *workers(srv)]:
        status = Path(f"/proc/{pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        out["threads"] += int(fields["Threads"])
        out["rss_kib"] += int(fields["VmRSS"].split()[0])
        out["fds"] += len(os.listdir(f"/proc/{pid}/fd"))
    return out


def settle(srv: Server, baseline: dict[str, int], seconds: float = 20) -> dict[str, int]:
    """Wait for the connections to be closed on the server side (at most 16 files over ``baseline``, the bound
    the tests then assert); the footprint then."""
    waiting.eventually(f"the server's open files back to at most {baseline['fds']} + 16",
                       lambda: footprint(srv)["fds"] <= baseline["fds"] + 16, within=seconds, every=0.5,
                       seen=lambda: f"{footprint(srv)} (baseline {baseline})")
    return footprint(srv)


BODY = json.dumps(review(wide_pod())).encode()


@pytest.mark.parametrize("kind", [*KINDS, "all"])
def test_stalled_connections_do_not_stop_admission(server: Server, kind: str) -> None:
    """With STALLED connections of a kind held (for "all": STALLED in total, the kinds mixed), a
    legitimate ``/validate`` on a new connection answers within 1 s; afterwards no thread, file or memory is
    left. (All five kinds at 256 each, 1,280 at once, are measured in docs/reliability.md: there the bursts
    of 768 TLS reconnections take the worker about a second of CPU.)"""
    kinds = list(KINDS) if kind == "all" else [kind]
    # A few of the same connections first: whatever the server starts lazily once (a pool thread) is then in
    # the baseline, so what is compared afterwards is what 256 connections left behind.
    attack(server.port, server.ca, BODY, kinds, 2, 1.0)
    server.post("/validate", BODY)
    before = settle(server, footprint(server), seconds=5)
    per_kind = STALLED // len(kinds)
    out = attack(server.port, server.ca, BODY, kinds, per_kind, HOLD_SECONDS)
    probe: Any = out["probe"]
    held: Any = out["kinds"]
    after = settle(server, before)
    # The bound is 1 s on a machine that gives the server its CPU. This machine may be shared (load averages of
    # 10-20 on 2 cores were seen): when the bound is missed, the same probe without any attack says how much
    # of it the machine itself takes, and the attack may add no more than the bound to that.
    control = None
    if probe["max_s"] >= 1.0:
        stop = threading.Event()
        threading.Timer(HOLD_SECONDS * 2 / 3, stop.set).start()
        control = probe_alone(server.port, server.ca, BODY, stop).summary()
    FIGURES.append(f"stalled {kind}: {per_kind} per kind held (peak {', '.join(str(held[k]['peak']) for k in kinds)}), "
                   f"probe max {probe['max_s'] * 1000:.0f} ms, median {probe['median_s'] * 1000:.0f} ms over "
                   f"{probe['probes']} probes, {probe['failures']} failed"
                   + (f" (no attack, same probe: max {control['max_s'] * 1000:.0f} ms)" if control else "")
                   + f"; after: threads {before['threads']}->{after['threads']}, fds {before['fds']}->{after['fds']}, "
                   f"RSS {before['rss_kib'] // 1024}->{after['rss_kib'] // 1024} MiB")
    assert all(held[k]["peak"] >= per_kind * 0.9 for k in kinds), held  # the attack really held them
    assert probe["probes"] >= 5 and probe["failures"] == 0, probe
    assert probe["max_s"] < 1.0 + (control["max_s"] if control else 0.0), (probe, control)
    assert probe["median_s"] < 0.5, probe
    assert after["threads"] <= before["threads"], (before, after)
    assert after["fds"] <= before["fds"] + 16, (before, after)  # not per connection: N is 256+
    assert after["rss_kib"] < before["rss_kib"] + 64 * 1024, (before, after)
    assert server.proc.poll() is None


def raw_tls(srv: Server, timeout: float = 5.0) -> ssl.SSLSocket:
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    return client_context(srv.ca).wrap_socket(sock, server_hostname="localhost")


def closed_by_peer(sock: ssl.SSLSocket, within: float) -> bool:
    """Whether the server closes the connection within ``within`` seconds (what else it sends is dropped)."""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except (ConnectionError, ssl.SSLError):
        pass
    return True


def status_of(data: bytes) -> int:
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0


def read_answer(sock: ssl.SSLSocket) -> bytes:
    """One answer: its head and a Content-Length body (whatever came, if the server closed early)."""
    data = b""
    try:
        while b"\r\n\r\n" not in data and (chunk := sock.recv(65536)):
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(rest) < length and (chunk := sock.recv(65536)):
            rest += chunk
            data += chunk
    except (TimeoutError, OSError):
        pass
    return data


@pytest.mark.parametrize("chunks, reason", [
    (b"zz\r\n{}\r\n0\r\n\r\n", "InvalidChunkSize"),
    (b"10\r\n" + b"{" * 5, None),  # the client leaves mid-chunk
])
def test_broken_chunked_bodies_are_400_never_500(server: Server, chunks: bytes, reason: str | None) -> None:
    """An invalid chunk size is a 400 naming it; a client leaving mid-chunk gets no 500 (nor a
    traceback in the log) and the server keeps serving."""
    with raw_tls(server) as sock:
        sock.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n" + chunks)
        if reason is None:
            sock.shutdown(socket.SHUT_WR)
        answer = read_answer(sock)
        # The positive sign that the server is done with the request before its log is read (a traceback is
        # logged before the answer is written or the connection closed): its 400, or, for a client that left
        # mid-chunk, the connection closed by the server.
        done = reason is not None or closed_by_peer(sock, within=10)
    if reason is not None:
        assert status_of(answer) == 400 and reason.encode() in answer, answer[:300]
    else:
        assert status_of(answer) in (0, 400), answer[:300]
    assert done, "the server kept the connection of a client that had left"
    assert server.post("/validate", BODY).status_code == 200
    assert "Traceback" not in (server.folder / "server.log").read_text()


# A 5,001-digit integer where the decoder reads it (a cpu limit): refused, naming the number. In a field nobody
# reads it is skipped as Go's decoder skips it (BIG_INT_UNREAD: judged as if it were not there).
BIG_INT = json.dumps(review(wide_pod(cpu="@"))).encode().replace(b'"@"', b"9" * 5001)
BIG_INT_UNREAD = json.dumps(review(wide_pod())).encode().replace(b'"object": {',
                                                               b'"object": {"x": ' + b"9" * 5001 + b", ")
FIXABLE = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},  # /mutate copies it to set limits
           "spec": {"containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "2"}}}]}}
DEEP = json.dumps(review(FIXABLE | {"extra": json.loads("[" * 800 + "]" * 800)})).encode()
LONG_UID = json.dumps(review(wide_pod(), uid="u" * 2_500_000)).encode()


@pytest.mark.parametrize("endpoint, body, reason", [
    ("/validate", BIG_INT, "number"), ("/mutate", BIG_INT, "number"),
    ("/validate", LONG_UID, "request.uid"), ("/mutate", LONG_UID, "request.uid"),
])
def test_hostile_bodies_are_400_with_a_reason(server: Server, endpoint: str, body: bytes, reason: str) -> None:
    """A 5,001-digit integer, a list 800 deep inside a fixable Pod, a 2.5 MB uid."""
    r = server.post(endpoint, body)
    assert r.status_code == 400 and reason in r.json()["reason"], r.text[:300]


def test_big_integer_in_an_unread_field_is_skipped(server: Server) -> None:
    r = server.post("/validate", BIG_INT_UNREAD)
    assert r.status_code == 200 and "cpu limit 1500m is not a whole number" in r.json()["response"]["status"]["message"]


def test_deep_unread_field_is_judged_and_patched(server: Server) -> None:
    """A list 800 deep inside a fixable Pod made /mutate's deepcopy raise RecursionError (500). The
    patch is now built from the changes and only the changed path is copied: the Pod is patched, and the
    patch applies (the API server itself decodes JSON 10,000 levels deep)."""
    r = server.post("/mutate", DEEP)
    assert r.status_code == 200, r.text[:300]
    patch = json.loads(base64.b64decode(r.json()["response"]["patch"]))
    patched = jsonpatch.apply_patch(json.loads(DEEP)["request"]["object"], patch, in_place=True)  # no deepcopy
    assert patched["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "2"}


def test_huge_content_length_is_refused_up_front(server: Server) -> None:
    """Content-Length 10^20 is a 413 at once, without waiting for a body."""
    with raw_tls(server) as sock:
        started = time.monotonic()
        sock.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000000000000000000\r\n\r\n{")
        answer = read_answer(sock)
        elapsed = time.monotonic() - started
    assert status_of(answer) == 413 and elapsed < 1.0, (answer[:200], elapsed)


def test_denial_message_and_log_lines_are_bounded(server: Server) -> None:
    """5,000 bad containers give a denial of a few KiB, not megabytes; a 100,000-character
    name gives a bounded JSON log line."""
    r = server.post("/validate", review(wide_pod(containers=5000, name="n" * 100_000)))
    message = r.json()["response"]["status"]["message"]
    assert len(message.encode()) < 8192 and "and 4980 more" in message, len(message)
    log = server.folder / "server.log"  # decision lines are written in batches every 50 ms
    waiting.eventually("the decision line of the 100,000-character name", lambda: "(100000 characters)" in
                       log.read_text(), within=5, every=0.05, seen=lambda: log.read_text()[-2000:])
    lines = [line for line in log.read_text().splitlines() if '"uid"' in line]
    assert lines and max(len(line) for line in lines) <= 4096
    assert json.loads(lines[-1])["name"].endswith("(100000 characters)")


def test_server_errors_are_counted(server: Server) -> None:
    """A 5xx would be counted; there is none after the hostile bodies above."""
    text = requests.get(server.metrics + "/metrics", timeout=5).text
    assert 'qos_guard_http_server_errors_total{code="500"} 0.0' in text


def test_metrics_port_survives_half_sent_requests(server: Server) -> None:
    """1,500 half-sent ``GET /metrics`` leave ``/healthz`` and ``/metrics`` answering, the master
    with a bounded number of threads, and a killed worker replaced promptly."""
    host, port = server.metrics.removeprefix("http://").split(":")
    socks: list[socket.socket] = []
    try:
        for _ in range(1500):
            try:
                s = socket.create_connection((host, int(port)), timeout=2)
                s.sendall(b"GET /metrics HTTP/1.1\r\nHo")
                socks.append(s)
            except OSError:
                pass
        started = time.monotonic()
        assert requests.get(server.metrics + "/healthz", timeout=2).status_code == 200
        assert "qos_guard_admission_requests_total" in requests.get(server.metrics + "/metrics", timeout=2).text
        health_s = time.monotonic() - started
        master_threads = int(dict(line.split(":", 1) for line in Path(f"/proc/{server.proc.pid}/status")
                                  .read_text().splitlines())["Threads"])
        assert master_threads <= 4, master_threads
        victim = workers(server)[0]
        os.kill(victim, signal.SIGKILL)
        replaced_s = waiting.eventually(
            f"worker {victim} (SIGKILL) replaced: {WORKERS} workers again",
            lambda: len(workers(server)) == WORKERS and victim not in workers(server), within=10,
            seen=lambda: f"workers {workers(server)}")
        assert replaced_s < 5, replaced_s
    finally:
        for s in socks:
            s.close()
    FIGURES.append(f"metrics port: {len(socks)} half-sent requests held; /healthz+/metrics in {health_s * 1000:.0f} "
                   f"ms, master threads {master_threads}, killed worker replaced in {replaced_s:.1f} s")
    waiting.eventually("/readyz 200 again", lambda: requests.get(server.metrics + "/readyz", timeout=2).status_code
                       == 200, within=15, every=0.2)


def _seconds_until_readyz(srv: Server, status: int, within: float = 5.0) -> float:
    """Seconds until ``/readyz`` answers ``status`` (polled every 0.2 s); the test fails when it does not in
    ``within`` seconds, naming what it answered."""
    return waiting.eventually(f"/readyz {status}", lambda: _readyz_status(srv) == status, within=within,
                              every=0.2, seen=lambda: f"/readyz {_readyz_status(srv)}")


def _readyz_status(srv: Server) -> int:
    return requests.get(srv.metrics + "/readyz", timeout=2).status_code


def test_readiness_fails_when_no_worker_answers(server: Server) -> None:
    """Every worker stopped (SIGSTOP): ``/readyz`` fails within a few seconds, ``/healthz`` stays
    up (its grace is longer); SIGCONT: ``/readyz`` is ok again."""
    pids = workers(server)
    assert len(pids) == WORKERS
    assert requests.get(server.metrics + "/readyz", timeout=2).status_code == 200
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        failed_after = _seconds_until_readyz(server, 503)
        assert failed_after < 3, failed_after
        assert requests.get(server.metrics + "/healthz", timeout=2).status_code == 200
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    ok_after = _seconds_until_readyz(server, 200)  # fails naming it: not ready again after SIGCONT
    FIGURES.append(f"readiness: /readyz 503 {failed_after:.1f} s after every worker stopped, 200 again "
                   f"{ok_after:.1f} s after they resumed")


def _dense(containers: int, cpu: str, fixable: bool = False) -> bytes:
    """A review of a Pod of ``containers`` small containers: the most objects a body of its size can make the
    engine build (about 2 KB each, against 90 bytes of JSON)."""
    obj = wide_pod(containers, cpu=cpu)
    if fixable:
        for c in obj["spec"]["containers"]:
            c["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    return json.dumps(review(obj)).encode()


def test_large_bodies_at_once_are_answered_within_the_limit(server: Server) -> None:
    """Eight clients at once, each sending the largest bodies a client can: a 3 MiB inference Pod (a large
    annotation), a Pod of 28,000 containers to deny and one of 25,000 to patch, for 15 s. Every answer is the
    verdict (200) or, when the replica's large-body buffers are full, 503 with Retry-After; no connection is
    dropped (a worker killed for memory would drop its connections)."""
    large = [bodies()["3 MiB"], _dense(28_000, "1500m"), _dense(25_000, "2", fixable=True)]
    paths = ["/validate", "/validate", "/mutate"]
    outcomes: dict[str, int] = {}
    lock = threading.Lock()
    stop = time.monotonic() + 15

    def client(i: int) -> None:
        n = i
        while time.monotonic() < stop:
            body, path = large[n % 3], paths[n % 3]
            n += 1
            try:
                r = requests.post(server.url + path, data=body, verify=server.ca, timeout=60,
                                  headers={"Content-Type": "application/json"})
                retry = f" retry-after {r.headers.get('Retry-After')}" if r.status_code == 503 else ""
                what = f"{r.status_code}{retry}"
            except requests.RequestException as exc:
                what = type(exc).__name__
            with lock:
                outcomes[what] = outcomes.get(what, 0) + 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    FIGURES.append(f"large bodies at once (8 clients, 15 s): {dict(sorted(outcomes.items()))}")
    assert set(outcomes) <= {"200", "503 retry-after 1"}, outcomes
    assert outcomes.get("200", 0) >= 3, outcomes


def test_replica_stayed_within_the_charts_memory_limit(server: Server) -> None:
    """Last in this module: through every attack above, the kernel never had to kill a process of the replica
    for memory, and its peak stayed within the chart's limit (``resources.limits.memory``)."""
    if server.cgroup is None:
        why = f"no memory cgroup here ({cgroup.available()}): the chart's limit is not enforced"
        if os.environ.get("CI") == "true":  # CI must hold the claim, not skip it (as tests/node do)
            pytest.fail(f"{why}; under CI=true this test must run: give the runner root and cgroups")
        pytest.skip(why)
    usage = server.cgroup.usage()
    FIGURES.append(f"memory: peak of the replica through the attacks {usage.peak / MIB:.0f} MiB of its "
                   f"{usage.limit / MIB:.0f} MiB limit, {usage.now / MIB:.0f} MiB after; OOM kills: {usage.oom_kills}")
    assert usage.oom_kills == 0, usage
    assert usage.peak <= usage.limit, usage

