"""The machinery of the declarative configuration schema (the schema itself is in ``config.py``).

A ``Setting`` is one key: its type (a ``Kind``), default, help and, for the admission policies, whether it is
a parameter. A ``Section`` is a mapping of settings built into a dataclass. From this one tree come the
parser (``Section.parse``), the policies' parameters (``Section.params``) and, rendered outside the core by
``webhook.policies.schema``, the chart's JSON Schema, its Helm pipelines and the configuration table of
docs/contract.md, so a default or a choice is written once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.names import DNS1123_LABEL, DNS1123_SUBDOMAIN, MAX_LABEL, MAX_SUBDOMAIN
from webhook.core.quantity import QuantityError, quantity_from_value


class ConfigError(ValueError):
    """A configuration problem; the message starts with the dotted key."""


def snake(name: str) -> str:
    """``fractionalCPUContainers`` -> ``fractional_cpu_containers``: the dataclass field a key fills."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _type_name(raw: Any) -> str:
    return type(raw).__name__


# ------------------------------------------------------------------------------------------------ kinds

class Kind:
    """How one key's values are read, checked and shown. Subclasses fill in each form."""

    def parse(self, raw: Any, key: str) -> Any:
        raise NotImplementedError

    def text(self, value: Any) -> str:
        """The value in the policies' parameters ConfigMap (a string: ConfigMap data is text)."""
        return str(value)

    def cel(self, text: str) -> str:
        """CEL turning the parameter's text (a CEL string expression) back into a typed value."""
        return text

    def document(self, value: Any) -> Any:
        """The value as it is written in a YAML configuration file."""
        return value


@dataclass(frozen=True)
class Names(Kind):
    """A list of non-empty strings (container names, namespaces, user names); order and repeats do not count."""

    def parse(self, raw: Any, key: str) -> frozenset[str]:
        if not isinstance(raw, list) or not all(isinstance(x, str) and x for x in raw):
            raise ConfigError(f"{key}: expected a list of non-empty strings")
        return frozenset(raw)

    def text(self, value: Any) -> str:
        return "\n".join(sorted(value))  # one item a line

    def cel(self, text: str) -> str:
        return f"{text}.split('\\n').filter(s, s != '')"

    def document(self, value: Any) -> Any:
        return sorted(value)


@dataclass(frozen=True)
class Choice(Kind):
    choices: tuple[str, ...]

    def parse(self, raw: Any, key: str) -> str:
        if raw not in self.choices:
            raise ConfigError(f"{key}: {raw!r} is not one of {', '.join(self.choices)}")
        return str(raw)

@dataclass(frozen=True)
class Flag(Kind):
    def parse(self, raw: Any, key: str) -> bool:
        if not isinstance(raw, bool):
            raise ConfigError(f"{key}: expected true or false, got {raw!r}")
        return raw

    def text(self, value: Any) -> str:
        return "true" if value else "false"

    def cel(self, text: str) -> str:
        return f"{text} == 'true'"

@dataclass(frozen=True)
class Count(Kind):
    """A whole number at least ``minimum``."""

    minimum: int

    def parse(self, raw: Any, key: str) -> int:
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < self.minimum:
            raise ConfigError(f"{key}: expected a whole number >= {self.minimum}, got {raw!r}")
        return raw

    def cel(self, text: str) -> str:
        return f"int({text})"


@dataclass(frozen=True)
class Name(Kind):
    """One object name, a DNS-1123 subdomain as the API server checks it (``schedulerName``); null: not set."""

    def parse(self, raw: Any, key: str) -> str:
        if not isinstance(raw, str) or len(raw) > MAX_SUBDOMAIN or not DNS1123_SUBDOMAIN.fullmatch(raw):
            shown = repr(raw)[:80]
            raise ConfigError(f"{key}: {shown} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', "
                              "at most 253 characters), as the API server requires of this name")
        return raw


@dataclass(frozen=True)
class Label(Kind):
    """One DNS-1123 label, as the API server checks a namespace's name (``policy.kserveNamespace``)."""

    def parse(self, raw: Any, key: str) -> str:
        if not isinstance(raw, str) or len(raw) > MAX_LABEL or not DNS1123_LABEL.fullmatch(raw):
            raise ConfigError(f"{key}: {repr(raw)[:80]} is not a namespace: a namespace must be a DNS-1123 label "
                              "(lowercase letters, digits and '-', starting and ending with a letter or digit, at "
                              "most 63 characters)")
        return raw


@dataclass(frozen=True)
class Amount(Kind):
    """A positive Kubernetes quantity (``32``, ``240Gi``, ``2000m``), kept in milli-units."""

    def parse(self, raw: Any, key: str) -> int:
        try:
            q = quantity_from_value(raw)
        except QuantityError as exc:
            raise ConfigError(f"{key}: {raw!r} is not a Kubernetes quantity ({exc})") from None
        if q.milli <= 0:
            raise ConfigError(f"{key}: must be greater than zero")
        return q.milli

@dataclass(frozen=True)
class Amounts(Kind):
    """A mapping of resource name to a positive quantity (``nvidia.com/gpu: 4``)."""

    def parse(self, raw: Any, key: str) -> dict[str, int]:
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{key}: expected a mapping of resource name to amount")
        return {str(k): Amount().parse(v, f"{key}.{k}") for k, v in raw.items()}

# ------------------------------------------------------------------------------------------------ tree

@dataclass(frozen=True)
class Setting:
    """One key. ``param``: the admission policies read it from their parameters ConfigMap."""

    name: str
    kind: Kind
    default: Any
    help: str
    param: bool = True


@dataclass(frozen=True)
class Section:
    """A mapping of keys built into ``build`` (a dataclass whose fields are the keys in snake case).

    ``nullable``: absent or null means ``None`` rather than the defaults (``policy.numa``); ``require_any``
    names the keys of which one at least must be set (a mapping must not be empty). ``literal``: a word
    accepted in place of the mapping (``policy.numa: auto``), parsed as ``literal_value``.
    """

    name: str
    build: Callable[..., Any]
    children: tuple[Setting | Section, ...]
    help: str = ""
    nullable: bool = False
    require_any: tuple[str, ...] = ()
    literal: str = ""
    literal_value: Any = None

    @property
    def default(self) -> Any:
        return None if self.nullable else self.build()

    def parse(self, raw: Any, key: str = "") -> Any:
        """Validate a decoded YAML mapping; ``None`` is the defaults (or ``None`` for a nullable section)."""
        if raw is None:
            return self.default
        if self.literal and raw == self.literal:
            return self.literal_value
        if not isinstance(raw, Mapping):
            also = f" or {self.literal!r}" if self.literal else ""
            raise ConfigError(f"{key or 'configuration'}: expected a mapping{also}, got {_type_name(raw)}")
        known = {c.name: c for c in self.children}
        for name in raw:
            if name not in known:
                where = f"{key}.{name}" if key else str(name)
                raise ConfigError(f"{where}: unknown key (known: {', '.join(sorted(known))})")
        if self.require_any and not any(raw.get(name) for name in self.require_any):
            raise ConfigError(f"{key}: set at least one of {_either(self.require_any)}")
        values: dict[str, Any] = {}
        for child in self.children:
            where = f"{key}.{child.name}" if key else child.name
            value = raw.get(child.name)
            if isinstance(child, Section):
                values[snake(child.name)] = child.parse(value, where)
            else:
                values[snake(child.name)] = child.default if value is None else child.kind.parse(value, where)
        return self.build(**values)

    def settings(self, key: str = "") -> Iterator[tuple[str, Setting]]:
        """Every leaf key under this section, dotted, in order."""
        for child in self.children:
            where = f"{key}.{child.name}" if key else child.name
            if isinstance(child, Section):
                yield from child.settings(where)
            else:
                yield where, child

    def key_of(self, setting: Setting) -> str:
        """The dotted key of ``setting`` (the object itself, placed once in the tree)."""
        return next(key for key, s in self.settings() if s is setting)

    def find(self, key: str) -> Setting | Section:
        """The setting or section at the dotted ``key``."""
        node: Setting | Section = self
        for part in key.split("."):
            found = next((c for c in node.children if c.name == part), None) if isinstance(node, Section) else None
            if found is None:
                raise KeyError(key)
            node = found
        return node

    def value(self, config: Any, key: str) -> Any:
        """The value of ``key`` in a built configuration."""
        for part in key.split("."):
            config = getattr(config, snake(part))
        return config

    def params(self, config: Any) -> dict[str, str]:
        """The policies' parameters: each parameter key with its value as text."""
        return {key: s.kind.text(self.value(config, key)) for key, s in self.settings() if s.param}

    def document(self) -> dict[str, Any]:
        """The defaults as a YAML configuration file writes them."""
        out: dict[str, Any] = {}
        for child in self.children:
            if isinstance(child, Section):
                out[child.name] = None if child.nullable else child.document()
            else:
                out[child.name] = child.kind.document(child.default)
        return out

def _either(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
