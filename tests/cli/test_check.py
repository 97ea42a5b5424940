"""``qos-guard check`` over real files: every workload kind, every format, exit codes, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.cli.conftest import CORPORA, MANIFESTS, Run
from tests.schemas import validate_sarif

WORKLOADS = str(MANIFESTS / "workloads.yaml")


def test_text_lines_name_file_line_object_rule(qos_guard: Run) -> None:
    out = qos_guard("check", WORKLOADS)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert f"{WORKLOADS}:13: Pod/fractional: cpu-not-integer: container \"vllm\" (spec.containers[0]): " \
           "cpu limit 1500m is not a whole number of CPUs; use 1 or 2" in lines
    found = {tuple(line.split(": ")[1:3]) for line in lines}
    assert found == {
        ("Pod/fractional", "cpu-not-integer"),
        ("Deployment/unequal", "requests-not-equal-limits"),
        ("DaemonSet/nolimits", "limits-missing"),
        ("ReplicaSet/badquantity", "invalid-quantity"),
        ("Job/sidecar", "limits-missing"),
        ("CronJob/nightly", "cpu-not-integer"),
        ("PodTemplate/tmpl", "requests-not-equal-limits"),
    }
    assert all(re.match(r"^.+:\d+: \w+/[\w-]+: [a-z-]+: ", line) for line in lines)
    assert "9 objects checked" in out.stderr


def test_compliant_only_exits_zero(qos_guard: Run, tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: ok}\nspec:\n  containers:\n  - name: a\n"
                    "    resources: {limits: {cpu: 2, memory: 1Gi}}\n")
    out = qos_guard("check", str(good))
    assert (out.returncode, out.stdout) == (0, "")


def test_folders_recursive_and_errors_named(qos_guard: Run) -> None:
    out = qos_guard("check", str(MANIFESTS), "--format", "json")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    errors = {(Path(e["file"]).name, e["line"]): e["message"] for e in report["errors"]}
    assert errors[("broken.yaml", 16)] == "YAML does not parse: mapping values are not allowed in this context"
    assert "spec.template.spec.containers: expected a list" in errors[("malformed.yml", 8)]
    assert any(name == "unclosed.yaml" for name, _ in errors)
    names = {v["name"] for v in report["violations"]}
    assert {"in-list", "before-error", "fractional"} <= names  # JSON List items and docs before an error
    assert report["summary"] == {"objects": 11, "violations": len(report["violations"]), "notices": 0, "errors": 3,
                                 "skipped": {"ConfigMap": 1, "Service": 1}}  # counted, never silent


def test_json_shape(qos_guard: Run) -> None:
    report = json.loads(qos_guard("check", WORKLOADS, "--format", "json").stdout)
    v = next(v for v in report["violations"] if v["name"] == "unequal")
    assert v == {
        "file": WORKLOADS, "line": 27, "kind": "Deployment", "namespace": None, "name": "unequal",
        "container": "server", "path": "spec.template.spec.containers[0].resources.requests.cpu",
        "rule": "requests-not-equal-limits", "fixable": True,
        "message": 'container "server" (spec.template.spec.containers[0]): cpu request 1 differs from its '
                   "limit 2; set resources.requests.cpu to 2",
    }
    assert next(v for v in report["violations"] if v["name"] == "fractional")["namespace"] == "llm"


def test_mutate_mode_reports_only_what_mutation_cannot_fix(qos_guard: Run) -> None:
    out = qos_guard("check", WORKLOADS, "--mode", "mutate", "--format", "json")
    report = json.loads(out.stdout)
    remaining = {(v["name"], v["rule"]) for v in report["violations"]}
    assert ("Deployment", "unequal") not in remaining and ("unequal", "requests-not-equal-limits") not in remaining
    assert ("nolimits", "limits-missing") not in remaining  # limits set from requests
    assert ("fractional", "cpu-not-integer") in remaining
    assert ("badquantity", "invalid-quantity") in remaining
    assert {n["name"] for n in report["notices"]} >= {"unequal", "nolimits", "tmpl"}
    assert out.returncode == 1
    text = qos_guard("check", WORKLOADS, "--mode", "mutate").stdout
    assert ": Deployment/unequal: notice: container \"server\": set resources.requests.cpu to 2 (its limit)" in text


def test_warn_mode_reports_everything_and_exits_zero(qos_guard: Run) -> None:
    out = qos_guard("check", WORKLOADS, "--mode", "warn")
    assert out.returncode == 0
    assert len(out.stdout.splitlines()) == len(qos_guard("check", WORKLOADS).stdout.splitlines())


def test_stdin(qos_guard: Run) -> None:
    text = Path(WORKLOADS).read_text()
    out = qos_guard("check", "-", stdin=text)
    assert out.returncode == 1 and out.stdout.startswith("<stdin>:")
    listing = (MANIFESTS / "nested" / "list.json").read_text()
    out = qos_guard("check", "--format", "json", "-", stdin=listing)
    assert json.loads(out.stdout)["violations"][0]["name"] == "in-list"


def test_sarif_validates_against_schema(qos_guard: Run) -> None:
    out = qos_guard("check", str(MANIFESTS), "--format", "sarif")
    doc = json.loads(out.stdout)
    validate_sarif(doc)  # the complete OASIS schema, URI formats checked
    results = doc["runs"][0]["results"]
    assert {r["ruleId"] for r in results} >= {"cpu-not-integer", "limits-missing", "invalid-quantity"}
    assert all(r["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1 for r in results)
    assert len(doc["runs"][0]["invocations"][0]["toolExecutionNotifications"]) == 3


def test_junit(qos_guard: Run) -> None:
    root = ET.fromstring(qos_guard("check", WORKLOADS, "--format", "junit").stdout)
    suite = root.find("testsuite")
    assert suite is not None
    failures = suite.findall("testcase/failure")
    assert int(suite.get("failures", "0")) == len(failures) >= 7
    assert {f.get("type") for f in failures} >= {"cpu-not-integer", "invalid-quantity"}
    assert any(tc.get("name") == "Pod/fractional" for tc in suite.findall("testcase"))


def test_github_annotations(qos_guard: Run) -> None:
    lines = qos_guard("check", WORKLOADS, "--format", "github").stdout.splitlines()
    assert f"::error file={WORKLOADS},line=13,title=cpu-not-integer::Pod/fractional: container \"vllm\" " \
           "(spec.containers[0]): cpu limit 1500m is not a whole number of CPUs; use 1 or 2" in lines
    assert all(line.startswith("::error ") for line in lines)


@pytest.mark.parametrize("args", [["check"], ["check", "x.yaml", "--format", "xml"], ["check", "--mode", "audit", "x"],
                                  ["frobnicate"]])
def test_usage_errors_exit_2(qos_guard: Run, args: list[str]) -> None:
    out = qos_guard(*args)
    assert out.returncode == 2 and "usage:" in out.stderr


def test_missing_file_exit_2_rest_still_checked(qos_guard: Run, tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: ok}\n"
                    "spec: {containers: [{name: a, resources: {limits: {cpu: 1, memory: 1Gi}}}]}\n")
    out = qos_guard("check", str(tmp_path / "nope.yaml"), str(good))
    assert out.returncode == 2
    assert "nope.yaml: error: no such file or directory" in out.stdout


def test_bad_config_exit_2_naming_key(qos_guard: Run, tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("policy:\n  smtAlignment: two\n")
    out = qos_guard("check", WORKLOADS, "--config", str(cfg))
    assert out.returncode == 2 and "policy.smtAlignment" in out.stderr


def test_config_changes_verdict(qos_guard: Run, tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("policy:\n  fractionalCPUContainers: [vllm, batch]\n")
    report = json.loads(qos_guard("check", WORKLOADS, "--config", str(cfg), "--format", "json").stdout)
    assert "cpu-not-integer" not in {v["rule"] for v in report["violations"]}


@pytest.mark.parametrize("corpus", CORPORA)
def test_corpus(qos_guard: Run, corpus: Path) -> None:
    out = qos_guard("check", str(corpus), "--format", "json")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    bad = {Path(e["file"]).name for e in report["errors"]}
    # These repeat a key; kubectl (go-yaml v2, not strict) keeps the last value and reads them
    # (docs/contract.md#commands-and-exit-codes).
    assert not {"etcd-controller.yaml", "openshift-controller.yaml", "statefulset-ondelete.yaml"} & bad
    assert all(e["line"] > 0 for e in report["errors"])
    assert report["summary"]["objects"] > 250 and report["summary"]["violations"] > 100


NAMESPACES = """apiVersion: v1
kind: Namespace
metadata:
  name: inference
  labels:
    qos-guard.io/mode: enfoce
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: batch, labels: {qos-guard.io/mode: warn}}
- apiVersion: v1
  kind: Namespace
  metadata: {name: plain}
"""


def test_a_namespace_mode_label_is_judged_as_the_webhook_judges_it(qos_guard: Run, tmp_path: Path) -> None:
    """A typo in the opt-in label fails CI, with the words the webhook refuses it with; a valid one or none
    passes; each labelled Namespace counts as checked, one without the label is skipped (nothing to judge)."""
    from tests.helpers import admission_review
    from webhook.core.config import Config
    from webhook.serving.app import create_app

    path = tmp_path / "namespaces.yaml"
    path.write_text(NAMESPACES)
    out = qos_guard("check", str(path))
    assert out.returncode == 1, out.stdout + out.stderr
    (line,) = out.stdout.splitlines()
    assert line.startswith(f"{path}:6: Namespace/inference: invalid-mode-label: ")
    assert "2 objects checked, 1 violation," in out.stderr, out.stderr
    assert "skipped: 1 Namespace without a qos-guard.io/mode label" in out.stderr, out.stderr
    review = admission_review({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": "inference", "labels": {"qos-guard.io/mode": "enfoce"}}})
    answer = create_app(Config()).test_client().post("/validate-namespace", json=review).get_json()["response"]
    assert answer["allowed"] is False and line.endswith(answer["status"]["message"])
    sarif = json.loads(qos_guard("check", str(path), "--format", "sarif").stdout)
    validate_sarif(sarif)
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["invalid-mode-label"]
    path.write_text(NAMESPACES.replace("enfoce", "enforce"))
    assert qos_guard("check", str(path)).returncode == 0


def test_an_object_whose_every_template_is_exempt_is_counted_exempt(qos_guard: Run, tmp_path: Path) -> None:
    """A JobSet of two templates in an exempt namespace was counted as no object at all (only an object of one
    pod spec was exempt whole): now one object, exempt."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("exemptions:\n  namespaces: [ex]\n")
    job = "{spec: {template: {spec: {containers: [{name: c, image: x, resources: {limits: {cpu: 1500m}}}]}}}}"
    manifest = tmp_path / "js.yaml"
    manifest.write_text("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: js, namespace: ex}\n"
                        f"spec:\n  replicatedJobs:\n  - {{name: a, template: {job}}}\n"
                        f"  - {{name: b, template: {job}}}\n")
    out = qos_guard("check", str(manifest), "--config", str(cfg))
    assert out.returncode == 0 and "1 object checked (1 exempt)" in out.stderr, out.stderr


def test_an_exempt_object_whose_pod_is_not_known_is_still_said_skipped(qos_guard: Run, tmp_path: Path) -> None:
    """An InferenceService whose runtime is not given, in an exempt namespace: nothing of it is known, so check
    and fix say why it was skipped, as anywhere (the webhook skips it: exempt)."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("exemptions:\n  namespaces: [ex]\n")
    manifest = tmp_path / "isvc.yaml"
    manifest.write_text("apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\n"
                        "metadata: {name: iris, namespace: ex}\n"
                        "spec: {predictor: {model: {modelFormat: {name: sklearn}, runtime: rt}}}\n")
    for command in ("check", "fix"):
        out = qos_guard(command, str(manifest), "--config", str(cfg))
        assert out.returncode == 2 and "its ServingRuntime 'rt' is not in the input" in out.stderr, out.stderr
