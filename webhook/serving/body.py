"""Reading a request body within bounds (transport only: the Flask layer turns ``BadBody`` into 400,
``TooLarge`` into 413 and ``Busy`` into 503; what the bytes mean is admission's business).

Refused up front, before any byte is read: a Content-Length over ``DRAIN_LIMIT`` (10^20 included). A body
over ``MAX_BODY`` that is not that large is read and dropped so the client sees the 413 rather than a reset.
A broken chunked encoding or a client leaving mid-body (gunicorn's ``InvalidChunkSize``, ``NoMoreData``,
...) is a ``BadBody`` naming what went wrong, never an uncaught exception and a 500.
"""

from __future__ import annotations

from typing import Any

from gunicorn.http import errors as http_errors

MAX_BODY = 3 * 1024 * 1024
# An oversized body up to this size is read and dropped so the client sees the 413 instead of a reset.
DRAIN_LIMIT = 64 * 1024 * 1024


class TooLarge(Exception):
    """The request body is over ``MAX_BODY``."""


class BadBody(ValueError):
    """The body could not be read as HTTP frames it: HTTP 400 with this reason."""


_READ_ERRORS = (http_errors.ParseException, http_errors.NoMoreData, ConnectionError, TimeoutError)


def _read(stream: Any, size: int) -> bytes:
    try:
        return bytes(stream.read(size))
    except _READ_ERRORS as exc:
        what = type(exc).__name__
        detail = str(exc)[:200]
        raise BadBody(f"the request body could not be read ({what}{': ' + detail if detail else ''})") from None


class Busy(Exception):
    """Large bodies being read already hold this worker's ``BodyBudget``: HTTP 503, retry later."""


# A request under SMALL_BODY never waits on the budget (a few KiB, as nearly every Pod is); larger ones must
# have a Content-Length and share it, so memory is bounded by connections x SMALL_BODY + BUFFER_BUDGET + the
# requests being judged (webhook/serving/worker.py: one small one in the hub and one large one in the offload
# thread, one large one per replica). 12 MiB: four 3 MiB bodies, one judged and three waiting (tens of seconds
# for Pods of tens of thousands of containers); more get 503 with Retry-After at once instead of a longer wait.
SMALL_BODY = 64 * 1024
BUFFER_BUDGET = 12 * 1024 * 1024
STEP = 256 * 1024
BUDGET = "qos_guard.budget"  # environ key: the worker's BodyBudget
# environ key: the body the worker read already under its budget (or the BadBody its read raised)
BUFFERED = "qos_guard.buffered"


class BodyBudget:
    """Body bytes held by the requests of one worker that are still being read, at most ``limit``. Only the
    worker's hub touches it (the offload thread gets bodies already read), so it needs no lock."""

    def __init__(self, limit: int = BUFFER_BUDGET) -> None:
        self.limit = limit
        self.held = 0

    def reserve(self, size: int) -> bool:
        """Take ``size`` bytes; False when the budget cannot cover them."""
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def release(self, size: int) -> None:
        self.held -= size


def read_into(stream: Any, length: int) -> bytearray:
    """Exactly ``length`` body bytes (fewer if the client stops) in one buffer, read in ``STEP`` pieces: a body
    is held once, not as pieces plus their join (twice its size while joining)."""
    buffer = bytearray(length)
    view = memoryview(buffer)
    got = 0
    try:
        while got < length:
            part = _read(stream, min(STEP, length - got))
            if not part:
                break
            view[got:got + len(part)] = part
            got += len(part)
    finally:
        view.release()
    if got < length:
        del buffer[got:]
    return buffer


def read_bounded(environ: dict[str, Any], budget: BodyBudget) -> bytes | bytearray:
    """The request body, at most ``MAX_BODY`` bytes; larger ones are refused (``TooLarge``). A body the worker
    read already (``BUFFERED``) is returned as it is; one over ``SMALL_BODY`` is held in one buffer, taken from
    ``budget`` for as long as it is read (``Busy`` when the budget cannot cover it)."""
    held = environ.get(BUFFERED)
    if isinstance(held, BadBody):  # the worker's read of this body failed: the app answers 400
        raise held
    if isinstance(held, bytes | bytearray):
        expected = str(environ.get("CONTENT_LENGTH") or "")
        if expected.isdigit() and len(held) < int(expected):
            raise BadBody(f"the request body ended after {len(held)} of {expected} bytes")
        return held
    stream = environ["wsgi.input"]
    raw_length = environ.get("CONTENT_LENGTH") or None
    length = int(raw_length) if raw_length is not None and str(raw_length).isdigit() else None
    if length is not None and length > DRAIN_LIMIT:
        raise TooLarge
    if length is not None and length <= MAX_BODY:
        counted = length if length > SMALL_BODY and not held else 0
        if counted and not budget.reserve(counted):
            raise Busy
        try:
            data: bytes | bytearray = _read(stream, length) if length <= STEP else read_into(stream, length)
        finally:
            budget.release(counted)
        if len(data) < length:
            raise BadBody(f"the request body ended after {len(data)} of {length} bytes")
        return data
    if length is None:  # chunked (no Content-Length): only a small body
        parts: list[bytes] = []
        got = 0
        while part := _read(stream, STEP):
            got += len(part)
            parts.append(part)
            if got > SMALL_BODY:
                raise BadBody(f"a body over {SMALL_BODY // 1024} KiB needs a Content-Length (the API server sends "
                              "one)")
        return b"".join(parts)
    left = length  # over MAX_BODY: read and dropped, so the client sees the 413 rather than a reset
    while left > 0 and (chunk := _read(stream, min(left, 1 << 20))):
        left -= len(chunk)
    raise TooLarge
