"""The README's CI examples work as written: the SARIF upload (the README's and the one in action.yml's header)
runs when the check step fails, and the pre-commit and Action pins name tags the repository has."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _ci_section() -> str:
    readme = (ROOT / "README.md").read_text()
    start = readme.index("### In CI and before a commit")
    return readme[start:readme.index("\n### ", start + 1)]


def _uploads(steps: list[dict[str, object]]) -> list[dict[str, object]]:
    return [s for s in steps if str(s.get("uses", "")).startswith("github/codeql-action/upload-sarif")]


def test_sarif_upload_runs_when_the_check_step_fails() -> None:
    """With the default fail-on-violation: true the check step fails exactly when there are findings, and an
    upload without `if: always()` is then skipped: code scanning never saw them."""
    blocks = re.findall(r"```yaml\n(.*?)```", _ci_section(), re.S)
    steps = [step for block in blocks for step in (yaml.safe_load(block) or []) if isinstance(step, dict)]
    header = "\n".join(line.removeprefix("#   ") for line in (ROOT / "action.yml").read_text().splitlines()
                       if line.startswith("#   "))
    header = header.replace("<owner>/qos-guard@<commit SHA or tag>", "qos-guard")
    steps += [s for s in yaml.safe_load(header) if isinstance(s, dict)]
    uploads = _uploads(steps)
    assert len(uploads) == 2
    assert all(u.get("if") == "always()" for u in uploads), uploads


def test_ci_pins_name_no_tag_the_repository_lacks() -> None:
    """Pre-commit and the Action pinned v0.1.0, a tag the repository does not have."""
    tags = subprocess.run(["git", "-C", str(ROOT), "tag"], capture_output=True, text=True, check=False).stdout.split()
    section = _ci_section()
    pins = re.findall(r"rev: ([^,}\s]+)", section) + re.findall(r"uses: qos-guard/qos-guard@(\S+)", section)
    assert len(pins) == 2 and all(pin in tags or pin == "COMMIT" for pin in pins), pins
    assert "pin a commit" in " ".join(section.split())
