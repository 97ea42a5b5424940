"""go-yaml v2 as ``sigs.k8s.io/yaml`` uses it (``resolve.go``, ``decode.go``), over libyaml's parser: how a
composed YAML node becomes the JSON value kubectl sends (``construct``).

- plain scalars resolve as go-yaml v2 does: no base-60 numbers (``1:00`` is a string), ``0o10`` and ``010``
  are 8, ``y``/``yes``/``on`` are true, ``1_000`` is 1000, timestamps stay strings, an integral float is a JSON
  integer, ``.inf`` and ``.nan`` cannot be written as JSON (an error);
- a repeated key keeps its last value; ``<<`` merges are applied where they stand, as go-yaml v2 does;
- map keys become strings as ``sigs.k8s.io/yaml`` makes them (``true``, ``1``); a null key is an error;
- excessive aliasing is refused with go-yaml's own ratio rule (``document contains excessive aliasing``).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from typing import Any

import yaml

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
    got_name = type_name(got)
    if want == "float" and got_name == "int":
        return float(got)
    if got_name != want:
        raise DecodeError(f"cannot decode !!{got_name} `{value}` as a !!{want}", line)
    return got


def type_name(value: Any) -> str:
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


def is_merge(key: yaml.Node) -> bool:
    """A ``<<`` merge key (plain, or tagged ``!!merge``)."""
    return isinstance(key, yaml.ScalarNode) and key.value == "<<" and key.tag in (PLAIN, _MERGE)


def merge_items(node: yaml.Node) -> list[tuple[int, yaml.MappingNode]]:
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
            if is_merge(key_node):
                for _, item in merge_items(value_node):
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
            if is_merge(key_node):
                self._merge(value_node, (parent, 2 * i + 1), out)
                continue
            key = self.raw(key_node, (parent, 2 * i))
            _set_key(out, key_node, key, self.value(value_node, (parent, 2 * i + 1)))

    def _merge(self, node: yaml.Node, edge: tuple[int, int], out: dict[str, Any]) -> None:
        sequence = isinstance(node, yaml.SequenceNode)
        if sequence and self._is_alias(node, edge):  # go-yaml: an alias to a list cannot be merged
            raise DecodeError("map merge requires map or sequence of maps as the value", node.start_mark.line)
        for j, item in merge_items(node):
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


def construct(node: yaml.Node, aliases_possible: bool = True) -> Any:
    """The JSON value kubectl makes of a composed document (see the module docstring). Building it takes up to
    three Python frames a level of nesting: the process raises its recursion limit once at start-up
    (``webhook.interpreter``) so that every document libyaml accepts (1,000 levels) can be built; deeper still,
    the callers turn the RecursionError into "nested too deeply"."""
    if aliases_possible:
        return _Counted().value(node, (0, 0))
    return _Fast().value(node)
