"""The readiness probe's own connection (webhook/serving/health.py ``WorkerProbe``), against a TLS listener in
the test: what a worker sees of a probe the master gave up on."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import waiting
from webhook.serving.certs import write_bundle
from webhook.serving.health import HealthServer, WorkerProbe


def test_a_probe_given_up_ends_its_connection_even_when_a_fork_holds_a_copy(tmp_path: Path) -> None:
    """gunicorn forks workers from the master while its health thread probes: a worker forked while a probe is
    open holds a copy of the probe's descriptor. The probe gave up (no worker had accepted it yet: they were
    booting); closing the master's descriptor alone would leave the connection open for the worker that accepts
    it later, which then waits for a request until its deadline (~10 s), and a stop of that worker as long."""
    paths = write_bundle(tmp_path / "pki", ["localhost", "127.0.0.1"], 1, keep_ca_key=False)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(paths.cert, paths.key)
    copies: list[int] = []

    class ForkedDuringProbe(WorkerProbe):
        def _socket(self) -> socket.socket:
            sock = super()._socket()
            copies.append(os.dup(sock.fileno()))  # what a worker forked now holds
            return sock

    with socket.create_server(("127.0.0.1", 0)) as listener:
        probe = ForkedDuringProbe("127.0.0.1", listener.getsockname()[1], timeout=0.3)
        try:
            assert asyncio.run(probe._ask()) is False  # nobody accepted within its timeout
            conn, _ = listener.accept()  # a worker that finished booting accepts it now
            conn.settimeout(3)
            started = time.monotonic()
            try:
                server.wrap_socket(conn, server_side=True).close()
            except TimeoutError:
                pytest.fail("the probe's connection stayed open for the worker: the fork's copy kept it")
            except (ssl.SSLError, OSError):
                pass  # the handshake met the end of the connection
            finally:
                conn.close()
            assert time.monotonic() - started < 1
            assert copies
        finally:
            for fd in copies:
                os.close(fd)


def _get(port: int, path: str) -> tuple[str, float]:
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        answer = conn.recv(4096).decode()
    return answer.split("\r\n", 1)[0], time.monotonic() - started


def _health_server(metrics: Callable[[], tuple[bytes, str]]) -> HealthServer:
    with socket.create_server(("127.0.0.1", 0)) as closed:  # a serving port nobody listens on
        worker_port = closed.getsockname()[1]
    server = HealthServer("127.0.0.1", 0, WorkerProbe("127.0.0.1", worker_port, timeout=0.2), metrics)
    server.start()
    return server


def test_a_slow_metrics_merge_does_not_hold_the_probes() -> None:
    """The metrics merge is synchronous; run on the health loop, a slow one held /healthz (kubelet's probe times
    out after 1 s, and liveness failures restart a healthy pod). It runs on a thread of its own."""
    merging = threading.Event()

    def slow_metrics() -> tuple[bytes, str]:
        merging.set()
        time.sleep(2)
        return b"# merged\n", "text/plain"

    server = _health_server(slow_metrics)
    port = server.sock.getsockname()[1]
    scrape = threading.Thread(target=_get, args=(port, "/metrics"))
    scrape.start()
    assert merging.wait(5)
    status, took = _get(port, "/healthz")
    assert status == "HTTP/1.1 200 OK" and took < 1, (status, took)  # within liveness grace: no worker yet
    scrape.join()


def test_a_failure_in_the_health_server_is_logged_with_its_cause(caplog: pytest.LogCaptureFixture) -> None:
    """/healthz and /metrics answered 500 and said nothing about why."""
    def broken() -> tuple[bytes, str]:
        raise PermissionError("[Errno 13] Permission denied: '/tmp/prometheus/counter_12.db'")

    server = _health_server(broken)
    with caplog.at_level(logging.ERROR, logger="qos_guard.server"):
        status, _ = _get(server.sock.getsockname()[1], "/metrics")
        waiting.eventually("the 500's log line", lambda: caplog.records, within=5, every=0.02)
    assert status == "HTTP/1.1 500 Internal Server Error"
    (record,) = caplog.records
    assert "'GET /metrics HTTP/1.1' answered 500: PermissionError" in record.getMessage()
    assert "counter_12.db" in record.getMessage() and server.failures == 1


def test_a_probe_timing_out_as_its_handshake_completes_does_not_wedge_the_next(tmp_path: Path) -> None:
    """The probe's timeout landed inside ``open_connection`` just as the handshake
    completed, so the SSL transport stayed registered with the loop while the probe closed its socket; the next
    probe's socket got the same descriptor number and raised ``RuntimeError: File descriptor N is used by
    transport`` (uncaught: /readyz and /healthz answered 500 for 30 to 60 s). Made certain here: the loop is held
    while the server answers the handshake and the timeout passes, so both are seen in the same iteration."""
    paths = write_bundle(tmp_path / "pki", ["localhost", "127.0.0.1"], 1, keep_ca_key=False)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(paths.cert, paths.key)
    accepted: list[socket.socket] = []
    done = threading.Event()

    def serve(listener: socket.socket) -> None:
        late = True
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.settimeout(3)
            if late:  # the first handshake is answered while the probe's loop is held (below)
                time.sleep(0.3)
                late = False
            try:  # handshake at once; then answer a request if one comes (the second probe's)
                tls = context.wrap_socket(conn, server_side=True)
                accepted.append(tls)
                if tls.recv(4096).startswith(b"GET /healthz"):
                    tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
            except (OSError, ssl.SSLError):
                pass

    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(5)
        thread = threading.Thread(target=serve, args=(listener,), daemon=True)
        thread.start()
        probe = WorkerProbe("127.0.0.1", listener.getsockname()[1], timeout=0.4)

        async def twice() -> tuple[bool, bool]:
            loop = asyncio.get_running_loop()
            # The loop held from 0.2 to 0.8 s: the server answers the handshake at 0.3 s and the 0.4 s timeout passes
            # meanwhile, so the handshake completes and the timeout fires in the same turn of the loop.
            loop.call_later(0.2, time.sleep, 0.6)
            first = await probe._ask()
            second = await probe._ask()  # as the next /readyz does; its socket takes the lowest free descriptor
            return first, second

        try:
            first, second = asyncio.run(twice())
        finally:
            done.set()
            for conn in accepted:
                conn.close()
        thread.join(5)
    assert first is False  # it did time out
    assert second is True  # and the next probe is answered: nothing of the first one is left in the loop


def test_an_unexpected_error_in_a_probe_is_503_and_counted_never_500() -> None:
    """Whatever a probe raises (here a RuntimeError, as the wedged descriptor raised), /readyz answers 503 and
    /healthz within its liveness grace 200, and the error is counted on /metrics: never a 500."""
    server = _health_server(lambda: (b"# merged\n", "text/plain"))

    async def broken() -> bool:
        raise RuntimeError("File descriptor 12 is used by transport <_SelectorSocketTransport fd=12>")

    server.probe._ask = broken  # type: ignore[method-assign]
    server.probe.ttl = 0.1
    port = server.sock.getsockname()[1]
    assert _get(port, "/readyz")[0] == "HTTP/1.1 503 Service Unavailable"
    time.sleep(0.25)  # past the probe's TTL: asked again
    assert _get(port, "/healthz")[0] == "HTTP/1.1 200 OK"  # a fresh start is within the liveness grace
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        text = b""
        while chunk := conn.recv(65536):
            text += chunk
    assert b"qos_guard_health_probe_errors_total 2" in text, text
    assert server.failures == 0
