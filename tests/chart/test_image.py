"""The container image recipe. No Docker engine runs here, so the Dockerfile is checked as text and its build
context (what .dockerignore lets through) is built into a wheel, as the image's first stage does."""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _final_stage() -> list[str]:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines() if ln.strip()
             and not ln.lstrip().startswith("#")]
    last_from = max(i for i, ln in enumerate(lines) if ln.startswith("FROM "))
    return lines[last_from:]


def test_runtime_stage_is_slim_non_root_with_serve_entrypoint() -> None:
    stage = _final_stage()
    # The base is an ARG (tests/node builds a local one, no registry there); users get python:3.11-slim.
    assert stage[0] == "FROM ${BASE_IMAGE}"
    args = [ln for ln in (ROOT / "Dockerfile").read_text().splitlines() if ln.startswith("ARG BASE_IMAGE=")]
    assert args == ["ARG BASE_IMAGE=python:3.11-slim-bookworm"]
    users = [ln.split(None, 1)[1] for ln in stage if ln.startswith("USER ")]
    assert users, "the runtime stage must set USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0  # numeric, so kubelet can enforce runAsNonRoot
    assert uid == "65532"  # the chart's runAsUser
    entry = next(ln for ln in stage if ln.startswith("ENTRYPOINT "))
    assert json.loads(entry.split(None, 1)[1]) == ["qos-guard"]
    cmd = next(ln for ln in stage if ln.startswith("CMD "))
    assert json.loads(cmd.split(None, 1)[1]) == ["serve"]
    text = "\n".join(stage)
    assert "[test]" not in text and "pytest" not in text  # runtime dependencies only
    assert "--no-index" in text  # only the wheels built in the first stage


def _allowed(rel: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore semantics for the patterns used: the last matching pattern wins."""
    keep = True
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.rstrip("/")
        if any(fnmatch.fnmatch(rel, p) for p in (pat, pat + "/*", pat.replace("**/", "*/"))):
            keep = negate
    return keep


def _context(patterns: list[str]) -> list[str]:
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    return [f for f in tracked if _allowed(f, patterns)]


def test_build_context_is_only_the_package(tmp_path: Path) -> None:
    patterns = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    files = _context(patterns)
    assert "pyproject.toml" in files and "webhook/cli.py" in files
    assert not [f for f in files if f.split("/")[0] in ("tests", "charts", "certs", ".git", "bench", "docs")]
    # The first stage's `pip wheel .` works on exactly that context.
    ctx = tmp_path / "ctx"
    for rel in files:
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, ctx / rel)
    out = tmp_path / "wheels"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ctx)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out.glob("qos_guard-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "webhook/core/rules/__init__.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "qos-guard = webhook.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
