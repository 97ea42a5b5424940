"""What needs the real server (gunicorn, TLS): decisions over TLS, bad bodies, size limits, routing, metrics
and health. Decisions themselves are tested in-process in tests/admission."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch
import pytest
import requests

from tests.builders import container, guaranteed, pod, rl
from tests.server.conftest import EXAMPLE, Server, review

BAD_POD = EXAMPLE["request"]["object"]


def resp(r: requests.Response) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    return r.json()["response"]  # type: ignore[no-any-return]


def test_decisions_over_tls(server: Server) -> None:
    """One deny and one patch through gunicorn and TLS; every other decision is tested in-process."""
    out = resp(server.post("/validate", review(BAD_POD)))
    assert out["allowed"] is False and out["status"]["code"] == 403
    obj = pod(container("vllm", rl("1", "8Gi"), rl("2", "8Gi")))
    patch = json.loads(base64.b64decode(resp(server.post("/mutate", review(obj)))["patch"]))
    assert jsonpatch.apply_patch(obj, patch)["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2"


@pytest.mark.parametrize("body,reason", [
    (b"not json", "not JSON"),
    (b"\xff\xfe\x00", "not UTF-8"),
    (b"[1, 2]", "not an AdmissionReview"),
    (json.dumps({"kind": "Pod"}).encode(), "expected AdmissionReview"),
    # It said "kind is None, expected AdmissionReview".
    (json.dumps({"apiVersion": "admission.k8s.io/v1", "request": {}}).encode(),
     "no kind in the body; expected AdmissionReview"),
    (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v2"}).encode(), "apiVersion"),
    (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {}}).encode(),
     "request.uid"),
    (json.dumps(review(BAD_POD) | {"request": dict(review(BAD_POD)["request"], object="pod")}).encode(),
     "request.object is not an object"),
    (json.dumps(review({"kind": "Pod", "metadata": {"name": "x"}, "spec": {"containers": "nope"}})).encode(),
     "spec.containers: expected a list"),
    (b"[" * 100000, "not an AdmissionReview object"),  # refused at its first byte: a review is an object
    (b'{"request": {"unread": ' + b"[" * 100000, "nested too deeply"),
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
