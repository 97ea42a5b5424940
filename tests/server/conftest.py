"""A real ``qos-guard serve`` (gunicorn, TLS) on free loopback ports, verified against its CA."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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


def review(obj: dict[str, Any], kind: str = "Pod", operation: str = "CREATE", api: str = "admission.k8s.io/v1",
           namespace: str = "inference", subresource: str | None = None, dry_run: bool = False,
           username: str = "alice", uid: str = "uid-1") -> dict[str, Any]:
    body = copy.deepcopy(EXAMPLE)
    body["apiVersion"] = api
    req = body["request"]
    req.update({"uid": uid, "kind": {"group": "", "version": "v1", "kind": kind}, "operation": operation,
                "namespace": namespace, "dryRun": dry_run, "object": obj, "userInfo": {"username": username}})
    if subresource:
        req["subResource"] = subresource
    return body
