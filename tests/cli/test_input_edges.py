"""``check`` and ``fix`` at the edges of their input (nothing to judge, a missing file, a YAML error, stdin,
links, anchors, compact JSON, notices, the API server down), run as the real command."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import yaml

from tests.cli.conftest import Run

NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n"
LABELLED = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n  labels:\n    qos-guard.io/mode: enforce\n"
SERVICE = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports: [{port: 80}]\n"


def test_an_unlabelled_namespace_is_nothing_to_judge(qos_guard: Run, tmp_path: Path) -> None:
    """A Namespace is judged by its qos-guard.io/mode label; without one there is nothing to judge, so a file of
    such a Namespace and a Service is refused as any file with nothing to judge (it passed as 1 object)."""
    path = tmp_path / "ns.yaml"
    path.write_text(NAMESPACE + "---\n" + SERVICE)
    out = qos_guard("check", str(path))
    assert out.returncode == 2, out.stderr
    assert "0 objects checked" in out.stderr and "1 Namespace without a qos-guard.io/mode label" in out.stderr
    assert "nothing to judge" in out.stderr
    path.write_text(LABELLED + "---\n" + NAMESPACE)
    out = qos_guard("check", str(path))
    assert out.returncode == 0, out.stderr
    assert "1 object checked" in out.stderr, out.stderr


FRACTIONAL = """apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: app
    image: i
    resources:
      limits: {{cpu: 1500m, memory: 1Gi}}
"""
ROUND_UP = "mutation: {cpuRounding: up}\n"


def test_a_missing_file_is_one_error_without_a_line_0(qos_guard: Run, tmp_path: Path) -> None:
    """It was two errors (the file, then "nothing to judge") and shown at line 0."""
    out = qos_guard("check", str(tmp_path / "missing.yaml"), "--format", "json")
    assert out.returncode == 2
    report = json.loads(out.stdout)
    assert report["errors"] == [{"file": str(tmp_path / "missing.yaml"), "line": None,
                                 "message": "no such file or directory"}]
    assert report["summary"]["errors"] == 1
    text = qos_guard("check", str(tmp_path / "missing.yaml"))
    assert text.stdout == f"{tmp_path / 'missing.yaml'}: error: no such file or directory\n"
    assert "nothing to judge" not in text.stderr and "1 error" in text.stderr


def test_a_yaml_error_in_one_document_leaves_the_next_judged(qos_guard: Run, tmp_path: Path) -> None:
    """Document 3 of 3 was silently skipped after an error in document 2."""
    path = tmp_path / "three.yaml"
    path.write_text(FRACTIONAL.format(name="one") + "---\nkind: Pod\nbad: [\n---\n" + FRACTIONAL.format(name="three"))
    out = qos_guard("check", str(path), "--format", "json")
    report = json.loads(out.stdout)
    assert out.returncode == 1, out.stderr
    assert [e["line"] for e in report["errors"]] == [14] and "YAML does not parse" in report["errors"][0]["message"]
    assert {v["name"] for v in report["violations"]} == {"one", "three"}


def test_check_and_fix_say_an_error_alike_and_name_stdin_alike(qos_guard: Run, tmp_path: Path) -> None:
    """check wrote `file:line: error:`, fix `file: error: line N:`; check named stdin `<stdin>`, fix `-`."""
    path = tmp_path / "broken.yaml"
    text = FRACTIONAL.format(name="p") + "  bad: [\n"
    path.write_text(text)
    check = qos_guard("check", str(path))
    fix = qos_guard("fix", str(path))
    (line,) = check.stdout.splitlines()
    assert line.startswith(f"{path}:12: error: YAML does not parse")
    assert fix.stdout == f"{line}; not changed\n", fix.stdout
    check_in = qos_guard("check", "-", stdin=text)
    fix_in = qos_guard("fix", "-", stdin=text)
    assert check_in.stdout.startswith("<stdin>:12: error: YAML does not parse")
    assert fix_in.stderr.startswith(check_in.stdout.strip() + "; not changed"), fix_in.stderr
    assert fix_in.stdout == text  # a filter gives back what it cannot fix


def test_fix_with_nothing_to_judge_fails_as_check_does(qos_guard: Run, tmp_path: Path) -> None:
    """check exits 2 on a file with no Pod or workload; fix exited 0."""
    path = tmp_path / "svc.yaml"
    path.write_text(SERVICE)
    for command in ("check", "fix"):
        out = qos_guard(command, str(path))
        assert out.returncode == 2, (command, out.stderr)
        assert "nothing to judge: no Pod or workload in" in out.stderr and "skipped: 1 Service" in out.stderr
        assert qos_guard(command, str(path), "--allow-empty").returncode == 0
    assert qos_guard("fix", "-", stdin=SERVICE).returncode == 2


def test_fix_on_a_refused_link_does_not_claim_nothing_is_left(qos_guard: Run, tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text(FRACTIONAL.format(name="p"))
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "link.yaml").symlink_to(outside)
    out = qos_guard("fix", str(tmp_path / "repo"))
    assert out.returncode == 2
    assert "is a link to" in out.stdout
    assert "0 violations left in the files read, 1 error" in out.stderr, out.stderr


def test_fix_writes_no_request_where_only_a_limit_is_set(qos_guard: Run, tmp_path: Path) -> None:
    """The request defaults to the limit: fix added `requests.cpu` all the same."""
    path = tmp_path / "pod.yaml"
    path.write_text(FRACTIONAL.format(name="p"))
    (tmp_path / "config.yaml").write_text(ROUND_UP)
    out = qos_guard("fix", "--config", str(tmp_path / "config.yaml"), str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert path.read_text() == FRACTIONAL.format(name="p").replace("cpu: 1500m", 'cpu: "2"')
    assert ('set resources.limits.cpu to 2, the next whole number of CPUs: +0.5 CPU reserved exclusively (the '
            'request defaults to it)') in out.stdout
    assert "requests" not in out.stdout


def test_fix_keeps_compact_json_compact(qos_guard: Run, tmp_path: Path) -> None:
    path = tmp_path / "pod.json"
    path.write_text('{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a",'
                    '"image":"i","resources":{"requests":{"cpu":"2","memory":"1Gi"}}}]}}\n')
    assert qos_guard("fix", str(path)).returncode == 0
    fixed = path.read_text()
    assert '"resources":{"limits":{"cpu":"2","memory":"1Gi"},"requests":' in fixed, fixed
    assert ": " not in fixed and ", " not in fixed
    assert json.loads(fixed)["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "2", "memory": "1Gi"}


DRA_POD = """apiVersion: v1
kind: Pod
metadata: {name: gpu}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]
  containers:
  - name: app
    image: i
    resources:
      limits: {cpu: "2", memory: 1Gi}
      claims: [{name: gpu}]
"""


def test_notices_are_counted_and_junit_names_their_rule(qos_guard: Run, tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(DRA_POD)
    text = qos_guard("check", str(path))
    assert text.returncode == 0 and "notice: dra-unaligned: " in text.stdout
    assert "1 object checked, 0 violations, 1 notice, 0 errors" in text.stderr, text.stderr
    assert json.loads(qos_guard("check", str(path), "--format", "json").stdout)["summary"]["notices"] == 1
    junit = ET.fromstring(qos_guard("check", str(path), "--format", "junit").stdout)
    (out,) = [e.text or "" for e in junit.iter("system-out")]
    assert ": notice: dra-unaligned: " in out, out


def test_numa_auto_with_the_api_server_down_is_a_counted_notice(qos_guard: Run, tmp_path: Path) -> None:
    """Fail-open as documented, but no longer silent in the summary: "0 errors" and nothing else."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    (tmp_path / "config.yaml").write_text("policy: {numa: auto}\n")
    path = tmp_path / "pod.yaml"
    path.write_text(FRACTIONAL.format(name="p").replace("1500m", "2"))
    out = qos_guard("check", "--config", str(tmp_path / "config.yaml"), "--kubeconfig", str(kubeconfig), str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{kubeconfig}: notice: numa-unfit: policy.numa: auto: numa-unfit is not judged" in out.stdout, out.stdout
    assert "1 object checked, 0 violations, 1 notice, 0 errors" in out.stderr, out.stderr
    report = json.loads(qos_guard("check", "--config", str(tmp_path / "config.yaml"), "--kubeconfig",
                                  str(kubeconfig), str(path), "--format", "json").stdout)
    assert report["summary"]["notices"] == 1 and report["notices"][0]["rule"] == "numa-unfit"


ANCHORED = """apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}], selector: {app: web}}
---
apiVersion: v1
kind: Pod
metadata:
  name: shared
spec:
  containers:
    - name: a
      image: x
      resources: &res
        limits:
          cpu: 500m
          memory: 1Gi
    - name: b
      image: x
      resources: *res
---
apiVersion: v1
kind: Pod
metadata:
  name: one-use
spec:
  containers:
    - name: a
      image: x
      resources:
        limits: &lim {cpu: 1500m, memory: 1Gi}
  initContainers:
    - name: i
      image: x
      resources:
        limits: {cpu: "2", memory: 1Gi}
        requests: {memory: 1Gi, cpu: "2"}
      env: [{name: LIMITS, value: x}]
    - name: j
      image: x
      resources:
        limits: *lim
        requests: *lim
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c}
data: {k: v}
"""


def test_fix_edits_only_what_it_changes_where_values_sit_under_anchors(qos_guard: Run, tmp_path: Path) -> None:
    """A value under an anchor made fix rewrite the whole file (the Service's flow mapping changed, &res renamed
    &id001, *res expanded). Now: a value every alias needs changed alike is written at the anchor, saying so;
    one whose aliases need it unchanged is refused by name; every other byte stays."""
    path = tmp_path / "anchors.yaml"
    path.write_text(ANCHORED)
    # j may keep a fractional cpu: the 1500m it shares with a through &lim must stay for it
    (tmp_path / "config.yaml").write_text(ROUND_UP + "policy: {fractionalCPUContainers: [j]}\n")
    out = qos_guard("fix", "--config", str(tmp_path / "config.yaml"), str(path))
    assert out.returncode == 1, out.stdout + out.stderr  # the refused change is a violation left
    fixed = path.read_text()
    assert fixed == ANCHORED.replace("          cpu: 500m\n", '          cpu: "1"\n'), fixed
    assert "(written at the YAML anchor &res: its alias gets it too)" in out.stdout
    assert ("Pod/one-use: not fixed: container \"a\": set resources.limits.cpu to 2, the next whole number of "
            "CPUs") in out.stdout
    assert "is under the YAML anchor &lim, shared by 2 aliases, and not every use needs this change" in out.stdout
    dry = qos_guard("fix", "--config", str(tmp_path / "config.yaml"), "--dry-run", str(path))
    assert dry.stdout == "" and dry.returncode == 1  # fixed once: nothing more to write


def test_fix_gives_checks_template_hint(qos_guard: Run, tmp_path: Path) -> None:
    path = tmp_path / "deployment.yaml"
    path.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n  x: [\n")
    check = qos_guard("check", str(path))
    fix = qos_guard("fix", str(path))
    assert "(the file holds {{ }}: a Helm or Go template? render it first: helm template" in check.stdout
    assert ("(the file holds {{ }}: a Helm or Go template? fix edits manifests, not templates: change the chart's "
            "values or templates; render it first: helm template") in fix.stdout, fix.stdout


def test_a_fractional_limit_above_its_request_gets_one_piece_of_advice(qos_guard: Run, tmp_path: Path) -> None:
    """request 6, limit 6.5: "set the request to 6.5", then "6.5 is not whole". Now both findings agree."""
    path = tmp_path / "isvc.yaml"
    path.write_text("apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: m, annotations: "
                    "{serving.kserve.io/deploymentMode: RawDeployment}}\nspec:\n"
                    "  predictor:\n    containers:\n    - name: kserve-container\n      image: i\n      resources:\n"
                    "        requests: {cpu: \"6\", memory: 8Gi}\n        limits: {cpu: \"6.5\", memory: 8Gi}\n")
    out = qos_guard("check", str(path))
    assert out.returncode == 1
    differs, fractional = out.stdout.splitlines()
    assert differs.endswith("cpu request 6 differs from its limit 6.5; set resources.requests.cpu and "
                            "resources.limits.cpu to one whole number of CPUs: use 6 or 7"), differs
    assert fractional.endswith("cpu limit 6.5 is not a whole number of CPUs; use 6 or 7"), fractional
    # a container allowed a fractional cpu, and memory, keep "set the request to the limit"
    (tmp_path / "config.yaml").write_text("policy: {fractionalCPUContainers: [kserve-container]}\n")
    allowed = qos_guard("check", "--config", str(tmp_path / "config.yaml"), str(path))
    assert allowed.stdout.strip().endswith("set resources.requests.cpu to 6.5"), allowed.stdout
