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
