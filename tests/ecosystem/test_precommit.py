"""``.pre-commit-hooks.yaml`` run by the real ``pre-commit`` (``try-repo``, as a user trying the hooks):
pre-commit clones this repository, pip-installs it into the hook's own environment and runs the hook over a
git repository of manifests. A bad manifest fails ``qos-guard-check``; ``qos-guard-fix`` rewrites what it
can (and fails, as pre-commit hooks that change files do); the fixed manifest then passes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.binaries import ROOT

FIXABLE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: inference  # the model server
spec:
  selector: {matchLabels: {app: inference}}
  template:
    metadata: {labels: {app: inference}}
    spec:
      containers:
        - name: server
          image: registry.invalid/server:1
          resources:
            limits: {cpu: "4", memory: 8Gi}
            requests: {cpu: "2", memory: 8Gi}
"""
NOT_KUBERNETES = "name: ci\non: [push]\n"  # any YAML without a judged kind is ignored


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One PRE_COMMIT_HOME for the module, so the hook environment is installed once."""
    yield tmp_path_factory.mktemp("pre-commit-home")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True, timeout=60)


def _manifests(tmp_path: Path, text: str) -> Path:
    repo = tmp_path / "manifests"
    (repo / "deploy").mkdir(parents=True)
    (repo / "deploy" / "inference.yaml").write_text(text)
    (repo / "workflow.yaml").write_text(NOT_KUBERNETES)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    return repo


def _try(home: Path, repo: Path, hook: str) -> subprocess.CompletedProcess[str]:
    pre_commit = Path(sys.executable).parent / "pre-commit"
    assert pre_commit.exists(), "pre-commit comes with the test extra (make install)"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env |= {"PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    return subprocess.run([str(pre_commit), "try-repo", str(ROOT), hook, "--all-files", "--verbose"], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=1200)


def test_check_fails_a_bad_manifest_and_passes_it_once_fixed(home: Path, tmp_path: Path) -> None:
    repo = _manifests(tmp_path, FIXABLE)
    bad = _try(home, repo, "qos-guard-check")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "requests-not-equal-limits" in bad.stdout and "deploy/inference.yaml" in bad.stdout
    assert "2 objects checked" not in bad.stdout and "1 objects checked, 1 violations" in bad.stdout

    fixed = _try(home, repo, "qos-guard-fix")
    assert fixed.returncode == 1, fixed.stdout + fixed.stderr  # files were modified: pre-commit fails the hook
    text = (repo / "deploy" / "inference.yaml").read_text()
    assert "# the model server" in text and text.count('cpu: "4"') == 2
    assert (repo / "workflow.yaml").read_text() == NOT_KUBERNETES
    _git(repo, "add", "-A")
    good = _try(home, repo, "qos-guard-check")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout
    again = _try(home, repo, "qos-guard-fix")
    assert again.returncode == 0, again.stdout + again.stderr

