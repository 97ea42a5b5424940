"""``qos-guard fix`` rewrites manifests so that what mutation can fix passes ``check --mode enforce``,
keeping comments and key order."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.cli.conftest import CORPORA, MANIFESTS, Run


def test_fix_in_place_keeps_comments_and_order(qos_guard: Run, tmp_path: Path) -> None:
    path = tmp_path / "workloads.yaml"
    shutil.copy(MANIFESTS / "workloads.yaml", path)
    out = qos_guard("fix", str(path))
    assert out.returncode == 1  # fractional cpu and the invalid quantity cannot be fixed
    assert "Deployment/unequal: fixed: container \"server\": set resources.requests.cpu to 2 (its limit)" in out.stdout
    assert "cannot be fixed automatically" in out.stdout
    text = path.read_text()
    assert "# One of every workload kind" in text and "cpu: 1500m   # not whole" in text
    assert text.index("kind: Pod") < text.index("kind: Deployment") < text.index("kind: Service")
    report = json.loads(qos_guard("check", str(path), "--format", "json").stdout)
    assert {(v["name"], v["rule"]) for v in report["violations"]} == {
        ("fractional", "cpu-not-integer"), ("badquantity", "invalid-quantity"), ("nightly", "cpu-not-integer")}
    assert all(not v["fixable"] for v in report["violations"])
    assert qos_guard("fix", str(path)).stdout.count("fixed:") == 0  # idempotent


def test_fix_output_dir_and_json(qos_guard: Run, tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    original = (MANIFESTS / "nested" / "list.json").read_text()
    result = qos_guard("fix", str(MANIFESTS / "nested" / "list.json"), "--output", str(out_dir))
    assert result.returncode == 0
    assert (MANIFESTS / "nested" / "list.json").read_text() == original
    fixed = json.loads((out_dir / "list.json").read_text())
    assert fixed["items"][0]["spec"]["containers"][0]["resources"]["requests"]["memory"] == "2Gi"
    assert list(fixed) == ["apiVersion", "kind", "items"]


def test_fix_refuses_unparsable_file(qos_guard: Run, tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    shutil.copy(MANIFESTS / "nested" / "broken.yaml", path)
    before = path.read_text()
    result = qos_guard("fix", str(path))
    assert result.returncode == 1  # a violation left and an error: 1, as check exits with both
    # laid out as check lays it out (file:line: error:)
    assert (f"{path}:16: error: YAML does not parse: mapping values are not allowed in this context; this document "
            "not changed" in result.stdout)
    # the document before it is read and judged, as check judges it (its fractional cpu is left)
    assert f"{path}:10: Pod/before-error: cpu-not-integer:" in result.stdout
    assert path.read_text() == before


@pytest.mark.parametrize("corpus", CORPORA)
def test_fix_corpus_copy(qos_guard: Run, tmp_path: Path, corpus: Path) -> None:
    copy = tmp_path / "corpus"
    shutil.copytree(corpus, copy)
    for p in copy.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    before = json.loads(qos_guard("check", str(copy), "--format", "json").stdout)
    qos_guard("fix", str(copy))
    after = json.loads(qos_guard("check", str(copy), "--format", "json").stdout)
    broken = {e["file"] for e in before["errors"]}
    fixable = {(v["file"], v["name"], v["rule"], v["path"]) for v in before["violations"]
               if v["fixable"] and v["file"] not in broken}
    left = {(v["file"], v["name"], v["rule"], v["path"]) for v in after["violations"]}
    assert fixable and not fixable & left
    assert all(not v["fixable"] for v in after["violations"] if v["file"] not in broken)
    # Comments survive: every comment line of a fixed file is still there.
    for original in corpus.rglob("*.yaml"):
        fixed = copy / original.relative_to(corpus)
        comments = [ln.strip() for ln in original.read_text().splitlines() if ln.strip().startswith("#")]
        fixed_text = fixed.read_text()
        assert all(c in fixed_text for c in comments), fixed


# --- a JSON file keeps its layout: only the changed values change, in the file's own indent ---


HAND_FORMATTED = """{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "vllm", "labels": {"app": "vllm",   "tier": "inference"}},
  "spec": {
    "replicas": 2,
    "selector": {"matchLabels": {"app": "vllm"}},
    "template": {
      "metadata": {"labels": {"app": "vllm"}},
      "spec": {
        "containers": [
          {"name": "vllm",    "image": "vllm:1",
           "resources": {"requests": {"cpu": "3", "memory": "16Gi"}, "limits": {"cpu": "4", "memory": "16Gi"}}},
          {"name": "metrics", "image": "exporter:2",
           "resources": {"limits": {"cpu": "1", "memory": "64Mi"}}},
          {"name": "logs",    "image": "fluent:3",
           "resources": {"requests": {"cpu": "1", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "64Mi"}}}
        ]
      }
    }
  }
}
"""


def _changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    a, b = before.splitlines(), after.splitlines()
    assert len(a) == len(b), after
    return [(x, y) for x, y in zip(a, b, strict=True) if x != y]


def test_fix_changes_only_the_changed_values_of_a_hand_formatted_json_file(qos_guard: Run, tmp_path: Path) -> None:
    """`fix` re-indented the whole file: one changed value, every line changed."""
    path = tmp_path / "vllm.json"
    path.write_text(HAND_FORMATTED)
    out = qos_guard("fix", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    after = path.read_text()
    (changed,) = _changed_lines(HAND_FORMATTED, after)
    assert changed[1] == changed[0].replace('"requests": {"cpu": "3"', '"requests": {"cpu": "4"')
    check = json.loads(qos_guard("check", str(path), "--format", "json").stdout)
    assert check["violations"] == [] and check["summary"]["objects"] == 1


TABBED = ('{\n\t"apiVersion": "v1",\n\t"kind": "Pod",\n\t"metadata": {\n\t\t"name": "tabbed"\n\t},\n'
          '\t"spec": {\n\t\t"containers": [\n\t\t\t{\n\t\t\t\t"name": "app",\n\t\t\t\t"image": "app:1",\n'
          '\t\t\t\t"resources": {\n\t\t\t\t\t"requests": {\n\t\t\t\t\t\t"cpu": "2",\n\t\t\t\t\t\t"memory": "1Gi"\n'
          '\t\t\t\t\t}\n\t\t\t\t}\n\t\t\t}\n\t\t]\n\t},\n\t"status": {\n\t\t"qosClass": "Burstable"\n\t}\n}\n')


def test_fix_keeps_a_tab_indented_json_pod_tab_indented(qos_guard: Run, tmp_path: Path) -> None:
    """A tab-indented JSON Pod came out on one line. Here a removal (status.qosClass) and a new block
    (resources.limits, set from the requests) are written in the file's tabs. Judged at 1.36, where the API
    server keeps a copied status.qosClass and fix removes it (from 1.37 it is reset on create: no removal)."""
    path = tmp_path / "pod.json"
    path.write_text(TABBED)
    assert qos_guard("fix", "--kubernetes-version", "1.36", str(path)).returncode == 0
    after = path.read_text()
    assert after.startswith('{\n\t"apiVersion": "v1",\n\t"kind": "Pod",\n\t"metadata": {\n\t\t"name": "tabbed"\n')
    lines = after.splitlines()
    assert len(lines) > 10 and all(not line.startswith(" ") for line in lines), after
    assert json.loads(after)["status"] == {}
    assert ('\t\t\t\t"resources": {\n\t\t\t\t\t"limits": {\n\t\t\t\t\t\t"cpu": "2",\n\t\t\t\t\t\t"memory": "1Gi"\n'
            '\t\t\t\t\t},\n\t\t\t\t\t"requests": {\n') in after, after
    assert qos_guard("check", "--kubernetes-version", "1.36", str(path)).returncode == 0


def test_fix_rewrites_a_json_file_whole_in_its_own_tab_indent_when_it_must(qos_guard: Run, tmp_path: Path) -> None:
    """An empty `resources: {}` gives no layout to follow: the file is written whole, still with tabs."""
    path = tmp_path / "pod.json"
    path.write_text('{\n\t"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},\n\t"spec": {"containers": '
                    '[{"name": "a", "image": "a", "resources": {"limits": {}, "requests": {"cpu": "1", '
                    '"memory": "1Gi"}}}]}\n}\n')
    assert qos_guard("fix", str(path)).returncode == 0
    after = path.read_text()
    assert "\n\t\"apiVersion\"" in after and not re.search(r"^ ", after, re.M)
    assert json.loads(after)["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
