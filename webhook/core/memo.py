"""A caller-owned memo: answers remembered while many objects are judged against one ``Facts``.

The facts stay immutable; what is learnt from them (nodes grouped by shape, a shape's answer for a demand,
numa-unfit's findings for a placement) lives here, in an object the caller makes and throws away with the facts
it belongs to (the serving app: one per snapshot; a batch run: one per run). Each table is bounded: a flood of
distinct keys empties it rather than grow it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

T = TypeVar("T")

LIMIT = 4096  # entries per table: distinct placements and demands are few; a flood of them is not kept


class Memo:
    """Named tables of remembered answers about one owner (the ``Facts`` it was handed to). Handed to other
    facts (``dataclasses.replace`` keeps it), it forgets everything first: an answer never outlives its facts."""

    __slots__ = ("_owner", "_tables")

    def __init__(self) -> None:
        self._tables: dict[str, dict[Hashable, object]] = {}
        self._owner: weakref.ref[Any] | None = None

    def bind(self, owner: object) -> None:
        """Remember answers about ``owner`` from now on; those about another owner are forgotten."""
        if self._owner is None or self._owner() is not owner:
            self._tables.clear()
            self._owner = weakref.ref(owner)

    def get(self, table: str, key: Hashable, compute: Callable[[], T], limit: int = LIMIT) -> T:
        """The answer remembered for ``key`` in ``table``, computed (and remembered) on first use."""
        entries = self._tables.setdefault(table, {})
        try:
            return cast(T, entries[key])
        except KeyError:
            pass
        value = compute()
        if len(entries) >= limit:
            entries.clear()
        entries[key] = value
        return value

    def size(self, table: str) -> int:
        """How many answers ``table`` holds (for tests and metrics)."""
        return len(self._tables.get(table, {}))


def remember(memo: Memo | None, table: str, key: Hashable, compute: Callable[[], T], limit: int = LIMIT) -> T:
    """``memo.get(...)``, or just ``compute()`` without a memo."""
    return compute() if memo is None else memo.get(table, key, compute, limit)
