"""The configuration file: read as manifests are (``read_documents``: kubectl's go-yaml v2 reading, the same
size bound and file checks), validated by the core's schema (``parse_config``). One reader, so a value means in
``--config`` what it means in a manifest: ``on``, ``0x10``, a repeated key or a tab read alike (PyYAML read
the file before, with its own answers to each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from webhook.core.config import Config, ConfigError, parse_config
from webhook.manifests.reader import ReadError, read_documents


def load_config(path: str | Path | None) -> Config:
    """Read and validate the file at ``path``; no path means the defaults (so does an empty file)."""
    if path is None:
        return Config()
    documents: list[Any] = []
    for doc in read_documents(str(path)):
        if isinstance(doc, ReadError):
            if not doc.line:  # the file itself: missing, unreadable, not a regular file
                raise ConfigError(f"cannot read config file {path}: {doc.message}")
            what = f"not valid YAML: {doc.message}" if doc.message.startswith(("YAML", "JSON")) else doc.message
            raise ConfigError(f"{path}:{doc.line}: {what}")
        documents.append(doc.obj)
    if len(documents) > 1:
        raise ConfigError(f"{path}: {len(documents)} YAML documents; a configuration file holds one")
    try:
        return parse_config(documents[0] if documents else None)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
