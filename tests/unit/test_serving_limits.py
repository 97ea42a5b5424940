"""Limits the server sets itself at start (webhook/serving/server.py): the open files its connections need."""

from __future__ import annotations

import resource

import pytest

from webhook.serving import server


@pytest.mark.parametrize("soft, hard, connections, raised, held, said", [
    (1024, 1_048_576, 2000, 2128, 2000, None),  # raised to what 2,000 connections need
    (1024, 1500, 2000, 1500, 1372, "serving up to 1372 connections per worker"),  # held under the hard limit
    (65536, 65536, 2000, None, 2000, None),  # enough already: left alone
])
def test_open_files_are_raised_or_the_connections_held_under_them(
        monkeypatch: pytest.MonkeyPatch, soft: int, hard: int, connections: int, raised: int | None, held: int,
        said: str | None) -> None:
    set_to: list[tuple[int, int]] = []
    monkeypatch.setattr(resource, "getrlimit", lambda which: (soft, hard))
    monkeypatch.setattr(resource, "setrlimit", lambda which, limits: set_to.append(limits))
    got, sentence = server.fit_open_files(connections)
    assert got == held
    assert set_to == ([] if raised is None else [(raised, hard)])
    assert (sentence is None) if said is None else (sentence is not None and said in sentence and "ulimit" in sentence)
