"""``fix --dry-run``'s diff: a valid unified diff that ``patch -p1`` applies to give exactly what an in-place
``fix`` writes, for every layout fix edits (no newline at the end, CRLF, a BOM, JSON edited in place or
written whole, a document rewritten by the round trip, lines holding characters ``str.splitlines`` cuts at),
and built from the edits, not by difflib over the whole file (about quadratic: a 20 MB file did not finish)."""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.conftest import Run
from webhook.batch.runner import fix_paths
from webhook.batch.unified import apply_edits, unified_diff
from webhook.core.config import parse_config

# Judged at 1.36, where whole.json's empty pod-level block makes the Pod BestEffort and fix removes it (from 1.37
# the block no longer decides and there would be nothing to change in that file).
ROUND_UP = "mutation: {cpuRounding: up}\nkubernetesVersion: '1.36'\n"
POD = """apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: app
    image: i  # a comment
    resources:
      limits: {{cpu: 1500m, memory: 1Gi}}
"""
FILES = {
    "no-newline.yaml": POD.format(name="a").rstrip("\n"),
    "crlf.yaml": POD.format(name="b").replace("\n", "\r\n"),
    "bom.yaml": "\ufeff" + POD.format(name="c"),
    "stream.yaml": "---\n" + "---\n".join(POD.format(name=f"s{i}") for i in range(5)) + "# the end\n",
    "status.yaml": POD.format(name="d") + "status:\n  qosClass: Burstable\n",  # removing it: the round trip
    # U+2028 ends a line for str.splitlines (not for patch): as it is in a JSON string
    "compact.json": json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e"}, "spec": {
        "containers": [{"name": "app", "image": "i\u2028j",
                        "resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}}}]}},
        indent=2, ensure_ascii=False),
    "whole.json": json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "f"}, "spec": {
        "containers": [{"name": "app", "image": "i", "resources": {}}],
        "resources": {}}}, indent="\t") + "\n",
}


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith((".orig", ".rej"))}


def test_the_dry_run_diff_patches_to_what_fix_writes(qos_guard: Run, tmp_path: Path) -> None:
    work, patched = tmp_path / "work", tmp_path / "patched"
    work.mkdir()
    for name, text in FILES.items():
        (work / name).write_bytes(text.encode("utf-8"))
    config = tmp_path / "config.yaml"
    config.write_text(ROUND_UP)
    shutil.copytree(work, patched)
    # bytes, not text: a text capture turns the CRLF file's \r\n into \n
    dry = subprocess.run([sys.executable, "-m", "webhook.cli", "fix", "--config", str(config), "--dry-run", "."],
                         cwd=work, capture_output=True, timeout=300, check=False)
    assert b"Traceback" not in dry.stderr and b" 0 errors" in dry.stderr, dry.stderr
    assert _tree(work) == _tree(patched)  # nothing written
    for name in FILES:
        assert f"--- a/{name}\n".encode() in dry.stdout, name
    assert dry.stdout.count(b"\\ No newline at end of file\n") == 2, dry.stdout  # the old and the new last line
    applied = subprocess.run(["patch", "-p1", "--quiet", "--binary"], input=dry.stdout,
                             cwd=patched, capture_output=True, check=False)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    real = qos_guard("fix", "--config", str(config), ".", cwd=work)
    assert real.returncode == dry.returncode, real.stdout + real.stderr
    assert _tree(work) == _tree(patched)
    assert _tree(work)["crlf.yaml"].count(b"\r\n") == _tree(work)["crlf.yaml"].count(b"\n")


def test_the_diff_is_not_difflib_over_the_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 Pods in one file: no difflib matcher sees more than one document's lines (it saw all 20,000)."""
    path = tmp_path / "pods.yaml"
    path.write_text("---\n".join(POD.format(name=f"p{i}") for i in range(2000)))
    seen: list[int] = []
    real = difflib.SequenceMatcher.set_seqs

    def spy(self: difflib.SequenceMatcher[Any], a: Any, b: Any) -> None:
        seen.append(max(len(a), len(b)))
        real(self, a, b)

    monkeypatch.setattr(difflib.SequenceMatcher, "set_seqs", spy)
    diffs: list[str] = []
    tally = fix_paths([str(path)], parse_config({"mutation": {"cpuRounding": "up"}}), None, lambda _: None,
                      dry_run=True, print_diff=diffs.append)
    assert tally.changed == 1 and len(diffs) == 1
    assert diffs[0].count("\n+      limits: {cpu: \"2\", memory: 1Gi}") + diffs[0].count(
        "\n+      limits: {cpu: 2, memory: 1Gi}") == 2000, diffs[0][:400]
    assert max(seen, default=0) <= 12, max(seen)


LINES = st.lists(st.sampled_from(["a\n", "b\n", "cpu: 1\n", "x\r\n", "\x0c\n", "\u2028\n", "\n"]), max_size=25)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=LINES, cut_last=st.booleans(), data=st.data())
def test_any_edits_give_a_diff_patch_applies(tmp_path: Path, lines: list[str], cut_last: bool,
                                             data: st.DataObject) -> None:
    old = "".join(lines)
    if cut_last:
        old = old.rstrip("\n")
    points = sorted(data.draw(st.lists(st.integers(0, len(old)), max_size=8, unique=True)))
    replacements = st.sampled_from(["", "Z", "Q\n", "\nW\n", "M\nN", "\n", "\r\n"])
    edits = [(points[i], points[i + 1], data.draw(replacements)) for i in range(0, len(points) - 1, 2)]
    new = apply_edits(old, edits)
    diff = unified_diff(old, edits, "a/f", "b/f")
    assert bool(diff) == (old != new)
    target = tmp_path / "f"
    target.write_bytes(old.encode("utf-8"))
    if diff:
        applied = subprocess.run(["patch", "-p1", "--quiet", "--binary", "-r", "-"], input=diff.encode("utf-8"),
                                 cwd=tmp_path, capture_output=True, check=False)
        assert applied.returncode == 0, (applied.stdout, applied.stderr, diff)
    assert target.read_bytes().decode("utf-8") == new
