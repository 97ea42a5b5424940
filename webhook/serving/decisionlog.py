"""The decision log: one JSON line per admission decision, written in batches by an OS thread of each worker (never
by its event loop: a stalled reader must not stop admission), each line bounded (a client controls the names and
uid it sends, and one line must not be megabytes); while the reader is stalled, lines are dropped and counted."""

from __future__ import annotations

import collections
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

DECISIONS = "qos_guard.decisions"  # the logger serving/app.py writes decision lines to
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


# Bytes waiting to be written, at most: about a second of a busy worker's decision lines (300 bytes each at about
# 1,000 a second), more than a reader's usual pause; while the writer is stuck (a full pipe) newer lines are dropped,
# and counted, rather than held in memory.
MAX_QUEUED = 256 * 1024


def _original(module: str, name: str) -> Any:
    """The standard library's ``module.name`` even where gevent has patched it (in the worker it has: its
    ``threading.Thread`` is a greenlet, and a greenlet that blocks in a write blocks the whole worker)."""
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover: gevent is a dependency of serving
        return getattr(__import__(module), name)
    return monkey.get_original(module, name)


class LineWriter:
    """Text written to a descriptor every ``interval`` seconds by an OS thread of its own, never by the caller.

    ``put`` never blocks: it queues (a ``deque``, safe across threads) or, with ``limit`` bytes waiting, drops the
    line and counts it (``dropped``, and ``on_drop``). What is waiting is what was put less what was taken, each
    total written by one side only (the caller, the thread), so no lock is needed. A reader that stops (a stopped
    log driver, a full pipe) then blocks this thread only, in ``os.write``, with the GIL released; admission
    carries on.
    """

    def __init__(self, fd: int, interval: float = 0.05, limit: int = MAX_QUEUED,
                 on_drop: Callable[[], None] | None = None) -> None:
        self.fd, self.interval, self.limit, self.on_drop = fd, interval, limit, on_drop
        self.dropped = 0
        self._put = 0  # characters queued, ever: written by callers only
        self._taken = 0  # characters taken to be written, ever: written by the thread only
        self._lines: collections.deque[str] = collections.deque()
        self._closing = False
        self._sleep = _original("time", "sleep")
        self._finished = _original("threading", "Event")()  # an OS-level event: set by the writer thread at its end
        _original("_thread", "start_new_thread")(self._run, ())

    def put(self, text: str) -> bool:
        if self._put - self._taken + len(text) > self.limit:
            self.dropped += 1
            if self.on_drop is not None:
                self.on_drop()
            return False
        self._put += len(text)
        self._lines.append(text)
        return True

    def _run(self) -> None:
        try:
            while not self._closing:
                self._sleep(self.interval)
                self._drain()
            self._drain()
        finally:
            self._finished.set()

    def _drain(self) -> None:
        parts = []
        try:
            while True:
                parts.append(self._lines.popleft())
        except IndexError:
            pass
        if not parts:
            return
        text = "".join(parts)
        self._taken += len(text)  # given back before the write: the write is what may block
        data = memoryview(text.encode("utf-8", "replace"))
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:
            pass  # the log is gone (a closed pipe): nothing to write to

    def close(self, timeout: float = 5.0) -> bool:
        """Write out what is queued, waiting at most ``timeout`` (a stuck reader does not hold a worker's exit
        longer): whether all was written."""
        self._closing = True
        return bool(self._finished.wait(timeout))


class QueuedStream:
    """A stream for ``logging.StreamHandler`` whose writes go through a ``LineWriter``: the worker's other log
    lines (gunicorn's, the server's) cannot block its event loop either."""

    def __init__(self, writer: LineWriter) -> None:
        self.writer = writer

    def write(self, text: str) -> int:
        self.writer.put(text)
        return len(text)

    def flush(self) -> None:
        pass


class BatchedLines(logging.Handler):
    """Decision log lines, each bounded, written in batches every ``interval`` seconds by a ``LineWriter``.

    A write (and a thread wake-up) per line cost more than judging the Pod (docs/performance); lines are at most
    ``interval`` late instead. The writer is an OS thread, not a greenlet: a reader that stops reading does not
    stop admission; lines are dropped and counted meanwhile. ``close`` writes whatever is still queued.
    """

    def __init__(self, stream: Any, interval: float = 0.05, on_drop: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.writer = LineWriter(stream.fileno(), interval, on_drop=on_drop)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            self.writer.put((line if len(line) <= MAX_LINE else bound_line(line)) + "\n")
        except Exception:  # never fail a request over a log line
            self.handleError(record)

    def close(self) -> None:
        self.writer.close()
        super().close()


def _dropped_counter() -> Callable[[], None] | None:
    """The worker's count of dropped log lines (a metric), or None where metrics are not kept."""
    try:
        from webhook.serving.metrics import log_lines_dropped

        counted: Callable[[], None] = log_lines_dropped().inc
        return counted
    except Exception:  # metrics are not worth a worker that cannot start
        logging.getLogger("qos_guard.server").exception("the dropped log lines will not be counted")
        return None


def start_in_worker(worker: Any) -> None:
    """gunicorn's ``post_worker_init``: in each worker (threads do not survive fork), decision lines through a
    ``BatchedLines``, and every other handler that writes to stderr through the same writer: no log write blocks
    the worker's event loop."""
    handler = BatchedLines(sys.stderr, on_drop=_dropped_counter())
    handler.setFormatter(logging.Formatter("%(message)s"))
    decisions = logging.getLogger(DECISIONS)
    decisions.addHandler(handler)
    decisions.propagate = False
    stream = QueuedStream(handler.writer)
    for name in (None, "gunicorn.error", "qos_guard.server", "qos_guard.extender"):
        for other in logging.getLogger(name).handlers:
            if isinstance(other, logging.StreamHandler) and _is_stderr(getattr(other, "stream", None)):
                other.setStream(stream)
    worker.qos_guard_log = handler


def _is_stderr(stream: Any) -> bool:
    try:
        return stream is not None and os.path.sameopenfile(stream.fileno(), sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        return False


def flush_in_worker(server: Any, worker: Any) -> None:
    """gunicorn's ``worker_exit``: write out what is still queued."""
    handler = getattr(worker, "qos_guard_log", None)
    if handler is not None:
        handler.close()
