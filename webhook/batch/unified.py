"""``fix --dry-run``'s unified diff, built from the edits ``fix`` made rather than by diffing the two texts.

``difflib`` over a whole file is about quadratic in its size (its longest-match search meets the same short
lines, ``cpu: 1``, thousands of times): 8,000 Pods took 79 s and a 20 MB file did not finish. ``fix`` knows
what it changed, as ``(start, end, replacement)`` spans of the old text, so the diff is those spans widened to
whole lines and grouped into hunks with three lines of context, in one pass over the text. Only a span that
rewrote a whole document (the round trip) is narrowed further, by ``difflib`` over that document alone.

The output is what ``diff -u`` writes (``patch -p1`` and ``git apply`` take it), including ``\\ No newline at
end of file`` where a side's last line has none.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CONTEXT = 3
# A span of more lines than this (a document rewritten whole) is not narrowed by difflib: shown replaced whole.
NARROW_LINES = 4000
NO_NEWLINE = "\\ No newline at end of file\n"

Edit = tuple[int, int, str]  # old[start:end] becomes the text


@dataclass(frozen=True, slots=True)
class _Change:
    """Old lines ``[line, line + len(old))`` (0-based) become ``new``."""

    line: int
    old: list[str]
    new: list[str]


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """``text`` with ``edits`` (sorted, not overlapping) made."""
    parts: list[str] = []
    at = 0
    for start, end, replacement in edits:
        parts += [text[at:start], replacement]
        at = end
    parts.append(text[at:])
    return "".join(parts)


def _line_start(text: str, at: int) -> int:
    return text.rfind("\n", 0, at) + 1


def _line_end(text: str, at: int) -> int:
    """Just past the newline that ends the line ``at`` is on (the text's end for a last line without one)."""
    newline = text.find("\n", at)
    return len(text) if newline < 0 else newline + 1


def split_lines(text: str) -> list[str]:
    """Lines with their ``\n`` (the last one without, if the text does not end with one). Only ``\n`` ends a
    line, as for ``diff`` and ``patch`` (``str.splitlines`` also cuts at ``\r``, form feeds, U+2028 ...)."""
    parts = text.split("\n")
    lines = [line + "\n" for line in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _regions(text: str, edits: Sequence[Edit]) -> Iterable[tuple[int, int, str]]:
    """The edits widened to whole old lines ``[lo, hi)``, with what those lines become; edits that share a
    line are one region."""
    groups: list[tuple[int, int, list[Edit]]] = []
    for edit in edits:
        start, end, replacement = edit
        if start == end and (start == 0 or text[start - 1] == "\n") and (not replacement or replacement[-1] == "\n"):
            lo = hi = start  # whole lines inserted before a line
        else:
            lo = _line_start(text, start)
            hi = end if end > start and text[end - 1] == "\n" else _line_end(text, end)
            joined = text[lo:start] + replacement
            if hi == end < len(text) and joined and not joined.endswith("\n"):
                hi = _line_end(text, end)  # the edit ends mid-line: its line goes on with the next old one
        if groups and lo < groups[-1][1]:
            g_lo, g_hi, members = groups[-1]
            groups[-1] = (g_lo, max(g_hi, hi), [*members, edit])
        else:
            groups.append((lo, hi, [edit]))
    for lo, hi, members in groups:
        parts, at = [], lo
        for start, end, replacement in members:
            parts += [text[at:start], replacement]
            at = end
        parts.append(text[at:hi])
        yield lo, hi, "".join(parts)


def _changes(text: str, edits: Sequence[Edit]) -> Iterable[_Change]:
    line, at = 0, 0
    for lo, hi, new in _regions(text, edits):
        line += text.count("\n", at, lo)
        at = lo
        yield from _narrowed(line, split_lines(text[lo:hi]), split_lines(new))


def _narrowed(line: int, old: list[str], new: list[str]) -> Iterable[_Change]:
    """A region as its changed lines only: common first and last lines dropped, and, for a region small enough,
    ``difflib``'s opcodes inside it (a document written whole by the round trip)."""
    head = 0
    while head < len(old) and head < len(new) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < len(old) - head and tail < len(new) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    old, new, line = old[head:len(old) - tail], new[head:len(new) - tail], line + head
    if not old and not new:
        return
    if len(old) > 1 and len(new) > 1 and max(len(old), len(new)) <= NARROW_LINES:
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if tag != "equal":
                yield _Change(line + i1, old[i1:i2], new[j1:j2])
        return
    yield _Change(line, old, new)


def _range(start: int, length: int) -> str:
    """A hunk range as ``diff -u`` writes it (difflib's ``_format_range_unified``)."""
    first = start + 1
    if length == 1:
        return str(first)
    if not length:
        first -= 1
    return f"{first},{length}"


def _lines(prefix: str, lines: Iterable[str]) -> Iterable[str]:
    for text in lines:
        yield prefix + text if text.endswith("\n") else prefix + text + "\n" + NO_NEWLINE


def unified_diff(old: str, edits: Sequence[Edit], old_name: str, new_name: str) -> str:
    """The unified diff from ``old`` to ``old`` with ``edits`` made (sorted by start, not overlapping), three
    lines of context, hunks closer than twice that merged, as ``difflib.unified_diff`` groups them."""
    changes = list(_changes(old, edits))
    if not changes:
        return ""
    lines = split_lines(old)
    out = [f"--- {old_name}\n", f"+++ {new_name}\n"]
    group: list[_Change] = []

    def flush() -> None:
        first, last = group[0], group[-1]
        lo = max(first.line - CONTEXT, 0)
        hi = min(last.line + len(last.old) + CONTEXT, len(lines))
        new_length = (hi - lo) + sum(len(c.new) - len(c.old) for c in group)
        body: list[str] = []
        at = lo
        for c in group:
            body += _lines(" ", lines[at:c.line])
            body += _lines("-", c.old)
            body += _lines("+", c.new)
            at = c.line + len(c.old)
        body += _lines(" ", lines[at:hi])
        new_start = lo + offset[0]
        out.append(f"@@ -{_range(lo, hi - lo)} +{_range(new_start, new_length)} @@\n")
        out.extend(body)
        offset[0] += sum(len(c.new) - len(c.old) for c in group)

    offset = [0]  # new line number minus old line number before the current group
    for change in changes:
        if group and change.line - (group[-1].line + len(group[-1].old)) > 2 * CONTEXT:
            flush()
            group = []
        group.append(change)
    flush()
    return "".join(out)
