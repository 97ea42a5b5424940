"""``qos-guard serve``: gunicorn with TLS (1.2 minimum) run programmatically, certificates reloaded from
disk when they change, metrics and health on a separate plain-HTTP port (webhook/serving/health.py) in the master.
Workers are gevent with a deadline on every client step (webhook/serving/worker.py; why: docs/reliability.md).

SIGTERM is gunicorn's graceful shutdown: workers stop accepting, finish in-flight requests, then exit.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication

from webhook.serving.certmetrics import record_certificate_expiry
from webhook.serving.certs import ensure_local

CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL:!MD5:!DSS:!RC4:!3DES"
LOG = logging.getLogger("qos_guard.server")


MAX_LINE = 4096
MAX_FIELD = 253  # a Kubernetes name's maximum; the API server's uids are 36


def bound_line(line: str) -> str:
    """A decision line within ``MAX_LINE``: long strings cut (their length said), long lists shortened; still
    JSON. A client controls the names and uid it sends, and one line must not be megabytes."""

    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > MAX_FIELD:
            return f"{value[:MAX_FIELD]}... ({len(value)} characters)"
        if isinstance(value, list):
            return [cut(v) for v in value[:20]] + ([f"... and {len(value) - 20} more"] if len(value) > 20 else [])
        if isinstance(value, dict):
            return {str(k)[:MAX_FIELD]: cut(v) for k, v in value.items()}
        return value

    try:
        bounded = json.dumps(cut(json.loads(line)))
    except ValueError:
        bounded = line
    return bounded if len(bounded) <= MAX_LINE else bounded[:MAX_LINE - 20] + "... (cut)"


class BatchedLines(logging.Handler):
    """Decision log lines go to a queue that one thread writes out every ``interval`` seconds.

    A write (and a thread wake-up) per line cost more than judging the Pod (docs/performance); lines
    are at most ``interval`` late instead. ``close`` writes whatever is still queued.
    """

    def __init__(self, stream: Any, interval: float = 0.05) -> None:
        super().__init__()
        self._queue: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._stream, self._interval = stream, interval
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._write, name="decision-log", daemon=True)
        self._thread.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            self._queue.put(line if len(line) <= MAX_LINE else bound_line(line))
        except Exception:  # never fail a request over a log line
            self.handleError(record)

    def _drain(self) -> None:
        lines = []
        while not self._queue.empty():
            lines.append(self._queue.get_nowait())
        if lines:
            try:
                self._stream.write("".join(f"{line}\n" for line in lines))
                self._stream.flush()
            except (OSError, ValueError):
                pass

    def _write(self) -> None:
        while not self._closing.wait(self._interval):
            self._drain()
        self._drain()

    def close(self) -> None:
        self._closing.set()
        self._thread.join(timeout=5)
        super().close()


def _batch_decision_log(worker: Any) -> None:
    """In each worker (threads do not survive fork): decision lines through a ``BatchedLines``."""
    decisions = logging.getLogger("qos_guard.decisions")
    handler = BatchedLines(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    decisions.addHandler(handler)
    decisions.propagate = False
    worker.qos_guard_log = handler


def _flush_decision_log(server: Any, worker: Any) -> None:
    handler = getattr(worker, "qos_guard_log", None)
    if handler is not None:
        handler.close()


class ServeError(RuntimeError):
    """A problem found before serving: the program exits 2 with this message."""


@dataclass(frozen=True)
class ServeOptions:
    bind: str = "0.0.0.0:8443"
    metrics_bind: str = "0.0.0.0:8080"
    workers: int = 2
    connections: int = 1000
    worker_model: str = "gevent"  # "gthread": the former model, kept for bench/ comparisons only
    threads: int = 4  # gthread only
    config: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    noop: bool = False
    graceful_timeout: int = 30


def server_context(cert: str, key: str) -> ssl.SSLContext:
    """TLS 1.2+ with forward-secret AEAD ciphers only."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(CIPHERS)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    ctx.load_cert_chain(certfile=cert, keyfile=key)
    record_certificate_expiry(cert)
    return ctx


class ReloadingContext:
    """gunicorn's ``ssl_context`` hook, called for every new connection: it hands out a context built
    from the files on disk, rebuilt (at most once a second) when they change, as they do when kubelet
    updates a mounted Secret or cert-manager renews it. A half-written pair keeps the old context."""

    def __init__(self, cert: str, key: str, interval: float = 1.0) -> None:
        self.cert, self.key, self.interval = cert, key, interval
        self._lock = threading.Lock()
        self._stamp: tuple[int, ...] | None = None
        self._context: ssl.SSLContext | None = None
        self._checked = 0.0

    def _files_stamp(self) -> tuple[int, ...]:
        a, b = os.stat(self.cert), os.stat(self.key)
        return a.st_mtime_ns, a.st_size, a.st_ino, b.st_mtime_ns, b.st_size, b.st_ino

    def current(self) -> ssl.SSLContext:
        now = time.monotonic()
        if self._context is not None and now - self._checked < self.interval:
            return self._context
        with self._lock:
            self._checked = now
            try:
                stamp = self._files_stamp()
                if stamp != self._stamp or self._context is None:
                    self._context = server_context(self.cert, self.key)
                    if self._stamp is not None:
                        LOG.warning('{"event": "certificate reloaded", "cert": "%s"}', self.cert)
                    self._stamp = stamp
            except (OSError, ssl.SSLError) as exc:
                if self._context is None:
                    raise
                LOG.warning('{"event": "certificate reload failed, keeping the old one", "error": "%s"}', exc)
            return self._context

    def __call__(self, conf: Any, default_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        return self.current()


def _split_bind(bind: str) -> tuple[str, int]:
    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ServeError(f"bind address {bind!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def check_port_free(bind: str, flag: str) -> None:
    host, port = _split_bind(bind)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ServeError(f"{flag} {bind}: cannot listen there ({exc.strerror})") from None


def resolve_certificates(opts: ServeOptions, workdir: Path) -> tuple[str, str, str | None]:
    """(cert, key, CA path to show): the given files, checked, or the local development CA."""
    if bool(opts.cert_file) != bool(opts.key_file):
        raise ServeError("--cert-file and --key-file go together")
    if opts.cert_file and opts.key_file:
        try:
            server_context(opts.cert_file, opts.key_file)
        except FileNotFoundError as exc:
            raise ServeError(f"certificate file not found: {exc.filename}") from None
        except (OSError, ssl.SSLError) as exc:
            raise ServeError(f"cannot use --cert-file {opts.cert_file} / --key-file {opts.key_file}: {exc}") from None
        return opts.cert_file, opts.key_file, None
    paths, created = ensure_local(workdir / "certs")
    verb = "created" if created else "reusing"
    print(f"qos-guard: {verb} a local development CA: {paths.ca} (certificate {paths.cert}, "
          f"SANs localhost and 127.0.0.1)", file=sys.stderr)
    return str(paths.cert), str(paths.key), str(paths.ca)


class _Gunicorn(BaseApplication):  # type: ignore[misc]
    def __init__(self, options: dict[str, Any], factory: Callable[[], Any]) -> None:
        self.options, self.factory = options, factory
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        return self.factory()


def _start_health_server(opts: ServeOptions, ready: Callable[[], bool]) -> Any:
    """The plain port (webhook/serving/health.py): bounded, in one thread of the master; readiness asks a worker."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    from webhook.serving.app import multiprocess_registry
    from webhook.serving.health import HealthServer, WorkerProbe

    host, port = _split_bind(opts.metrics_bind)
    health = HealthServer(host, port, WorkerProbe(*_split_bind(opts.bind)),
                          lambda: (generate_latest(multiprocess_registry()), CONTENT_TYPE_LATEST), ready)
    health.start()
    return health


def _worker_app(config: Any, own_namespace: str | None, noop: bool) -> Any:
    """In each worker: the Flask app behind the readiness probe route and the 5xx counter."""
    from prometheus_client import Counter

    from webhook.serving.app import Metrics, create_app
    from webhook.serving.health import probe_route

    errors = Counter("qos_guard_http_server_errors", "Answers with a 5xx status; there should be none", ["code"])
    errors.labels("500")
    return probe_route(create_app(config, Metrics.create(), own_namespace, noop=noop),
                       lambda code: errors.labels(code).inc())


def serve(opts: ServeOptions) -> int:
    """Run until SIGTERM/SIGINT; gunicorn's arbiter ends the process itself when it stops."""
    from webhook.core.config import load_config

    config = load_config(opts.config)  # ConfigError: exit 2 before anything listens
    check_port_free(opts.bind, "--bind")
    check_port_free(opts.metrics_bind, "--metrics-bind")
    cert, key, ca = resolve_certificates(opts, Path.cwd())
    # prometheus-client chooses its multiprocess value store when first imported: set the folder first.
    metrics_dir = tempfile.mkdtemp(prefix="qos-guard-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    from prometheus_client import multiprocess

    ready = threading.Event()
    health: list[Any] = []
    own_namespace = os.environ.get("POD_NAMESPACE") or None
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)

    def when_ready(server: Any) -> None:
        health.append(_start_health_server(opts, ready.is_set))
        ready.set()
        host, port = _split_bind(opts.bind)
        shown = "localhost" if host in ("0.0.0.0", "::", "127.0.0.1") else host
        hint = f"--cacert {ca} " if ca else ""
        print(f"qos-guard: serving https://{shown}:{port} (metrics http://{opts.metrics_bind}/metrics); try:\n"
              f"  curl {hint}https://{shown}:{port}/validate -H 'Content-Type: application/json' "
              "--data @examples/admission-review.json", file=sys.stderr, flush=True)

    def post_fork(server: Any, worker: Any) -> None:
        for h in health:
            h.close_in_child()

    def child_exit(server: Any, worker: Any) -> None:
        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]

    options: dict[str, Any] = {
        "bind": [opts.bind],
        "workers": opts.workers,
        "worker_class": "webhook.serving.worker.GuardedWorker" if opts.worker_model == "gevent" else "gthread",
        "threads": opts.threads,
        "worker_connections": opts.connections,
        "keepalive": 75,
        "certfile": cert,
        "keyfile": key,
        "ssl_context": ReloadingContext(cert, key),
        "graceful_timeout": opts.graceful_timeout,
        "timeout": 30,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "warning",
        "when_ready": when_ready,
        "child_exit": child_exit,
        "post_fork": post_fork,
        "post_worker_init": _batch_decision_log,
        "worker_exit": _flush_decision_log,
        "proc_name": "qos-guard",
    }
    if opts.worker_model == "gevent":
        from webhook.serving.worker import hold_stop_signals_across_fork

        hold_stop_signals_across_fork()
    master = os.getpid()
    try:
        _Gunicorn(options, lambda: _worker_app(config, own_namespace, opts.noop)).run()
    finally:
        # A worker's exit (sys.exit) unwinds through this frame too, forked with it: only the master owns the
        # folder; removed by a worker, its replacement could not boot and the whole server halted.
        if os.getpid() == master:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0
