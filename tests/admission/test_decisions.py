"""Admission decisions, one example per behaviour, through the Flask application in-process (the real
gunicorn + TLS server is tested in tests/server for what needs it: TLS, lifecycle, limits)."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from flask.testing import FlaskClient

from tests.helpers import admission_review, container, guaranteed, pod, rl
from webhook.core.config import parse_config
from webhook.core.podspec import GUARANTEED
from webhook.core.qos import qos_class
from webhook.core.workloads import find_targets
from webhook.serving.app import create_app

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "admission-review.json").read_text())
BAD_POD = EXAMPLE["request"]["object"]
CONFIG = parse_config({"exemptions": {"namespaces": ["exempt-ns"], "usernames": ["system:admin"],
                                      "runtimeClassNames": ["kata"]}})


class Client:
    """The application's test client, posting AdmissionReviews as the API server does."""

    def __init__(self, flask: FlaskClient) -> None:
        self._flask = flask

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._flask.post(path, data=json.dumps(body), content_type="application/json")


@pytest.fixture(scope="module")
def client() -> Client:
    return Client(create_app(CONFIG).test_client())


def review(obj: Any, kind: str = "Pod", **request: Any) -> dict[str, Any]:
    return admission_review(obj, kind=kind, **request)


def answer(r: Any) -> dict[str, Any]:
    assert r.status_code == 200, r.get_data(as_text=True)
    return r.get_json()["response"]  # type: ignore[no-any-return]


def guaranteed_after(patched: dict[str, Any]) -> bool:
    (target,) = find_targets(patched)
    return qos_class(target.pod_spec()) == GUARANTEED


def test_validate_denies_with_403_and_message(client: Client) -> None:
    out = answer(client.post("/validate", review(BAD_POD)))
    assert out["allowed"] is False and out["uid"] == "uid-1"
    assert out["status"]["code"] == 403
    assert 'container "vllm" (spec.containers[0]): cpu limit 1500m is not a whole number of CPUs; use 1 or 2' \
        in out["status"]["message"]
    assert "patch" not in out


def test_validate_allows_compliant(client: Client) -> None:
    out = answer(client.post("/validate", review(pod(guaranteed()))))
    assert out == {"uid": "uid-1", "allowed": True}


@pytest.mark.parametrize("api", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_echoes_api_version_and_uid(client: Client, api: str) -> None:
    r = client.post("/validate", review(BAD_POD, api=api, uid="abc-123"))
    assert r.get_json()["apiVersion"] == api and r.get_json()["kind"] == "AdmissionReview"
    assert r.get_json()["response"]["uid"] == "abc-123"


@pytest.mark.parametrize("kind,obj", [
    ("Deployment", {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": pod(
        container("a", rl("1", "1Gi"), rl("2", "1Gi")))["spec"]}}}),
    ("StatefulSet", {"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"template": {"spec": pod(
        container("a", None, rl("500m", "1Gi")))["spec"]}}}),
    ("DaemonSet", {"kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": {"template": {"spec": pod(
        container("a", rl("1", "1Gi"), None))["spec"]}}}),
    ("ReplicaSet", {"kind": "ReplicaSet", "metadata": {"name": "rs"}, "spec": {"template": {"spec": pod(
        container("a", None, rl("1K", "1Gi")))["spec"]}}}),
    ("Job", {"kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": pod(
        container("a", None, rl("0.5", "1Gi")))["spec"]}}}),
    ("CronJob", {"kind": "CronJob", "metadata": {"name": "cj"}, "spec": {"jobTemplate": {"spec": {"template": {
        "spec": pod(container("a", None, rl("0.5", "1Gi")))["spec"]}}}}}),
    ("ReplicationController", {"kind": "ReplicationController", "metadata": {"name": "rc"}, "spec": {
        "template": {"spec": pod(container("a", None, rl("0.5", "1Gi")))["spec"]}}}),
    ("PodTemplate", {"kind": "PodTemplate", "metadata": {"name": "pt"}, "template": {"spec": pod(
        container("a", None, rl("0.5", "1Gi")))["spec"]}}),
])
def test_workloads_judged_by_template(client: Client, kind: str, obj: dict[str, Any]) -> None:
    for operation in ("CREATE", "UPDATE"):
        out = answer(client.post("/validate", review(obj, kind=kind, operation=operation)))
        assert out["allowed"] is False, (kind, operation)
        assert f'{kind} "' in out["status"]["message"]


def test_pod_update_not_judged_but_resize_is(client: Client) -> None:
    assert answer(client.post("/validate", review(BAD_POD, operation="UPDATE")))["allowed"] is True
    out = answer(client.post("/validate", review(BAD_POD, operation="UPDATE", subresource="resize")))
    assert out["allowed"] is False
    ok = answer(client.post("/validate", review(pod(guaranteed()), operation="UPDATE", subresource="resize")))
    assert ok["allowed"] is True


def test_dry_run_answered_the_same(client: Client) -> None:
    wet = answer(client.post("/validate", review(BAD_POD)))
    dry = answer(client.post("/validate", review(BAD_POD, dry_run=True)))
    assert wet == dry


@pytest.mark.parametrize("change", [{"namespace": "exempt-ns"}, {"username": "system:admin"},
                                    {"namespace": "kube-system"}])
def test_exemptions(client: Client, change: dict[str, str]) -> None:
    assert answer(client.post("/validate", review(BAD_POD, **change)))["allowed"] is True


def test_runtime_class_exemption(client: Client) -> None:
    obj = copy.deepcopy(BAD_POD)
    obj["spec"]["runtimeClassName"] = "kata"
    assert answer(client.post("/validate", review(obj)))["allowed"] is True


def test_warn_admits_with_bounded_warnings(client: Client) -> None:
    many = pod(*[container(f"container-with-a-rather-long-name-{i:03d}", rl("100m", "1Gi"), None)
                 for i in range(60)])
    out = answer(client.post("/warn", review(many)))
    assert out["allowed"] is True and "status" not in out
    warnings = out["warnings"]
    assert len(warnings) > 5
    assert all(len(w) < 120 for w in warnings)
    assert sum(len(w.encode()) for w in warnings) < 4096
    assert warnings[-1].startswith("... and ")
    one = answer(client.post("/warn", review(BAD_POD)))["warnings"]
    assert one == ['cpu-not-integer: container "vllm" (spec.containers[0]): cpu limit 1500m is not a whole '
                   "number of CPUs; use 1 or 2"]


def test_mutate_patch_gives_guaranteed_pod_and_is_idempotent(client: Client) -> None:
    obj = pod(container("vllm", rl("1", "8Gi"), rl("2", "8Gi")), container("side", rl("1", "64Mi"), None))
    out = answer(client.post("/mutate", review(obj)))
    assert out["allowed"] is True and out["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(out["patch"]))
    patched = jsonpatch.apply_patch(obj, patch)
    assert guaranteed_after(patched)
    assert len(out["warnings"]) == 3 and all(w.startswith("qos-guard: container") for w in out["warnings"])
    again = answer(client.post("/mutate", review(patched)))
    assert "patch" not in again  # reinvocation changes nothing
    assert answer(client.post("/validate?mode=mutate", review(patched)))["allowed"] is True


def test_mutate_never_patches_templates_and_validate_mutated_denies_only_unfixable(client: Client) -> None:
    fixable = {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": pod(
        container("a", rl("1", "1Gi"), rl("2", "1Gi")))["spec"]}}}
    assert "patch" not in answer(client.post("/mutate", review(fixable, kind="Deployment")))
    # /validate/mutate is the same endpoint, for webhook configurations (no query string allowed there).
    for path in ("/validate?mode=mutate", "/validate/mutate"):
        assert answer(client.post(path, review(fixable, kind="Deployment")))["allowed"] is True
        out = answer(client.post(path, review(BAD_POD)))
        assert out["allowed"] is False and "cpu-not-integer" in out["status"]["message"]
    assert answer(client.post("/validate", review(fixable, kind="Deployment")))["allowed"] is False


@pytest.mark.parametrize("value,allowed", [("enforce", True), ("mutate", True), ("warn", True), ("bogus", False),
                                           (None, True)])
def test_validate_namespace(client: Client, value: str | None, allowed: bool) -> None:
    labels = {"qos-guard.io/mode": value} if value else {}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": labels}}
    out = answer(client.post("/validate-namespace", review(ns, kind="Namespace", namespace="")))
    assert out["allowed"] is allowed
    if not allowed:
        assert out["status"]["code"] == 403
        assert '"bogus" is not one of enforce, mutate, warn' in out["status"]["message"]




def test_only_a_deep_object_is_called_nested_too_deeply(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every RecursionError in a request was answered 400 "request.object is nested too deeply", a defect in the
    judge included: that one is a 500 (and Flask logs it), the client's only when its object is that deep."""
    from webhook.serving import app as app_module

    def overflowing(*args: Any, **kwargs: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(app_module, "review_decision", overflowing)
    flask = create_app(CONFIG)
    flask.testing = False  # as served: an unexpected exception is a 500, not raised into the test
    client = Client(flask.test_client())
    shallow = client.post("/validate", review(BAD_POD))
    assert shallow.status_code == 500
    assert "nested too deeply" not in shallow.get_data(as_text=True)
    deep_value: Any = "1"
    for _ in range(150):
        deep_value = [deep_value]
    deep = copy.deepcopy(BAD_POD)
    deep["spec"]["containers"][0]["resources"]["limits"]["cpu"] = deep_value
    refused = client.post("/validate", review(deep))
    assert refused.status_code == 400
    assert refused.get_json() == {"error": "bad AdmissionReview",
                                  "reason": "request.object is nested too deeply to be judged"}
