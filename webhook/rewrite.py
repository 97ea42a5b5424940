"""``qos-guard fix``: apply the mutation to manifest files, keeping comments, key order and layout.

YAML is read once by the same reader ``check`` uses; only the fields the mutation sets are edited in the
text (positions from libyaml's node marks) and the result is re-read to prove it holds exactly the mutated
objects. Where a change sits in a layout that cannot be edited that way, ruamel.yaml's round trip (with the
file's own indentation) rewrites the file instead. JSON keeps its key order and indent. Only files that
change are rewritten in place; with an output folder every input is written.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError as RuamelError

from webhook.config import Config
from webhook.engine import Mode, evaluate
from webhook.manifests import Document, Loader, ReadError, json_document, yaml_documents
from webhook.mutation import REMOVED, Change, apply_changes
from webhook.podspec import ManifestError
from webhook.rules import Violation
from webhook.workloads import Segment, Target

_KEY_LINE = re.compile(r"^(\s*)(- )?[^\s#-][^:#]*:\s*(#.*)?$")


@dataclass
class FileResult:
    """What fixing one file did: changes made, and violations that remain (per object)."""

    file: str
    changes: list[tuple[Target, Change]] = field(default_factory=list)
    remaining: list[tuple[Target, Violation]] = field(default_factory=list)
    error: str | None = None
    new_text: str | None = None


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


class _Timestamp(str):
    """A timestamp kept as written: ruamel's own round-trip of timestamps drops a trailing ``Z``."""


def _yaml(text: str) -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 1 << 16
    mapping, sequence, offset = guess_indent(text)
    y.indent(mapping=mapping, sequence=sequence, offset=offset)
    y.explicit_start = text.lstrip().startswith("---")
    # Keep ``null`` as written by most tools instead of ruamel's empty value.
    y.representer.add_representer(
        type(None), lambda rep, _: rep.represent_scalar("tag:yaml.org,2002:null", "null"))
    y.constructor.add_constructor("tag:yaml.org,2002:timestamp", lambda _, node: _Timestamp(node.value))
    y.representer.add_representer(
        _Timestamp, lambda rep, data: rep.represent_scalar("tag:yaml.org,2002:timestamp", str(data)))
    return y


def _fix_documents(docs: list[Any], config: Config, result: FileResult) -> list[Any]:
    fixed = []
    for doc in docs:
        changes = _judge_document(doc, config, result)
        fixed.append(apply_changes(doc, changes) if changes else doc)
    return fixed


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
    try:
        plain = yaml.safe_load(f"k: {value}") == {"k": value} and value.strip() == value
    except yaml.YAMLError:
        plain = False
    return value if plain and value else json.dumps(value)


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


def _walk(node: yaml.Node, segments: tuple[Segment, ...]) -> tuple[yaml.Node, tuple[Segment, ...], int]:
    """The deepest node on ``segments``, the segments left below it, and the column of its key."""
    column = 0
    for i, seg in enumerate(segments):
        child = None
        if isinstance(node, yaml.MappingNode) and isinstance(seg, str):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == seg:
                    child, column = value, key.start_mark.column
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and seg < len(node.value):
            child = node.value[seg]
        if child is None:
            return node, segments[i:], column
        node = child
    return node, (), column


def _insertion(text: str, node: yaml.Node, nested: dict[str, Any], column: int,
               step: int) -> tuple[int, int, str] | None:
    """Where and what to write so that ``node`` gains the keys in ``nested``."""
    if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null":
        start, end = node.start_mark.index, node.end_mark.index
        if "{" in text[text.rfind("\n", 0, start) + 1:start]:
            return start, end, "{" + _flow(nested) + "}"
        return start, end, "\n" + _block(nested, column + step, step).rstrip("\n")
    if not isinstance(node, yaml.MappingNode):
        return None
    if node.flow_style:
        at = node.start_mark.index + 1
        return at, at, _flow(nested) + (", " if node.value else "")
    if not node.value:
        return None
    first_key = node.value[0][0]
    line_start = first_key.start_mark.index - first_key.start_mark.column
    if text[line_start:first_key.start_mark.index].strip():
        return None  # the first key shares its line with a "- ": no clean place for a new line
    return line_start, line_start, _block(nested, first_key.start_mark.column, step)


def _edit_in_place(text: str, documents: list[Document], config: Config, result: FileResult) -> str | None:
    """Change only the fields the mutation sets, leaving every other byte as it was; ``None`` when the
    layout around a change needs a full round trip instead."""
    step = guess_indent(text)[0]
    edits: list[tuple[int, int, str]] = []
    expected: list[Any] = []
    for doc in documents:
        changes = _judge_document(doc.obj, config, result)
        expected.append(apply_changes(doc.obj, changes) if changes else doc.obj)
        inserts: dict[int, tuple[yaml.Node, dict[str, Any], int]] = {}
        for change in changes:
            if doc.node is None or change.new is REMOVED:
                return None  # removing a field (and its comments) is left to the full round trip
            node, rest, column = _walk(doc.node, change.path)
            if not rest:
                if not isinstance(node, yaml.ScalarNode):
                    return None
                edits.append((node.start_mark.index, node.end_mark.index, _scalar(change.new, node.style)))
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
    new_text = text
    for start, end, replacement in sorted(edits, key=lambda e: e[0], reverse=True):
        new_text = new_text[:start] + replacement + new_text[end:]
    try:
        reread = list(yaml.load_all(new_text, Loader=Loader))
    except yaml.YAMLError:
        return None
    return new_text if reread == expected else None


def _judge_document(doc: Any, config: Config, result: FileResult) -> list[Change]:
    verdict = evaluate(doc, config, Mode.MUTATE)
    for r in verdict.results:
        result.remaining += [(r.target, v) for v in r.remaining]
        result.changes += [(r.target, c) for c in r.changes]
    return list(verdict.changes)


def fix_text(file: str, text: str, config: Config) -> FileResult:
    """Fix the documents in ``text``; ``new_text`` is set only when something changed. A file that does
    not read cleanly (as ``check`` reads it) is left alone with the reason in ``error``."""
    result = FileResult(file)
    try:
        if file.endswith(".json"):
            doc = json_document(file, text)
            if isinstance(doc, ReadError):
                result.error = f"line {doc.line}: {doc.message}; not changed"
                return result
            (fixed,) = _fix_documents([doc.obj], config, result)
            if result.changes:
                result.new_text = json.dumps(fixed, indent=_json_indent(text), ensure_ascii=False) + (
                    "\n" if text.endswith("\n") else "")
            return result
        documents: list[Document] = []
        for item in yaml_documents(file, text):
            if isinstance(item, ReadError):
                result.error = f"line {item.line}: {item.message}; not changed"
                return result
            documents.append(item)
        edited = _edit_in_place(text, documents, config, result)
        if edited is not None:
            result.new_text = edited if result.changes else None
            return result
        result = FileResult(file)  # start over with a full round trip
        preamble, body = _split_preamble(text)
        y = _yaml(body)
        fixed_docs = _fix_documents(list(y.load_all(body)), config, result)
        if result.changes:
            out = io.StringIO()
            y.dump_all(fixed_docs, out)
            new_text = preamble + out.getvalue()
            result.new_text = new_text if text.endswith("\n") else new_text.rstrip("\n")
    except RuamelError as exc:
        result.error = f"does not parse: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    except ManifestError as exc:
        result.error = str(exc)
    return result


def _split_preamble(text: str) -> tuple[str, str]:
    """Comments and blank lines before a leading ``---``, which ruamel's round trip would drop."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("---"):
            return "".join(lines[:i]), "".join(lines[i:])
        if stripped and not stripped.startswith("#"):
            break
    return "", text


def _json_indent(text: str) -> int | None:
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" ")
        if stripped:
            return len(line) - len(stripped) or None
    return None


def fix_file(path: str, config: Config, output: Path | None = None, root: Path | None = None) -> FileResult:
    """Fix ``path`` in place, or write it under ``output`` (mirroring its place below ``root``)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return FileResult(path, error=f"cannot read: {exc}")
    result = fix_text(path, text, config)
    if result.error is not None:
        return result
    new_text = result.new_text if result.new_text is not None else text
    if output is not None:
        relative = Path(path).resolve().relative_to(root.resolve()) if root else Path(Path(path).name)
        target = output / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(new_text, encoding="utf-8")
    elif result.new_text is not None:
        Path(path).write_text(new_text, encoding="utf-8")
    return result
