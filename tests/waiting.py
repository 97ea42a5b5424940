"""Polling for what a running system does a moment later (a watch delivering, a worker relisting, an informer
catching up): one loop for every test that waits, so each says what it waited for and how long it took."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


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


def result(what: str, get: Callable[[], T | None], within: float, every: float = 0.1,
           seen: Callable[[], object] | None = None) -> T:
    """The first true value ``get()`` returns (the object waited for, e.g. the Event that appeared), polled as
    ``eventually`` polls and failing as it fails."""
    got: list[T | None] = []

    def check() -> bool:
        got[:] = [get()]
        return bool(got[0])

    eventually(what, check, within, every, seen)
    value = got[0]
    assert value is not None  # it was true
    return value


def parked_in(thread: threading.Thread, function: Callable[..., object]) -> bool:
    """Whether ``thread`` is blocked waiting (innermost in ``threading.Condition.wait``) inside ``function``: the
    positive sign that it reached that wait, where a test would otherwise sleep and hope it had."""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None or frame.f_code is not threading.Condition.wait.__code__:
        return False
    code = getattr(function, "__code__", None)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False
