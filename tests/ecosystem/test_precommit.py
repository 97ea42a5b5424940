"""``.pre-commit-hooks.yaml`` run by the real ``pre-commit`` (``try-repo``, as a user trying the hooks):
pre-commit clones this repository, pip-installs it into the hook's own environment and runs the hook over a
git repository of manifests. A bad manifest fails ``qos-guard-check``; ``qos-guard-fix`` rewrites what it
can (and fails, as pre-commit hooks that change files do); the fixed manifest then passes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local clone of this repository as it is now (committed or not), as a user's ``repo:`` would be."""
    folder = tmp_path_factory.mktemp("clone")
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"], check=True,
                           capture_output=True, text=True, timeout=60).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, folder / name)
    _git(folder, "init", "-q")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "-m", "snapshot")
    return folder


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                          capture_output=True, text=True, timeout=60).stdout


def _manifests(tmp_path: Path, text: str) -> Path:
    repo = tmp_path / "manifests"
    (repo / "deploy").mkdir(parents=True)
    (repo / "deploy" / "inference.yaml").write_text(text)
    (repo / "workflow.yaml").write_text(NOT_KUBERNETES)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    return repo


def _pre_commit(repo: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    pre_commit = Path(sys.executable).parent / "pre-commit"
    assert pre_commit.exists(), "pre-commit comes with the test extra (make install)"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env |= {"PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    return subprocess.run([str(pre_commit), *args, "--all-files", "--verbose"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=1500)


# Each try-repo installs the hook environment anew (in a temporary store), several minutes on a loaded
# machine: the first run is the try-repo a user starts with; the rest use a .pre-commit-config.yaml naming
# the same clone, so they share one installed environment.
@pytest.mark.timeout(3000)
def test_check_fails_a_bad_manifest_and_passes_it_once_fixed(clone: Path, tmp_path: Path) -> None:
    repo = _manifests(tmp_path, FIXABLE)
    bad = _pre_commit(repo, tmp_path / "try-home", "try-repo", str(clone), "qos-guard-check")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "requests-not-equal-limits" in bad.stdout and "deploy/inference.yaml" in bad.stdout
    assert "1 object checked, 1 violation," in bad.stdout  # workflow.yaml was passed and ignored

    rev = _git(clone, "rev-parse", "HEAD").strip()
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {clone}\n    rev: {rev}\n    hooks: [{{id: qos-guard-check}}, {{id: qos-guard-fix}}]\n")
    _git(repo, "add", "-A")
    home = tmp_path / "home"
    fixed = _pre_commit(repo, home, "run", "qos-guard-fix")
    assert fixed.returncode == 1, fixed.stdout + fixed.stderr  # files were modified: pre-commit fails the hook
    assert "files were modified by this hook" in fixed.stdout
    text = (repo / "deploy" / "inference.yaml").read_text()
    assert "# the model server" in text and text.count('cpu: "4"') == 2, text
    assert (repo / "workflow.yaml").read_text() == NOT_KUBERNETES
    _git(repo, "add", "-A")
    good = _pre_commit(repo, home, "run", "qos-guard-check")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout
    again = _pre_commit(repo, home, "run", "qos-guard-fix")
    assert again.returncode == 0, again.stdout + again.stderr
    # a commit with no Pod or workload in it passes the check hook (it is given every YAML file)
    (repo / "deploy" / "inference.yaml").unlink()
    _git(repo, "add", "-A")
    other = _pre_commit(repo, home, "run", "qos-guard-check")
    assert other.returncode == 0, other.stdout + other.stderr
    assert "skipped: 2 documents without a kind" in other.stdout  # workflow.yaml, .pre-commit-config.yaml
