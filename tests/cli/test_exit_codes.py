"""One exit code per run, whatever happens to stdout: a reader that closes the pipe early (``| head -1`` in CI)
never turns violations into success."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from webhook.core.outcome import ExitCode, fold

BAD = """apiVersion: v1
kind: Pod
metadata: {{name: bad-{i}}}
spec:
  containers:
  - name: app
    image: x
    resources: {{requests: {{cpu: 500m, memory: 1Gi}}, limits: {{cpu: 500m, memory: 1Gi}}}}
"""
GOOD = """apiVersion: v1
kind: Pod
metadata: {name: good}
spec:
  containers:
  - name: app
    image: x
    resources: {limits: {cpu: "2", memory: 1Gi}}
"""


def run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess[bytes]:
    """``qos-guard ARGS | head -0``, without the race: the reading end is closed before the command starts."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "webhook.cli", *args], stdout=write, stderr=subprocess.PIPE,
                              timeout=120, check=False)
    finally:
        os.close(write)


@pytest.mark.parametrize("objects", [1, 400], ids=["one-line", "more-than-a-pipe-buffer"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_closed_pipe_keeps_the_exit_code_the_violations_earned(tmp_path: Path, objects: int, fmt: str) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text("---\n".join(BAD.format(i=i) for i in range(objects)))
    done = run_into_closed_pipe("check", "--format", fmt, str(manifest))
    assert done.returncode == ExitCode.VIOLATIONS, done.stderr.decode()
    assert b"Traceback" not in done.stderr and b"Exception ignored" not in done.stderr


def test_a_closed_pipe_after_a_clean_run_is_still_success(tmp_path: Path) -> None:
    manifest = tmp_path / "good.yaml"
    manifest.write_text(GOOD)
    done = run_into_closed_pipe("check", "--format", "json", str(manifest))
    assert done.returncode == ExitCode.OK, done.stderr.decode()


def test_an_unreadable_input_under_a_closed_pipe_is_still_an_error(tmp_path: Path) -> None:
    done = run_into_closed_pipe("check", str(tmp_path / "missing.yaml"))
    assert done.returncode == ExitCode.USAGE, done.stderr.decode()


def test_violations_outrank_errors_and_errors_outrank_success() -> None:
    assert fold(violations=True, errors=True) is ExitCode.VIOLATIONS
    assert fold(violations=False, errors=True) is ExitCode.USAGE
    assert fold(violations=False, errors=False) is ExitCode.OK
    assert [int(c) for c in ExitCode] == [0, 1, 2]
