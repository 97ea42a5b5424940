"""``qos-guard fix``: apply the mutation to manifest files, keeping comments, key order and layout.

YAML is read once by the same reader ``check`` uses; only the fields the mutation sets are edited in the
text (positions from libyaml's node marks) and the result is re-read to prove it holds exactly the mutated
objects. Where a change sits in a layout that cannot be edited that way, ruamel.yaml's round trip (with the
file's own indentation) rewrites the file instead. JSON is edited the same way, value by value
(``jsonedit``), else written whole in its own indent (tabs or spaces). Only files that
change are rewritten in place; with an output folder every input is written.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError as RuamelError

from webhook.batch import jsonedit
from webhook.batch.files import NotRewritable, Unjudgeable, Unreadable, Unwritable, atomic_write, inside
from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate
from webhook.core.mutation import REMOVED, Change, apply_changes
from webhook.core.podspec import ManifestError
from webhook.core.rules import Violation
from webhook.core.workloads import Target
from webhook.manifests.documents import (
    Document,
    ReadError,
    decode_text,
    json_objects,
    read_text_documents,
    yaml_document,
    yaml_pieces,
)
from webhook.manifests.nodes import is_null, plain_reads_back, walk
from webhook.manifests.reader import open_manifest

_KEY_LINE = re.compile(r"^(\s*)(- )?[^\s#-][^:#]*:\s*(#.*)?$")


@dataclass
class FileResult:
    """What fixing one file did: changes made, and violations that remain (per object). A file that could
    not be fixed raises a ``NotFixed`` instead."""

    file: str
    changes: list[tuple[Target, Change]] = field(default_factory=list)
    # What is left, and the mutation setting that would fix it where one would (``TargetResult.remedies``).
    remaining: list[tuple[Target, Violation, str | None]] = field(default_factory=list)
    new_text: str | None = None
    old_text: str | None = None  # kept for ``fix --dry-run``'s diff


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


def _edit_document(text: str, doc: Document, config: Config, result: FileResult,
                   newline: str) -> tuple[str, Any] | None:
    """``text`` (one document of a stream) with only the fields the mutation sets changed, every other
    byte as it was, and the object it must read back as; ``None`` when the layout around a change needs a
    full round trip instead. The edits are sorted and the text is built once (no re-slicing per edit)."""
    step = guess_indent(text)[0]
    edits: list[tuple[int, int, str]] = []
    changes = _judge_document(doc.obj, config, result)
    if not changes:
        return text, doc.obj
    expected = apply_changes(doc.obj, changes)
    if doc.node is None:
        return None
    inserts: dict[int, tuple[yaml.Node, dict[str, Any], int]] = {}
    for change in changes:
        if change.new is REMOVED:
            return None  # removing a field (and its comments) is left to the full round trip
        walked = walk(doc.node, change.path)
        node, rest, column = walked.node, walked.rest, walked.key_column
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
    edits.sort(key=lambda e: e[0])
    parts: list[str] = []
    at = 0
    for start, end, replacement in edits:
        if start < at:
            return None  # overlapping edits: let the round trip do it
        parts += [text[at:start], replacement.replace("\n", newline) if newline != "\n" else replacement]
        at = end
    parts.append(text[at:])
    return "".join(parts), expected


def _judge_document(doc: Any, config: Config, result: FileResult) -> list[Change]:
    verdict = evaluate(doc, config, Mode.MUTATE)
    for r in verdict.results:
        # Only the names are reported: keep no reference to the object, so memory stays flat per document.
        target = dataclasses.replace(r.target, spec={})
        result.remaining += [(target, v, r.remedies.get((v.rule, v.subject))) for v in r.remaining]
        result.changes += [(target, c) for c in r.changes]
    return list(verdict.changes)


def _is_json(text: str) -> bool:
    """kubectl reads a stream whose first non-space character is ``{`` as JSON."""
    return text.lstrip(" \t\r\n")[:1] == "{"


def fix_text(file: str, text: str, config: Config) -> FileResult:
    """Fix the documents in ``text``; ``new_text`` is set only when something changed. A file that does
    not read cleanly (as ``check`` reads it) raises ``NotFixed`` with the reason. Line endings (LF or CRLF)
    are kept; a BOM is the caller's (``fix_file`` strips and restores it)."""
    result = FileResult(file)
    try:
        if _is_json(text):
            return _fix_json(file, text, config, result)
        return _fix_yaml(file, text, config, result)
    except RuamelError as exc:
        raise Unreadable(f"does not parse: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") \
            from None
    except ManifestError as exc:
        raise Unjudgeable(str(exc)) from None
    except RecursionError:
        raise Unjudgeable("nested too deeply to be fixed") from None


def _unreadable(error: ReadError) -> Unreadable:
    return Unreadable(error.reason, error.line)


def _fix_json(file: str, text: str, config: Config, result: FileResult) -> FileResult:
    """Only the changed values change (``jsonedit``); where a change needs a layout that cannot be written in
    place, the file is written whole in its own indent (a tab, or so many spaces)."""
    docs = json_objects(file, text)
    if isinstance(docs, ReadError):
        raise _unreadable(docs)
    if not isinstance(docs, list):
        raise NotRewritable("JSON followed by YAML in one file cannot be rewritten")
    changes = [_judge_document(doc, config, result) for doc in docs]
    fixed = [apply_changes(doc, c) if c else doc for doc, c in zip(docs, changes, strict=True)]
    if result.changes:
        newline = "\r\n" if "\r\n" in text else "\n"
        indent = jsonedit.indent_of(text)
        edited = jsonedit.edit(text, changes, indent)
        if edited is not None and json_objects(file, edited) == fixed:
            result.new_text = edited
            return result
        body = "\n".join(json.dumps(doc, indent=indent, ensure_ascii=False) for doc in fixed)
        body += "\n" if text.endswith("\n") else ""
        result.new_text = body.replace("\n", newline) if newline != "\n" else body
    return result


def _fix_yaml(file: str, text: str, config: Config, result: FileResult) -> FileResult:
    newline = "\r\n" if "\r\n" in text else "\n"
    out: list[str] = []
    changed = False
    for piece in yaml_pieces(file, text):
        if isinstance(piece, ReadError):
            raise _unreadable(piece)
        part, doc = piece
        if doc is None:
            out.append(part)
            continue
        edited = _edit_document(part, doc, config, result, newline)
        doc.node = None  # the node tree is the largest thing held; let it go document by document
        if edited is None or _reread(file, edited[0]) != edited[1]:
            return _round_trip(file, text, config, newline)
        changed = changed or edited[0] != part
        out.append(edited[0])
    if result.changes and changed:
        result.new_text = "".join(out)
    return result


def _reread(file: str, text: str) -> Any:
    doc = yaml_document(file, text)
    return doc.obj if isinstance(doc, Document) else doc


def _round_trip(file: str, text: str, config: Config, newline: str) -> FileResult:
    """ruamel.yaml's round trip of the whole file, kept only if the result reads back (as kubectl reads
    it) as exactly the mutated objects."""
    result = FileResult(file)
    expected: list[Any] = []
    for doc in read_text_documents(file, text):
        if isinstance(doc, ReadError):
            raise _unreadable(doc)
        expected.append(doc.obj)
    check = FileResult(file)
    expected = _fix_documents(expected, config, check)
    body_text = text.replace("\r\n", "\n") if newline != "\n" else text
    preamble, body = _split_preamble(body_text)
    y = _yaml(body)
    fixed_docs = _fix_documents(list(y.load_all(body)), config, result)
    if result.changes:
        stream = io.StringIO()
        y.dump_all(fixed_docs, stream)
        new_text = preamble + stream.getvalue()
        new_text = new_text if body_text.endswith("\n") else new_text.rstrip("\n")
        reread = [d.obj if isinstance(d, Document) else d for d in read_text_documents(file, new_text)]
        if reread != expected:
            raise NotRewritable("cannot be rewritten without changing what kubectl reads")
        result.new_text = new_text.replace("\n", newline) if newline != "\n" else new_text
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


BOM = "\ufeff"


def fix_file(path: str, config: Config, output: Path | None = None, root: Path | None = None,
             dry_run: bool = False) -> FileResult:
    """Fix ``path`` in place, or write it under ``output`` (mirroring its place below ``root``); with
    ``dry_run`` write nothing and keep the old text beside the new one.

    The file must be a regular file under the size limit, and, followed through links, inside ``root``
    (the folder given, or a file's own folder). Writes are atomic (``webhook.batch.files``); a BOM and CRLF line
    endings are kept. Raises ``NotFixed`` (``UnsafePath`` too) for a file left as it was."""
    base = root if root is not None else Path(path).parent
    real = inside(path, base)
    stream = open_manifest(str(real))
    if isinstance(stream, ReadError):
        raise _unreadable(stream)
    try:
        with stream:
            info = os.fstat(stream.fileno())
            data = stream.read()
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror or exc}") from None
    bom = data.startswith(BOM.encode("utf-8"))
    text = decode_text(data[len(BOM.encode("utf-8")):] if bom else data, path, 0)
    del data
    if isinstance(text, ReadError):
        raise _unreadable(text)
    result = fix_text(path, text, config)
    if dry_run:
        result.old_text = text
        return result
    new_text = result.new_text if result.new_text is not None else text
    try:
        if output is not None:
            relative = Path(os.path.relpath(path, base)) if root is not None else Path(Path(path).name)
            if relative.is_absolute() or ".." in relative.parts:
                relative = Path(Path(path).name)
            target = output / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, ((BOM if bom else "") + new_text).encode("utf-8"), info)
        elif result.new_text is not None:
            atomic_write(real, ((BOM if bom else "") + new_text).encode("utf-8"), info)
    except OSError as exc:
        raise Unwritable(f"cannot write: {exc.strerror or exc}") from None
    return result
