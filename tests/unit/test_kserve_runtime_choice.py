"""Which ServingRuntime KServe v0.20.0 runs a model on (``reconcileModel``, ``GetSupportingRuntimes``), the
protocol it defaults (``setPredictorModelDefaults``), and what cannot be known without the cluster's runtimes."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.unit.kserve_cases import (
    RAW,
    cluster,
    findings,
    isvc,
    runtime,
)
from webhook.core.fieldpath import dotted
from webhook.core.operators import collect
from webhook.core.operators.kserve import RELATED
from webhook.core.workloads import find_targets, walk


@pytest.mark.parametrize(("runtimes", "chosen"), [
    # the namespace's runtimes before the cluster's
    ([runtime("ns-rt", "sklearn"), runtime("csr", "sklearn", kind="ClusterServingRuntime", priority=9)], "ns-rt"),
    # the higher priority first; one with a priority before one without
    ([runtime("low", "sklearn", priority=1), runtime("high", "sklearn", priority=2)], "high"),
    ([runtime("none", "sklearn"), runtime("some", "sklearn", priority=1)], "some"),
    # not disabled, not multi-model, not multi-node for a single-node predictor
    ([runtime("off", "sklearn", disabled=True), runtime("on", "sklearn", cpu_request="2")], "on"),
    ([runtime("mm", "sklearn", multiModel=True), runtime("sm", "sklearn")], "sm"),
    ([runtime("mn", "sklearn", workerSpec={"containers": []}), runtime("sn", "sklearn")], "sn"),
    # only formats with autoSelect; and the protocol
    ([runtime("other", "xgboost"), runtime("csr", "sklearn", kind="ClusterServingRuntime")], "csr"),
    ([runtime("v2", "sklearn", protocolVersions=["v2"]), runtime("v1", "sklearn", protocolVersions=["v1"])], "v1"),
])
def test_the_runtime_is_chosen_as_kserve_chooses_it(runtimes: list[dict[str, Any]], chosen: str) -> None:
    obj = isvc({"model": {"modelFormat": {"name": "sklearn"}}}, RAW)
    [target] = find_targets(obj, related=cluster(*runtimes))
    assert target.template.endswith(f" {chosen})")


def test_what_the_runtime_choice_cannot_know_is_said() -> None:
    obj = isvc({"model": {"modelFormat": {"name": "sklearn"}}}, RAW)
    (tie,) = walk(obj, related=cluster(runtime("a", "sklearn"), runtime("b", "sklearn")))
    assert "ServingRuntimes a, b rank the same for it (KServe takes the newest)" in str(tie)
    (none,) = walk(obj, related=cluster(runtime("x", "xgboost")))
    assert "supports modelFormat 'sklearn': KServe builds no Pod" in str(none)
    # from the input alone another runtime of the cluster may rank first: unknown, never a pass
    (partial,) = walk(obj, related=collect([runtime("a", "sklearn")], RELATED))
    assert "others may rank first" in str(partial)
    named = isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "gone"}}, RAW)
    (missing,) = walk(named, related=cluster())
    assert "no ServingRuntime or ClusterServingRuntime named 'gone' in the cluster" in str(missing)
    (refused,) = walk(named, related=cluster(runtime("gone", "xgboost")))
    assert "KServe refuses ServingRuntime 'gone'" in str(refused)
    # KServe builds no Pod then: even a model whose own resources fail is not judged (no Pod fails)
    bursty = isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "gone", "resources": {
        "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}}, RAW)
    (no_pod,) = walk(bursty, related=cluster())
    assert isinstance(no_pod, str) and "KServe builds no Pod" in no_pod
    (unknown,) = find_targets(bursty)  # without the cluster: the runtime may exist, and the model fails anyway
    assert unknown.partial
    mesh = isvc({"model": {"modelFormat": {"name": "sklearn"}}}, {"serving.kserve.io/deploymentMode": "ModelMesh"})
    assert list(walk(mesh)) == [
        "InferenceService in ModelMesh mode (its Pods are the ServingRuntime's, built by modelmesh-serving)"]


def test_a_framework_field_is_a_model_of_that_format() -> None:
    """setPredictorModelDefaults: ``sklearn:`` is ``model`` with ``modelFormat: sklearn``, found by auto-select."""
    obj = isvc({"sklearn": {"storageUri": "pvc://m", "resources": {"limits": {"cpu": "2", "memory": "4Gi"}}}}, RAW)
    [target] = find_targets(obj, related=cluster(runtime("rt", "sklearn")))
    assert target.template == "spec.predictor (predictor, ServingRuntime rt)"
    assert dotted(target.pod_spec().containers[0].path) == "spec.predictor.sklearn"
    assert findings(obj, cluster(runtime("rt", "sklearn"))) == Counter()


def test_protocol_v2_is_the_default_for_triton_and_vllm_models_only() -> None:
    """setPredictorModelDefaults: a model of format triton or vLLM gets v2; onnx and huggingface get it only
    from their framework fields (assignONNXRuntime, assignHuggingFaceRuntime). A v1 runtime named for an onnx
    model is used (a Pod is built and judged), refused for the onnx framework field."""
    v1 = collect([runtime("rt", "onnx", protocolVersions=["v1"])], RELATED)
    onnx = isvc({"model": {"modelFormat": {"name": "onnx"}, "runtime": "rt", "storageUri": "pvc://m",
                           "resources": {"requests": {"cpu": "1"}}}}, RAW)
    assert findings(onnx, v1) == Counter(
        {"requests-not-equal-limits kserve-container spec.predictor.model.resources.cpu": 1})
    framework = isvc({"onnx": {"runtime": "rt", "storageUri": "pvc://m"}}, RAW)
    (refused,) = walk(framework, related=v1)
    assert isinstance(refused, str) and "KServe refuses ServingRuntime 'rt'" in refused
    triton = isvc({"model": {"modelFormat": {"name": "triton"}, "runtime": "rt", "storageUri": "pvc://m"}}, RAW)
    (v2,) = walk(triton, related=collect([runtime("rt", "triton", protocolVersions=["v1"])], RELATED))
    assert isinstance(v2, str) and "KServe refuses" in v2
