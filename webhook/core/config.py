"""The YAML configuration (SPEC §4): defaults, strict validation, errors that name the key.

Validated once at start-up; an unknown key or a bad value is a ``ConfigError`` and the program stops
with exit code 2 rather than run with a policy nobody wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webhook.core.quantity import QuantityError, quantity_from_value


class ConfigError(ValueError):
    """A configuration problem; the message starts with the dotted key."""


@dataclass(frozen=True)
class NumaPolicy:
    """One NUMA node's capacity, in milli-units, and whether containers or whole Pods must fit in it."""

    scope: str = "container"
    cpus: int | None = None
    memory: int | None = None
    devices: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Policy:
    fractional_cpu_containers: frozenset[str] = frozenset()
    pod_level_resources: str = "deny"
    smt_alignment: int = 1
    numa: NumaPolicy | None = None


@dataclass(frozen=True)
class MutationPolicy:
    set_limits_from_requests: bool = True
    cpu_rounding: str = "none"


@dataclass(frozen=True)
class Exemptions:
    namespaces: frozenset[str] = frozenset()
    usernames: frozenset[str] = frozenset()
    runtime_class_names: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Config:
    policy: Policy = field(default_factory=Policy)
    mutation: MutationPolicy = field(default_factory=MutationPolicy)
    exemptions: Exemptions = field(default_factory=Exemptions)


def _section(raw: Any, key: str, allowed: set[str]) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{key or 'configuration'}: expected a mapping, got {type(raw).__name__}")
    for name in raw:
        if name not in allowed:
            where = f"{key}.{name}" if key else str(name)
            raise ConfigError(f"{where}: unknown key (known: {', '.join(sorted(allowed))})")
    return raw


def _strings(raw: Any, key: str) -> frozenset[str]:
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or not all(isinstance(x, str) and x for x in raw):
        raise ConfigError(f"{key}: expected a list of non-empty strings")
    return frozenset(raw)


def _choice(raw: Any, key: str, choices: tuple[str, ...], default: str) -> str:
    if raw is None:
        return default
    if raw not in choices:
        raise ConfigError(f"{key}: {raw!r} is not one of {', '.join(choices)}")
    return str(raw)


def _bool(raw: Any, key: str, default: bool) -> bool:
    if raw is None:
        return default
    if not isinstance(raw, bool):
        raise ConfigError(f"{key}: expected true or false, got {raw!r}")
    return raw


def _positive_milli(raw: Any, key: str) -> int:
    try:
        q = quantity_from_value(raw)
    except QuantityError as exc:
        raise ConfigError(f"{key}: {raw!r} is not a Kubernetes quantity ({exc})") from None
    if q.milli <= 0:
        raise ConfigError(f"{key}: must be greater than zero")
    return q.milli


def _numa(raw: Any) -> NumaPolicy | None:
    if raw is None:
        return None
    numa = _section(raw, "policy.numa", {"scope", "cpus", "memory", "devices"})
    scope = _choice(numa.get("scope"), "policy.numa.scope", ("container", "pod"), "container")
    cpus = _positive_milli(numa["cpus"], "policy.numa.cpus") if numa.get("cpus") is not None else None
    memory = _positive_milli(numa["memory"], "policy.numa.memory") if numa.get("memory") is not None else None
    devices_raw = numa.get("devices") or {}
    if not isinstance(devices_raw, Mapping):
        raise ConfigError("policy.numa.devices: expected a mapping of resource name to amount")
    devices = {str(k): _positive_milli(v, f"policy.numa.devices.{k}") for k, v in devices_raw.items()}
    if cpus is None and memory is None and not devices:
        raise ConfigError("policy.numa: set at least one of cpus, memory or devices")
    return NumaPolicy(scope=scope, cpus=cpus, memory=memory, devices=devices)


def _smt(raw: Any) -> int:
    if raw is None:
        return 1
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise ConfigError(f"policy.smtAlignment: expected a whole number >= 1, got {raw!r}")
    return raw


def parse_config(raw: Any) -> Config:
    """Validate a decoded YAML document; ``None`` (an empty file) is the default configuration."""
    top = _section(raw, "", {"policy", "mutation", "exemptions"})
    pol = _section(top.get("policy"), "policy",
                   {"fractionalCPUContainers", "podLevelResources", "smtAlignment", "numa"})
    mut = _section(top.get("mutation"), "mutation", {"setLimitsFromRequests", "cpuRounding"})
    exe = _section(top.get("exemptions"), "exemptions", {"namespaces", "usernames", "runtimeClassNames"})
    return Config(
        policy=Policy(
            fractional_cpu_containers=_strings(pol.get("fractionalCPUContainers"),
                                               "policy.fractionalCPUContainers"),
            pod_level_resources=_choice(pol.get("podLevelResources"), "policy.podLevelResources",
                                        ("deny", "allow"), "deny"),
            smt_alignment=_smt(pol.get("smtAlignment")),
            numa=_numa(pol.get("numa")),
        ),
        mutation=MutationPolicy(
            set_limits_from_requests=_bool(mut.get("setLimitsFromRequests"),
                                           "mutation.setLimitsFromRequests", True),
            cpu_rounding=_choice(mut.get("cpuRounding"), "mutation.cpuRounding", ("none", "up"), "none"),
        ),
        exemptions=Exemptions(
            namespaces=_strings(exe.get("namespaces"), "exemptions.namespaces"),
            usernames=_strings(exe.get("usernames"), "exemptions.usernames"),
            runtime_class_names=_strings(exe.get("runtimeClassNames"), "exemptions.runtimeClassNames"),
        ),
    )


def load_config(path: str | Path | None) -> Config:
    """Read and validate the file at ``path``; no path means the defaults."""
    if path is None:
        return Config()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    try:
        return parse_config(raw)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
