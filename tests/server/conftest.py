"""A real ``qos-guard serve`` (gunicorn, TLS) on free loopback ports, verified against its CA."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import admission_review
from tests.serving import Server, free_port, start_server

__all__ = ["Server", "free_port", "review", "start_server"]

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "admission-review.json").read_text())


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("serve")
    cfg = folder / "config.yaml"
    folder.mkdir(exist_ok=True)
    cfg.write_text("exemptions:\n  namespaces: [exempt-ns]\n  usernames: [system:admin]\n"
                   "  runtimeClassNames: [kata]\n")
    srv = start_server(folder, "--config", str(cfg))
    yield srv
    srv.stop()


review = admission_review  # the one builder (tests/helpers.py), under the name these tests use
