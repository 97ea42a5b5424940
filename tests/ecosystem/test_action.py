"""``action.yml``: the composite action's check step, run by bash as a runner runs it (inputs through ``env``,
outputs through ``$GITHUB_OUTPUT``), its SARIF validated against the SARIF 2.1.0 schema.

The install step is a plain ``pip install`` of this repository (what the pre-commit test does for real); here
the check step finds the project's own installed ``qos-guard`` where that step would have put it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.binaries import ROOT
from tests.schemas import validate_sarif

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
FIXTURES = ROOT / "tests" / "fixtures"
BAD = FIXTURES / "manifests" / "workloads.yaml"
GOOD = """apiVersion: v1
kind: Pod
metadata: {name: pinned}
spec:
  containers:
    - name: app
      image: registry.invalid/app:1
      resources:
        limits: {cpu: "2", memory: 1Gi}
        requests: {cpu: "2", memory: 1Gi}
"""


def _expand(value: str, inputs: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        expr = m.group(1).strip()
        if expr == "github.action_path":
            return str(ROOT)
        assert expr.startswith("inputs."), f"the scripts may only see inputs, not {expr}"
        return inputs[expr.removeprefix("inputs.")]

    return re.sub(r"\$\{\{(.*?)\}\}", one, value)


def run_check_step(tmp_path: Path, **given: str) -> tuple[int, dict[str, str], str]:
    """Run the `check` step's script with bash in ``tmp_path``; (exit code, step outputs, stdout)."""
    unknown = set(given) - set(ACTION["inputs"])
    assert not unknown, unknown
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()} | given
    step = next(s for s in ACTION["runs"]["steps"] if s.get("id") == "check")
    assert "${{" not in step["run"], "inputs must reach the script through env only"
    runner_temp = tmp_path / "runner-temp"
    (runner_temp / "qos-guard" / "bin").mkdir(parents=True, exist_ok=True)
    link = runner_temp / "qos-guard" / "bin" / "qos-guard"
    if not link.exists():
        installed = shutil.which("qos-guard", path=str(Path(sys.executable).parent))
        assert installed, "qos-guard is not installed beside this Python (make install)"
        link.symlink_to(installed)
    output = tmp_path / "github-output"
    output.write_text("")
    env = {"PATH": "/usr/bin:/bin", "RUNNER_TEMP": str(runner_temp), "GITHUB_OUTPUT": str(output),
           **{k: _expand(str(v), inputs) for k, v in step["env"].items()}}
    proc = subprocess.run([step["shell"], "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return proc.returncode, outputs, proc.stdout


def test_every_input_and_output_is_documented() -> None:
    assert ACTION["runs"]["using"] == "composite"
    for name, spec in {**ACTION["inputs"], **ACTION["outputs"]}.items():
        assert len(spec.get("description", "")) > 20, name
    for step in ACTION["runs"]["steps"]:
        assert "${{" not in step.get("run", ""), step["name"]  # no script injection through an input
    readme = (ROOT / "README.md").read_text()
    assert "action.yml" in readme and "format: sarif" in readme


def test_sarif_for_code_scanning_validates_against_the_schema(tmp_path: Path) -> None:
    code, outputs, _ = run_check_step(tmp_path, paths=str(BAD), format="sarif")
    assert code == 1 and outputs == {"sarif-file": "qos-guard.sarif", "exit-code": "1"}
    doc: dict[str, Any] = json.loads((tmp_path / "qos-guard.sarif").read_text())
    validate_sarif(doc)  # the complete OASIS schema, URI formats checked
    results = doc["runs"][0]["results"]
    assert results and all(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == BAD.as_uri()
                           for r in results)


def test_github_annotations_and_a_clean_folder(tmp_path: Path) -> None:
    code, outputs, stdout = run_check_step(tmp_path, paths=str(BAD))
    assert code == 1 and outputs["exit-code"] == "1" and outputs["sarif-file"] == ""
    assert stdout.startswith(f"::error file={BAD},line=")
    clean = tmp_path / "deploy"
    clean.mkdir()
    (clean / "pod.yaml").write_text(GOOD)
    (clean / "other.yaml").write_text(GOOD.replace("pinned", "also-pinned"))
    code, outputs, stdout = run_check_step(tmp_path, paths="deploy/pod.yaml\n  deploy/other.yaml")
    assert (code, outputs["exit-code"], stdout) == (0, "0", "")


@pytest.mark.parametrize(("fail", "step_code"), [("true", 1), ("false", 0)])
def test_fail_on_violation(tmp_path: Path, fail: str, step_code: int) -> None:
    code, outputs, _ = run_check_step(tmp_path, paths=str(BAD), **{"fail-on-violation": fail})
    assert code == step_code and outputs["exit-code"] == "1"


def test_an_unreadable_input_always_fails(tmp_path: Path) -> None:
    code, outputs, _ = run_check_step(tmp_path, paths="missing.yaml", **{"fail-on-violation": "false"})
    assert code == 2 and outputs["exit-code"] == "2"


def test_a_path_with_nothing_to_judge_fails_unless_allowed(tmp_path: Path) -> None:
    """A wrong `paths:` (an empty folder, a typo'd one holding only other YAML) passed the step unnoticed."""
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "service.yaml").write_text("kind: Service\nmetadata: {name: s}\n")
    code, outputs, _ = run_check_step(tmp_path, paths="deploy")
    assert code == 2 and outputs["exit-code"] == "2"
    code, outputs, _ = run_check_step(tmp_path, paths="deploy", **{"allow-empty": "true"})
    assert code == 0 and outputs["exit-code"] == "0"


def test_a_repository_holding_a_helm_chart_passes_with_exclude(tmp_path: Path) -> None:
    """The default `paths: "."` failed on any repository holding a Helm chart (its templates are not manifests)
    and there was no way to leave the chart out: `exclude` does, the rest is still checked."""
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "pod.yaml").write_text(GOOD)
    templates = tmp_path / "charts" / "app" / "templates"
    templates.mkdir(parents=True)
    (templates.parent / "Chart.yaml").write_text("apiVersion: v2\nname: app\nversion: 0.1.0\n")
    (templates / "deployment.yaml").write_text("apiVersion: apps/v1\nkind: Deployment\n{{- include \"x\" . }}\n")
    code, outputs, stdout = run_check_step(tmp_path)
    assert code == 2 and outputs["exit-code"] == "2"
    assert "a Helm chart" in stdout and "--exclude charts/app" in stdout, stdout
    code, outputs, stdout = run_check_step(tmp_path, exclude="charts\n")
    assert (code, outputs["exit-code"], stdout) == (0, "0", "")
    # still checked: a violation outside the excluded folder fails the step
    (tmp_path / "deploy" / "bad.yaml").write_text(BAD.read_text())
    code, outputs, _ = run_check_step(tmp_path, exclude="charts\n  unused/*")
    assert code == 1 and outputs["exit-code"] == "1"
