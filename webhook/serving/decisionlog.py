"""The decision log: one JSON line per admission decision, written in batches by a thread of each worker, each
line bounded (a client controls the names and uid it sends, and one line must not be megabytes)."""

from __future__ import annotations

import json
import logging
import queue
import sys
import threading
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


def start_in_worker(worker: Any) -> None:
    """gunicorn's ``post_worker_init``: in each worker (threads do not survive fork), decision lines through
    a ``BatchedLines``."""
    decisions = logging.getLogger(DECISIONS)
    handler = BatchedLines(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    decisions.addHandler(handler)
    decisions.propagate = False
    worker.qos_guard_log = handler


def flush_in_worker(server: Any, worker: Any) -> None:
    """gunicorn's ``worker_exit``: write out what is still queued."""
    handler = getattr(worker, "qos_guard_log", None)
    if handler is not None:
        handler.close()
