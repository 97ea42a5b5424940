"""Reading manifests from files, folders and stdin as ``kubectl apply -f`` reads them, with line numbers.

kubectl reads a file with ``k8s.io/apimachinery/pkg/util/yaml.YAMLOrJSONDecoder``: a stream whose first
non-space character is ``{`` is a stream of JSON values (falling back to YAML if the first or second value
does not parse), anything else is cut into documents at every line that starts with ``---``, and each
document is decoded by ``sigs.k8s.io/yaml`` over go-yaml v2 (``resolve.go``, ``decode.go``) and turned into
JSON. This module does the same with libyaml's parser (``CSafeLoader``) and its own constructor, so that
what ``check`` judges is what the API server would receive:

- plain scalars resolve as go-yaml v2 does: no base-60 numbers (``1:00`` is a string), ``0o10`` and ``010``
  are 8, ``y``/``yes``/``on`` are true, ``1_000`` is 1000, timestamps stay strings, an integral float is a JSON
  integer, ``.inf`` and ``.nan`` cannot be written as JSON (an error);
- a repeated key keeps its last value; ``<<`` merges are applied where they stand, as go-yaml v2 does;
- map keys become strings as ``sigs.k8s.io/yaml`` makes them (``true``, ``1``); a null key is an error;
- excessive aliasing is refused with go-yaml's own ratio rule (``document contains excessive aliasing``);
- content after ``---`` on a separator line is an error, and the document before it is not read (as kubectl);
- a document that is not an object (a list, a string) is an error; ``null`` documents are skipped.

Files are read in blocks, one document at a time, so memory stays flat however long a file is; one
document may not exceed ``MAX_DOCUMENT_BYTES`` and one file ``MAX_FILE_BYTES``. Only regular files are read
(a FIFO or a link to a device is refused without opening it for a blocking read).
"""

from __future__ import annotations

import base64
import binascii
import gc
import io
import json
import math
import os
import re
import stat
import struct
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from webhook.core.fieldpath import Segment

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"
MIB = 1024 * 1024
# A file larger than this is refused before it is read (``fix`` holds a whole file in memory).
MAX_FILE_BYTES = 256 * MIB
# One document (the text between two ``---`` lines, or one JSON value) larger than this is refused: its
# node tree and decoded form take about 70 times its size in memory (measured: an 8 MiB List peaks near
# 700 MiB in check). The API server itself refuses objects over 3 MiB; kubectl sends a List item by item.
MAX_DOCUMENT_BYTES = 8 * MIB
_BLOCK = 4 * MIB

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

PLAIN = "!qos-guard/plain"  # an untagged plain scalar, resolved by ``resolve_plain``
STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_BINARY = "tag:yaml.org,2002:binary"
_RESOLVABLE = {STR: "str", "tag:yaml.org,2002:bool": "bool", "tag:yaml.org,2002:int": "int",
               "tag:yaml.org,2002:float": "float", "tag:yaml.org,2002:null": "null",
               "tag:yaml.org,2002:timestamp": "timestamp"}


class Loader(_BaseLoader):  # type: ignore[misc,valid-type]
    """libyaml's parser and composer; scalars are left for ``construct`` to resolve the go-yaml v2 way."""

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is yaml.ScalarNode:
            return PLAIN if implicit[0] else STR
        return _MAP if kind is yaml.MappingNode else _SEQ


class DecodeError(ValueError):
    """A document go-yaml (or sigs.k8s.io/yaml's JSON conversion) would refuse, with its 0-based line."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


# --- scalars (go-yaml v2 resolve.go) --------------------------------------------------------------------

_PLAIN_MAP: dict[str, Any] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_NUMERIC_START = frozenset("0123456789+-.")
# strconv.ParseInt(s, 0, 64) syntax, after go-yaml removed every underscore.
_GO_INT = re.compile(r"([-+]?)(?:0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+)|0([0-7]+)|([0-9]+))")
_GO_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+(?:[eE][-+]?[0-9]+)?")
# time.Parse layouts go-yaml v2 tries ("2006-1-2T15:4:5.999999999Z07:00", "2006-1-2 15:4:5.999999999", ...).
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(?:\.[0-9]+)?"
                        r"(?:Z|[-+][0-9]{2}:[0-9]{2})| [0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(?:\.[0-9]+)?)?")
_INT64 = 1 << 63


def resolve_plain(value: str) -> Any:
    """What go-yaml v2 makes of an untagged plain scalar: None, bool, int, float (Go's types) or str."""
    try:
        return _PLAIN_MAP[value]
    except KeyError:
        pass
    first = value[0]
    if first not in _NUMERIC_START:
        return value
    if first == ".":
        if _DOT_FLOAT.fullmatch(value):
            dotted = float(value)
            if not math.isinf(dotted):  # ParseFloat's range error: the scalar stays a string
                return dotted
        return value
    plain = value.replace("_", "") if "_" in value else value
    m = _GO_INT.fullmatch(plain)
    if m is not None:
        sign, hexa, octal, binary, zero_octal, decimal = m.groups()
        digits = hexa or octal or binary or zero_octal or decimal
        number: int | None
        if len(digits) > 64:
            number = None  # beyond uint64 whatever the base (and no 4,300-digit int() limit to hit)
        elif decimal is not None:
            # A leading zero means octal in Go; "08" is no octal number, and falls through to a float.
            number = int(decimal) if decimal[0] != "0" or len(decimal) == 1 else None
        elif hexa is not None:
            number = int(hexa, 16)
        elif octal is not None:
            number = int(octal, 8)
        elif binary is not None:
            number = int(binary, 2)
        else:
            number = int(zero_octal, 8)
        if number is not None:
            if sign == "-":
                number = -number
            if -_INT64 <= number < _INT64 or (not sign and number < 2 * _INT64):
                return number
    if _GO_FLOAT.fullmatch(plain):
        real = float(plain)
        if not math.isinf(real):
            return real
    return value


def _tagged(tag: str, value: str, line: int) -> Any:
    """A scalar with an explicit tag: go-yaml v2 resolves it and refuses a value of another type."""
    if tag == STR:
        return value
    if tag == _BINARY:
        try:
            data = base64.b64decode(value.replace("\n", "").replace("\r", ""), validate=True)
        except (binascii.Error, ValueError):
            raise DecodeError("!!binary value contains invalid base64 data", line) from None
        return data.decode("utf-8", "replace")  # encoding/json writes invalid UTF-8 as U+FFFD
    want = _RESOLVABLE.get(tag)
    if want is None:
        return value  # an unknown tag (or !!map on a scalar): go-yaml keeps the text
    if want == "timestamp" and _TIMESTAMP.fullmatch(value):
        return value  # a timestamp decoded into interface{} is kept as its text
    got = resolve_plain(value)
    got_name = _type_name(got)
    if want == "float" and got_name == "int":
        return float(got)
    if got_name != want:
        raise DecodeError(f"cannot decode !!{got_name} `{value}` as a !!{want}", line)
    return got


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    return {int: "int", float: "float"}.get(type(value), "str")


def json_number(value: float) -> int | float:
    """The number encoding/json writes for a float64, as Python's JSON reader reads it back."""
    if math.isnan(value) or math.isinf(value):
        raise DecodeError(f"json: unsupported value: {_go_float_name(value)}")
    if value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def _go_float_name(value: float) -> str:
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def _float32_key(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32), as sigs.k8s.io/yaml writes a float map key."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    try:
        f32 = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return ".inf" if value > 0 else "-.inf"
    if math.isinf(f32):
        return ".inf" if f32 > 0 else "-.inf"
    if f32 == 0:
        return "-0" if math.copysign(1, f32) < 0 else "0"
    for digits in range(1, 10):
        text = f"{f32:.{digits - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == f32:
            break
    mantissa, exponent = text.split("e")
    exp = int(exponent)
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    if exp < -4 or exp >= 6:  # shortest 'g' uses %e from exponent 6 on (eprec = 6)
        sign = "-" if exp < 0 else "+"
        return f"{mantissa}e{sign}{abs(exp):02d}"
    negative = mantissa.startswith("-")
    digits_only = mantissa.lstrip("-").replace(".", "")
    if exp >= 0:
        whole = digits_only[: exp + 1].ljust(exp + 1, "0")
        frac = digits_only[exp + 1:]
        out = whole + ("." + frac if frac else "")
    else:
        out = "0." + "0" * (-exp - 1) + digits_only
    return ("-" if negative else "") + out


def _key(value: Any, line: int) -> str:
    """A map key as sigs.k8s.io/yaml writes it into JSON (convertToJSONableObject)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if value >= _INT64:
            raise DecodeError(f"unsupported map key of type: uint64, key: {value}", line)
        return str(value)
    if isinstance(value, float):
        return _float32_key(value)
    if value is None:
        raise DecodeError("unsupported map key of type: <nil> (a null key)", line)
    raise DecodeError("invalid map key: a mapping or a list cannot be a key", line)


# --- documents (go-yaml v2 decode.go) -------------------------------------------------------------------

# go-yaml v2's rule against alias bombs (decode.go, allowedAliasRatio).
_ALIAS_RANGE_LOW = 400_000
_ALIAS_RANGE_HIGH = 4_000_000


def allowed_alias_ratio(decodes: int) -> float:
    if decodes <= _ALIAS_RANGE_LOW:
        return 0.99
    if decodes >= _ALIAS_RANGE_HIGH:
        return 0.10
    return 0.99 - 0.89 * ((decodes - _ALIAS_RANGE_LOW) / (_ALIAS_RANGE_HIGH - _ALIAS_RANGE_LOW))


def _scalar(node: yaml.ScalarNode) -> Any:
    tag = node.tag
    if tag == PLAIN:
        return resolve_plain(node.value) if node.value else None
    if tag == STR:
        return node.value
    return _tagged(tag, node.value, node.start_mark.line)


def _is_merge(key: yaml.Node) -> bool:
    return isinstance(key, yaml.ScalarNode) and key.value == "<<" and key.tag in (PLAIN, _MERGE)


def _merge_items(node: yaml.Node) -> list[tuple[int, yaml.MappingNode]]:
    """go-yaml v2 writes merged keys into the map where ``<<`` stands; a list merges last to first."""
    items = list(enumerate(node.value))[::-1] if isinstance(node, yaml.SequenceNode) else [(-1, node)]
    maps: list[tuple[int, yaml.MappingNode]] = []
    for i, item in items:
        if not isinstance(item, yaml.MappingNode):
            raise DecodeError("map merge requires map or sequence of maps as the value", item.start_mark.line)
        maps.append((i, item))
    return maps


def _set_key(out: dict[str, Any], key_node: yaml.Node, key: Any, value: Any) -> None:
    if isinstance(key, (dict, list)):
        raise DecodeError("invalid map key: a mapping or a list cannot be a key", key_node.start_mark.line)
    out[_key(key, key_node.start_mark.line)] = value


def _value(raw: Any) -> Any:
    return json_number(raw) if isinstance(raw, float) else raw


class _Fast:
    """The value of a document without aliases (no ``*`` in its text): no bookkeeping."""

    def value(self, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return _value(_scalar(node))
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            self.mapping(node, out)
            return out
        return [self.value(item) for item in node.value]

    def mapping(self, node: yaml.MappingNode, out: dict[str, Any]) -> None:
        for key_node, value_node in node.value:
            if _is_merge(key_node):
                for _, item in _merge_items(value_node):
                    self.mapping(item, out)
                continue
            key = _scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else self.value(key_node)
            _set_key(out, key_node, key, self.value(value_node))


class _Counted:
    """The value of a document with aliases, each decode counted as go-yaml v2 counts it.

    libyaml's composer shares one node object between an anchor and its aliases. Walking in document
    order, the first visit of a node is its definition; a later visit through a parent-child edge not
    used at the definition is an alias. Those alias edges are recorded while walking outside any alias,
    so that inside an expansion only the aliases nested in the anchored value count as aliases again."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.alias_edges: set[tuple[int, int]] = set()
        self.active: set[int] = set()
        self.decodes = 1  # the document node
        self.aliased = 0
        self.depth = 0

    def _count(self) -> None:
        self.decodes += 1
        if self.depth:
            self.aliased += 1
        if (self.aliased > 100 and self.decodes > 1000
                and self.aliased / self.decodes > allowed_alias_ratio(self.decodes)):
            raise DecodeError("document contains excessive aliasing")

    def _is_alias(self, node: yaml.Node, edge: tuple[int, int]) -> bool:
        if self.depth:
            return edge in self.alias_edges
        if id(node) in self.seen:
            self.alias_edges.add(edge)
            return True
        self.seen.add(id(node))
        return False

    def value(self, node: yaml.Node, edge: tuple[int, int]) -> Any:
        return _value(self.raw(node, edge))

    def raw(self, node: yaml.Node, edge: tuple[int, int]) -> Any:
        self._count()  # the node, or go-yaml's alias node
        if not self._is_alias(node, edge):
            return self._build(node)
        if id(node) in self.active:
            raise DecodeError("anchor value contains itself", node.start_mark.line)
        self.depth += 1
        try:
            self._count()  # the anchored value, decoded again
            return self._build(node)
        finally:
            self.depth -= 1

    def _build(self, node: yaml.Node) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return _scalar(node)
        key = id(node)
        self.active.add(key)
        try:
            if isinstance(node, yaml.MappingNode):
                out: dict[str, Any] = {}
                self._mapping(node, out)
                return out
            return [self.value(item, (key, i)) for i, item in enumerate(node.value)]
        finally:
            self.active.discard(key)

    def _mapping(self, node: yaml.MappingNode, out: dict[str, Any]) -> None:
        parent = id(node)
        for i, (key_node, value_node) in enumerate(node.value):
            if _is_merge(key_node):
                self._merge(value_node, (parent, 2 * i + 1), out)
                continue
            key = self.raw(key_node, (parent, 2 * i))
            _set_key(out, key_node, key, self.value(value_node, (parent, 2 * i + 1)))

    def _merge(self, node: yaml.Node, edge: tuple[int, int], out: dict[str, Any]) -> None:
        sequence = isinstance(node, yaml.SequenceNode)
        if sequence and self._is_alias(node, edge):  # go-yaml: an alias to a list cannot be merged
            raise DecodeError("map merge requires map or sequence of maps as the value", node.start_mark.line)
        for j, item in _merge_items(node):
            item_edge = (id(node), j) if sequence else edge
            self._count()
            if not self._is_alias(item, item_edge):
                self._merge_into(item, out)
                continue
            if id(item) in self.active:
                raise DecodeError("anchor value contains itself", item.start_mark.line)
            self.depth += 1
            try:
                self._count()
                self._merge_into(item, out)
            finally:
                self.depth -= 1

    def _merge_into(self, item: yaml.MappingNode, out: dict[str, Any]) -> None:
        self.active.add(id(item))
        try:
            self._mapping(item, out)
        finally:
            self.active.discard(id(item))


# libyaml refuses nesting deeper than 1,000 levels; building the value takes up to three Python frames a
# level, so the limit is raised while a document is built (Python frames do not use the C stack on 3.11+).
_CONSTRUCT_RECURSION = 4000


def construct(node: yaml.Node, aliases_possible: bool = True) -> Any:
    """The JSON value kubectl makes of a composed document (see the module docstring)."""
    limit = sys.getrecursionlimit()
    if limit < _CONSTRUCT_RECURSION:
        sys.setrecursionlimit(_CONSTRUCT_RECURSION)
    try:
        if aliases_possible:
            return _Counted().value(node, (0, 0))
        return _Fast().value(node)
    finally:
        sys.setrecursionlimit(limit)


# --- reading --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadError:
    file: str
    line: int
    message: str


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
        line = node.start_mark.line + 1
        for seg in segments:
            child = _child(node, seg)
            if child is None:
                break
            key_line, node = child
            line = key_line
        return line + self.first_line


def _child(node: yaml.Node, seg: Segment) -> tuple[int, yaml.Node] | None:
    if isinstance(node, yaml.MappingNode) and isinstance(seg, str):
        for key, value in reversed(node.value):  # a repeated key: the last one holds the value
            if isinstance(key, yaml.ScalarNode) and key.value == seg:
                return key.start_mark.line + 1, value
    elif isinstance(node, yaml.SequenceNode) and isinstance(seg, int) and 0 <= seg < len(node.value):
        item = node.value[seg]
        return item.start_mark.line + 1, item
    return None


def expand_paths(paths: Iterable[str]) -> Iterator[str | ReadError]:
    """Files in command-line order, folders recursively (sorted), ``-`` for stdin. A folder (or a folder
    inside it) that cannot be listed is an error, never silently empty."""
    for raw in paths:
        if raw == STDIN:
            yield STDIN
            continue
        path = Path(raw)
        try:
            is_dir = stat.S_ISDIR(path.stat().st_mode)
        except FileNotFoundError:
            is_dir = False
        except OSError as exc:
            if not _is_link(path):
                yield ReadError(raw, 0, f"cannot read: {exc.strerror or exc}")
                continue
            is_dir = False  # a looping link: opening it names the problem
        if is_dir:
            problems: list[OSError] = []
            found = sorted(
                os.path.join(root, name)
                for root, _dirs, files in os.walk(path, onerror=problems.append)
                for name in files
                if name.endswith(MANIFEST_SUFFIXES)
            )
            for problem in problems:
                yield ReadError(str(problem.filename or raw), 0, f"cannot list folder: {problem.strerror or problem}")
            yield from found
        elif path.exists() or _is_link(path):
            yield raw
        else:
            yield ReadError(raw, 0, "no such file or directory")


def _is_link(path: Path) -> bool:
    try:
        return path.is_symlink()
    except OSError:
        return False


def open_manifest(file: str) -> IO[bytes] | ReadError:
    """``file`` opened for reading if it is a regular file no larger than ``MAX_FILE_BYTES``; stdin for ``-``.

    The open does not block on a FIFO (``O_NONBLOCK``), and the type is checked on the open descriptor, so a
    ``.yaml`` that is a FIFO or a link to ``/dev/zero`` is refused, not read forever."""
    if file == STDIN:
        if sys.stdin is None:
            return ReadError(file, 0, "cannot read stdin: it is closed")
        try:
            return sys.stdin.buffer
        except AttributeError:
            return ReadError(file, 0, "cannot read stdin: it is not a byte stream")
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return ReadError(file, 0, f"cannot read: {exc.strerror or exc}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            return ReadError(file, 0, f"not a regular file ({_file_type(info.st_mode)}); not read")
        if info.st_size > MAX_FILE_BYTES:
            os.close(fd)
            return ReadError(file, 0, f"file is {info.st_size / MIB:.0f} MiB, over the "
                                      f"{MAX_FILE_BYTES // MIB} MiB limit; not read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except OSError as exc:
        os.close(fd)
        return ReadError(file, 0, f"cannot read: {exc.strerror or exc}")


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


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
    before it is dropped, as kubectl drops it. A document over ``MAX_DOCUMENT_BYTES`` or a stream over
    ``MAX_FILE_BYTES`` also ends the stream with an error."""
    parts: list[bytes] = []
    size = 0
    total = len(head)
    doc_line = line = first_line
    carry = head
    while True:
        block = stream.read(_BLOCK)
        total += len(block)
        if total > MAX_FILE_BYTES:
            yield ReadError(file, line + 1, f"input is over the {MAX_FILE_BYTES // MIB} MiB limit; not read further")
            return
        data = carry + block if carry else block
        if block:
            cut = data.rfind(b"\n") + 1
            data, carry = data[:cut], data[cut:]
            if size + len(carry) > MAX_DOCUMENT_BYTES:
                yield _too_big(file, doc_line)
                return
        else:
            carry = b""
        pos = 0
        for m in _SEPARATOR.finditer(data):
            if m.start() > pos:
                parts.append(data[pos:m.start()])
                size += m.start() - pos
                line += data.count(b"\n", pos, m.start())
            rest = m.group(1).strip(_GO_SPACE)
            if rest and not rest.startswith(b"#"):
                shown = rest[:60].decode("utf-8", "replace")
                yield ReadError(file, line + 1, f"invalid YAML document separator: {shown!r} (only a comment "
                                                "may follow ---)")
                return
            if parts:
                yield Piece(b"".join(parts), doc_line, True)
                parts, size = [], 0
            yield Piece(m.group(0), line, False)
            line += m.group(0).count(b"\n")
            doc_line = line
            pos = m.end()
        if pos < len(data):
            parts.append(data[pos:])
            size += len(data) - pos
            line += data.count(b"\n", pos)
            if size > MAX_DOCUMENT_BYTES:
                yield _too_big(file, doc_line)
                return
        if not block:
            break
    if parts:
        yield Piece(b"".join(parts), doc_line, True)


def _too_big(file: str, line: int) -> ReadError:
    return ReadError(file, line + 1, f"document is over the {MAX_DOCUMENT_BYTES // MIB} MiB limit; "
                                     "the rest of the input is not read")


def decode_text(data: bytes, file: str, line: int) -> str | ReadError:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = line + data[: exc.start].count(b"\n") + 1
        return ReadError(file, at, f"not UTF-8 text (byte 0x{data[exc.start]:02x})")


_FREEZE_FROM = 256 * 1024


def _settle(size: int) -> None:
    """After a large document is built, move what is alive out of the collector's sight (``gc.freeze``):
    the document is acyclic and freed by reference counting, but while it is judged every full collection
    would walk its millions of objects again (a 4 MiB List took 53 s instead of 23 s)."""
    if size >= _FREEZE_FROM:
        gc.freeze()


def yaml_document(file: str, text: str, first_line: int = 0) -> Document | ReadError | None:
    """The first YAML document of ``text`` (one piece of a stream) decoded as kubectl decodes it; ``None``
    for an empty or ``null`` document. An error here ends the stream (kubectl stops reading the file)."""
    loader = Loader(text)
    collecting = gc.isenabled()
    gc.disable()  # millions of new, acyclic objects: each full collection would walk them all again
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
        if collecting:
            _settle(len(text))
            gc.enable()
    if obj is None:
        return None
    return Document(file, first_line + node.start_mark.line + 1, obj, node, first_line=first_line)


def not_an_object(doc: Document) -> ReadError | None:
    """kubectl refuses a document that is not an object (it has no apiVersion and kind to read)."""
    if isinstance(doc.obj, dict):
        return None
    what = "a list" if isinstance(doc.obj, list) else {
        "bool": "a boolean", "int": "a number", "float": "a number"}.get(_type_name(doc.obj), "a string")
    return ReadError(doc.file, doc.line, f"document is {what}, not an object")


_JSON_SPACE = re.compile(r"[ \t\r\n]*")


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
            obj, end = _json_value(text, pos)
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


def _json_value(text: str, pos: int) -> tuple[Any, int]:
    collecting = gc.isenabled()
    gc.disable()
    try:
        obj, end = _JSON.raw_decode(text, pos)
    finally:
        if collecting:
            gc.enable()
    if collecting:
        _settle(end - pos)
    return obj, end


def _after_whitespace_line(text: str, pos: int) -> int:
    """apimachinery's ``consumeWhitespace``: skip spaces up to and including the first newline."""
    while pos < len(text) and text[pos].isspace():
        pos += 1
        if text[pos - 1] == "\n":
            break
    return pos


def stream_documents(file: str, stream: IO[bytes]) -> Iterator[Document | ReadError]:
    """Every document of a byte stream, as ``kubectl apply -f`` reads it."""
    head = stream.read(_BLOCK)
    start = len(head) - len(head.lstrip(_GO_SPACE))
    if head[start:start + 1] == b"{":
        rest = stream.read(MAX_DOCUMENT_BYTES + 1 - len(head)) if len(head) == _BLOCK else b""
        data = head + rest
        if len(data) > MAX_DOCUMENT_BYTES:
            yield ReadError(file, 1, f"JSON input over the {MAX_DOCUMENT_BYTES // MIB} MiB limit; not read")
            return
        text = decode_text(data, file, 0)
        if isinstance(text, ReadError):
            yield text
            return
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
        tail = io.BytesIO(text[yaml_from.offset:].encode("utf-8"))
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
            return
        if not piece.document:
            continue
        text = decode_text(piece.data, file, piece.line)
        if isinstance(text, ReadError):
            yield text
            return
        doc = yaml_document(file, text, piece.line)
        if doc is None:
            continue
        if isinstance(doc, ReadError):
            yield doc
            return
        bad = not_an_object(doc)
        yield doc if bad is None else bad


def read_documents(file: str) -> Iterator[Document | ReadError]:
    """Every document in ``file`` (``-`` for stdin), read as kubectl reads it."""
    stream = open_manifest(file)
    if isinstance(stream, ReadError):
        yield stream
        return
    try:
        yield from stream_documents(file, stream)
    except OSError as exc:
        yield ReadError(file, 0, f"cannot read: {exc.strerror or exc}")
    finally:
        if file != STDIN:
            stream.close()


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
