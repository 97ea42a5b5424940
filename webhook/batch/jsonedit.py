"""``fix`` on JSON: edit only the values the mutation changes, in the text, so a hand-formatted file keeps its
layout (indentation with tabs or spaces, one-line objects, the order and spacing of every untouched member).

The text is read once more with positions (values through ``json.JSONDecoder.raw_decode``, containers here);
``edit`` returns the new text, or ``None`` when a change needs a layout this module does not write (the caller
then writes the whole file with the file's own indent). The caller proves the result reads back as the
mutated objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.batch.unified import apply_edits
from webhook.core.mutation import REMOVED, Change

_SPACE = re.compile(r"[ \t\r\n]*")
_DECODER = json.JSONDecoder()


@dataclass
class _Node:
    """A JSON value's place in the text: ``[start, end)``; an object's members as (key start, key, value)."""

    start: int
    end: int = 0
    members: list[tuple[int, str, _Node]] = field(default_factory=list)
    items: list[_Node] = field(default_factory=list)
    kind: str = "scalar"  # scalar | object | array


class _Unparsed(Exception):
    """The text is not the JSON this reader follows: leave the file to the whole rewrite."""


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at


def _value(text: str, at: int) -> _Node:
    at = _skip(text, at)
    char = text[at:at + 1]
    if char == "{":
        return _container(text, at, "object", "}", _member)
    if char == "[":
        return _container(text, at, "array", "]", _item)
    try:
        _, end = _DECODER.raw_decode(text, at)
    except ValueError:
        raise _Unparsed(at) from None
    return _Node(at, end)


def _container(text: str, at: int, kind: str, close: str, read: Callable[[str, _Node, int], int]) -> _Node:
    """An object or array opening at ``at``: its entries, each read by ``read`` (which returns where the entry
    ends), separated by commas, up to ``close``."""
    node = _Node(at, kind=kind)
    at = _skip(text, at + 1)
    if text[at:at + 1] == close:
        node.end = at + 1
        return node
    while True:
        at = _skip(text, read(text, node, at))
        if text[at:at + 1] == ",":
            at = _skip(text, at + 1)
            continue
        if text[at:at + 1] == close:
            node.end = at + 1
            return node
        raise _Unparsed(at)


def _member(text: str, node: _Node, at: int) -> int:
    """One ``"key": value`` of an object, kept with where its key starts."""
    if text[at:at + 1] != '"':
        raise _Unparsed(at)
    key, after = _DECODER.raw_decode(text, at)
    colon = _skip(text, after)
    if text[colon:colon + 1] != ":":
        raise _Unparsed(colon)
    child = _value(text, colon + 1)
    node.members.append((at, key, child))
    return child.end


def _item(text: str, node: _Node, at: int) -> int:
    child = _value(text, at)
    node.items.append(child)
    return child.end


def _documents(text: str) -> list[_Node]:
    nodes: list[_Node] = []
    at = _skip(text, 0)
    while at < len(text):
        node = _value(text, at)
        nodes.append(node)
        at = _skip(text, node.end)
    return nodes


def _line_indent(text: str, at: int) -> str:
    """The white space that starts the line ``at`` is on."""
    line = text[text.rfind("\n", 0, at) + 1:]
    return line[:len(line) - len(line.lstrip(" \t"))]


def _dumps(value: Any, indent: str | None, column: str, separators: tuple[str, str] = (", ", ": ")) -> str:
    """``value`` as JSON, multi-line in the file's own indent, continued at ``column``; on one line with the
    ``separators`` the object it goes into uses (``,`` and ``:`` in compact JSON)."""
    if indent is None or not isinstance(value, dict | list) or not value:
        return json.dumps(value, ensure_ascii=False, separators=separators if indent is None else None)
    return json.dumps(value, ensure_ascii=False, indent=indent).replace("\n", "\n" + column)


def _separators(text: str, node: _Node) -> tuple[str, str]:
    """How an object on one line writes its members: the text between its first key and value (``:`` or
    ``: ``), and between two members (``,`` or ``, ``; a one-member object: compact if nothing follows ``{``)."""
    key_at, _, value = node.members[0]
    _, key_end = _DECODER.raw_decode(text, key_at)
    colon = text[key_end:value.start]
    if len(node.members) > 1:
        comma = text[value.end:node.members[1][0]]
    else:
        comma = "," if text[node.start + 1:key_at] == "" and colon == ":" else ", "
    return comma.strip() + (" " if comma.endswith(" ") else ""), colon.strip() + (" " if colon.endswith(" ") else "")


def _insert(text: str, node: _Node, nested: dict[str, Any], indent: str | None) -> tuple[int, int, str] | None:
    """The edit that gives object ``node`` the members in ``nested``, written before its first member in the
    same layout as that member (on its own line, or on the object's line)."""
    if node.kind != "object" or not node.members:
        return None  # {} gives no layout to follow
    first = node.members[0][0]
    gap = text[node.start + 1:first]  # what separates "{" from the first member, e.g. "\n\t\t" or " "
    column = gap[gap.rfind("\n") + 1:] if "\n" in gap else ""
    one_line = "\n" not in gap
    comma, colon = _separators(text, node) if one_line else (",", ": ")
    members = [f"{json.dumps(k, ensure_ascii=False)}{colon}"
               f"{_dumps(v, None if one_line else indent, column, (comma, colon))}" for k, v in nested.items()]
    return first, first, "".join(m + ("," + gap if "\n" in gap else comma) for m in members)


def _remove(text: str, parent: _Node, index: int) -> tuple[int, int, str]:
    members = parent.members
    if index + 1 < len(members):
        return members[index][0], members[index + 1][0], ""
    if index > 0:
        return members[index - 1][2].end, members[index][2].end, ""
    return parent.start + 1, parent.end - 1, ""


def _walk(node: _Node, path: Sequence[str | int]) -> tuple[_Node, _Node | None, int, list[str | int]]:
    """The deepest node on ``path`` present in the text, its parent object and member index (for a
    removal), and the segments not there yet."""
    parent: _Node | None = None
    index = -1
    for i, seg in enumerate(path):
        if node.kind == "object" and isinstance(seg, str):
            found = [j for j, (_, key, _) in enumerate(node.members) if key == seg]
            if not found:
                return node, parent, index, list(path[i:])
            parent, index, node = node, found[-1], node.members[found[-1]][2]
        elif node.kind == "array" and isinstance(seg, int) and 0 <= seg < len(node.items):
            parent, index, node = None, -1, node.items[seg]
        else:
            return node, parent, index, list(path[i:])
    return node, parent, index, []


def indent_of(text: str) -> str | None:
    """The file's indent unit (a tab, or spaces) from its first indented line; ``None`` for one line."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and line != stripped:
            lead = line[:len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else lead
    return None


def edit(text: str, changes: Sequence[Sequence[Change]], indent: str | None) -> str | None:
    """``text`` with each document's ``changes`` (one list per document, in order) written in place, every
    other byte as it was; ``None`` where that cannot be done (the caller rewrites the file whole)."""
    edits = plan(text, changes, indent)
    return None if edits is None else apply_edits(text, edits)


def plan(text: str, changes: Sequence[Sequence[Change]], indent: str | None) -> list[tuple[int, int, str]] | None:
    """The spans of ``text`` ``edit`` replaces, sorted, and what each becomes (``fix --dry-run``'s diff is
    built from them); ``None`` where the changes cannot be written in place."""
    try:
        documents = _documents(text)
    except (_Unparsed, RecursionError):
        return None
    if len(documents) != len(changes):
        return None
    edits: list[tuple[int, int, str]] = []
    for root, doc_changes in zip(documents, changes, strict=True):
        inserts: dict[int, tuple[_Node, dict[str, Any]]] = {}
        for change in doc_changes:
            node, parent, index, rest = _walk(root, change.path)
            if change.new is REMOVED:
                if rest:
                    continue  # nothing there to remove
                if parent is None:
                    return None
                edits.append(_remove(text, parent, index))
            elif not rest:
                if node.kind != "scalar" and not isinstance(change.new, dict | list):
                    return None
                edits.append((node.start, node.end, _dumps(change.new, indent, _line_indent(text, node.start))))
            else:
                if not all(isinstance(seg, str) for seg in rest):
                    return None
                nested = inserts.setdefault(id(node), (node, {}))[1]
                for seg in rest[:-1]:
                    nested = nested.setdefault(str(seg), {})
                nested[str(rest[-1])] = change.new
        for node, nested in inserts.values():
            insertion = _insert(text, node, nested, indent)
            if insertion is None:
                return None
            edits.append(insertion)
    edits.sort(key=lambda e: (e[0], e[1]))
    at = 0
    for start, end, _ in edits:
        if start < at:
            return None  # overlapping edits
        at = end
    return edits
