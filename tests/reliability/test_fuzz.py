"""Every input gets a verdict, a 400 or a named error: the engine, the manifest reader, the CLI and the HTTP
handlers never raise an unhandled exception. Over 10,000 generated cases per run in total (see the count
printed at the end of the run). Failures once found are kept below as ``@example`` regressions."""

from __future__ import annotations

import base64
import json
import tempfile
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.helpers import admission_review
from tests.reliability.conftest import CASES
from tests.reliability.strategies import json_value, pod_spec, workload
from webhook.admission.review import ENDPOINTS as ADMISSION_ENDPOINTS
from webhook.admission.review import BadReview, Endpoint, parse_review, review_decision
from webhook.batch.runner import check_paths
from webhook.core.config import parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.mutation import apply_changes, json_patch
from webhook.core.resourceblock import ManifestError
from webhook.core.rules import RULE_IDS
from webhook.manifests.documents import ReadError, json_document, yaml_documents
from webhook.manifests.reader import read_documents
from webhook.serving.app import create_app


def fuzz(examples: int) -> settings:
    """Fixed sizes whatever the profile: the run's total (over 10,000) is part of the contract."""
    return settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
CONFIGS = [parse_config(None), parse_config({"mutation": {"cpuRounding": "up", "setLimitsFromRequests": False},
                                             "policy": {"smtAlignment": 2, "podLevelResources": "allow",
                                                        "numa": {"cpus": 8, "memory": "16Gi"}}})]


@fuzz(3000)
@given(workload, st.sampled_from(list(Mode)), st.sampled_from(CONFIGS))
@example({"apiVersion": "v1", "kind": "Pod", "metadata": None, "spec": {"containers": [{"resources": {
    "limits": {"cpu": float("nan")}}}]}}, Mode.MUTATE, CONFIGS[0])
@example({"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": {"containers": [{"resources": {
    "limits": {"cpu": "1e999999999999"}}}]}}, Mode.ENFORCE, CONFIGS[1])
def test_engine_gives_a_verdict_or_names_the_field(obj: dict[str, Any], mode: Mode, config: Any) -> None:
    CASES["engine"] += 1
    try:
        verdict = evaluate(obj, config, mode)
    except ManifestError as exc:
        assert exc.path and exc.message  # names the field and what is wrong with it
        return
    for _target, violation in verdict.violations:
        assert violation.rule in RULE_IDS
        assert violation.message and violation.path
    for result in verdict.results:
        if result.changes and result.target.kind == "Pod":
            # The patch built from the changes applies to the object it was planned for, with their result.
            patched = jsonpatch.apply_patch(obj, json_patch(obj, result.changes))
            assert patched == apply_changes(obj, result.changes)


yaml_text = st.one_of(
    st.text(max_size=200),
    st.builds(lambda v: yaml.safe_dump_all(v if isinstance(v, list) else [v]), st.one_of(json_value, workload)),
    # valid YAML with one character changed or removed
    st.builds(lambda v, i, c: (lambda t: t[: i % (len(t) + 1)] + c + t[i % (len(t) + 1) + 1:])(yaml.safe_dump(v)),
              workload, st.integers(0, 400), st.sampled_from(["", ":", "-", "\t", "'", "{", "&a", "*b", "!!x"])),
)


@fuzz(2500)
@given(yaml_text)
@example("a: 1\na: 2\n")  # a repeated key is refused, as go-yaml does
@example("x: &a [*a]\n")  # an undefined alias
@example("\ufeff---\nkind: Pod\n")
def test_reader_yields_documents_or_errors_with_a_line(text: str) -> None:
    CASES["reader"] += 1
    for item in [*yaml_documents("f.yaml", text), json_document("f.json", text)]:
        if isinstance(item, ReadError):
            assert item.message and item.line >= 0
        else:
            json.dumps(item.obj, allow_nan=False)  # what kubectl sends is JSON: every document read must be


@fuzz(500)
@given(st.one_of(yaml_text, st.binary(max_size=200).map(lambda b: b.decode("latin-1"))),
       st.sampled_from([".yaml", ".json", ".yml"]), st.sampled_from(list(Mode)))
def test_cli_check_reports_every_file(text: str, suffix: str, mode: Mode) -> None:
    CASES["cli"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"input{suffix}"
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        report = check_paths([str(path)], CONFIGS[0], mode)
        read = list(read_documents(str(path)))
        unreadable = sum(isinstance(item, ReadError) and not item.skip for item in read)
        passed_over = sum(isinstance(item, ReadError) and bool(item.skip) for item in read)
    assert report.counts.errors >= unreadable  # nothing the reader refused is dropped on the way
    # a document that is no object (a list, a string) is no manifest: counted as skipped, never lost
    assert sum(report.skipped.values()) >= passed_over
    assert all(e.message for e in report.errors)


def _review(obj: Any, kind: str = "Pod", **request: Any) -> dict[str, Any]:
    return admission_review(obj, kind=kind, namespace="ns", username="u", uid="u-1", **request)


def _overridden(review: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    review["request"].update(fields)
    return review


bodies = st.one_of(
    st.binary(max_size=300),
    json_value.map(lambda v: json.dumps(v).encode()),
    workload.map(lambda w: json.dumps(_review(w, w["kind"]), default=str).encode()),
    st.builds(lambda w, extra: json.dumps(_overridden(_review(w, w["kind"]), extra), default=str).encode(), workload,
              st.dictionaries(st.sampled_from(["uid", "kind", "operation", "namespace", "subResource", "dryRun",
                                               "userInfo", "object", "name"]), json_value, max_size=3)),
    st.builds(lambda v, api: json.dumps({"apiVersion": api, "kind": "AdmissionReview", "request": v}).encode(),
              json_value, st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1", "v1"])),
)
ENDPOINTS = ["/validate", "/validate?mode=mutate", "/validate/mutate", "/warn", "/mutate", "/validate-namespace"]


@pytest.fixture(scope="module")
def client() -> Any:
    return create_app(CONFIGS[0], own_namespace="qos-guard").test_client()


@fuzz(3500)
@given(bodies, st.sampled_from(ENDPOINTS))
@example(b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "x", "kind": '
         b'{"kind": "Pod"}, "object": {"kind": "Pod", "spec": {"containers": [null]}}}}', "/mutate")
@example(b"[" * 100000, "/validate")
def test_http_handlers_answer_200_or_400(client: Any, body: bytes, endpoint: str) -> None:
    CASES["http"] += 1
    resp = client.post(endpoint, data=body, content_type="application/json")
    assert resp.status_code in (200, 400), resp.data[:300]
    out = resp.get_json()
    if resp.status_code == 400:
        assert out["reason"]
        return
    sent = json.loads(body)  # the whole review, as the API server holds it (the decoder keeps only a part)
    assert out["response"]["uid"] == sent["request"]["uid"] and out["apiVersion"] == sent["apiVersion"]
    if "patch" in out["response"]:
        patch = json.loads(base64.b64decode(out["response"]["patch"]))
        jsonpatch.apply_patch(sent["request"]["object"], patch)  # a patch we send applies to the whole object


@fuzz(500)
@given(pod_spec, st.sampled_from([e for e in ADMISSION_ENDPOINTS.values() if e.mode is not None]))
def test_admission_decides_on_any_pod_spec(spec: Any, endpoint: Endpoint) -> None:
    CASES["admission"] += 1
    body = json.dumps(_review({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})).encode()
    try:
        decision = review_decision(parse_review(body), endpoint, CONFIGS[1])
    except BadReview as exc:
        assert str(exc)  # the 400 reason
        return
    assert decision.allowed or decision.message


PLACING = parse_config({"placement": {"schedulerName": "qos-guard-numa", "memoryManager": True}})
# Pod specs near the decision: whole or fractional CPUs, Guaranteed or not, devices, claims, a scheduler or a node.
_resources = st.builds(lambda cpu, gpu, same: {"limits": {"cpu": cpu, "memory": "1Gi"} | gpu,
                                               "requests": ({"cpu": cpu, "memory": "1Gi"} if same else
                                                            {"cpu": "100m"}) | gpu},
                       st.sampled_from(["1", "2", "500m", "4e0", "1500m"]),
                       st.sampled_from([{}, {"nvidia.com/gpu": "1"}]), st.booleans())
_near = st.builds(
    lambda res, extra: {"containers": [{"name": "app", "resources": r} for r in res]} | extra,
    st.lists(_resources, min_size=1, max_size=2),
    st.fixed_dictionaries({}, optional={
        "schedulerName": st.sampled_from(["", "default-scheduler", "qos-guard-numa", "gpu-scheduler", 7]),
        "nodeName": st.sampled_from(["n1", ""]), "resourceClaims": st.just([{"name": "gpu"}])}))


@fuzz(1500)
@given(st.one_of(bodies, st.one_of(pod_spec, _near).map(lambda spec: json.dumps(_review(
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}), default=str).encode())))
def test_place_answers_200_or_400_and_only_ever_sets_the_scheduler(body: bytes) -> None:
    """``/place`` with ``placement.schedulerName`` set: never a 500, never a refusal, and a patch (which applies to
    the whole object) touches ``spec.schedulerName`` alone."""
    CASES["http"] += 1
    resp = create_app(PLACING, own_namespace="qos-guard").test_client().post(
        "/place", data=body, content_type="application/json")
    assert resp.status_code in (200, 400), resp.data[:300]
    out = resp.get_json()
    if resp.status_code == 400:
        assert out["reason"]
        return
    assert out["response"]["allowed"] is True
    if "patch" in out["response"]:
        patch = json.loads(base64.b64decode(out["response"]["patch"]))
        assert [op["path"] for op in patch] == ["/spec/schedulerName"], patch
        after = jsonpatch.apply_patch(json.loads(body)["request"]["object"], patch)
        assert after["spec"]["schedulerName"] == "qos-guard-numa"


@pytest.fixture(scope="module")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.serving import start_server
    srv = start_server(tmp_path_factory.mktemp("fuzz-server"))
    yield srv
    srv.stop()


@fuzz(300)
@given(bodies, st.sampled_from(ENDPOINTS))
def test_real_server_answers_every_body(real_server: Any, body: bytes, endpoint: str) -> None:
    """The same bodies through gunicorn and TLS: a worker never dies or answers 500 on bad input."""
    CASES["server"] += 1
    resp = real_server.post(endpoint, body)
    assert resp.status_code in (200, 400), resp.text[:300]
    assert real_server.proc.poll() is None
