"""The readiness probe's own connection (webhook/serving/health.py ``WorkerProbe``), against a TLS listener in
the test: what a worker sees of a probe the master gave up on."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from pathlib import Path

import pytest

from webhook.serving.certs import write_bundle
from webhook.serving.health import WorkerProbe


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
