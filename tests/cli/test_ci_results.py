"""Results a CI pipeline can trust: nothing judged is a failure, skipped documents are counted, Helm charts are
named as such, JUnit and SARIF pass the schemas their readers use, help says what the exit codes mean, and
``fix`` shows its costs, what it cannot fix and (with ``--dry-run``) a diff it does not write."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.cli.conftest import FIXTURES, MANIFESTS, Run
from tests.schemas import junit_schema, validate_sarif

ROOT = FIXTURES.parents[1]
WORKLOADS = str(MANIFESTS / "workloads.yaml")
GOOD = ("apiVersion: v1\nkind: Pod\nmetadata: {name: ok}\nspec:\n  containers:\n  - name: a\n"
        "    resources: {limits: {cpu: 2, memory: 1Gi}}\n")
# One object, two violations (fractional cpu, request below its limit).
TWO_IN_ONE = ("apiVersion: v1\nkind: Pod\nmetadata: {name: two}\nspec:\n  containers:\n  - name: a\n"
              "    resources: {requests: {cpu: 1500m, memory: 512Mi}, limits: {cpu: 1500m, memory: 1Gi}}\n")


# --- nothing to judge, and what was skipped ------------------------------------------------------------------


def test_an_empty_folder_is_exit_2_with_the_reason_on_stderr(qos_guard: Run, tmp_path: Path) -> None:
    out = qos_guard("check", str(tmp_path))
    assert out.returncode == 2 and out.stdout == ""
    assert f"nothing to judge: no Pod or workload in {tmp_path}" in out.stderr and "--allow-empty" in out.stderr
    allowed = qos_guard("check", str(tmp_path), "--allow-empty")
    assert allowed.returncode == 0 and "nothing to judge" not in allowed.stderr
    # machine-read formats carry it as an input error too
    report = json.loads(qos_guard("check", str(tmp_path), "--format", "json").stdout)
    assert report["summary"]["errors"] == 1 and "nothing to judge" in report["errors"][0]["message"]


def test_an_admission_review_is_counted_as_skipped_and_named(qos_guard: Run, tmp_path: Path) -> None:
    """A folder holding one AdmissionReview (examples/ once did): it was skipped silently, "0 objects checked",
    exit 0."""
    folder = tmp_path / "reviews"
    folder.mkdir()
    shutil.copy(ROOT / "examples" / "admission-review.json", folder)
    out = qos_guard("check", str(folder))
    assert out.returncode == 2
    assert "0 objects checked, 0 violations, 0 errors (enforce mode); skipped: 1 AdmissionReview" in out.stderr
    assert "an AdmissionReview is what the webhook receives" in out.stderr


def test_skipped_documents_are_counted_by_reason(qos_guard: Run, tmp_path: Path) -> None:
    (tmp_path / "mixed.yaml").write_text(
        GOOD + "---\nkind: Service\nmetadata: {name: s}\n---\nkind: Service\nmetadata: {name: t}\n"
        "---\nmetadata: {name: no-kind}\n---\nmetadata: {name: no-kind-either}\n"
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: patch}\n"
        "spec: {replicas: 3}\n")
    out = qos_guard("check", str(tmp_path))
    assert out.returncode == 0
    assert out.stderr.strip().endswith(
        "1 object checked, 0 violations, 0 errors (enforce mode); skipped: 2 Service, 2 documents without a kind\n"
        "qos-guard: skipped: 1 Deployment without a pod template")
    report = json.loads(qos_guard("check", str(tmp_path), "--format", "json").stdout)
    assert report["summary"]["skipped"] == {"Service": 2, "Deployment without a pod template": 1,
                                            "document without a kind": 2}


def test_the_skipped_summary_is_one_line_per_kind_however_many_objects(qos_guard: Run, tmp_path: Path) -> None:
    """The summary once grew one sentence per skipped reason on one line. Kinds qos-guard does not judge
    share one line, each kind it knows but could not judge has one line of its own, whatever the count."""
    patch = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d{i}}}\nspec: {{replicas: 3}}\n"
    bare = "apiVersion: v1\nkind: Namespace\nmetadata: {{name: n{i}}}\n"
    service = "apiVersion: v1\nkind: Service\nmetadata: {{name: s{i}}}\n"
    docs = [GOOD] + [t.format(i=i) for i in range(20) for t in (patch, service)] + [bare.format(i=i) for i in range(5)]
    (tmp_path / "many.yaml").write_text("---\n".join(docs))
    out = qos_guard("check", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [
        "qos-guard: 1 object checked, 0 violations, 0 errors (enforce mode); skipped: 20 Service",
        "qos-guard: skipped: 20 Deployment without a pod template",
        "qos-guard: skipped: 5 Namespace without a qos-guard.io/mode label"]


def test_a_helm_chart_is_one_error_that_says_render_it_first(qos_guard: Run) -> None:
    """`check charts/qos-guard` printed 17 "JSON does not parse" errors, one per `{{-` template."""
    chart = ROOT / "charts" / "qos-guard"
    templates = len([p for p in (chart / "templates").rglob("*") if p.suffix in (".yaml", ".yml", ".json")])
    out = qos_guard("check", str(chart))
    assert out.returncode == 2
    assert "does not parse" not in out.stdout
    (line,) = out.stdout.splitlines()
    where, message = line.split(": error: ")
    assert Path(where).parent == chart / "templates"  # a template file, not the folder (`chart:0:`)
    assert message == (f"a Helm chart: its {templates} template files are not manifests until rendered; "
                       f"check what it renders: helm template {chart} | qos-guard check -, and leave it out here: "
                       f"--exclude {chart}")
    github = qos_guard("check", str(chart), "--format", "github").stdout.splitlines()[0]
    assert github.startswith(f"::error file={where},line=1,title=input error::a Helm chart: ")
    one = qos_guard("check", str(chart / "templates" / "deployment.yaml"))
    assert one.returncode == 2
    assert one.stdout.startswith(f"{chart / 'templates' / 'deployment.yaml'}: error: a Helm chart: its template "
                                 "file is not a manifest until ")
    fixed = qos_guard("fix", str(chart))
    assert fixed.returncode == 2 and f"{chart}: error: a Helm chart" in fixed.stdout


def test_a_template_outside_a_chart_gets_the_hint(qos_guard: Run, tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text("{{- if .Values.enabled }}\nkind: Pod\n{{- end }}\n")
    out = qos_guard("check", str(tmp_path / "pod.yaml"))
    assert out.returncode == 2
    assert "a Helm or Go template? render it first" in out.stdout


# --- JUnit ---------------------------------------------------------------------------------------------------


def test_junit_one_case_per_object_failures_count_cases(qos_guard: Run, tmp_path: Path) -> None:
    """One failing object with two violations said tests="2" failures="2"; compliant objects were one case."""
    (tmp_path / "a.yaml").write_text(TWO_IN_ONE + "---\n" + GOOD + "---\n" + GOOD.replace("name: ok", "name: ok2"))
    xml = qos_guard("check", str(tmp_path), "--format", "junit").stdout
    junit_schema().validate(xml)
    suite = ET.fromstring(xml).find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["Pod/two", "Pod/ok", "Pod/ok2"]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("3", "1", "0",
                                                                                                     "0")
    failure = cases[0].find("failure")
    assert failure is not None and len(cases[0].findall("failure")) == 1
    assert failure.get("message") == "2 violations: requests-not-equal-limits, cpu-not-integer"
    assert all(c.find("failure") is None for c in cases[1:])


def test_junit_validates_against_the_ci_schema_in_every_mode(qos_guard: Run, tmp_path: Path) -> None:
    schema = junit_schema()
    config = tmp_path / "c.yaml"
    config.write_text("exemptions: {namespaces: [llm]}\n")
    for args in ([], ["--mode", "mutate"], ["--mode", "warn"], ["--config", str(config)]):
        xml = qos_guard("check", str(MANIFESTS), "--format", "junit", *args).stdout
        schema.validate(xml)
        suite = ET.fromstring(xml).find("testsuite")
        assert suite is not None
        cases = suite.findall("testcase")
        assert int(suite.get("tests", "-1")) == len(cases)
        assert int(suite.get("failures", "-1")) == len([c for c in cases if c.find("failure") is not None])
        assert int(suite.get("errors", "-1")) == len([c for c in cases if c.find("error") is not None]) == 3
        assert int(suite.get("skipped", "-1")) == len([c for c in cases if c.find("skipped") is not None])
        if "warn" in args:
            assert suite.get("failures") == "0" and any(c.find("system-out") is not None for c in cases)
        if "--config" in args:  # the exempt Pod is a skipped case, not a passed one
            skipped = [c for c in cases if c.find("skipped") is not None]
            assert [c.get("name") for c in skipped] == ["Pod/fractional"]


# --- SARIF ---------------------------------------------------------------------------------------------------


def test_sarif_from_stdin_and_odd_paths_has_valid_uris(qos_guard: Run, tmp_path: Path) -> None:
    """`check -` wrote "uri": "<stdin>", which is no URI; a space or a colon in a name is escaped."""
    doc = json.loads(qos_guard("check", "-", "--format", "sarif", stdin=TWO_IN_ONE).stdout)
    validate_sarif(doc)
    where = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert where == {"uri": "stdin", "description": {"text": "standard input (qos-guard check -)"}}
    odd = tmp_path / "my deploy" / "a:b #1.yaml"
    odd.parent.mkdir()
    odd.write_text(TWO_IN_ONE)
    relative = qos_guard("check", "my deploy", "--format", "sarif", cwd=tmp_path)
    doc = json.loads(relative.stdout)
    validate_sarif(doc)
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in doc["runs"][0]["results"]} == {"my%20deploy/a%3Ab%20%231.yaml"}
    absolute = json.loads(qos_guard("check", str(odd), "--format", "sarif").stdout)
    validate_sarif(absolute)
    assert absolute["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        odd.as_uri()


def test_sarif_validates_against_the_full_schema_in_every_mode(qos_guard: Run) -> None:
    for mode in ("enforce", "mutate", "warn"):
        out = qos_guard("check", str(MANIFESTS), "--format", "sarif", "--mode", mode)
        validate_sarif(json.loads(out.stdout))


# --- help and exit codes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["check", "fix", "audit", "serve", "certs", "policy"])
def test_every_command_says_its_exit_codes(qos_guard: Run, command: str) -> None:
    out = qos_guard(command, "--help")
    assert out.returncode == 0 and "exit codes:" in out.stdout
    assert re.search(r"^  2  ", out.stdout, re.M)


def test_check_and_fix_options_are_explained(qos_guard: Run) -> None:
    check = qos_guard("check", "--help").stdout
    assert re.search(r"--mode \{enforce,mutate,warn\}\s+judge as", check) and "(default enforce)" in check
    assert re.search(r"--format \{text,json,sarif,junit,github\}\s+text", check)
    assert "(default text)" in " ".join(check.split())
    fix = qos_guard("fix", "--help").stdout
    assert re.search(r"PATH\s+file or folder", fix) and "--dry-run" in fix
    top = qos_guard("--help").stdout
    assert "exit codes: 0 success; 1 violations found" in " ".join(top.split())


# --- fix: costs, the way out, --dry-run ----------------------------------------------------------------------

SIDECAR = """apiVersion: v1
kind: Pod
metadata:
  name: vllm
spec:
  containers:
    - name: vllm
      resources:
        limits: {cpu: "4", memory: 16Gi}
    - name: istio-proxy   # as the injector adds it
      resources:
        requests: {cpu: 100m, memory: 128Mi}
        limits: {cpu: 2000m, memory: 1Gi}
    - name: log-shipper
      resources:
        limits: {cpu: 250m, memory: 64Mi}
"""


def test_fix_says_what_each_raise_costs_and_which_setting_would_fix_the_rest(qos_guard: Run,
                                                                             tmp_path: Path) -> None:
    """`fix` raised the proxy's 100m to 2000m (two exclusive CPUs) and 128Mi to 1Gi without a word of the cost,
    and called cpu-not-integer "cannot be fixed automatically" without naming mutation.cpuRounding: up."""
    path = tmp_path / "pod.yaml"
    path.write_text(SIDECAR)
    out = qos_guard("fix", str(path))
    assert out.returncode == 1
    assert 'set resources.requests.cpu to 2000m (its limit): +1.9 CPU reserved exclusively' in out.stdout
    assert 'set resources.requests.memory to 1Gi (its limit): +896Mi memory reserved' in out.stdout
    assert 'container "log-shipper" (spec.containers[2]): cpu limit 250m is not a whole number of CPUs' in out.stdout
    assert "(cannot be fixed with this configuration: mutation.cpuRounding: up would set it to 1: +0.75 CPU " \
           "reserved exclusively)" in out.stdout
    rounding = tmp_path / "c.yaml"
    rounding.write_text("mutation: {cpuRounding: up}\n")
    again = qos_guard("fix", str(path), "--config", str(rounding))
    assert again.returncode == 0 and "+0.75 CPU reserved exclusively" in again.stdout
    mutate = qos_guard("check", str(tmp_path / "pod.yaml"), "--mode", "mutate")  # nothing left: rounded
    assert mutate.returncode == 0


def test_check_in_mutate_mode_names_the_setting_too(qos_guard: Run, tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text(SIDECAR)
    out = qos_guard("check", str(tmp_path), "--mode", "mutate")
    assert out.returncode == 1
    assert "cpu-not-integer" in out.stdout and "(mutation.cpuRounding: up would set it to 1" in out.stdout


def test_fix_dry_run_prints_a_diff_and_writes_nothing(qos_guard: Run, tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    (work / "pod.yaml").write_text(SIDECAR)
    shutil.copytree(MANIFESTS, work / "m")
    before = {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    dry = qos_guard("fix", ".", "--dry-run", cwd=work)
    assert {p: p.read_bytes() for p in work.rglob("*") if p.is_file()} == before  # nothing written
    assert dry.stdout.startswith("--- a/m/")
    assert "+        requests: {cpu: 2000m, memory: 1Gi}" in dry.stdout
    assert "would fix: container \"istio-proxy\"" in dry.stderr and "files would change" in dry.stderr
    # the diff is exactly what fix writes
    patched = tmp_path / "patched"
    shutil.copytree(work, patched)
    applied = subprocess.run(["patch", "-p1", "--quiet"], input=dry.stdout, text=True, cwd=patched,
                             capture_output=True, check=False)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    real = qos_guard("fix", ".", cwd=work)
    assert real.returncode == dry.returncode
    assert {p.relative_to(work): p.read_bytes() for p in work.rglob("*") if p.is_file()} == \
        {p.relative_to(patched): p.read_bytes() for p in patched.rglob("*") if p.is_file() and
         not p.name.endswith(".orig")}


SIDECARS = """apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: app
    image: i
    resources: {requests: {cpu: 2, memory: 1Gi}, limits: {cpu: 2, memory: 1Gi}}
  - name: log-shipper
    image: i
    resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {memory: 64Mi}}
  - name: istio-proxy
    image: i
    resources: {requests: {cpu: 1500m, memory: 64Mi}, limits: {memory: 64Mi}}
"""


def test_findings_of_a_file_come_in_line_order(qos_guard: Run, tmp_path: Path) -> None:
    """Each rule reported its own in turn (lines 11, 14, 11, 14): a reader walking the file went back and forth."""
    (tmp_path / "pod.yaml").write_text(SIDECARS)
    out = qos_guard("check", str(tmp_path))
    lines = [int(line.split(":")[1]) for line in out.stdout.splitlines()]
    assert lines == [11, 11, 14, 14]
    doc = json.loads(qos_guard("check", str(tmp_path), "--format", "json").stdout)
    assert [(v["line"], v["rule"]) for v in doc["violations"]] == [
        (11, "limits-missing"), (11, "cpu-not-integer"), (14, "limits-missing"), (14, "cpu-not-integer")]


def test_summaries_count_in_the_singular_and_say_the_exempt(qos_guard: Run, tmp_path: Path) -> None:
    """"1 errors", "1 objects checked", "1 files changed"; and exempt objects were counted by JUnit only."""
    (tmp_path / "one.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: one}\nspec:\n  containers:\n  - name: a\n    image: i\n"
        "    resources: {requests: {cpu: 1, memory: 1Gi}, limits: {cpu: 1, memory: 2Gi}}\n")
    (tmp_path / "bad.yaml").write_text("kind: Pod\nmetadata: [\n")
    out = qos_guard("check", str(tmp_path))
    assert out.stderr.strip() == "qos-guard: 1 object checked, 1 violation, 1 error (enforce mode)"
    (tmp_path / "bad.yaml").unlink()
    (tmp_path / "kata.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: kata}\nspec:\n  runtimeClassName: kata\n"
        "  containers:\n  - name: a\n    image: i\n    resources: {requests: {cpu: 50m}}\n")
    (tmp_path / "config.yaml").write_text("exemptions:\n  runtimeClassNames: [kata]\n")
    config = str(tmp_path / "config.yaml")
    out = qos_guard("check", str(tmp_path / "one.yaml"), str(tmp_path / "kata.yaml"), "--config", config)
    assert out.stderr.strip() == "qos-guard: 2 objects checked (1 exempt), 1 violation, 0 errors (enforce mode)"
    junit = qos_guard("check", str(tmp_path / "one.yaml"), str(tmp_path / "kata.yaml"), "--config", config,
                      "--format", "junit").stdout
    assert 'tests="2" failures="1" errors="0" skipped="1"' in junit
    fixed = qos_guard("fix", str(tmp_path / "one.yaml"))
    assert fixed.stderr.strip().endswith("qos-guard: 1 file changed, 0 violations left, 0 errors"), fixed.stderr


def test_a_loose_file_with_braces_names_helm_template(qos_guard: Run, tmp_path: Path) -> None:
    """It said "render it first" without naming `helm template`, which the chart-folder message does."""
    loose = tmp_path / "deployment.yaml"
    loose.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"
                     "spec:\n  replicas: {{ .Values.replicas }\n")
    out = qos_guard("check", str(loose))
    assert out.returncode == 2
    assert "a Helm or Go template? render it first: helm template RELEASE CHART | qos-guard check -" in out.stdout
