"""The chart's words agree with each other and with the docs: the install notes and the chart README on when to
label a namespace, the notes when nothing sends Pods to the second scheduler, the autoscaling text and Sizing on
the p99, and the Kubernetes versions the docs give the webhook with those the chart asks for and registers."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.chart.conftest import CHART, ROOT, Render, one, run_helm


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


def test_autoscaling_text_and_sizing_give_the_same_p99() -> None:
    """`autoscaling.enabled` said "p99 under a second" where Sizing (and the chart README) say under 0.1 s."""
    values = (CHART / "values.yaml").read_text()
    text = values[values.index("autoscaling:"):values.index("  enabled:", values.index("autoscaling:"))]
    sizing = (ROOT / "docs" / "operations" / "sizing.md").read_text().split("## The webhook", 1)[1].split("##", 1)[0]
    assert "p99.9 under 0.1 s" in sizing and "p99 under 0.1 s" in " ".join(text.split())
    assert "under a second" not in values and "p99 under 0.1 s" in (CHART / "README.md").read_text()


def test_readme_webhook_kubernetes_versions_are_the_charts(render: Render) -> None:
    """The README's table said any cluster with admission.k8s.io v1 or v1beta1; the chart asks for 1.27+ and
    registers v1 only."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    minimum = chart["kubeVersion"].removeprefix(">=").removesuffix(".0-0")
    row = next(line for line in (ROOT / "docs" / "howto" / "admission-policies.md").read_text().splitlines()
               if line.startswith("| Kubernetes |"))
    webhook_cell = row.split("|")[3]
    assert f"{minimum}+" in webhook_cell and "admissionReviewVersions: [v1]" in webhook_cell, row
    objects = render()
    hooks = [h for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
             for h in one(objects, kind)["webhooks"]]
    assert hooks and all(h["admissionReviewVersions"] == ["v1"] for h in hooks)
