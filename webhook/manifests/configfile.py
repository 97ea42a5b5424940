"""The configuration file: read, decoded as YAML, validated by the core's schema (``parse_config``)."""

from __future__ import annotations

from pathlib import Path

import yaml

from webhook.core.config import Config, ConfigError, parse_config


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
