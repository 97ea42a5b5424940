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


class Busy(Exception):
    """Large bodies being read already hold this worker's ``BodyBudget`` (or this client's share of it): HTTP
    503, retry later."""


_READ_ERRORS = (http_errors.ParseException, http_errors.NoMoreData, ConnectionError, TimeoutError)


def _read(stream: Any, size: int) -> bytes:
    try:
        return bytes(stream.read(size))
    except _READ_ERRORS as exc:
        what = type(exc).__name__
        detail = str(exc)[:200]
        raise BadBody(f"the request body could not be read ({what}{': ' + detail if detail else ''})") from None


# A request under SMALL_BODY never waits on the budget (a few KiB, as nearly every Pod is); larger ones must
# have a Content-Length and share it, so memory is bounded by connections x SMALL_BODY + BUFFER_BUDGET + the
# requests being judged (webhook/serving/worker.py: one small one in the hub and one large one in the offload
# thread, one large one per replica). 12 MiB: four 3 MiB bodies, one judged and three waiting (tens of seconds
# for Pods of tens of thousands of containers); more get 503 with Retry-After at once instead of a longer wait.
# The budget is taken as bytes arrive, PIECE at a time, never on the promised Content-Length (250
# connections promising 100,000 bytes and sending one held the whole budget, and every Pod over 64 KiB got 503);
# and one client (a peer address) may hold at most half of it in bodies still being read, so that clients sending
# slowly from one address cannot take it all from the API server (whose address is another); a body read whole no
# longer counts against its sender's share (it waits to be judged, within a deadline: worker.py).
SMALL_BODY = 64 * 1024
BUFFER_BUDGET = 12 * 1024 * 1024
STEP = 256 * 1024
PIECE = 16 * 1024  # what a body read takes of the budget at a time: a TLS record's worth
BUDGET = "qos_guard.budget"  # environ key: the worker's BodyBudget
# environ key: the body the worker read already under its budget (or the BadBody or Busy its read raised)
BUFFERED = "qos_guard.buffered"


class BodyBudget:
    """Body bytes held by the requests of one worker that are still being read (or, read by the worker, judged),
    at most ``limit`` in all, and at most ``share`` per client in bodies still being read. Only the worker's hub
    touches it (the offload thread gets bodies already read), so it needs no lock."""

    def __init__(self, limit: int = BUFFER_BUDGET, share: int | None = None) -> None:
        self.limit = limit
        # Half the budget, and at least one body of the largest size (a client must be able to send one).
        self.share = max(limit // 2, min(limit, MAX_BODY)) if share is None else share
        self.held = 0
        self.by_client: dict[str, int] = {}

    def fits(self, client: str, size: int) -> bool:
        """Whether ``size`` more bytes for ``client`` would fit now (nothing is taken: a body's promised length
        is checked so, so that one that cannot be held is refused before any of it is read, while the bytes
        still to come hold nothing)."""
        return self.held + size <= self.limit and self.by_client.get(client, 0) + size <= self.share

    def take(self, client: str, size: int) -> bool:
        """Take ``size`` bytes for ``client``; False when the budget or the client's share cannot cover them."""
        mine = self.by_client.get(client, 0)
        if self.held + size > self.limit or mine + size > self.share:
            return False
        self.held += size
        self.by_client[client] = mine + size
        return True

    def give(self, client: str, size: int, read: int | None = None) -> None:
        """Give back ``size`` bytes of the budget, of which ``read`` (all, by default) still count against
        ``client``'s share."""
        self.held -= size
        self.settle(client, size if read is None else read)

    def settle(self, client: str, size: int) -> None:
        """``size`` bytes of ``client``'s are read whole: they stay in the budget (until judged) but no longer
        count against its share, which bounds what a client holds by sending slowly."""
        left = self.by_client.get(client, 0) - size
        if left > 0:
            self.by_client[client] = left
        else:
            self.by_client.pop(client, None)

    def reserve(self, size: int) -> bool:
        """Take ``size`` bytes for no client in particular; False when the budget cannot cover them."""
        return self.take("", size)

    def release(self, size: int) -> None:
        self.give("", size)


class Taken:
    """What one request's read has taken of a ``BodyBudget`` so far; ``read_whole`` says the body is read (its
    bytes no longer count against the client's share), ``give_back`` returns all of it. ``promised``: the body's
    length, refused at once (``Busy``) when it would not fit now, rather than after reading part of it."""

    def __init__(self, budget: BodyBudget, client: str, promised: int = 0) -> None:
        if promised and not budget.fits(client, promised):
            raise Busy
        self.budget, self.client, self.size, self.reading = budget, client, 0, 0

    def take(self, size: int) -> None:
        if not self.budget.take(self.client, size):
            raise Busy
        self.size += size
        self.reading += size

    def read_whole(self) -> None:
        self.budget.settle(self.client, self.reading)
        self.reading = 0

    def give_back(self) -> None:
        self.budget.give(self.client, self.size, self.reading)
        self.size = self.reading = 0


def client_of(environ: dict[str, Any]) -> str:
    """Whose share a request's body is taken from: its peer address."""
    return str(environ.get("REMOTE_ADDR") or "")


def read_into(stream: Any, length: int, taken: Taken | None = None) -> bytearray:
    """At most ``length`` body bytes (fewer if the client stops) in one buffer, grown as pieces arrive, each piece
    taken from ``taken``'s budget first (``Busy`` when it cannot be): a body is held once, not as pieces plus
    their join, and only what was sent is held."""
    buffer = bytearray()
    step = PIECE if taken is not None else STEP
    while len(buffer) < length:
        part = _read(stream, min(step, length - len(buffer)))
        if not part:
            break
        if taken is not None:
            taken.take(len(part))
        buffer += part
    return buffer


def read_bounded(environ: dict[str, Any], budget: BodyBudget) -> bytes | bytearray:
    """The request body, at most ``MAX_BODY`` bytes; larger ones are refused (``TooLarge``). A body the worker
    read already (``BUFFERED``) is returned as it is; one over ``SMALL_BODY`` is held in one buffer, taken from
    ``budget`` for as long as it is read (``Busy`` when the budget cannot cover it)."""
    held = environ.get(BUFFERED)
    if isinstance(held, BadBody | Busy):  # the worker's read of this body failed: the app answers 400 or 503
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
        if length <= SMALL_BODY or held:
            data: bytes | bytearray = _read(stream, length) if length <= STEP else read_into(stream, length)
        else:
            taken = Taken(budget, client_of(environ), length)
            try:
                data = read_into(stream, length, taken)
            finally:
                taken.give_back()
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
