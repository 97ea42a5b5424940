"""The install notes and the chart README say the same about when to label a namespace, and the chart refuses
when nothing sends Pods to the second scheduler."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.chart.conftest import CHART, run_helm


def _notes(helm: str, tmp_path: Path, *values: str) -> str:
    """NOTES.txt as ``helm install`` prints it, rendered without a cluster (helm template skips NOTES): the same
    text as a named template of a copy of the chart."""
    chart = tmp_path / "chart"
    tmp_path.mkdir(exist_ok=True)
    shutil.copytree(CHART, chart)
    notes = (chart / "templates" / "NOTES.txt").read_text()
    (chart / "templates" / "_notes_copy.tpl").write_text('{{- define "notes.copy" -}}\n' + notes + "{{- end }}\n")
    (chart / "templates" / "notes-copy.yaml").write_text('notes: {{ include "notes.copy" . | toJson }}\n')
    proc = run_helm(helm, "template", "qg", str(chart), "--namespace", "ops", "--show-only",
                    "templates/notes-copy.yaml", *values)
    assert proc.returncode == 0, proc.stderr
    return " ".join(str(yaml.safe_load(proc.stdout)["notes"]).split())


def _readme() -> str:
    return " ".join((CHART / "README.md").read_text().split())


def test_webhook_notes_say_to_wait_for_helm_test_as_the_readme_does(helm: str, tmp_path: Path) -> None:
    """The NOTES said "Pick a mode per namespace" at once; the chart README said to wait for helm test."""
    notes = _notes(helm, tmp_path)
    assert "helm test qg --namespace ops" in notes
    assert "Label a namespace only once it passes: with failurePolicy Fail" in notes
    assert notes.index("helm test") < notes.index("kubectl label namespace NAME qos-guard.io/mode=enforce")
    assert "Label a namespace only once `helm test` passes: with `failurePolicy: Fail`" in _readme()


def test_policy_notes_say_a_namespace_can_opt_in_at_once(helm: str, tmp_path: Path) -> None:
    notes = _notes(helm, tmp_path, "--set", "enforcement=policy")
    assert "helm test" not in notes.replace("no helm test", "")
    assert "failurePolicy Fail" in notes and "a namespace can opt in now" in notes
    assert "With `enforcement: policy` there is no webhook to wait for (and no `helm test`)" in _readme()
    assert "so a namespace can be labelled at once" in _readme()


@pytest.mark.parametrize("name", [None, "numa-aware"])
def test_policy_notes_say_nothing_sends_pods_to_the_scheduler(helm: str, tmp_path: Path, name: str | None) -> None:
    """enforcement=policy with scheduler.enabled=true rendered a kube-scheduler and said nothing: only the
    webhook's place.qos-guard.io sets spec.schedulerName, so it gets only the Pods that name it themselves (the
    chart allows that on purpose: tests/chart/test_placement_chart.py)."""
    extra = ["--set", f"scheduler.name={name}"] if name else []
    notes = _notes(helm, tmp_path, "--set", "enforcement=policy", "--set", "scheduler.enabled=true", *extra)
    assert (f"The scheduler {name or 'qos-guard-numa'} is installed, but the policies set no spec.schedulerName "
            "(only the webhook's place.qos-guard.io does): it schedules only the Pods whose spec.schedulerName "
            "names it") in notes, notes
    assert "use enforcement: webhook" in notes
    assert "The scheduler" not in _notes(helm, tmp_path / "w", "--set", "scheduler.enabled=true")
    values = " ".join((CHART / "values.yaml").read_text().split())
    assert "With `enforcement: policy` nothing sets it" in values and "With `enforcement: policy` nothing sets it" \
        in _readme()
