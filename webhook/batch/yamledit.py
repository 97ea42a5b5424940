"""``fix`` on YAML: edit only the fields the mutation sets, in the text (positions from libyaml's node marks), so
every other byte stays as it was; ``edits`` returns the spans to replace, or ``None`` when a change needs a layout
this module does not write (the caller then round-trips that one document). The anchors and aliases a change
goes through (``shared_nodes``, ``anchor_of``) let the caller write a shared value at its anchor or refuse it.
The caller proves the result reads back as the mutated object.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import yaml

from webhook.batch.unified import Edit
from webhook.core.mutation import REMOVED, Change
from webhook.manifests.goyaml import is_merge
from webhook.manifests.yamlnodes import is_null, plain_reads_back, walk

_KEY_LINE = re.compile(r"^(\s*)(- )?[^\s#-][^:#]*:\s*(#.*)?$")


def guess_indent(text: str) -> tuple[int, int, int]:
    """(mapping indent, sequence indent, dash offset) as ruamel's ``YAML.indent`` takes them."""
    mapping, offset = 0, -1
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for prev, cur in itertools.pairwise(lines):
        m = _KEY_LINE.match(prev)
        if not m:
            continue
        base = len(m.group(1)) + (2 if m.group(2) else 0)
        indent = len(cur) - len(cur.lstrip())
        if cur.lstrip().startswith("- "):
            if offset < 0 and indent >= base:
                offset = indent - base
        elif not mapping and indent > base:
            mapping = indent - base
        if mapping and offset >= 0:
            break
    mapping = mapping or 2
    offset = max(offset, 0)
    return mapping, max(offset + 2, mapping), offset



def _scalar(value: object, style: str | None = None) -> str:
    """YAML text for a new scalar that reads back as exactly ``value``."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return json.dumps(value)
    if not isinstance(value, str):
        return repr(value) if isinstance(value, float) else str(value)
    if style == "'":
        return "'" + value.replace("'", "''") + "'"
    if style == '"':
        return json.dumps(value)
    return value if plain_reads_back(value) else json.dumps(value)


def _block(nested: dict[str, Any], column: int, step: int) -> str:
    out = ""
    for key, value in nested.items():
        if isinstance(value, dict):
            out += f"{' ' * column}{key}:\n{_block(value, column + step, step)}"
        else:
            out += f"{' ' * column}{key}: {_scalar(value)}\n"
    return out


def _flow(nested: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {{{_flow(v)}}}" if isinstance(v, dict) else f"{k}: {_scalar(v)}"
                     for k, v in nested.items())


def _insertion(text: str, node: yaml.Node, nested: dict[str, Any], column: int,
               step: int) -> tuple[int, int, str] | None:
    """Where and what to write so that ``node`` gains the keys in ``nested``."""
    if isinstance(node, yaml.ScalarNode) and is_null(node):
        start, end = _value_start(text, node), node.end_mark.index
        if "{" in text[text.rfind("\n", 0, start) + 1:start]:
            return start, end, "{" + _flow(nested) + "}"
        return start, end, "\n" + _block(nested, column + step, step).rstrip("\n")
    if not isinstance(node, yaml.MappingNode):
        return None
    if node.flow_style:
        brace = text.find("{", node.start_mark.index)  # after an anchor or a tag, if any
        if brace < 0:
            return None
        at = brace + 1
        return at, at, _flow(nested) + (", " if node.value else "")
    if not node.value:
        return None
    first_key = node.value[0][0]
    line_start = first_key.start_mark.index - first_key.start_mark.column
    merges = [key for key, _ in node.value if is_merge(key)]
    if merges:
        # go-yaml applies a merge key where it stands: a key written before ``<<: *c`` is overridden by it, so
        # the new keys go on the line after the last merge (a one-line ``<<: *c`` or ``<<: [*a, *b]`` only).
        last = merges[-1]
        end = text.find("\n", last.end_mark.index)
        line = text[last.start_mark.index:end if end >= 0 else len(text)]
        if end < 0 or not _MERGE_LINE.match(line):
            return None
        return end + 1, end + 1, _block(nested, last.start_mark.column, step)
    if text[line_start:first_key.start_mark.index].strip():
        return None  # the first key shares its line with a "- ": no clean place for a new line
    column = first_key.start_mark.column
    while column and line_start > 0:  # above the comments that describe the first key, never between them
        above = text.rfind("\n", 0, line_start - 1) + 1
        line = text[above:line_start]
        if not line.strip().startswith("#") or len(line) - len(line.lstrip(" ")) != column:
            break
        line_start = above
    return line_start, line_start, _block(nested, column, step)


_MERGE_LINE = re.compile(r"<<\s*:\s*(\*[^\s,\[\]{}]+|\[\s*\*[^\]]*\])\s*(#.*)?\r?$")


_PROPERTIES = re.compile(r"(?:[&!][^\s,\[\]{}]*\s+)*")


def _value_start(text: str, node: yaml.Node) -> int:
    """Where a node's value starts: after its anchor (``&res``) and tag, which its start mark includes and an
    edit of the value must keep."""
    at = node.start_mark.index
    match = _PROPERTIES.match(text, at, node.end_mark.index)
    return match.end() if match and text[at:at + 1] in "&!" else at


def edits(text: str, root: yaml.Node, changes: list[Change], newline: str, merges: bool = True) -> list[Edit] | None:
    """The spans of ``text`` (one document of a stream) to replace so that only the fields ``changes`` set
    change, every other byte as it was; ``None`` when the layout around a change needs a full round trip.
    ``merges``: a value a ``<<`` merge brings is edited where it is written (at its anchor); without, a key is
    added after the merge, which overrides it for this use alone."""
    step = guess_indent(text)[0]
    edits: list[Edit] = []
    inserts: dict[int, tuple[yaml.Node, dict[str, Any], int]] = {}
    for change in changes:
        if change.new is REMOVED:
            return None  # removing a field (and its comments) is left to the full round trip
        walked = walk(root, change.path, merges)
        node, rest, column = walked.node, walked.rest, walked.key_column
        if not rest:
            if not isinstance(node, yaml.ScalarNode):
                return None
            edits.append((_value_start(text, node), node.end_mark.index, _scalar(change.new, node.style)))
            continue
        if not all(isinstance(seg, str) for seg in rest):
            return None
        nested = inserts.setdefault(id(node), (node, {}, column))[1]
        for seg in rest[:-1]:
            nested = nested.setdefault(str(seg), {})
        nested[str(rest[-1])] = change.new
    for node, nested, column in inserts.values():
        edit = _insertion(text, node, nested, column, step)
        if edit is None:
            return None
        edits.append(edit)
    # One value reached twice (through an alias) and set alike is one edit.
    edits = sorted(set(edits), key=lambda e: (e[0], e[1]))
    out: list[Edit] = []
    at = 0
    for start, end, replacement in edits:
        if start < at:
            return None  # overlapping edits: let the round trip do it
        out.append((start, end, replacement.replace("\n", newline) if newline != "\n" else replacement))
        at = end
    return out


def shared_nodes(root: yaml.Node) -> dict[int, int]:
    """Nodes reached more than once (an anchor and its aliases: the composer gives an alias the anchor's own
    node), by id, with how many times."""
    seen: dict[int, int] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        seen[id(node)] = seen.get(id(node), 0) + 1
        if seen[id(node)] > 1:
            continue
        if isinstance(node, yaml.MappingNode):
            stack += [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    return {key: n for key, n in seen.items() if n > 1}


def anchor_of(text: str, root: yaml.Node, change: Change, shared: dict[int, int]) -> tuple[str, int] | None:
    """The outermost anchor on the way to what ``change`` sets, and how many aliases use it; None when no
    node on the way is shared."""
    node = root
    for i in range(len(change.path) + 1):
        walked = walk(root, change.path[:i])
        if walked.rest:
            break
        node = walked.node
        if id(node) in shared:
            found = re.match(r"[^&]{0,200}?&([^\s,\[\]{}]+)", text[node.start_mark.index:node.end_mark.index])
            return (found[1] if found else "?"), shared[id(node)] - 1
    return None
