"""``/metrics``, ``/healthz`` and ``/readyz`` on the plain port: one asyncio thread in the gunicorn master,
bounded so that clients cannot starve it, and readiness that asks a worker.

Why not a thread per connection (the former werkzeug server): 1,500 half-sent requests made 1,400 threads in
the master, which then took minutes to replace a killed worker (docs/reliability.md). Here a connection is
a coroutine with a deadline (``HEAD_DEADLINE`` for the request head, ``MAX_HEAD`` bytes at most), at most
``MAX_CONNECTIONS`` are open (more are closed as soon as they are accepted), and one request is served per
connection.

Readiness is a real request: ``/readyz`` opens a TLS connection to the serving port and sends
``GET /healthz``, which ``probe_route`` answers inside a worker before Flask. It is ready when a worker
answered within ``PROBE_TIMEOUT``; results are shared for ``PROBE_TTL`` so probes cannot amplify load.
``/healthz`` (liveness) fails only when no worker has answered for ``LIVENESS_GRACE`` seconds: a restart
is for a wedged pod, not a busy one.

``/metrics`` merges every worker's metric files, synchronous work that grows with the workers: it runs on one
thread of its own, never on the loop, so a slow scrape cannot make a probe miss its deadline (a liveness
failure would restart a healthy pod). A probe that fails by an error of its own is not an answer: ``/readyz``
answers 503 (``/healthz`` within its grace 200), the error is logged and counted
(``qos_guard_health_probe_errors_total``). Any other request that fails in the server itself answers 500 and logs
why (``qos_guard_health_server_errors_total``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

MAX_CONNECTIONS = 256
MAX_HEAD = 8192
HEAD_DEADLINE = 5.0
PROBE_TIMEOUT = 0.8  # under kubelet's default probe timeout of 1 s
PROBE_TTL = 1.0
LIVENESS_GRACE = 60.0
PROBE_PATH = "/healthz"
LOG = logging.getLogger("qos_guard.server")


def probe_route(app: Callable[..., Iterable[bytes]],
                count_error: Callable[[str], None] | None = None) -> Callable[..., Iterable[bytes]]:
    """WSGI middleware for the TLS port: ``GET /healthz`` answers ``ok`` from the worker, before Flask; every
    5xx answer is passed to ``count_error`` (there should be none: a metric says so, whatever the cause)."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == PROBE_PATH and environ.get("REQUEST_METHOD") == "GET":
            start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "3")])
            return [b"ok\n"]
        if count_error is None:
            return app(environ, start_response)

        def counted(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            if status.startswith("5"):
                count_error(status[:3])
            return start_response(status, headers, exc_info)

        return app(environ, counted)

    return wrapped


class WorkerProbe:
    """Whether a worker answers ``GET /healthz`` on the serving port, asked at most once per ``PROBE_TTL``."""

    def __init__(self, host: str, port: int, timeout: float = PROBE_TIMEOUT, ttl: float = PROBE_TTL) -> None:
        self.host = "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else host)
        self.port, self.timeout, self.ttl = port, timeout, ttl
        self.checked = float("-inf")
        self.last_ok = time.monotonic()  # a fresh start counts as answered, for the liveness grace
        self.ok = False
        self._running: asyncio.Task[bool] | None = None
        self.errors = 0  # probes that failed by an error of their own (exported: qos_guard_health_probe_errors)
        self._ctx = ssl.create_default_context()
        self._ctx.check_hostname = False
        self._ctx.verify_mode = ssl.CERT_NONE  # our own port on loopback: only "does it answer" is asked

    def _socket(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        return sock

    async def _ask(self) -> bool:
        """One probe, bounded by ``timeout`` from its own steps, never cancelled from outside.

        Once ``open_connection`` has the socket, the loop owns it: an SSL transport registered for its descriptor
        closes it. A timeout that cancelled ``open_connection`` as the handshake completed left that transport
        registered while this probe closed the socket; the next probe's socket got the same descriptor number and
        the loop raised ``RuntimeError: File descriptor N is used by transport`` for 30 to 60 s. So
        the connect alone is cancelled from here; after it the deadline shuts the connection down, and the
        transport, seeing its end, fails the handshake or the read itself and closes what it holds.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        writer: asyncio.StreamWriter | None = None
        handed = False
        sock = self._socket()
        # At the deadline the connection is ended (a shutdown, for every copy of the descriptor: see below), which
        # fails whatever step is waiting on it (the handshake or the answer) from inside the loop.
        ending = loop.call_at(deadline, _end, sock)
        try:
            async with asyncio.timeout_at(deadline):
                await loop.sock_connect(sock, (self.host, self.port))
            # No wait between here and the transport holding the socket: open_connection makes it first.
            handed = True
            reader, writer = await asyncio.open_connection(sock=sock, ssl=self._ctx, server_hostname=self.host,
                                                           ssl_handshake_timeout=self.timeout + 1)
            writer.write(f"GET {PROBE_PATH} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            return (await reader.read(64)).startswith(b"HTTP/1.1 200")
        except (OSError, TimeoutError, ssl.SSLError):
            return False  # the worker did not answer in time, or not at all: what the probe asks
        finally:
            ending.cancel()
            # A worker forked while this probe was open holds a copy of its descriptor, so closing ours alone
            # would leave the connection open: the worker that accepted it then waits for a request until its
            # deadline, and a stop of that worker takes as long. A shutdown ends the connection for every copy.
            _end(sock)
            if writer is not None:
                writer.transport.abort()  # at once: no TLS close_notify waited for
            elif not handed:
                sock.close()
            # else: open_connection failed and its transport, which holds the socket, has closed it

    async def check(self) -> bool:
        now = time.monotonic()
        if now - self.checked < self.ttl:
            return self.ok
        if self._running is None:
            self._running = asyncio.ensure_future(self._ask())
        running = self._running
        try:
            ok = await asyncio.shield(running)
        except Exception as exc:  # a defect, not an answer: counted and logged, and the probe is not answered
            ok = False
            self.errors += 1
            LOG.error("health port: the worker probe failed: %s: %s", type(exc).__name__, exc)
        finally:
            if self._running is running and running.done():
                self._running = None
        self.ok, self.checked = ok, time.monotonic()
        if ok:
            self.last_ok = self.checked
        return ok


def _end(sock: socket.socket) -> None:
    """End a probe's connection for every process holding its descriptor; the descriptor stays open."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _shown(head_line: bytes) -> str:
    """A request line as a log may show it: at most 200 characters, controls escaped."""
    return repr(head_line[:200].decode("ascii", "replace"))


def _response(status: str, body: bytes, content_type: str = "text/plain") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body


class HealthServer:
    """The plain-HTTP port; ``start`` runs it in a daemon thread of the calling process."""

    def __init__(self, host: str, port: int, probe: WorkerProbe, metrics: Callable[[], tuple[bytes, str]],
                 ready: Callable[[], bool] = lambda: True) -> None:
        self.host, self.port, self.probe, self.metrics, self.ready = host, port, probe, metrics, ready
        self.pending: dict[asyncio.StreamWriter, None] = {}  # connections still sending their head, oldest first
        self.evicted = 0
        self.sock: Any = None  # asyncio's TransportSocket
        self.failures = 0  # requests answered 500 (each logged with its cause)
        self._started = threading.Event()
        # One merge at a time, off the loop; made in ``start`` (the thread is started on first use, in the master).
        self._merging: ThreadPoolExecutor | None = None

    async def _answer(self, path: str) -> bytes:
        if path == "/metrics":
            if self._merging is None:
                body, content_type = self.metrics()
            else:
                body, content_type = await asyncio.get_running_loop().run_in_executor(self._merging, self.metrics)
            return _response("200 OK", body + self._own_metrics(), content_type)
        if path in ("/readyz", "/healthz"):
            ok = self.ready() and await self.probe.check()
            if path == "/healthz":
                ok = ok or time.monotonic() - self.probe.last_ok < LIVENESS_GRACE
            return _response("200 OK", b"ok\n") if ok else _response("503 Service Unavailable", b"no worker answers\n")
        return _response("404 Not Found", b"not found\n")

    def _own_metrics(self) -> bytes:
        """This port's own counters, in the text format after the workers' (it runs in the master's thread)."""
        return (f"# HELP qos_guard_health_probe_errors_total Readiness probes that failed by an error of their own "
                f"(answered 503 and logged); there should be none\n"
                f"# TYPE qos_guard_health_probe_errors_total counter\n"
                f"qos_guard_health_probe_errors_total {self.probe.errors}\n"
                f"# HELP qos_guard_health_server_errors_total Requests to the health port answered 500 (each "
                f"logged with its cause); there should be none\n"
                f"# TYPE qos_guard_health_server_errors_total counter\n"
                f"qos_guard_health_server_errors_total {self.failures}\n").encode()

    async def _answered(self, head_line: bytes) -> bytes:
        """The answer to one request line. What fails in answering (the metrics merge's files, a bug) is a 500
        with its cause logged, never passed off as the client's connection failing (an OSError reading a
        metrics file was caught with the client's and the connection closed without a word)."""
        parts = head_line.split()
        if len(parts) != 3 or parts[0] not in (b"GET", b"HEAD"):
            return _response("400 Bad Request", b"bad request\n")
        try:
            return await self._answer(parts[1].split(b"?", 1)[0].decode("ascii", "replace"))
        except Exception as exc:  # never let one request end the server; but say why it failed
            self.failures += 1
            LOG.error("health port: %s answered 500: %s: %s", _shown(head_line), type(exc).__name__, exc,
                      exc_info=exc)
            return _response("500 Internal Server Error", b"error\n")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.pending) >= MAX_CONNECTIONS:  # evict the oldest: a probe needs milliseconds, a stall more
            oldest = next(iter(self.pending))
            del self.pending[oldest]
            oldest.transport.abort()
            self.evicted += 1
        self.pending[writer] = None
        try:
            async with asyncio.timeout(HEAD_DEADLINE):
                head = await reader.readuntil(b"\r\n\r\n")
            self.pending.pop(writer, None)
            writer.write(await self._answered(head.split(b"\r\n", 1)[0]))
            async with asyncio.timeout(HEAD_DEADLINE):
                await writer.drain()
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client's connection: gone, stalled or over the bound
        finally:
            self.pending.pop(writer, None)
            writer.close()

    async def _main(self) -> None:
        server = await asyncio.start_server(self._serve, self.host, self.port, limit=MAX_HEAD, backlog=128)
        self.sock = server.sockets[0]
        self._started.set()
        async with server:
            await server.serve_forever()

    def start(self) -> None:
        # The readiness probe's TLS connection looks up the idna codec (an import) on first use. Done in that
        # thread, a worker forked meanwhile inherits the codec's import lock held by a thread it does not have,
        # and blocks on its first lookup for good (ignoring SIGTERM): the thread must import nothing.
        "localhost".encode("idna")
        self._merging = ThreadPoolExecutor(1, thread_name_prefix="metrics-merge")
        threading.Thread(target=lambda: asyncio.run(self._main()), name="health", daemon=True).start()
        if not self._started.wait(10):
            raise RuntimeError(f"the metrics port {self.host}:{self.port} did not open")

    def close_in_child(self) -> None:
        """In a forked worker: drop the inherited listening socket (the loop thread did not survive fork)."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                os.close(self.sock.fileno())
