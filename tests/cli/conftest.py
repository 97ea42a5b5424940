"""Run the ``qos-guard`` command: in process (``tests/inprocess.py``), as a subprocess would see it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import inprocess

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MANIFESTS = FIXTURES / "manifests"
# The vendored corpus is always there; a larger one is used in addition where it stands beside the repository.
CORPUS = FIXTURES.parent / "corpus"
_EXTRA = Path(os.environ.get("QOS_GUARD_EXTRA_CORPUS") or FIXTURES.parents[2] / "shared" / "corpus")
# The larger one is the slow tier's (make test), so make test-fast stays under a minute wherever it is present.
CORPORA = [pytest.param(CORPUS, id="vendored")] + (
    [pytest.param(_EXTRA, id="extra", marks=pytest.mark.slow)] if _EXTRA.is_dir() else [])

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def qos_guard() -> Run:
    def run(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return inprocess.run(args, stdin=stdin, cwd=cwd)
    return run


def refused(out: subprocess.CompletedProcess[str], *words: str) -> None:
    """A refusal as the contract has it: exit 2, one ``qos-guard: `` message naming each of ``words``, no
    traceback."""
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr and out.stderr.startswith("qos-guard: "), out.stderr
    for word in words:
        assert word in out.stderr, (word, out.stderr)


# A Pod whose one finding `fix` mends (its CPU request raised to its limit), with a comment `fix` keeps.
LIMIT_ABOVE_REQUEST = """apiVersion: v1
kind: Pod   # kept
metadata: {name: p}
spec:
  containers:
    - name: a
      resources:
        requests: {cpu: "1", memory: 1Gi}
        limits: {cpu: "2", memory: 1Gi}   # a limit above its request
"""
