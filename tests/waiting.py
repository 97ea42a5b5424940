"""Polling for what a running system does a moment later (a watch delivering, a worker relisting, an informer
catching up): one loop for every test that waits, so each says what it waited for and how long it took."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(what: str, check: Callable[[], object], within: float, every: float = 0.1,
               seen: Callable[[], object] | None = None) -> float:
    """Seconds until ``check()`` is true, polled every ``every`` seconds; the test fails naming ``what`` when it
    is not within ``within`` seconds (and what ``seen()`` says there is instead, e.g. a log). ``check`` may
    itself fail the test at once (a process that exited: no point waiting)."""
    started = time.monotonic()
    while not check():
        waited = time.monotonic() - started
        assert waited < within, f"{what}: not seen within {within:g} s" + (f"; seen: {seen()}" if seen else "")
        time.sleep(every)
    return time.monotonic() - started
