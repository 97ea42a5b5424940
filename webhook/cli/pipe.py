"""A reader that closes stdout early (``qos-guard check … | head -1``) must not decide the exit code: the run
goes on with its output discarded and ends with the code its results earned (a closed pipe once meant exit 0,
so CI could pass with violations, depending on timing)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, TextIO, cast


class _ClosedPipeTolerant:
    """``sys.stdout``, except that a closed pipe sends the rest of the output to /dev/null instead of raising."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner
        self.closed_early = False

    def _discard_from_now_on(self) -> None:
        self.closed_early = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._inner.fileno())  # what is still buffered is flushed there too, at exit
            os.close(devnull)
        except (OSError, ValueError):  # no file descriptor (a test's StringIO): it is dropped below instead
            self._inner = cast(TextIO, open(os.devnull, "w"))  # noqa: SIM115 - lives until the process ends

    def write(self, text: str) -> int:
        if not self.closed_early:
            try:
                return self._inner.write(text)
            except BrokenPipeError:
                self._discard_from_now_on()
        try:
            return self._inner.write(text)
        except BrokenPipeError:  # the buffer held across the dup2 is written again
            return len(text)

    def flush(self) -> None:
        try:
            self._inner.flush()
        except BrokenPipeError:
            self._discard_from_now_on()
            with suppress(BrokenPipeError):
                self._inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextmanager
def closed_pipe_tolerated() -> Iterator[None]:
    """Within: writes to ``sys.stdout`` never raise ``BrokenPipeError``."""
    original = sys.stdout
    tolerant = _ClosedPipeTolerant(original)
    sys.stdout = cast(TextIO, tolerant)
    try:
        yield
    finally:
        tolerant.flush()
        sys.stdout = original
