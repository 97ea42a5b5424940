"""``helm`` (a real binary) rendering ``charts/qos-guard``; objects come back parsed."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.binaries import binary

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "qos-guard"

Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def helm() -> str:
    return binary("helm")


def run_helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="session")
def render(helm: str) -> Render:
    def _render(*args: str, namespace: str = "qos-guard", release: str = "qos-guard") -> list[dict[str, Any]]:
        proc = run_helm(helm, "template", release, str(CHART), "--namespace", namespace, *args)
        assert proc.returncode == 0, proc.stderr
        return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
    return _render


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]
