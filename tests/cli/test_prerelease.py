"""Kubernetes 1.38 before its release: judged from its pre-release (v1.38.0-beta.0), said in every answer, and
never the default (run as the real command, and through the webhook's application)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Run
from tests.helpers import admission_review
from webhook.core.config import parse_config
from webhook.serving.app import create_app

ROOT = Path(__file__).resolve().parents[2]
NOTE = "Kubernetes 1.38 is judged from its pre-release v1.38.0-beta.0: an answer may change at 1.38.0"
EMPTY_BLOCK = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  resources: {}\n  containers:\n"
               "  - name: a\n    image: a\n    resources: {limits: {cpu: '2', memory: 1Gi}}\n")


@pytest.mark.parametrize("example", ["deployment.yaml", "broken-deployment.yaml", "inference-pod.yaml"])
def test_the_examples_judged_at_1_38_as_at_1_37_and_1_38_says_its_pre_release(qos_guard: Run, example: str) -> None:
    """1.38 changes no field of the semantics table: each of the examples gets 1.37's answer, and the run at
    1.38 says once, on stderr, which pre-release it judged from (1.37's run says nothing of the kind)."""
    path = str(ROOT / "examples" / example)
    at_37 = qos_guard("check", "--kubernetes-version", "1.37", "--format", "json", path)
    at_38 = qos_guard("check", "--kubernetes-version", "v1.38.0-beta.0", "--format", "json", path)
    assert at_38.returncode == at_37.returncode and at_37.returncode in (0, 1), at_38.stderr
    assert json.loads(at_38.stdout) == json.loads(at_37.stdout)
    assert f"qos-guard: {NOTE}; --kubernetes-version 1.37 judges with the newest released minor" in at_38.stderr
    assert "pre-release" not in at_37.stderr


def test_the_empty_pod_level_block_at_1_38_and_the_default(qos_guard: Run, tmp_path: Path) -> None:
    """The README's example: Guaranteed and pinned from 1.37 on (1.38 included), BestEffort on 1.36; no flag
    judges at 1.37 (the newest released), silently."""
    path = tmp_path / "pod-with-empty-resources.yaml"
    path.write_text(EMPTY_BLOCK)
    assert qos_guard("check", "--kubernetes-version", "1.36", str(path)).returncode == 1
    at_38 = qos_guard("check", "--kubernetes-version", "1.38", str(path))
    assert at_38.returncode == 0 and NOTE in at_38.stderr
    default = qos_guard("check", str(path))
    assert default.returncode == 0 and "pre-release" not in default.stderr


def test_a_minor_past_the_pre_release_is_refused_naming_the_supported(qos_guard: Run, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(EMPTY_BLOCK)
    out = qos_guard("check", "--kubernetes-version", "1.39", str(path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "Kubernetes 1.39 is not supported: qos-guard judges 1.33 to 1.38" in out.stderr


def _answer(minor: str, obj: dict[str, Any], path: str = "/validate") -> dict[str, Any]:
    app = create_app(parse_config({"kubernetesVersion": minor}))
    r = app.test_client().post(path, data=json.dumps(admission_review(obj)), content_type="application/json")
    assert r.status_code == 200, r.get_data(as_text=True)
    return r.get_json()["response"]  # type: ignore[no-any-return]


def test_an_admission_answer_at_1_38_says_its_pre_release() -> None:
    """A denial at 1.38 ends with the note, a warning answer carries it as one more warning (under Kubernetes'
    120 characters, not cut), in parentheses: no reader of "rule: message" lines takes it for a rule; an answer
    with nothing to say stays empty; at 1.37 none of it."""
    bad = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "a", "image": "a", "resources": {"limits": {"cpu": "1500m",
                                                                                        "memory": "1Gi"}}}]}}
    denied = _answer("1.38", bad)
    assert denied["allowed"] is False and denied["status"]["message"].endswith(f"\n({NOTE})")
    assert NOTE not in _answer("1.37", bad)["status"]["message"]
    warned = _answer("1.38", bad, "/warn")
    assert warned["allowed"] is True and warned["warnings"][-1] == f"({NOTE})"
    assert all(NOTE not in w for w in _answer("1.37", bad, "/warn").get("warnings", []))
    good = {**bad, "spec": {"containers": [{"name": "a", "image": "a",
                                            "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}}
    assert _answer("1.38", good) == {"uid": "uid-1", "allowed": True}
