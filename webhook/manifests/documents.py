"""Streams and documents, as kubectl's ``YAMLOrJSONDecoder`` cuts and decodes them, with line numbers.

A stream whose first non-space character is ``{`` is a stream of JSON values (falling back to YAML if the first
or second value does not parse); anything else is cut into documents at every line that starts with ``---``,
and each document is decoded by go-yaml v2 (``goyaml.construct``), so that what ``check`` judges is what the
API server would receive:

- content after ``---`` on a separator line is an error, and the document before it is not read (as kubectl);
- a document that is not an object (a list, a string) is an error; ``null`` documents are skipped.

Streams are read in blocks, one document at a time, so memory stays flat however long a file is; one document
may not exceed ``MAX_DOCUMENT_BYTES`` (it is an error, and the next one is read) and one stream
``MAX_FILE_BYTES``.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import IO, Any

import yaml

from webhook.core.fieldpath import Segment
from webhook.manifests.encoding import file_visitor
from webhook.manifests.goyaml import DecodeError, Loader, construct, type_name
from webhook.manifests.yamlnodes import walk

MIB = 1024 * 1024
# A file larger than this is refused before it is read (``fix`` holds a whole file in memory).
MAX_FILE_BYTES = 256 * MIB
# One document (the text between two ``---`` lines, or one JSON value) larger than this is refused: its
# node tree and decoded form take about 70 times its size in memory (measured: an 8 MiB List peaks near
# 700 MiB in check). The API server itself refuses objects over 3 MiB; kubectl sends a List item by item.
MAX_DOCUMENT_BYTES = 8 * MIB
BLOCK = 4 * MIB


@dataclass(frozen=True, slots=True)
class ReadError:
    """An input that could not be read: where, why (``reason``) and what is left unread because of it
    (``effect``, when more than this document); ``message`` says both, as ``check`` shows it."""

    file: str
    line: int
    reason: str
    effect: str = ""
    ends: bool = True  # nothing after it in the stream is read (False: one document is lost, the next is read)
    # A document that is not an object (a list, a string): kubectl refuses it, but it is no Kubernetes manifest
    # either (a CI configuration, a list of pre-commit hooks), so check and fix count it as skipped, by this.
    skip: str = ""

    @property
    def message(self) -> str:
        return f"{self.reason}; {self.effect}" if self.effect else self.reason


@dataclass
class Document:
    """One decoded document and what is needed to point at a line inside it.

    ``first_line`` is the 0-based line where the document's text starts in its file; node marks count
    from there."""

    file: str
    line: int
    obj: Any
    node: yaml.Node | None = None
    text: str | None = field(default=None, repr=False)
    first_line: int = 0

    def line_of(self, segments: tuple[Segment, ...]) -> int:
        """The line of the deepest existing node on ``segments`` (where a missing field belongs)."""
        node = self.node
        if node is None and self.text is not None:
            try:
                loader = Loader(self.text)
                try:
                    node = loader.get_node() if loader.check_node() else None
                finally:
                    loader.dispose()
            except (yaml.YAMLError, RecursionError):
                node = None
            self.node = node
        if node is None:
            return self.line
        return walk(node, segments).line + self.first_line


_SEPARATOR = re.compile(rb"^---([^\n]*)(?:\n|\Z)", re.M)
_GO_SPACE = b" \t\r\n\x0b\x0c"


@dataclass(frozen=True, slots=True)
class Piece:
    """A part of a YAML stream: a document's bytes (``document``) or a separator line; ``line`` is the
    0-based line it starts on. The pieces of a stream, joined, are the stream."""

    data: bytes
    line: int
    document: bool


def split_yaml(stream: IO[bytes], file: str, head: bytes = b"",
               first_line: int = 0) -> Iterator[Piece | ReadError]:
    """Cut a YAML stream at ``---`` lines as apimachinery's ``YAMLReader`` does, reading in blocks.

    A separator line with content other than a comment is an error that ends the stream; the document
    before it is dropped, as kubectl drops it. A stream over ``MAX_FILE_BYTES`` ends with an error. A document
    over ``MAX_DOCUMENT_BYTES`` is an error for that document alone (``ends`` False): its bytes are dropped as
    they are read, up to the next ``---``, so memory stays bounded, and the documents after it are read."""
    parts: list[bytes] = []
    size = 0
    skipping = False  # inside a document over the limit: dropped up to the next separator
    midline = False  # the previous block's partial line was dropped: the next data does not start a line
    total = len(head)
    doc_line = line = first_line
    carry = head
    while True:
        block = stream.read(BLOCK)
        total += len(block)
        if total > MAX_FILE_BYTES:
            yield ReadError(file, line + 1, f"input is over the {MAX_FILE_BYTES // MIB} MiB limit",
                            "not read further")
            return
        data = carry + block if carry else block
        if midline and data:
            newline = data.find(b"\n")
            if newline < 0:
                data, carry = b"", b""
                if block:
                    continue
            else:
                data, midline = data[newline + 1:], False
                line += 1
        if block:
            cut = data.rfind(b"\n") + 1
            data, carry = data[:cut], data[cut:]
            if size + len(carry) > MAX_DOCUMENT_BYTES:  # one line longer than a document may be
                if not skipping:
                    yield _too_big(file, doc_line)
                parts, size, skipping, midline, carry = [], 0, True, True, b""
        else:
            carry = b""
        pos = 0
        for m in _SEPARATOR.finditer(data):
            if m.start() > pos:
                if not skipping:
                    parts.append(data[pos:m.start()])
                    size += m.start() - pos
                line += data.count(b"\n", pos, m.start())
            rest = m.group(1).strip(_GO_SPACE)
            if rest and not rest.startswith(b"#"):
                shown = rest[:60].decode("utf-8", "replace")
                yield ReadError(file, line + 1, f"invalid YAML document separator: {shown!r} (only a comment "
                                                "may follow ---)")
                return
            if size > MAX_DOCUMENT_BYTES and not skipping:
                yield _too_big(file, doc_line)
            elif parts and not skipping:
                yield Piece(b"".join(parts), doc_line, True)
            parts, size, skipping = [], 0, False
            yield Piece(m.group(0), line, False)
            line += m.group(0).count(b"\n")
            doc_line = line
            pos = m.end()
        if pos < len(data):
            if not skipping:
                parts.append(data[pos:])
                size += len(data) - pos
            line += data.count(b"\n", pos)
            if size > MAX_DOCUMENT_BYTES and not skipping:
                yield _too_big(file, doc_line)
                parts, size, skipping = [], 0, True
        if not block:
            break
    if parts and not skipping:
        yield Piece(b"".join(parts), doc_line, True)


def _too_big(file: str, line: int) -> ReadError:
    return ReadError(file, line + 1, f"document is over the {MAX_DOCUMENT_BYTES // MIB} MiB limit",
                     "it is not read (the documents after it are)", ends=False)


def decode_text(data: bytes, file: str, line: int) -> str | ReadError:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = line + data[: exc.start].count(b"\n") + 1
        return ReadError(file, at, f"not UTF-8 text (byte 0x{data[exc.start]:02x})")


def yaml_document(file: str, text: str, first_line: int = 0) -> Document | ReadError | None:
    """The first YAML document of ``text`` (one piece of a stream) decoded as kubectl decodes it; ``None``
    for an empty or ``null`` document. An error here is this document's: ``check`` reads the next one (the
    stream is cut at ``---`` lines first), though kubectl apply refuses the whole file."""
    loader = Loader(text)
    try:
        if not loader.check_node():
            return None
        node = loader.get_node()
        if node is None:
            return None
        obj = construct(node, "*" in text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = first_line + (mark.line + 1 if mark is not None else 1)
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        return ReadError(file, line, f"YAML does not parse: {problem}")
    except yaml.YAMLError as exc:
        return ReadError(file, first_line + 1, f"YAML does not parse: {exc}")
    except DecodeError as exc:
        line = first_line + 1 + (exc.line if exc.line is not None else node.start_mark.line)
        return ReadError(file, line, f"YAML cannot be decoded: {exc}")
    except RecursionError:
        return ReadError(file, first_line + 1, "YAML is nested too deeply to be read")
    except (ValueError, TypeError) as exc:
        return ReadError(file, first_line + 1, f"YAML cannot be decoded: {exc}")
    finally:
        loader.dispose()
    if obj is None:
        return None
    return Document(file, first_line + node.start_mark.line + 1, obj, node, first_line=first_line)


def not_an_object(doc: Document) -> ReadError | None:
    """kubectl refuses a document that is not an object (it has no apiVersion and kind to read)."""
    if isinstance(doc.obj, dict):
        return None
    what = "a list" if isinstance(doc.obj, list) else {
        "bool": "a boolean", "int": "a number", "float": "a number"}.get(type_name(doc.obj), "a string")
    # A list of objects with a kind is manifests kubectl refuses (``kind: List`` is the way): an error, or the
    # Pods in it would pass unjudged. Any other list or scalar is no manifest: passed over, counted.
    manifests = isinstance(doc.obj, list) and any(isinstance(item, dict) and "kind" in item for item in doc.obj)
    return ReadError(doc.file, doc.line, f"document is {what}, not an object" + (
        "; kubectl refuses it: put the objects in the items of a kind: List, or separate them with ---"
        if manifests else ""),
        skip="" if manifests else f"document that is {what}, not a Kubernetes object")


_JSON_SPACE = re.compile(r"[ \t\r\n]*")
_ESCAPED = re.compile("[\udc80-\udcff]")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"number {text[:40]} is out of range")
    return number


_JSON = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_parse_float)


@dataclass(frozen=True, slots=True)
class YAMLAfterJSON:
    """Where kubectl goes on reading as YAML (a character offset), and the JSON error it reports if that
    YAML does not parse either."""

    offset: int
    error: ReadError


def json_documents(file: str, text: str, first_line: int = 0) -> Iterator[Document | ReadError | YAMLAfterJSON]:
    """The JSON values of ``text`` as ``YAMLOrJSONDecoder`` reads them. When a value does not parse and at
    most one did before, kubectl reads the rest as YAML: a ``YAMLAfterJSON`` says from where."""
    pos = _JSON_SPACE.match(text).end()  # type: ignore[union-attr]
    line = first_line + text.count("\n", 0, pos)
    count = 0
    while pos < len(text):
        try:
            obj, end = _JSON.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            error = ReadError(file, exc.lineno + first_line, f"JSON does not parse: {exc.msg} (column {exc.colno})")
            yield YAMLAfterJSON(_after_whitespace_line(text, pos), error) if count <= 1 else error
            return
        except RecursionError:
            yield ReadError(file, line + 1, "JSON is nested too deeply to be read")
            return
        except ValueError as exc:  # a number too long or out of range, NaN
            message = str(exc)
            if "digits" in message:
                message = "an integer has more than 4,300 digits"
            yield ReadError(file, line + 1, f"JSON cannot be decoded: {message}")
            return
        count += 1
        if obj is not None:
            yield Document(file, line + 1, obj, None, text[pos:end], first_line=line)
        line += text.count("\n", pos, end)
        after = _JSON_SPACE.match(text, end).end()  # type: ignore[union-attr]
        line += text.count("\n", end, after)
        pos = after


def _after_whitespace_line(text: str, pos: int) -> int:
    """apimachinery's ``consumeWhitespace``: skip spaces up to and including the first newline."""
    while pos < len(text) and text[pos].isspace():
        pos += 1
        if text[pos - 1] == "\n":
            break
    return pos


def stream_documents(file: str, stream: IO[bytes]) -> Iterator[Document | ReadError]:
    """Every document of a file's bytes (or stdin's), as ``kubectl apply -f`` reads them: decoded as
    ``FileVisitor`` decodes them (``encoding.file_visitor``: UTF-16 on a BOM, U+FFFD for bytes that are not
    UTF-8), then read as ``StreamVisitor`` reads them."""
    decoded = file_visitor(stream, MAX_FILE_BYTES)
    if isinstance(decoded, int):
        yield ReadError(file, 1, f"input is over the {MAX_FILE_BYTES // MIB} MiB limit", "not read")
        return
    yield from _stream_visitor(file, decoded)


def _stream_visitor(file: str, stream: IO[bytes]) -> Iterator[Document | ReadError]:
    head = stream.read(BLOCK)
    start = len(head) - len(head.lstrip(_GO_SPACE))
    if head[start:start + 1] == b"{":
        rest = stream.read(MAX_DOCUMENT_BYTES + 1 - len(head)) if len(head) == BLOCK else b""
        data = head + rest
        if len(data) > MAX_DOCUMENT_BYTES:
            yield ReadError(file, 1, f"JSON input over the {MAX_DOCUMENT_BYTES // MIB} MiB limit", "not read")
            return
        # Only after a UTF-8 BOM can bytes that are not UTF-8 get here (``file_visitor`` passes them on): in a
        # JSON string encoding/json reads each as U+FFFD, and outside one the JSON does not parse either way.
        # Each such byte is kept (``surrogateescape``) for the YAML that may follow, which refuses it as kubectl's
        # YAML decoder does, and read as U+FFFD in the JSON (encoding/json replaces byte by byte).
        kept = data.decode("utf-8", "surrogateescape")
        text = _ESCAPED.sub("\ufffd", kept)
        yaml_from: YAMLAfterJSON | None = None
        for item in json_documents(file, text):
            if isinstance(item, YAMLAfterJSON):
                yaml_from = item
                break
            if isinstance(item, Document):
                bad = not_an_object(item)
                if bad is not None:
                    yield bad
                    continue
            yield item
        if yaml_from is None:
            return
        line = text.count("\n", 0, yaml_from.offset)
        tail = io.BytesIO(kept[yaml_from.offset:].encode("utf-8", "surrogateescape"))
        for index, after in enumerate(_yaml_stream(file, tail, b"", line)):
            # neither JSON nor YAML: kubectl reports the JSON error
            yield yaml_from.error if index == 0 and isinstance(after, ReadError) else after
        return
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    yield from _yaml_stream(file, stream, head, 0)


def _yaml_stream(file: str, stream: IO[bytes], head: bytes, first_line: int) -> Iterator[Document | ReadError]:
    for piece in split_yaml(stream, file, head, first_line):
        if isinstance(piece, ReadError):
            yield piece
            if piece.ends:
                return
            continue
        if not piece.document:
            continue
        text = decode_text(piece.data, file, piece.line)
        if isinstance(text, ReadError):
            yield text  # one document: the stream is cut at ``---`` lines, the next one reads on its own
            continue
        doc = yaml_document(file, text, piece.line)
        if doc is None:
            continue
        if isinstance(doc, ReadError):
            yield doc  # as above: the documents after it are judged (kubectl apply refuses the whole file)
            continue
        bad = not_an_object(doc)
        yield doc if bad is None else bad


def read_text_documents(file: str, text: str) -> Iterator[Document | ReadError]:
    """``read_documents`` over text already in memory (tests, ``fix``)."""
    yield from stream_documents(file, io.BytesIO(text.encode("utf-8")))


def yaml_documents(file: str, text: str) -> Iterator[Document | ReadError]:
    """Every document of ``text`` read as YAML (whatever its first character)."""
    yield from _yaml_stream(file, io.BytesIO(text.encode("utf-8")), b"", 0)


def json_document(file: str, text: str) -> Document | ReadError:
    """The one JSON value of ``text`` (an error if there is not exactly one object)."""
    docs = list(json_documents(file, text))
    for doc in docs:
        if isinstance(doc, ReadError):
            return doc
        if isinstance(doc, YAMLAfterJSON):
            return doc.error
    if len(docs) == 1 and isinstance(docs[0], Document):
        return docs[0]
    return ReadError(file, 1, "JSON does not parse: expected exactly one JSON value")


def json_objects(file: str, text: str) -> list[Any] | ReadError | YAMLAfterJSON:
    """Every object of a JSON stream (``fix``), or the first thing that stops it: an error, or the point
    where kubectl would go on reading YAML."""
    objects: list[Any] = []
    for item in json_documents(file, text):
        if not isinstance(item, Document):
            return item
        bad = not_an_object(item)
        if bad is not None:
            return bad
        objects.append(item.obj)
    return objects


def yaml_pieces(file: str, text: str) -> Iterator[tuple[str, Document | ReadError | None] | ReadError]:
    """The pieces of a YAML stream (``fix``), each with its document: ``None`` for a separator line or an
    empty document, a ``ReadError`` for a document that does not decode or is not an object (``skip`` set where
    it is no manifest at all). The pieces joined are ``text``; a stream error (a separator with content, a
    document over the limit) ends them."""
    for piece in split_yaml(io.BytesIO(text.encode("utf-8")), file):
        if isinstance(piece, ReadError):
            yield piece
            return
        part = piece.data.decode("utf-8")
        doc = yaml_document(file, part, piece.line) if piece.document else None
        bad = doc if isinstance(doc, ReadError) else not_an_object(doc) if doc is not None else None
        # One document that does not decode, or is no object, is its own error (as check reads the documents
        # after it): ``fix`` leaves it as it is and goes on.
        yield part, replace(bad, ends=False) if bad is not None else doc
