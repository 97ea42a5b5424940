"""The gunicorn worker ``qos-guard serve`` runs: gevent, with a deadline on every step a client controls.

Why (docs/reliability.md, "Serving model"): with one OS thread per connection (gthread), a few clients that
stall a TLS handshake, dribble headers or a body, or connect and send nothing hold every thread, and
admission stops. Here a connection costs a greenlet (kilobytes), so hundreds of stalled ones leave the
worker free; and each is closed by its deadline, so nothing piles up:

- TLS handshake: ``request_deadline`` seconds from accept;
- before the first request's first byte: ``request_deadline`` (at most ``keepalive``);
- idle between keep-alive requests: gunicorn's ``keepalive``;
- one request, from its first byte to the last byte of the answer: ``request_deadline``, except while an
  offloaded body waits to be judged (not the client's doing): that wait ends at ``JUDGE_DEADLINE`` with a 503;
- log lines are written by an OS thread (decisionlog.py), so no write the event loop makes can block on a slow
  log reader.

At shutdown, idle keep-alive connections are closed at once and requests in flight finish: the API server
keeps idle connections to a webhook open for a minute and more, and a worker that waited for them made every
stop take ``graceful_timeout`` and kept answering on them until then (a stopped webhook that still admits).

Requests are judged in the hub (one at a time: no thread hand-off, the fast path), except bodies over
``OFFLOAD_BODY`` with a Content-Length, which are read here and judged in one OS thread per worker, one at a time
per replica (``LargeSlot``), and the memory they took is given back afterwards (``give_back_memory``): judging a
3 MiB Pod of tens of thousands of containers takes ~100 MiB, and the chart's memory limit is 256Mi for the
master and its worker (docs/reliability.md, "Memory per request"). ``HubWorker`` (the extender's) offloads none.

Connections per worker are bounded by gunicorn's ``worker_connections`` (the gevent pool); over it, new
connections wait in the listen backlog. Only HTTP/1.1 is served (the API server speaks it to webhooks).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import gc
import io
import os
import random
import signal
import ssl
import time
from functools import partial
from types import TracebackType
from typing import Any

import gevent
from gevent import select as gselect
from gevent.pool import Pool
from gevent.server import StreamServer
from gevent.threadpool import ThreadPool
from gunicorn import http, util
from gunicorn.http import wsgi
from gunicorn.workers.ggevent import GeventWorker

from webhook.serving.body import BUDGET, BUFFERED, MAX_BODY, BadBody, BodyBudget, Busy, Taken, client_of, read_into
from webhook.serving.tls import PEER_VERIFIED, ReloadingContext

REQUEST_DEADLINE = 10.0
# The longest a request waits to be judged in the offload thread (behind other large ones in the replica): the API
# server waits at most 30 s for a webhook (timeoutSeconds), so an answer later than that is read by nobody.
JUDGE_DEADLINE = 30.0
# A body over this is judged in the worker's one offload thread (an OS thread: the GIL hands the hub the CPU
# every 5 ms), so a 3 MiB Pod that takes seconds to judge does not stop the small requests of this worker.
OFFLOAD_BODY = 64 * 1024


# What the master sends to stop a worker. A worker forked just before one arrived got it before installing its
# own handlers: the inherited master handler swallowed it, and the worker served on until the master killed it
# after graceful_timeout. So they are blocked across fork() and unblocked once the worker's handlers are in.
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGQUIT})


def hold_stop_signals_across_fork() -> None:
    """In the master, once: every forked worker starts with the stop signals blocked (pending, not lost)."""
    os.register_at_fork(before=lambda: signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS),
                        after_in_parent=lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS))


class Deadline(BaseException):
    """A client took longer than its deadline: the connection is closed. A ``BaseException`` (as
    ``gevent.Timeout`` is) so that Flask's error handling, which catches ``Exception``, lets it through."""


class CoalescedResponse(wsgi.Response):  # type: ignore[misc]
    """The head goes out with the first body bytes: one TLS record and one system call, not two. The
    separate header write was half of a worker's samples in the profile (docs/performance/profiling.md)."""

    _head = b""
    headers_sent: bool

    def send_headers(self) -> None:
        if self.headers_sent:
            return
        lines = self.default_headers()
        lines.extend(f"{k}: {v}\r\n" for k, v in self.headers)
        self._head = ("".join(lines) + "\r\n").encode("latin-1")
        self.headers_sent = True

    def _flush_head(self, data: bytes = b"") -> bytes:
        head, self._head = self._head, b""
        if head and (self.chunked or not data):
            util.write(self.sock, head)
            return data
        return head + data

    def _emit_body(self, data: bytes) -> None:
        data = self._flush_head(data)
        if data:
            util.write(self.sock, data, self.chunked)

    def close(self) -> None:
        self.send_headers()
        self._flush_head()
        if self.chunked:
            util.write_chunk(self.sock, b"")


class LargeSlot:
    """One large body judged at a time in the whole replica: an exclusive ``flock`` on a file every worker opens
    (in the master's metrics folder, which only this replica uses). Taken in the offload thread, so waiting for
    it blocks that thread, never the hub."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)

    def __enter__(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)


def _large_slot() -> contextlib.AbstractContextManager[None]:
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")  # set by ``serve`` for the master and its workers
    return LargeSlot(os.path.join(folder, "large-body.lock")) if folder else contextlib.nullcontext()


_LIBC = ctypes.util.find_library("c")
_malloc_trim = getattr(ctypes.CDLL(_LIBC), "malloc_trim", None) if _LIBC else None


def give_back_memory() -> None:
    """After a large body: collect its cycles and hand freed heap pages back to the system (glibc's
    ``malloc_trim``), so a worker does not keep the peak of the largest request it ever judged (measured: 65
    -> 50 MiB after a 28,000-container Pod)."""
    gc.collect()
    if _malloc_trim is not None:
        _malloc_trim(0)


class GuardedWorker(GeventWorker):  # type: ignore[misc]
    """gunicorn's gevent worker with TLS done here (handshake under a deadline, certificates reloaded from
    disk) and a deadline per request; see the module docstring."""

    request_deadline = REQUEST_DEADLINE
    judge_deadline = JUDGE_DEADLINE
    offload_body: int | None = OFFLOAD_BODY  # None: every body is judged in the hub (``HubWorker``)
    alive: bool

    def init_process(self) -> None:
        # The first context is built on the first connection, after gevent patched ssl (in
        # super().init_process): so it is gevent's.
        # gunicorn's ca_certs: the CA that verifies client certificates (the extender's --client-ca-file).
        self.tls = ReloadingContext(self.cfg.certfile, self.cfg.keyfile, client_ca=self.cfg.ca_certs or None) \
            if self.cfg.is_ssl else None
        self.offload = ThreadPool(1)
        self.budget = BodyBudget()  # large bodies being read by this worker, bounded together
        self.large = _large_slot()  # large bodies being judged by the replica: one at a time
        # Codecs are imported on first use; do it now, not in a request (the master does the same before its
        # health thread starts, so no fork inherits the codec's import lock held: docs/reliability.md).
        "localhost".encode("idna")
        # Readable once the worker stops: every idle keep-alive wait watches it beside its own socket.
        self.closing_r, self.closing_w = os.pipe()
        super().init_process()

    def init_signals(self) -> None:
        super().init_signals()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # a stop sent while booting arrives now

    def run(self) -> None:
        backend = str(getattr(gevent.get_hub().loop, "backend", ""))
        if backend == "select":  # libev's own select backend holds descriptors below 1,024 only: say so at start
            self.log.warning("qos-guard: the gevent loop polls with select: connections on descriptors of 1,024 "
                             "and more will fail; unset GEVENT_BACKEND (epoll is the default on Linux)")
        servers = []
        for s in self.sockets:
            s.setblocking(1)
            server = StreamServer(s, handle=partial(self.handle, s), spawn=Pool(self.worker_connections))
            if self.cfg.workers > 1:
                server.max_accept = 1
            server.start()
            servers.append(server)
        while self.alive:
            self.notify()
            gevent.sleep(1.0)
        for server in servers:  # stop accepting; let requests in flight finish within graceful_timeout
            server.close()
        os.write(self.closing_w, b"x")  # idle keep-alive connections are closed now
        started = time.monotonic()
        while time.monotonic() - started <= self.cfg.graceful_timeout:
            if all(server.pool.free_count() == server.pool.size for server in servers):
                return
            self.notify()
            gevent.sleep(0.2)
        for server in servers:
            server.stop(timeout=1)

    def _deadline(self) -> float:
        """``request_deadline`` ± 25 %: connections opened together are not all closed, and reopened, together
        (a burst of TLS handshakes is what delays everyone else; see docs/reliability.md)."""
        return self.request_deadline * random.uniform(0.75, 1.25)

    def _wait_for_request(self, client: Any, parser: Any, first: bool = False) -> bool:
        """Wait for the next request's first byte, up to ``keepalive`` between requests and up to a request
        deadline for the first (a client that opens a connection sends its request at once: the API server
        does; one that sends nothing is recycled as a stalled one is, not kept for a minute): False when none
        came, or when the worker is stopping and none is waiting (a request already sent is still served)."""
        if parser.unreader.buf.getvalue() or (isinstance(client, ssl.SSLSocket) and client.pending()):
            return True
        # gevent's poll (an io watcher per descriptor on the hub's loop, epoll), not its select: that one first
        # calls the real select.select, which cannot take a descriptor of 1,024 or more (ValueError, answered
        # 500 to every connection past it with --connections above about 1,000).
        fd = client.fileno()
        waiting = gselect.poll()
        waiting.register(fd, gselect.POLLIN)
        waiting.register(self.closing_r, gselect.POLLIN)
        wait = min(max(self.cfg.keepalive, 1), self._deadline()) if first else max(self.cfg.keepalive, 1)
        return any(ready == fd for ready, _ in waiting.poll(wait * 1000))

    def serve_request(self, listener_name: Any, req: Any, client: Any, addr: Any, deadline: Any) -> bool:
        """One request through the WSGI app (gunicorn's ``handle_request`` without HTTP/2 or access log, and
        with ``CoalescedResponse``): whether the connection stays open. ``deadline`` covers what the client
        controls; judging an offloaded body does not count against it, and writing the answer gets a new one."""
        self.cfg.pre_request(self, req)
        resp, environ = wsgi.create(req, client, addr, listener_name, self.cfg, response_class=CoalescedResponse)
        environ["wsgi.multithread"] = True
        self.nr += 1
        if self.nr >= self.max_requests and self.alive:
            self.log.info("Autorestarting worker after current request.")
            self.alive = False
        if not self.alive or not self.cfg.keepalive:
            resp.force_close()
        environ[BUDGET] = self.budget
        peer = getattr(client, "getpeercert", None)
        environ[PEER_VERIFIED] = bool(peer()) if peer is not None else False  # None: no certificate sent
        length = str(environ.get("CONTENT_LENGTH") or "")
        size = int(length) if length.isdigit() else 0
        if self.offload_body is not None and self.offload_body < size <= MAX_BODY:
            # Read here, under the budget as the bytes arrive (never on the promised length); judged in
            # the worker's thread, so the hub keeps serving small requests meanwhile.
            taken = Taken(self.budget, client_of(environ))
            try:
                try:
                    if not self.budget.fits(taken.client, size):  # would not fit now: refused before reading
                        raise Busy
                    environ[BUFFERED] = read_into(environ["wsgi.input"], size, taken)  # held once, not in pieces
                    taken.read_whole()  # in the budget until judged; no longer against the sender's share
                except (BadBody, Busy) as exc:  # a broken chunk, a client gone mid-body, no budget: 400 or 503
                    environ[BUFFERED] = exc
                environ["wsgi.input"] = io.BytesIO()
                if isinstance(environ[BUFFERED], Exception):
                    respiter: Any = self.wsgi(environ, resp.start_response)  # the refusal, at once in the hub
                else:
                    respiter = self._judged_off_the_hub(environ, resp, deadline)
            finally:
                environ.pop(BUFFERED, None)
                taken.give_back()
        else:
            respiter = self.wsgi(environ, resp.start_response)
        try:
            for item in respiter:
                resp.write(item)
            resp.close()
        finally:
            if hasattr(respiter, "close"):
                respiter.close()
        return not resp.should_close()

    def _judged_off_the_hub(self, environ: dict[str, Any], resp: Any, deadline: Any) -> list[bytes]:
        """A body read already, judged in the offload thread. The client's deadline is off meanwhile (judging is
        not the client's doing), but the wait is bounded all the same: past ``JUDGE_DEADLINE`` (the most the API
        server waits for a webhook) the answer is 503 with Retry-After, and the thread, when it gets to it,
        skips judging a Pod nobody waits for."""
        deadline.cancel()
        given_up: list[bool] = []  # a flag the thread reads: appending to a list is atomic
        answered: list[tuple[str, list[tuple[str, str]]]] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answered[:] = [(status, headers)]
            return None

        job = self.offload.spawn(self._call_app, environ, start_response, given_up)
        try:
            body: list[bytes] = job.get(timeout=self.judge_deadline)
        except gevent.Timeout:
            given_up.append(True)
            self.log.warning("qos-guard: a large body was not judged within %.0f s (the replica judges one at a "
                             "time): answered 503", self.judge_deadline)
            answered[:] = [("503 Service Unavailable", [("Content-Type", "application/json"), ("Retry-After", "1")])]
            body = [b'{"error": "busy", "reason": "large requests are judged one at a time and this one waited '
                    b'too long; retry"}']
        deadline.start()  # writing the answer is the client's doing again
        status, headers = answered[0]
        resp.start_response(status, headers)
        return body

    def _call_app(self, environ: dict[str, Any], start_response: Any, given_up: list[bool]) -> list[bytes]:
        """In the offload thread: the whole answer, so no gevent socket is touched outside the hub; one such
        request at a time in the replica, and its memory given back when it is answered."""
        try:
            with self.large:
                if given_up:  # the hub answered 503 meanwhile: nobody waits for this one
                    start_response("503 Service Unavailable", [])
                    return []
                respiter = self.wsgi(environ, start_response)
                try:
                    return list(respiter)
                finally:
                    if hasattr(respiter, "close"):
                        respiter.close()
        finally:
            environ.pop(BUFFERED, None)
            give_back_memory()

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        req = None
        try:
            client.setblocking(1)
            if self.tls is not None:
                with gevent.Timeout(self._deadline(), Deadline):
                    client = self.tls.current().wrap_socket(client, server_side=True, do_handshake_on_connect=False)
                    client.do_handshake()
            parser = http.get_parser(self.cfg, client, addr)
            listener_name = listener.getsockname()
            first = True
            while True:
                req = None
                if not self._wait_for_request(client, parser, first):
                    break
                first = False
                deadline = gevent.Timeout(self._deadline(), Deadline)
                deadline.start()
                try:
                    req = next(parser)
                    if not req:
                        break
                    keep = self.serve_request(listener_name, req, client, addr, deadline)
                finally:
                    deadline.close()
                if not keep or not self.cfg.keepalive or not self.alive:
                    break
        except (Deadline, StopIteration, http.errors.NoMoreData, ssl.SSLError):
            pass
        except OSError as exc:
            if exc.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.EBADF):
                self.log.exception("socket error")
        except Exception as exc:  # a malformed request line or header: gunicorn answers 400 itself
            self.handle_error(req, client, addr, exc)
        finally:
            util.close(client)


class HubWorker(GuardedWorker):
    """``GuardedWorker`` that judges every body in the hub, large ones too: for an app whose state greenlets of
    the same worker change (the extender's watches update its stores between calls), so that no call is judged
    in an OS thread while they change it. The hub runs one greenlet at a time and judging does not yield, so a
    call sees its view whole; the cost is that a large body holds the worker's other requests while it is judged
    (the extender's one client, kube-scheduler, schedules one Pod at a time)."""

    offload_body = None
