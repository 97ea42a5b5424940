"""The chosen runtime's containers with the InferenceService's merged over them (``MergeRuntimeContainers``;
``multiNodeProcess`` for a multi-node predictor's workers)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.unit.kserve_cases import (
    RAW,
    findings,
    isvc,
    runtime,
)
from webhook.core.operators import collect
from webhook.core.operators.kserve import RELATED, merge_container
from webhook.core.workloads import find_targets, walk


def test_the_models_resources_override_the_runtimes_key_by_key() -> None:
    """MergeRuntimeContainers: a model that sets only its cpu request lowers it under the runtime's limit."""
    merged = merge_container({"name": "kserve-container", "args": ["a"],
                              "resources": {"requests": {"cpu": "2", "memory": "4Gi"},
                                            "limits": {"cpu": "2", "memory": "4Gi"}}},
                             {"modelFormat": {"name": "x"}, "args": ["b"], "resources": {"requests": {"cpu": "1"}}})
    assert merged["resources"] == {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
    assert merged["args"] == ["a", "b"] and "modelFormat" not in merged
    obj = isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "rt", "storageUri": "pvc://m",
                          "resources": {"requests": {"cpu": "1"}}}}, RAW)
    assert findings(obj, collect([runtime("rt", "sklearn")], RELATED)) == Counter(
        {"requests-not-equal-limits kserve-container spec.predictor.model.resources.cpu": 1})


def test_the_predictors_worker_spec_is_merged_over_the_runtimes_worker() -> None:
    """predictor.go multiNodeProcess: the runtime's worker-container with workerSpec.containers[0] merged over
    it, alone in the workers' Pod (Standard mode)."""
    worker_rt = runtime("rt", "huggingface", workerSpec={"containers": [
        {"name": "worker-container", "resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                                                   "limits": {"cpu": "1", "memory": "2Gi"}}}]})
    related = collect([worker_rt], RELATED)
    predictor: dict[str, Any] = {
        "model": {"modelFormat": {"name": "huggingface"}, "runtime": "rt", "storageUri": "pvc://p/m"},
        "workerSpec": {"pipelineParallelSize": 2, "containers": [
            {"name": "worker-container", "resources": {"requests": {"cpu": "500m"}}}]}}
    assert findings(isvc(predictor, RAW), related) == Counter(
        {"requests-not-equal-limits worker-container spec.predictor.workerSpec.containers[0].resources.cpu": 1})
    del predictor["workerSpec"]["containers"]
    obj = isvc(predictor, RAW)
    assert findings(obj, related) == Counter()
    assert [t.template for t in find_targets(obj, related=related)][-1] == \
        "spec.predictor.workerSpec (predictor worker, ServingRuntime rt)"
    # a runtime without a workerSpec: reconcileWorker fails before any Deployment, so no Pod at all
    (no_pod,) = walk(obj, related=collect([runtime("rt", "huggingface")], RELATED))
    assert isinstance(no_pod, str) and "rt has no workerSpec: KServe builds no Pod" in no_pod
    # an OCI model: the modelcar in the workers' Pod too (InjectModelcar falls back to worker-container)
    predictor["model"]["storageUri"] = "oci://r/m:1"
    assert "cpu-not-integer modelcar spec.predictor.model.storageUri.resources.cpu" in findings(isvc(predictor, RAW),
                                                                                                related)
