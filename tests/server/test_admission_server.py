"""Every endpoint and mode of the real server over TLS, v1 and v1beta1, workloads, resize, dry-run,
exemptions, warnings limits, patches, bad input and metrics."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
import pytest
import requests

from tests.helpers import container, guaranteed, pod, rl
from tests.server.conftest import EXAMPLE, Server, review
from webhook.podspec import GUARANTEED, build_pod_spec, qos_class

BAD_POD = EXAMPLE["request"]["object"]


def resp(r: requests.Response) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    return r.json()["response"]  # type: ignore[no-any-return]


def test_validate_denies_with_403_and_message(server: Server) -> None:
    out = resp(server.post("/validate", review(BAD_POD)))
    assert out["allowed"] is False and out["uid"] == "uid-1"
    assert out["status"]["code"] == 403
    assert 'container "vllm" (spec.containers[0]): cpu limit 1500m is not a whole number of CPUs; use 1 or 2' \
        in out["status"]["message"]
    assert "patch" not in out


def test_validate_allows_compliant(server: Server) -> None:
    out = resp(server.post("/validate", review(pod(guaranteed()))))
    assert out == {"uid": "uid-1", "allowed": True}


@pytest.mark.parametrize("api", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_echoes_api_version_and_uid(server: Server, api: str) -> None:
    r = server.post("/validate", review(BAD_POD, api=api, uid="abc-123"))
    assert r.json()["apiVersion"] == api and r.json()["kind"] == "AdmissionReview"
    assert r.json()["response"]["uid"] == "abc-123"


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
def test_workloads_judged_by_template(server: Server, kind: str, obj: dict[str, Any]) -> None:
    for operation in ("CREATE", "UPDATE"):
        out = resp(server.post("/validate", review(obj, kind=kind, operation=operation)))
        assert out["allowed"] is False, (kind, operation)
        assert f'{kind} "' in out["status"]["message"]


def test_pod_update_not_judged_but_resize_is(server: Server) -> None:
    assert resp(server.post("/validate", review(BAD_POD, operation="UPDATE")))["allowed"] is True
    out = resp(server.post("/validate", review(BAD_POD, operation="UPDATE", subresource="resize")))
    assert out["allowed"] is False
    ok = resp(server.post("/validate", review(pod(guaranteed()), operation="UPDATE", subresource="resize")))
    assert ok["allowed"] is True


def test_dry_run_answered_the_same(server: Server) -> None:
    wet = resp(server.post("/validate", review(BAD_POD)))
    dry = resp(server.post("/validate", review(BAD_POD, dry_run=True)))
    assert wet == dry


@pytest.mark.parametrize("change", [{"namespace": "exempt-ns"}, {"username": "system:admin"},
                                    {"namespace": "kube-system"}])
def test_exemptions(server: Server, change: dict[str, str]) -> None:
    assert resp(server.post("/validate", review(BAD_POD, **change)))["allowed"] is True


def test_runtime_class_exemption(server: Server) -> None:
    obj = copy.deepcopy(BAD_POD)
    obj["spec"]["runtimeClassName"] = "kata"
    assert resp(server.post("/validate", review(obj)))["allowed"] is True


def test_warn_admits_with_bounded_warnings(server: Server) -> None:
    many = pod(*[container(f"container-with-a-rather-long-name-{i:03d}", rl("100m", "1Gi"), None)
                 for i in range(60)])
    out = resp(server.post("/warn", review(many)))
    assert out["allowed"] is True and "status" not in out
    warnings = out["warnings"]
    assert len(warnings) > 5
    assert all(len(w) < 120 for w in warnings)
    assert sum(len(w.encode()) for w in warnings) < 4096
    assert warnings[-1].startswith("... and ")
    one = resp(server.post("/warn", review(BAD_POD)))["warnings"]
    assert one == ['cpu-not-integer: container "vllm" (spec.containers[0]): cpu limit 1500m is not a whole '
                   "number of CPUs; use 1 or 2"]


def test_mutate_patch_gives_guaranteed_pod_and_is_idempotent(server: Server) -> None:
    obj = pod(container("vllm", rl("1", "8Gi"), rl("2", "8Gi")), container("side", rl("1", "64Mi"), None))
    out = resp(server.post("/mutate", review(obj)))
    assert out["allowed"] is True and out["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(out["patch"]))
    patched = jsonpatch.apply_patch(obj, patch)
    assert qos_class(build_pod_spec(patched["spec"], ("spec",))) == GUARANTEED
    assert len(out["warnings"]) == 3 and all(w.startswith("qos-guard: container") for w in out["warnings"])
    again = resp(server.post("/mutate", review(patched)))
    assert "patch" not in again  # reinvocation changes nothing
    assert resp(server.post("/validate?mode=mutate", review(patched)))["allowed"] is True


def test_mutate_never_patches_templates_and_validate_mutated_denies_only_unfixable(server: Server) -> None:
    fixable = {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": pod(
        container("a", rl("1", "1Gi"), rl("2", "1Gi")))["spec"]}}}
    assert "patch" not in resp(server.post("/mutate", review(fixable, kind="Deployment")))
    # /validate/mutate is the same endpoint, for webhook configurations (no query string allowed there).
    for path in ("/validate?mode=mutate", "/validate/mutate"):
        assert resp(server.post(path, review(fixable, kind="Deployment")))["allowed"] is True
        out = resp(server.post(path, review(BAD_POD)))
        assert out["allowed"] is False and "cpu-not-integer" in out["status"]["message"]
    assert resp(server.post("/validate", review(fixable, kind="Deployment")))["allowed"] is False


@pytest.mark.parametrize("value,allowed", [("enforce", True), ("mutate", True), ("warn", True), ("bogus", False),
                                           (None, True)])
def test_validate_namespace(server: Server, value: str | None, allowed: bool) -> None:
    labels = {"qos-guard.io/mode": value} if value else {}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labels": labels}}
    out = resp(server.post("/validate-namespace", review(ns, kind="Namespace", namespace="")))
    assert out["allowed"] is allowed
    if not allowed:
        assert out["status"]["code"] == 403
        assert '"bogus" is not one of enforce, mutate, warn' in out["status"]["message"]


@pytest.mark.parametrize("body,reason", [
    (b"not json", "not JSON"),
    (b"\xff\xfe\x00", "not UTF-8"),
    (b"[1, 2]", "not an AdmissionReview"),
    (json.dumps({"kind": "Pod"}).encode(), "expected AdmissionReview"),
    (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v2"}).encode(), "apiVersion"),
    (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {}}).encode(),
     "request.uid"),
    (json.dumps(review(BAD_POD) | {"request": dict(review(BAD_POD)["request"], object="pod")}).encode(),
     "request.object is not an object"),
    (json.dumps(review({"kind": "Pod", "metadata": {"name": "x"}, "spec": {"containers": "nope"}})).encode(),
     "spec.containers: expected a list"),
    (b"[" * 100000, "nested too deeply"),
])
def test_bad_input_gets_400_and_server_keeps_serving(server: Server, body: bytes, reason: str) -> None:
    r = server.post("/validate", body)
    assert r.status_code == 400 and reason in r.json()["reason"]
    assert resp(server.post("/validate", review(BAD_POD)))["allowed"] is False


def test_body_too_large_gets_413(server: Server) -> None:
    r = server.post("/validate", b"x" * (3 * 1024 * 1024 + 10))
    assert r.status_code == 413
    assert resp(server.post("/validate", review(pod(guaranteed()))))["allowed"] is True


def test_wrong_method_and_path(server: Server) -> None:
    assert requests.get(server.url + "/validate", verify=server.ca, timeout=5).status_code == 405
    assert server.post("/nope", review(BAD_POD)).status_code == 404
    assert server.post("/noop", review(BAD_POD)).status_code == 404  # benchmark-only endpoint is off


def test_metrics_count_what_was_sent(server: Server) -> None:
    def count(text: str, *labels: str) -> float:
        total = 0.0
        for line in text.splitlines():
            if line.startswith("qos_guard_admission_requests_total{") and all(lbl in line for lbl in labels):
                total += float(line.rsplit(" ", 1)[1])
        return total

    before = requests.get(server.metrics + "/metrics", timeout=5).text
    for _ in range(7):
        server.post("/validate", review(BAD_POD, dry_run=True))
    after = requests.get(server.metrics + "/metrics", timeout=5).text
    labels = ('path="validate"', 'kind="Pod"', 'decision="denied"', 'dry_run="true"')
    assert count(after, *labels) - count(before, *labels) == 7
    assert 'qos_guard_violations_total{rule="cpu-not-integer"}' in after
    assert "qos_guard_admission_duration_seconds_bucket" in after
    assert "inference" not in after and "vllm" not in after  # no namespace or name labels


def test_health_endpoints(server: Server) -> None:
    assert requests.get(server.metrics + "/healthz", timeout=5).text == "ok\n"
    assert requests.get(server.metrics + "/readyz", timeout=5).status_code == 200
