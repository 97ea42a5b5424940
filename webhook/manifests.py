"""Reading manifests from files, folders and stdin, with line numbers; round-trip rewriting for ``fix``.

Reading uses libyaml (``CSafeLoader``) one document at a time, keeping each document's node tree only
while that document is judged, so memory stays flat however many files are checked. A file that does
not parse yields a ``ReadError`` with its line; the documents before the error are still checked.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webhook.fieldpath import Segment

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Loader(_BaseLoader):  # type: ignore[misc,valid-type]
    """libyaml's safe loader that, like go-yaml (and so kubectl), refuses a key repeated in a mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                line = key_node.start_mark.line + 1
                if key_node.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None,
                        f'mapping key "{key_node.value}" already defined at line {seen[key_node.value]}',
                        key_node.start_mark)
                seen[key_node.value] = line
        return super().construct_mapping(node, deep)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class ReadError:
    file: str
    line: int
    message: str


@dataclass
class Document:
    """One decoded document and what is needed to point at a line inside it."""

    file: str
    line: int
    obj: Any
    node: yaml.Node | None = None
    text: str | None = field(default=None, repr=False)

    def line_of(self, segments: tuple[Segment, ...]) -> int:
        """The line of the deepest existing node on ``segments`` (where a missing field belongs)."""
        node = self.node
        if node is None and self.text is not None:
            try:
                node = yaml.compose(self.text, Loader=Loader)
            except yaml.YAMLError:
                node = None
            self.node = node
        if node is None:
            return self.line
        line = node.start_mark.line + 1
        for seg in segments:
            child = _child(node, seg)
            if child is None:
                break
            key_line, node = child
            line = key_line
        return line


def _child(node: yaml.Node, seg: Segment) -> tuple[int, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode) and isinstance(seg, str):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == seg:
                return key.start_mark.line + 1, value
    elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and 0 <= seg < len(node.value):
        item = node.value[seg]
        return item.start_mark.line + 1, item
    return None


def expand_paths(paths: Iterable[str]) -> Iterator[str | ReadError]:
    """Files in command-line order, folders recursively (sorted), ``-`` for stdin."""
    for raw in paths:
        if raw == STDIN:
            yield STDIN
            continue
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                os.path.join(root, name)
                for root, _dirs, files in os.walk(path)
                for name in files
                if name.endswith(MANIFEST_SUFFIXES)
            )
            yield from found
        elif path.exists():
            yield raw
        else:
            yield ReadError(raw, 0, "no such file or directory")


def _read_text(file: str) -> str | ReadError:
    try:
        data = sys.stdin.buffer.read() if file == STDIN else Path(file).read_bytes()
    except OSError as exc:
        return ReadError(file, 0, f"cannot read: {exc.strerror or exc}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return ReadError(file, line, f"not UTF-8 text (byte 0x{data[exc.start]:02x})")


def yaml_documents(file: str, text: str) -> Iterator[Document | ReadError]:
    """Each YAML document of ``text`` with its node tree; a ``ReadError`` ends the stream."""
    loader = Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            obj = loader.construct_document(node)
            yield Document(file, node.start_mark.line + 1, obj, node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 0
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        yield ReadError(file, line, f"YAML does not parse: {problem}")
    except yaml.YAMLError as exc:
        yield ReadError(file, 0, f"YAML does not parse: {exc}")
    except (ValueError, TypeError, RecursionError) as exc:
        yield ReadError(file, 0, f"YAML cannot be decoded: {exc}")
    finally:
        loader.dispose()


def read_documents(file: str) -> Iterator[Document | ReadError]:
    """Every document in ``file`` (JSON by suffix or leading brace, otherwise YAML)."""
    text = _read_text(file)
    if isinstance(text, ReadError):
        yield text
        return
    if file.endswith(".json") or (file == STDIN and text.lstrip()[:1] in ("{", "[")):
        yield json_document(file, text)
        return
    yield from yaml_documents(file, text)


def json_document(file: str, text: str) -> Document | ReadError:
    try:
        return Document(file, 1, json.loads(text), None, text)
    except json.JSONDecodeError as exc:
        return ReadError(file, exc.lineno, f"JSON does not parse: {exc.msg} (column {exc.colno})")
    except RecursionError:
        return ReadError(file, 0, "JSON is nested too deeply")

