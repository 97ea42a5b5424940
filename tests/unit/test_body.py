"""Reading a request body: the worker's budget bounds large bodies being read, and is given back whatever
happens; transport errors are the transport's own (the Flask layer maps them), not AdmissionReview errors."""

from __future__ import annotations

import io
from typing import Any

import pytest

from webhook.admission.review import BadReview
from webhook.cli import main
from webhook.serving.body import (
    BUFFERED,
    MAX_BODY,
    SMALL_BODY,
    STEP,
    BadBody,
    BodyBudget,
    Busy,
    TooLarge,
    read_bounded,
)


def environ(body: bytes, length: int | None = None, **extra: Any) -> dict[str, Any]:
    return {"wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body) if length is None else length),
            **extra}


def test_a_large_body_is_counted_while_read_and_given_back() -> None:
    body = b"x" * (SMALL_BODY * 3)
    budget = BodyBudget(limit=SMALL_BODY * 4)
    assert read_bounded(environ(body), budget) == body
    assert budget.held == 0
    assert budget.reserve(SMALL_BODY * 2)  # another request holds half
    with pytest.raises(Busy):
        read_bounded(environ(body), budget)
    assert budget.held == SMALL_BODY * 2  # the refused read gave back what it took
    budget.release(SMALL_BODY * 2)
    assert budget.held == 0


def test_small_and_already_buffered_bodies_never_wait_on_the_budget() -> None:
    spent = BodyBudget(limit=0)
    assert read_bounded(environ(b"{}"), spent) == b"{}"
    big = b"y" * (SMALL_BODY * 2)
    assert read_bounded(environ(big, **{BUFFERED: True}), spent) == big


def test_transport_errors_are_not_review_errors() -> None:
    assert not issubclass(BadBody, BadReview)
    with pytest.raises(BadBody, match="ended after 2 of 10 bytes"):
        read_bounded(environ(b"{}", length=10), BodyBudget())
    with pytest.raises(TooLarge):
        read_bounded(environ(b"", length=MAX_BODY * 100), BodyBudget())


@pytest.mark.parametrize("flag", ["--enable-noop", "--worker-model=gthread", "--threads=8"])
def test_benchmark_flags_are_not_in_the_production_command(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", flag])
    assert exit_info.value.code == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_a_body_the_worker_read_is_used_as_it_is() -> None:
    body = bytearray(b"z" * (SMALL_BODY * 2))
    assert read_bounded(environ(b"", length=len(body), **{BUFFERED: body}), BodyBudget(limit=0)) is body
    with pytest.raises(BadBody, match="ended after 3 of 10 bytes"):
        read_bounded(environ(b"", length=10, **{BUFFERED: bytearray(b"abc")}), BodyBudget())
    failed = BadBody("the request body could not be read (NoMoreData)")
    with pytest.raises(BadBody, match="NoMoreData"):
        read_bounded(environ(b"", length=10, **{BUFFERED: failed}), BodyBudget())


class Socketish(io.RawIOBase):
    """Hands out new bytes on every read, as a socket does (BytesIO may return its own buffer)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = memoryview(data), 0

    def read(self, size: int = -1) -> bytes:
        end = len(self.data) if size < 0 else min(len(self.data), self.pos + size)
        out, self.pos = bytes(self.data[self.pos:end]), end
        return out


@pytest.mark.parametrize("size", [SMALL_BODY * 3, MAX_BODY])
def test_a_large_body_is_held_once(size: int) -> None:
    """Read in pieces into one buffer: the peak is the body and a piece or two, not the pieces and their join."""
    import tracemalloc
    data = b"q" * size
    tracemalloc.start()
    try:
        body = read_bounded({"wsgi.input": Socketish(data), "CONTENT_LENGTH": str(size)}, BodyBudget())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert body == data
    assert peak <= size + 2 * STEP + 4096, (peak, size)  # the piece being copied and the next one


def test_an_oversized_body_is_drained_not_kept() -> None:
    import tracemalloc
    size = MAX_BODY * 2
    stream = Socketish(b"x" * size)
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge):
            read_bounded({"wsgi.input": stream, "CONTENT_LENGTH": str(size)}, BodyBudget())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * (1 << 20) + 4096, peak


def test_the_budget_is_taken_as_bytes_arrive_not_on_the_promise() -> None:
    """A body promising 100,000 bytes and sending one takes one byte of the budget, not
    100,000 (250 such connections held a worker's whole 12 MiB and every Pod over 64 KiB got 503)."""
    from webhook.serving.body import Taken, read_into

    budget = BodyBudget(limit=200_000)
    taken = Taken(budget, "10.0.0.9")
    assert read_into(io.BytesIO(b"{"), 100_000, taken) == b"{"
    assert budget.held == 1 and budget.by_client == {"10.0.0.9": 1}
    taken.give_back()
    assert budget.held == 0 and budget.by_client == {}
    assert budget.take("10.0.0.9", 150_000)  # bytes really held: a body that cannot fit now is refused up front
    with pytest.raises(Busy):
        Taken(budget, "10.96.0.1", promised=60_000)
    assert budget.held == 150_000


def test_one_client_holds_at_most_its_share() -> None:
    """One peer address may hold at most its share (half the budget by default, at least one largest body): a
    client that sends slowly from many connections cannot take the rest from the API server."""
    budget = BodyBudget(limit=4 * MAX_BODY)
    assert budget.share == 2 * MAX_BODY
    assert budget.take("10.0.0.9", 2 * MAX_BODY)
    assert not budget.take("10.0.0.9", 1)  # its share is held
    assert budget.take("10.96.0.1", 2 * MAX_BODY)  # another client still has its own
    body = b"x" * (SMALL_BODY * 2)
    with pytest.raises(Busy):
        read_bounded(environ(body, REMOTE_ADDR="10.0.0.9"), budget)
    budget.give("10.0.0.9", 2 * MAX_BODY)
    assert read_bounded(environ(body, REMOTE_ADDR="10.0.0.9"), budget) == body
    assert budget.held == 2 * MAX_BODY and budget.by_client == {"10.96.0.1": 2 * MAX_BODY}
    assert BodyBudget(limit=SMALL_BODY * 4).share == SMALL_BODY * 4  # a small budget: one body may take it all


def test_a_body_read_whole_leaves_its_senders_share_but_not_the_budget() -> None:
    """The share bounds what a client holds by sending slowly; a body read whole waits to be judged (within its
    deadline) and counts against the budget only, so one API server's fast large bodies are not held to it."""
    from webhook.serving.body import Taken, read_into

    budget = BodyBudget(limit=4 * MAX_BODY)
    first = Taken(budget, "10.96.0.1")
    assert len(read_into(io.BytesIO(b"x" * MAX_BODY), MAX_BODY, first)) == MAX_BODY
    first.read_whole()
    assert budget.held == MAX_BODY and budget.by_client == {}
    second = Taken(budget, "10.96.0.1")
    read_into(io.BytesIO(b"x" * 100), MAX_BODY, second)  # still arriving: against the share
    assert budget.by_client == {"10.96.0.1": 100}
    second.give_back()
    first.give_back()
    assert budget.held == 0 and budget.by_client == {}
