"""tests/waiting.py itself: a wait that runs out fails naming what it waited for and what it saw instead."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests import waiting


def test_result_is_the_first_true_value() -> None:
    values: Iterator[list[str] | dict[str, str] | None] = iter([None, [], {"uid": "a"}, {"uid": "b"}])
    assert waiting.result("a Pod", lambda: next(values), within=5, every=0) == {"uid": "a"}


def test_eventually_fails_naming_what_and_what_was_seen() -> None:
    count = itertools.count()
    with pytest.raises(AssertionError, match=r"the Pod gone: not seen within 0\.05 s; seen: \d+ polls"):
        waiting.eventually("the Pod gone", lambda: False, within=0.05, every=0.01,
                           seen=lambda: f"{next(count)} polls")


def test_result_fails_as_eventually_fails() -> None:
    with pytest.raises(AssertionError, match=r"an Event: not seen within 0\.05 s; seen: none yet"):
        waiting.result("an Event", lambda: [], within=0.05, every=0.01, seen=lambda: "none yet")
