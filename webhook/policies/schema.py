"""The configuration schema (``webhook.core.config.SCHEMA``) in the chart's and the docs' forms: the values
JSON Schema, the Helm pipelines of the policies' parameters ConfigMap and the rows of docs/contract.md's
configuration table. Output formats, so out of the pure core: the core reads and checks a configuration, this
module shows it (``hack/generate.py`` writes what it renders).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from webhook.core.config import KubeVersion, Workloads
from webhook.core.kubeversion import NEWEST, OLDEST
from webhook.core.settings import Amount, Amounts, Choice, Count, Flag, Kind, Label, Name, Names, Section, Setting

# resource.ParseQuantity's grammar for a positive value (the server checks the rest, e.g. a zero in "0.0").
_POSITIVE_QUANTITY = (r"^\+?([0-9]*[1-9][0-9]*(\.[0-9]*)?|[0-9]*\.[0-9]*[1-9][0-9]*)"
                      r"(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")


def _workloads_schema(kind: Workloads) -> dict[str, Any]:
    """A declared kind: group, version, kind, plural and its template paths (or {path, name})."""
    path = {"type": "string", "minLength": 1}
    return {"type": "array", "items": {
        "type": "object", "additionalProperties": False, "required": list(kind.FIELDS),
        "properties": {
            "group": {"type": "string", "minLength": 1}, "version": {"type": "string", "minLength": 1},
            "kind": {"type": "string", "minLength": 1}, "plural": {"type": "string", "minLength": 1},
            "templates": {"type": "array", "minItems": 1, "items": {"oneOf": [path, {
                "type": "object", "additionalProperties": False, "required": ["path"],
                "properties": {"path": path, "name": {"type": "string", "minLength": 1}}}]}}}}}


def kind_schema(kind: Kind) -> dict[str, Any]:
    """JSON Schema (draft 7) of one key's values, accepting what ``kind.parse`` accepts."""
    if isinstance(kind, Names):
        return {"type": "array", "items": {"type": "string", "minLength": 1}}
    if isinstance(kind, Choice):
        return {"type": "string", "enum": list(kind.choices)}
    if isinstance(kind, Flag):
        return {"type": "boolean"}
    if isinstance(kind, Count):
        return {"type": "integer", "minimum": kind.minimum}
    if isinstance(kind, Name):  # null (the default) is not set
        return {"type": ["string", "null"], "maxLength": 253,
                "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"}
    if isinstance(kind, Label):  # a namespace's name, as the API server checks it
        return {"type": "string", "maxLength": 63, "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}
    if isinstance(kind, Amount):
        return {"oneOf": [{"type": "number", "exclusiveMinimum": 0},
                          {"type": "string", "pattern": _POSITIVE_QUANTITY}]}
    if isinstance(kind, Amounts):
        return {"type": "object", "additionalProperties": kind_schema(Amount())}
    if isinstance(kind, Workloads):
        return _workloads_schema(kind)
    if isinstance(kind, KubeVersion):  # null (the default): the API server's own
        return {"type": ["string", "null"], "pattern": r"^v?1\.[0-9]+(\.[0-9]+)?$"}
    raise TypeError(f"no JSON Schema for {type(kind).__name__}")


def json_schema(section: Section, top: bool = True) -> dict[str, Any]:
    """JSON Schema (draft 7) accepting what ``section.parse`` accepts (bar null values, which Helm drops)."""
    props: dict[str, Any] = {}
    for child in section.children:
        props[child.name] = json_schema(child, top=False) if isinstance(child, Section) else kind_schema(child.kind)
    body: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": props}
    if section.require_any:
        body["anyOf"] = []
        for name in section.require_any:
            need: dict[str, Any] = {"required": [name]}
            found = next(c for c in section.children if c.name == name)
            if isinstance(found, Setting) and kind_schema(found.kind).get("type") == "object":
                need["properties"] = {name: {"minProperties": 1}}
            body["anyOf"].append(need)
    if top:
        return body
    forms = [body, {"type": "string", "enum": [section.literal]}] if section.literal else [body]
    if section.nullable or section.literal:
        return {"oneOf": [{"type": "null"}, *forms]}
    return {**body, "type": ["object", "null"]}


def helm(kind: Kind, ref: str, default: Any) -> str:
    """A Helm pipeline rendering ``ref`` (a values path) as ``kind.text`` does, ``default`` when unset."""
    if isinstance(kind, Names):
        return f'{ref} | default list | uniq | sortAlpha | join "\\n" | quote'
    if isinstance(kind, Flag):
        other = kind.text(not default)
        return f'ternary "{other}" "{kind.text(default)}" (eq (toString {ref}) "{other}") | quote'
    if isinstance(kind, Count):
        return f"{ref} | default {default} | toString | quote"
    if isinstance(kind, KubeVersion):  # unset: the cluster's own minor, as the API server it installs into says
        return (f'{ref} | default (printf "%s.%s" $.Capabilities.KubeVersion.Major '
                f'($.Capabilities.KubeVersion.Minor | trimSuffix "+")) | toString | quote')
    return f"{ref} | default {json.dumps(kind.text(default))} | quote"


def described(kind: Kind) -> str:
    """What a value looks like, for the docs' table (Markdown: ``|`` escaped)."""
    if isinstance(kind, Names):
        return "list of names"
    if isinstance(kind, Choice):
        return " \\| ".join(kind.choices)
    if isinstance(kind, Flag):
        return "true \\| false"
    if isinstance(kind, Count):
        return f"whole number >= {kind.minimum}"
    if isinstance(kind, Name):
        return "DNS-1123 subdomain or null"
    if isinstance(kind, Label):
        return "namespace (DNS-1123 label)"
    if isinstance(kind, Amount):
        return "quantity > 0"
    if isinstance(kind, Amounts):
        return "resource name: quantity > 0"
    if isinstance(kind, Workloads):
        return "list of {group, version, kind, plural, templates}"
    if isinstance(kind, KubeVersion):
        return f"{OLDEST} to {NEWEST}, or null"
    raise TypeError(f"no description for {type(kind).__name__}")


def rows(section: Section, key: str = "") -> Iterator[tuple[str, str, str, str]]:
    """(key, values, default, help) per documented key, for the docs' table."""
    for child in section.children:
        where = f"{key}.{child.name}" if key else child.name
        if isinstance(child, Section):
            if child.help:
                forms = "mapping" + (f", {child.literal}" if child.literal else "")
                yield where, f"{forms} or null" if child.nullable else forms, "null", child.help
            yield from rows(child, where)
        else:
            value = child.kind.document(child.default)
            shown = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))
            yield where, described(child.kind), shown, child.help
