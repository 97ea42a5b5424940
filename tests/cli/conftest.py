"""Run the real ``qos-guard`` command in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MANIFESTS = FIXTURES / "manifests"
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def qos_guard() -> Run:
    def run(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "webhook.cli", *args], input=stdin, capture_output=True,
                              text=True, cwd=cwd, timeout=300, check=False)
    return run
