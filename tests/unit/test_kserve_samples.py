"""KServe's own samples (tests/fixtures/kserve, SOURCES.md there) judged as the Pods KServe v0.20.0 builds, through
the engine, ``check`` and the webhook; and a malformed InferenceService answered with the field, never another
exception."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from tests import inprocess
from tests.helpers import admission_review
from tests.unit.kserve_cases import (
    FIXTURES,
    QUEUE_PROXY,
    RAW,
    cluster,
    docs,
    findings,
    isvc,
    runtime,
)
from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.operators import collect
from webhook.core.operators.kserve import RELATED
from webhook.core.workloads import find_targets, walk
from webhook.serving.app import create_app


def test_the_collocation_samples_model_fails_whatever_its_runtime() -> None:
    """kserve/website collocation.md, first block: no runtime given, but the model's own resources (100m/256Mi
    below 1/1Gi) override any runtime's, so the Pod is Burstable: refused, never skipped."""
    (obj,) = docs("collocation-model.yaml")
    model = "spec.predictor.model.resources"
    transformer = "spec.predictor.containers[0].resources"
    storage = "spec.predictor.model.storageUri.resources"
    assert findings(obj) == Counter({
        f"requests-not-equal-limits kserve-container {model}.cpu": 1,
        f"requests-not-equal-limits kserve-container {model}.memory": 1,
        f"requests-not-equal-limits transformer-container {transformer}.cpu": 1,
        f"requests-not-equal-limits transformer-container {transformer}.memory": 1,
        f"requests-not-equal-limits storage-initializer {storage}.cpu": 1,
        f"requests-not-equal-limits storage-initializer {storage}.memory": 1,
        **QUEUE_PROXY})


def test_the_collocation_runtime_sample_merges_the_transformer_over_the_runtimes() -> None:
    """The same page's ServingRuntime and the InferenceService naming it, in one input: the runtime's
    kserve-container (1 CPU, 2Gi) is Guaranteed, the transformer-container is merged (the InferenceService's
    200m/512Mi over the runtime's 100m/256Mi, limits 1/1Gi): Burstable; the runtime itself fails on its own
    transformer-container."""
    runtime_doc, obj = docs("collocation-runtime.yaml")
    related = collect([runtime_doc, obj], RELATED)
    [target] = find_targets(obj, related=related)
    assert target.template == "spec.predictor (predictor, ServingRuntime pytorch-collocation)"
    pod = target.pod_spec()
    assert [c.name for c in pod.containers] == ["kserve-container", "transformer-container", "queue-proxy"]
    transformer = pod.containers[1].resources
    assert (transformer.requests["cpu"].raw, transformer.limits["cpu"].raw) == ("200m", 1)
    own = "spec.predictor.containers[0].resources"
    assert findings(obj, related) == Counter({
        f"requests-not-equal-limits transformer-container {own}.cpu": 1,
        f"requests-not-equal-limits transformer-container {own}.memory": 1,
        "requests-not-equal-limits storage-initializer spec.predictor.model.storageUri.resources.cpu": 1,
        "requests-not-equal-limits storage-initializer spec.predictor.model.storageUri.resources.memory": 1,
        **QUEUE_PROXY})
    assert findings(runtime_doc) == Counter({
        "requests-not-equal-limits transformer-container spec.containers[1].resources.cpu": 1,
        "requests-not-equal-limits transformer-container spec.containers[1].resources.memory": 1})


def test_the_compliant_twin_with_kserves_own_runtime_passes() -> None:
    """KServe's kserve-sklearnserver (1 CPU, 2Gi, requests == limits), named by the model, a pvc:// model (no
    storage-initializer) and Standard mode (no queue-proxy): every container Guaranteed with whole CPUs."""
    (sklearn,) = docs("kserve-sklearnserver.yaml")
    obj = isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "kserve-sklearnserver",
                          "storageUri": "pvc://models/iris"}}, RAW)
    related = collect([sklearn], RELATED)
    verdict = evaluate(obj, Config(), Mode.ENFORCE, Facts(related=related))
    assert len(verdict.results) == 1 and verdict.violations == [] and verdict.allowed
    # without the runtime nothing is known: no result (never a pass), and the reason names it
    assert evaluate(obj, Config(), Mode.ENFORCE).results == ()
    (reason,) = walk(obj)
    assert "ServingRuntime 'kserve-sklearnserver' is not in the input" in str(reason)
    # in Knative mode (KServe's default) the same object fails on queue-proxy alone
    knative = isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "kserve-sklearnserver",
                              "storageUri": "pvc://models/iris"}})
    assert findings(knative, related) == Counter(QUEUE_PROXY)


def test_check_and_the_webhook_refuse_the_collocation_sample_naming_template_and_container() -> None:
    path = FIXTURES / "collocation-model.yaml"
    out = inprocess.run(("check", str(path)))
    assert out.returncode == 1, out.stdout + out.stderr
    assert ('requests-not-equal-limits: spec.predictor (predictor, its runtime not known): container '
            '"kserve-container" (spec.predictor.model)') in out.stdout
    (obj,) = docs("collocation-model.yaml")
    answer = create_app(Config()).test_client().post(
        "/validate", data=json.dumps(admission_review(obj, namespace="ml")), content_type="application/json")
    response = answer.get_json()["response"]
    assert response["allowed"] is False
    assert 'spec.predictor (predictor, its runtime not known): container "kserve-container"' in \
        response["status"]["message"]
    # the runtime sample: check reads both documents of the file, the runtime from the same input
    both = inprocess.run(("check", str(FIXTURES / "collocation-runtime.yaml")))
    assert both.returncode == 1 and "2 objects checked" in both.stderr, both.stderr
    assert "spec.predictor (predictor, ServingRuntime pytorch-collocation)" in both.stdout


@pytest.mark.parametrize("predictor", [
    {"model": ["not", "a", "mapping"]},
    {"model": {"modelFormat": "sklearn"}},
    {"containers": {"name": "x"}},
    {"containers": ["x"]},
    {"sklearn": {"resources": {"requests": []}}},
])
def test_a_malformed_inference_service_is_a_manifest_error_or_a_reason(predictor: dict[str, Any]) -> None:
    """Bad input gets a clear answer naming the field (check's error record, the webhook's 400), never another
    exception."""
    from webhook.core.resourceblock import ManifestError
    with pytest.raises(ManifestError) as err:
        evaluate(isvc(predictor), Config(), Mode.ENFORCE, Facts(related=cluster(runtime("rt", "sklearn"))))
    assert err.value.path[:2] == ("spec", "predictor"), err.value.path
