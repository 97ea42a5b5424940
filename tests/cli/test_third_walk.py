"""What a new user tripped over on the third walk through ``check`` and ``fix``, run as the real command."""

from __future__ import annotations

from pathlib import Path

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
