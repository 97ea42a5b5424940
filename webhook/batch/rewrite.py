"""``qos-guard fix``: apply the mutation to manifest files, keeping comments, key order and layout.

YAML is read once by the same reader ``check`` uses, document by document; only the fields the mutation sets
are edited in the text (``yamledit``, from libyaml's node marks) and each edited document is re-read to prove it
holds exactly the mutated object. A document ``fix`` does not change stays byte for byte as it was. Where a
change sits in a layout that cannot be edited that way, ruamel.yaml's round trip (with the file's own
indentation) rewrites that one document instead, unless it uses YAML anchors and aliases (which a rewrite
would rename and expand): a value under an anchor is edited at the anchor when every use of it needs the same
change (the change says so), and otherwise that change is not made and is reported. JSON is edited the same
way, value by value (``jsonedit``), else written whole in its own indent (tabs or spaces). Only files that
change are rewritten in place; with an output folder every input is written. What was edited is kept as
spans of the old text (``FileResult.edits``), from which ``--dry-run`` builds its diff (``unified``).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError as RuamelError

from webhook.batch import jsonedit, yamledit
from webhook.batch.files import NotRewritable, Unjudgeable, Unreadable, Unwritable, atomic_write, inside
from webhook.batch.inputs import with_input
from webhook.batch.unified import Edit, apply_edits
from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate, related_of, without_containers
from webhook.core.facts import NO_FACTS, Facts
from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.mutation import Change, apply_changes
from webhook.core.resourceblock import ManifestError
from webhook.core.rules import Violation
from webhook.core.target import Target
from webhook.core.workloads import related_kinds, table
from webhook.core.workloads import walk as walk_workloads
from webhook.manifests.documents import (
    Document,
    ReadError,
    json_objects,
    yaml_document,
    yaml_pieces,
)
from webhook.manifests.encoding import Decoded, NotText, decode_for_fix, escaped_lines
from webhook.manifests.reader import open_manifest


@dataclass
class FileResult:
    """What fixing one file did: changes made, and violations that remain (per object). A file that could
    not be fixed raises a ``NotFixed`` instead."""

    file: str
    objects: int = 0  # judged (as check counts them: a JobSet is one, an exempt one too)
    skipped: Counter[str] = field(default_factory=Counter)  # documents with nothing to judge, by reason
    changes: list[tuple[Target, Change]] = field(default_factory=list)
    # What is left, and the mutation setting that would fix it where one would (``TargetResult.remedies``).
    remaining: list[tuple[Target, Violation, str | None]] = field(default_factory=list)
    # Changes not made (a value under a YAML anchor that other uses share), each with why.
    refused: list[tuple[Target, Change, str]] = field(default_factory=list)
    new_text: str | None = None
    old_text: str | None = None  # kept for ``fix --dry-run``'s diff
    edits: list[Edit] = field(default_factory=list)  # spans of the old text and what they became, in order
    lines: dict[tuple[int, FieldPath], int] = field(default_factory=dict)  # (id of a target, path) -> its line
    errors: list[ReadError] = field(default_factory=list)  # documents that could not be read, left as they are

    def at(self, target: Target, path: FieldPath) -> str:
        """``:LINE`` for a field of ``target`` (empty where not known: JSON), as ``check`` says where."""
        line = self.lines.get((id(target), path))
        return f":{line}" if line else ""



class _Timestamp(str):
    """A timestamp kept as written: ruamel's own round-trip of timestamps drops a trailing ``Z``."""


def _yaml(text: str) -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 1 << 16
    mapping, sequence, offset = yamledit.guess_indent(text)
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



ANCHOR_REFUSED = ("{what} is under the YAML anchor &{anchor}, shared by {n} alias{es}, and not every use needs "
                  "this change; set it by hand where it is needed (or give this use its own value)")
ANCHOR_LAYOUT = ("the document uses YAML anchors and aliases and this change cannot be written in place; rewriting "
                 "the document would rename its anchors and expand its aliases: set it by hand")
AT_ANCHOR = " (written at the YAML anchor &{anchor}: {aliases} too)"


def _fix_document(file: str, part: str, doc: Document, config: Config, result: FileResult,
                  newline: str, facts: Facts = NO_FACTS) -> list[Edit]:
    """The edits that fix one document of a YAML stream (none when nothing changes), spans of ``part``."""
    changes = _judge_document(doc.obj, config, result, doc.line_of, facts)
    if not changes:
        return []
    if doc.node is None:
        return _round_trip_document(file, part, apply_changes(doc.obj, changes), config, newline)
    shared = yamledit.shared_nodes(doc.node) if "*" in part else {}
    attempt = list(changes)
    while attempt:
        expected = apply_changes(doc.obj, attempt)
        # A value a ``<<`` merge brings: at its anchor when every use needs the change, else overridden here.
        edits = next((e for merges in (True, False) if (e := yamledit.edits(part, doc.node, attempt, newline, merges))
                      is not None and _reread(file, apply_edits(part, e)) == expected), None)
        if edits is not None:
            for change in attempt:
                anchored = yamledit.anchor_of(part, doc.node, change, shared) if shared else None
                if anchored is not None:
                    _say_at_anchor(result, change, *anchored)
            return edits
        anchored_changes = [(c, a) for c in attempt if shared and (a := yamledit.anchor_of(part, doc.node, c, shared))]
        if not anchored_changes:
            break
        for change, (anchor, n) in anchored_changes:  # a shared value: its other uses must not change
            _refuse(result, change, ANCHOR_REFUSED.format(what=dotted(change.path), anchor=anchor, n=n,
                                                          es="es" if n > 1 else ""))
        attempt = [c for c in attempt if all(c is not a for a, _ in anchored_changes)]
    if not attempt:
        return []
    if shared:
        for change in attempt:
            _refuse(result, change, ANCHOR_LAYOUT)
        return []
    return _round_trip_document(file, part, apply_changes(doc.obj, attempt), config, newline)


def _say_at_anchor(result: FileResult, change: Change, anchor: str, n: int) -> None:
    note = AT_ANCHOR.format(anchor=anchor, aliases="its alias gets it" if n == 1 else f"its {n} aliases get it")
    result.changes = [(t, dataclasses.replace(c, message=c.message + note) if c is change else c)
                      for t, c in result.changes]


def _refuse(result: FileResult, change: Change, why: str) -> None:
    target = next(t for t, c in result.changes if c is change)
    result.changes = [(t, c) for t, c in result.changes if c is not change]
    result.refused.append((target, change, why))


def _judge_document(doc: Any, config: Config, result: FileResult,
                    line_of: Callable[[FieldPath], int] | None = None, facts: Facts = NO_FACTS) -> list[Change]:
    verdict = evaluate(doc, config, Mode.MUTATE, facts)
    empty = without_containers(verdict)
    if empty:
        raise Unjudgeable(f"invalid object: {empty[0][1]}")
    found = [] if verdict.results else list(walk_workloads(doc, kinds=table(config.workloads),
                                                              related=related_of(config, facts)))
    # an exempt object is one judged (by the configuration); one with no pod spec known is not, whatever its namespace
    exempt = verdict.exempt is not None and any(not isinstance(r, str) for r in found)
    result.objects += len({r.target.root for r in verdict.results}) + exempt
    if not verdict.results and not exempt:  # nothing to judge in it: said by reason, as check says
        result.skipped.update(r for r in found if isinstance(r, str))
    for r in verdict.results:
        # Only the names are reported: keep no reference to the object, so memory stays flat per document.
        target = dataclasses.replace(r.target, spec={})
        result.remaining += [(target, v, r.remedies.get((v.rule, v.subject))) for v in r.left_by_fix]
        result.changes += [(target, c) for c in r.changes]
        if line_of is not None:  # where each is, as check says it (file:line)
            for path in [c.path for c in r.changes] + [v.path for v in r.remaining]:
                result.lines[(id(target), path)] = line_of(path)
    return list(verdict.changes)


def _is_json(text: str) -> bool:
    """kubectl reads a stream whose first non-space character is ``{`` as JSON."""
    return text.lstrip(" \t\r\n")[:1] == "{"


def fix_text(file: str, text: str, config: Config, facts: Facts = NO_FACTS) -> FileResult:
    """Fix the documents in ``text``; ``new_text`` is set only when something changed. A file that does
    not read cleanly (as ``check`` reads it) raises ``NotFixed`` with the reason. Line endings (LF or CRLF)
    are kept; a BOM is the caller's (``fix_file`` strips and restores it). ``facts``: what else is known (the
    other files' ServingRuntimes...); the text's own objects the operators' builders read are added, as check
    adds its input's."""
    result = FileResult(file)
    try:
        facts = _with_own(file, text, config, facts)
        if _is_json(text):
            return _fix_json(file, text, config, result, facts)
        return _fix_yaml(file, text, config, result, facts)
    except RuamelError as exc:
        raise Unreadable(f"does not parse: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") \
            from None
    except ManifestError as exc:
        raise Unjudgeable(str(exc)) from None
    except RecursionError:
        raise Unjudgeable("nested too deeply to be fixed") from None


def _with_own(file: str, text: str, config: Config, facts: Facts) -> Facts:
    """``facts`` with the text's own objects of the kinds the builders read; read only when the text names one
    of those kinds (a kind is spelled out in its document), so a file without one is parsed once."""
    if not any(kind in text for _, kind in related_kinds(table(config.workloads))):
        return facts
    if _is_json(text):
        docs = json_objects(file, text)
        objects = docs if isinstance(docs, list) else []
    else:
        objects = [piece[1].obj for piece in yaml_pieces(file, text)
                   if not isinstance(piece, ReadError) and piece[1] is not None
                   and not isinstance(piece[1], ReadError)]
    return with_input(facts, objects, config)


def _unreadable(error: ReadError) -> Unreadable:
    return Unreadable(error.reason, error.line)


def _fix_json(file: str, text: str, config: Config, result: FileResult, facts: Facts = NO_FACTS) -> FileResult:
    """Only the changed values change (``jsonedit``); where a change needs a layout that cannot be written in
    place, the file is written whole in its own indent (a tab, or so many spaces)."""
    docs = json_objects(file, text)
    if isinstance(docs, ReadError):
        raise _unreadable(docs)
    if not isinstance(docs, list):
        raise NotRewritable("JSON followed by YAML in one file cannot be rewritten")
    changes = [_judge_document(doc, config, result, facts=facts) for doc in docs]
    fixed = [apply_changes(doc, c) if c else doc for doc, c in zip(docs, changes, strict=True)]
    if result.changes:
        newline = "\r\n" if "\r\n" in text else "\n"
        indent = jsonedit.indent_of(text)
        edits = jsonedit.plan(text, changes, indent)
        edited = apply_edits(text, edits) if edits is not None else None
        if edits is not None and edited is not None and json_objects(file, edited) == fixed:
            result.new_text, result.edits = edited, edits
            return result
        body = "\n".join(json.dumps(doc, indent=indent, ensure_ascii=False) for doc in fixed)
        body += "\n" if text.endswith("\n") else ""
        result.new_text = body.replace("\n", newline) if newline != "\n" else body
        result.edits = [(0, len(text), result.new_text)]
    return result


def _fix_yaml(file: str, text: str, config: Config, result: FileResult, facts: Facts = NO_FACTS) -> FileResult:
    newline = "\r\n" if "\r\n" in text else "\n"
    out: list[str] = []
    offset = 0
    for piece in yaml_pieces(file, text):
        if isinstance(piece, ReadError):
            raise _unreadable(piece)
        part, doc = piece
        if isinstance(doc, ReadError) and doc.skip:  # no Kubernetes manifest: passed over as check passes it
            result.skipped[doc.skip] += 1
        elif isinstance(doc, ReadError):  # this document is left as it is; the others are fixed
            result.errors.append(doc)
        elif doc is not None:
            edits = _fix_document(file, part, doc, config, result, newline, facts)
            doc.node = None  # the node tree is the largest thing held; let it go document by document
            if edits:
                result.edits += [(offset + start, offset + end, new) for start, end, new in edits]
                part = apply_edits(part, edits)
        out.append(part)
        offset += len(piece[0])
    if result.errors and not result.objects and not result.skipped:  # nothing else in it: the file is the error
        raise _unreadable(result.errors[0])
    if result.edits:
        result.new_text = "".join(out)
    return result


def _reread(file: str, text: str) -> Any:
    doc = yaml_document(file, text)
    return doc.obj if isinstance(doc, Document) else doc


def _round_trip_document(file: str, part: str, expected: Any, config: Config, newline: str) -> list[Edit]:
    """ruamel.yaml's round trip of one document (``part``), kept only if it reads back (as kubectl reads it)
    as exactly the mutated object ``expected``: one edit, the whole document."""
    body = part.replace("\r\n", "\n") if newline != "\n" else part
    y = _yaml(body)
    y.explicit_start = False
    loaded = list(y.load_all(body))
    fixed = _fix_documents(loaded, config, FileResult(file))  # its own tally: the changes are counted already
    stream = io.StringIO()
    y.dump_all(fixed, stream)
    new = stream.getvalue()
    new = new if body.endswith("\n") else new.rstrip("\n")
    if _reread(file, new) != expected:
        raise NotRewritable("cannot be rewritten without changing what kubectl reads")
    return [(0, len(part), new.replace("\n", newline) if newline != "\n" else new)]


BOM = "\ufeff"


def decode(data: bytes) -> Decoded:
    """A file's bytes as kubectl reads them, kept so ``encoded`` writes them back in their own encoding
    (``encoding.decode_for_fix``); raises ``Unreadable`` for bytes that could not be written back as read."""
    try:
        return decode_for_fix(data)
    except NotText as exc:
        raise Unreadable(exc.reason, exc.line) from None


def encoded(decoded: Decoded, result: FileResult) -> bytes | None:
    """The fixed file's bytes, in the encoding and with the BOM it had (``None``: nothing changed). Where the
    file holds bytes that are not UTF-8 (kubectl reads each as U+FFFD), they stay as they were; an edit that
    would replace one is refused (``NotRewritable``)."""
    if result.new_text is None:
        return None
    if decoded.escaped is None:
        return decoded.encode(result.new_text)
    for start, end, _ in result.edits:
        line = escaped_lines(decoded, start, end)
        if line is not None:
            raise NotRewritable(f"line {line} holds bytes that are not UTF-8, and the rewrite would replace them "
                                "with U+FFFD; save the file as UTF-8 first")
    return decoded.encode(apply_edits(decoded.escaped, result.edits))


def fix_file(path: str, config: Config, output: Path | None = None, root: Path | None = None,
             dry_run: bool = False, facts: Facts = NO_FACTS) -> FileResult:
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
    decoded = decode(data)
    del data
    text = decoded.text
    result = fix_text(path, text, config, facts)
    if dry_run:  # the diff is of the file as it is, BOM included
        result.old_text = (BOM if decoded.bom else "") + text
        if decoded.bom:
            result.edits = [(start + len(BOM), end + len(BOM), new) for start, end, new in result.edits]
        return result
    new_data = encoded(decoded, result)
    try:
        if output is not None:
            relative = Path(os.path.relpath(path, base)) if root is not None else Path(Path(path).name)
            if relative.is_absolute() or ".." in relative.parts:
                relative = Path(Path(path).name)
            target = output / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, new_data if new_data is not None else decoded.encode(decoded.escaped or text), info)
        elif new_data is not None:
            atomic_write(real, new_data, info)
    except OSError as exc:
        raise Unwritable(f"cannot write: {exc.strerror or exc}") from None
    return result
