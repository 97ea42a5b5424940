"""A Kubernetes minor before its release: judged from its pre-release (1.38 from v1.38.0-beta.0 until v1.38.0 is
served), said in every answer, and never the default (run as the real command, and through the webhook's
application). Each test runs at the minors the live table judges from a pre-release (``kubeversion.PRERELEASES``)
and at a stand-in one (``tests.helpers.pre_release_minors``), so it runs, and can fail, after release day too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Run
from tests.helpers import admission_review, judged_from, pre_release_minors
from webhook.core.config import parse_config
from webhook.core.kubeversion import DEFAULT, PRERELEASES, SUPPORTED
from webhook.serving.app import create_app

ROOT = Path(__file__).resolve().parents[2]
EMPTY_BLOCK = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  resources: {}\n  containers:\n"
               "  - name: a\n    image: a\n    resources: {limits: {cpu: '2', memory: 1Gi}}\n")
RELEASED = str(DEFAULT.minor)  # the newest minor released as GA: what judges when nothing says


def note(minor: int, release: str) -> str:
    return f"Kubernetes 1.{minor} is judged from its pre-release {release}: an answer may change at 1.{minor}.0"


@pytest.mark.parametrize(("minor", "release"), pre_release_minors())
@pytest.mark.parametrize("example", ["deployment.yaml", "broken-deployment.yaml", "inference-pod.yaml"])
def test_the_examples_judged_at_a_pre_release_as_at_the_newest_released_and_said(
        qos_guard: Run, monkeypatch: pytest.MonkeyPatch, example: str, minor: int, release: str) -> None:
    """1.38 changes no field the examples reach (and the stand-in answers as the newest supported minor): each gets
    the newest released minor's answer, and the run at the pre-release says once, on stderr, which release it
    judged from and which flag judges with the newest released minor (that minor's run says nothing of the kind)."""
    judged_from(monkeypatch, minor, release)
    path = str(ROOT / "examples" / example)
    before = qos_guard("check", "--kubernetes-version", RELEASED, "--format", "json", path)
    at_pre = qos_guard("check", "--kubernetes-version", release, "--format", "json", path)
    assert at_pre.returncode == before.returncode and before.returncode in (0, 1), at_pre.stderr
    assert json.loads(at_pre.stdout) == json.loads(before.stdout)
    assert (f"qos-guard: {note(minor, release)}; --kubernetes-version {RELEASED} judges with the newest released "
            "minor") in at_pre.stderr
    assert "pre-release" not in before.stderr


def test_the_empty_pod_level_block_at_1_38_and_the_default(qos_guard: Run, tmp_path: Path) -> None:
    """The README's example: Guaranteed and pinned from 1.37 on (1.38 included), BestEffort on 1.36; no flag
    judges at the newest released minor, silently; 1.38 says its pre-release while the table judges it from one."""
    path = tmp_path / "pod-with-empty-resources.yaml"
    path.write_text(EMPTY_BLOCK)
    assert qos_guard("check", "--kubernetes-version", "1.36", str(path)).returncode == 1
    at_38 = qos_guard("check", "--kubernetes-version", "1.38", str(path))
    assert at_38.returncode == 0
    assert ("pre-release" in at_38.stderr) == (38 in PRERELEASES), at_38.stderr
    if 38 in PRERELEASES:
        assert note(38, PRERELEASES[38]) in at_38.stderr
    default = qos_guard("check", str(path))
    assert default.returncode == 0 and "pre-release" not in default.stderr


def test_a_minor_past_the_newest_is_refused_naming_the_supported(qos_guard: Run, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(EMPTY_BLOCK)
    newest = max(SUPPORTED)
    out = qos_guard("check", "--kubernetes-version", f"1.{newest.minor + 1}", str(path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert (f"Kubernetes 1.{newest.minor + 1} is not supported: qos-guard judges {min(SUPPORTED)} to {newest}"
            in out.stderr)


def _answer(minor: str, obj: dict[str, Any], path: str = "/validate") -> dict[str, Any]:
    app = create_app(parse_config({"kubernetesVersion": minor}))
    r = app.test_client().post(path, data=json.dumps(admission_review(obj)), content_type="application/json")
    assert r.status_code == 200, r.get_data(as_text=True)
    return r.get_json()["response"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("minor", "release"), pre_release_minors())
def test_an_admission_answer_at_a_pre_release_says_so(monkeypatch: pytest.MonkeyPatch, minor: int,
                                                      release: str) -> None:
    """A denial at the pre-release ends with the note, a warning answer carries it as one more warning (under
    Kubernetes' 120 characters, not cut), in parentheses: no reader of "rule: message" lines takes it for a rule;
    an answer with nothing to say stays empty; at the newest released minor none of it."""
    judged_from(monkeypatch, minor, release)
    said = note(minor, release)
    bad = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "a", "image": "a", "resources": {"limits": {"cpu": "1500m",
                                                                                        "memory": "1Gi"}}}]}}
    denied = _answer(f"1.{minor}", bad)
    assert denied["allowed"] is False and denied["status"]["message"].endswith(f"\n({said})")
    assert "pre-release" not in _answer(RELEASED, bad)["status"]["message"]
    warned = _answer(f"1.{minor}", bad, "/warn")
    assert warned["allowed"] is True and warned["warnings"][-1] == f"({said})"
    assert all("pre-release" not in w for w in _answer(RELEASED, bad, "/warn").get("warnings", []))
    good = {**bad, "spec": {"containers": [{"name": "a", "image": "a",
                                            "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}}
    assert _answer(f"1.{minor}", good) == {"uid": "uid-1", "allowed": True}
