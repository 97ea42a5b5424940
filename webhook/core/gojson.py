"""Go's ``encoding/json`` ``Unmarshal`` of a JSON text into a struct, for what Go programs read from a ConfigMap's
JSON values (KServe's ``inferenceservice-config``). Python's ``json.loads`` differs where it matters:

- a key fills the field whose JSON name it equals, else one it equals ignoring case (``bytes.EqualFold``: ASCII
  letters, and the Kelvin sign and long s that fold to ``k`` and ``s``): ``"CPUREQUEST"`` fills ``cpuRequest``;
- the keys are read in order, so of two that fill the same field the last wins (``{"cpuRequest": "1",
  "CpuRequest": "2"}`` gives "2"), and a nested struct met twice is decoded into the one already there;
- ``null`` leaves a value field as it was and clears a pointer, slice or map; a top-level ``null`` into a
  pointer (KServe passes ``&config``, a pointer to a pointer) clears the pointer itself;
- a value of another JSON type is an error (``UnmarshalTypeError``), reported after the rest is decoded; keys of
  no field are ignored; ``NaN`` and ``Infinity`` are not JSON;
- nesting deeper than 10000 arrays and objects is a syntax error (``scanner.go`` ``maxNestingDepth``); Python's
  parser stops far sooner (its recursion limit): a text between the two is ``TooDeep``, not known, never refused.

CR fields need none of this: the API server prunes unknown keys case-sensitively (structural schemas) and
apimachinery decodes case-sensitively (``sigs.k8s.io/json`` ``UnmarshalCaseSensitivePreserveInts``)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

# A Go type: "string", "bool", "int" (64 bits), "int64", "int32" (a pointer: "*string", "*int", ...), "[]string",
# "map[string]string", "any" (decoded, never a type error here), or a Struct.
GoType = Union[str, "Struct"]

_KELVIN, _LONG_S = "\u212a", "\u017f"
MAX_DEPTH = 10000  # encoding/json scanner.go maxNestingDepth
# A JSON string (unterminated to the end), or a bracket: what the depth scan steps over or counts.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


@dataclass(frozen=True)
class Struct:
    """A Go struct: each field's JSON name and its Go type; ``pointer``: reached through a pointer (null clears
    it)."""

    fields: Mapping[str, GoType] = field(default_factory=dict)
    pointer: bool = False


class GoJSONError(ValueError):
    """What ``json.Unmarshal`` returns: a syntax error, or the first value of the wrong type (with its key)."""


class TooDeep(Exception):
    """A JSON text nested deeper than Python's parser goes here but no deeper than Go's reads: what Go makes of
    it is not known (an answer, not a refusal)."""


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its key/value pairs in order (duplicates kept)."""


def fold(name: str) -> str:
    """``name`` folded as Go's ``bytes.EqualFold`` compares it with an ASCII field name: ASCII lowered, the Kelvin
    sign and long s as the ``k`` and ``s`` they fold to; any other character kept (it matches no ASCII one)."""
    return "".join("k" if c == _KELVIN else "s" if c == _LONG_S else c.lower() if c.isascii() else c for c in name)


def field_for(key: str, names: Mapping[str, Any]) -> str | None:
    """The field a JSON key fills: the one of that exact name, else one equal ignoring case, else None."""
    if key in names:
        return key
    folded = fold(key)
    return next((n for n in names if fold(n) == folded), None)


def _reject(constant: str) -> Any:
    raise GoJSONError(f"invalid character in JSON value {constant}")


def _parse(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_Pairs, parse_constant=_reject)
    except GoJSONError:
        raise
    except ValueError as bad:
        raise GoJSONError(f"not JSON: {bad}") from None


def past_max_depth(text: str) -> str | None:
    """The bracket at which Go's scanner exceeds ``MAX_DEPTH`` nested arrays and objects in ``text``, or None.
    Exact for valid JSON (for invalid JSON Go fails whatever this says); iterative: any depth."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return None
    level = 0
    for token in _TOKENS.finditer(text):
        c = token.group()
        if c in "[{":
            level += 1
            if level > MAX_DEPTH:
                return c
        elif c in "]}":
            level -= 1
    return None


def _kind(value: Any) -> str:
    if isinstance(value, _Pairs):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "string"


def _plain(value: Any) -> Any:
    if isinstance(value, _Pairs):
        return {k: _plain(v) for k, v in value}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _decode(value: Any, kind: GoType, before: Any, where: str, errors: list[str]) -> tuple[bool, Any]:
    """(set, value): what ``value`` leaves in a field of Go type ``kind`` that held ``before``."""
    if value is None:
        pointer = (isinstance(kind, Struct) and kind.pointer) or (isinstance(kind, str) and kind[:1] in "*[m")
        return (False, None) if pointer else (before is not None, before)
    if isinstance(kind, Struct):
        if not isinstance(value, _Pairs):
            errors.append(f"cannot unmarshal {_kind(value)} into {where} (a struct)")
            return before is not None, before
        return True, _struct(value, kind, before if isinstance(before, dict) else {}, where, errors)
    base = kind.lstrip("*")
    ok = {"string": isinstance(value, str), "bool": isinstance(value, bool),
          "int": isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63,
          "int64": isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63,
          "int32": isinstance(value, int) and not isinstance(value, bool) and -2**31 <= value < 2**31,
          "[]string": isinstance(value, list) and not isinstance(value, _Pairs)
          and all(v is None or isinstance(v, str) for v in value),
          "map[string]string": isinstance(value, _Pairs) and all(v is None or isinstance(v, str) for _, v in value),
          "any": True}[base]
    if not ok:
        errors.append(f"cannot unmarshal {_kind(value)} into {where} of type {base}")
        return before is not None, before
    return True, _plain(value)


def _struct(pairs: _Pairs, struct: Struct, into: dict[str, Any], where: str, errors: list[str]) -> dict[str, Any]:
    out = dict(into)
    for key, value in pairs:
        name = field_for(key, struct.fields)
        if name is None:
            continue
        at = f"{where}.{name}" if where else name
        present, decoded = _decode(value, struct.fields[name], out.get(name), at, errors)
        if present:
            out[name] = decoded
        else:
            out.pop(name, None)
    return out


def copied(value: Any) -> Any:
    """A decoded value's own copy (its dicts and lists new): what a caller changes is never a kept value's."""
    if isinstance(value, dict):
        return {k: copied(v) for k, v in value.items()}
    return [copied(v) for v in value] if isinstance(value, list) else value


def unmarshal(text: str, struct: Struct) -> dict[str, Any] | None:
    """``json.Unmarshal([]byte(text), &v)`` for ``v`` of this struct (a pointer when ``struct.pointer``): the
    fields it sets, by their JSON names (nested structs as dicts); None where a top-level ``null`` clears the
    pointer. Raises ``GoJSONError`` where Go returns an error, ``TooDeep`` where Go's answer is not known."""
    if (bracket := past_max_depth(text)) is not None:
        raise GoJSONError(f"invalid character '{bracket}' exceeded max depth")
    try:
        return _unmarshal(text, struct)
    except RecursionError:
        raise TooDeep(f"nested too deeply for qos-guard to read (Go reads up to {MAX_DEPTH} levels)") from None


def _unmarshal(text: str, struct: Struct) -> dict[str, Any] | None:
    value = _parse(text)
    if value is None:
        if struct.pointer:
            return None
        return {}
    if not isinstance(value, _Pairs):
        raise GoJSONError(f"cannot unmarshal {_kind(value)} into a struct")
    errors: list[str] = []
    out = _struct(value, struct, {}, "", errors)
    if errors:
        raise GoJSONError(errors[0])
    return out


__all__ = ["MAX_DEPTH", "GoJSONError", "GoType", "Struct", "TooDeep", "copied", "field_for", "fold",
           "past_max_depth", "unmarshal"]
