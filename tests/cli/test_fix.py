"""``qos-guard fix`` rewrites manifests so that what mutation can fix passes ``check --mode enforce``,
keeping comments and key order."""

from __future__ import annotations

import json
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
