"""``check`` and ``fix`` read files as kubectl does (docs/contract.md#commands-and-exit-codes): end to end through
the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Run

POD = "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: c\n    resources:\n" \
      "      limits: {{cpu: {cpu}, memory: 1Gi}}\n"


def test_base_60_is_not_a_number(qos_guard: Run, tmp_path: Path) -> None:
    """PyYAML read ``cpu: 1:00`` as 60 and passed a Pod the API server refuses ("1:00" is no quantity)."""
    path = tmp_path / "p.yaml"
    path.write_text(POD.format(name="sixty", cpu="1:00"))
    out = qos_guard("check", str(path), "--format", "json")
    assert out.returncode == 1
    assert [v["rule"] for v in json.loads(out.stdout)["violations"]] == ["invalid-quantity"]


def test_octal_and_repeated_keys(qos_guard: Run, tmp_path: Path) -> None:
    """``010`` is 8 (whole); a repeated key keeps its last value instead of refusing the file."""
    path = tmp_path / "p.yaml"
    path.write_text(POD.format(name="eight", cpu="010").replace("kind: Pod\n", "kind: Pod\nkind: Pod\n"))
    out = qos_guard("check", str(path))
    assert (out.returncode, out.stdout) == (0, ""), out.stdout
    assert "1 object checked" in out.stderr


def test_separator_content_and_json_streams(qos_guard: Run, tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(POD.format(name="a", cpu="2") + "--- kind: Pod\n")
    (tmp_path / "b.json").write_text(
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j1"}}\n'
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j2"},'
        ' "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}}]}}\n')
    (tmp_path / "c.json").write_text('[{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}]\n')
    out = qos_guard("check", str(tmp_path), "--format", "json")
    report = json.loads(out.stdout)
    assert out.returncode == 1  # j2's fractional cpu
    assert {v["name"] for v in report["violations"]} == {"j2"}
    errors = {(Path(e["file"]).name, e["line"]): e["message"] for e in report["errors"]}
    assert errors == {
        ("a.yaml", 9): "invalid YAML document separator: 'kind: Pod' (only a comment may follow ---)",
        ("c.json", 1): "document is a list, not an object; kubectl refuses it: put the objects in the items of a "
                       "kind: List, or separate them with ---",
    }
    only_array = qos_guard("check", str(tmp_path / "c.json"))
    assert only_array.returncode == 2 and "0 objects checked" in only_array.stderr
