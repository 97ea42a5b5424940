"""Containers KServe's pod webhook and Knative add to an InferenceService's Pod: the agent (a logger, a batcher, a
multi-model predictor) and Knative's queue-proxy, not again when declared; each a failing object and its
compliant twin."""

from __future__ import annotations

from collections import Counter

from tests.unit.kserve_cases import (
    AGENT,
    QUEUE_PROXY,
    RAW,
    RT,
    SI,
    both,
    config,
    findings,
    isvc,
    model,
    runtime,
)
from webhook.core.operators import collect
from webhook.core.operators.kserve import RELATED


def test_knatives_queue_proxy_is_guaranteed_by_its_settings() -> None:
    custom = isvc({"containers": [{"name": "kserve-container", "image": "x"}]})
    assert findings(custom) == Counter(QUEUE_PROXY)
    deployment = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "config-deployment", "namespace": "knative-serving"},
                  "data": {"queue-sidecar-cpu-request": "1", "queue-sidecar-cpu-limit": "1",
                           "queue-sidecar-memory-request": "1Gi", "queue-sidecar-memory-limit": "1Gi"}}
    assert findings(custom, collect([deployment], RELATED)) == Counter()
    annotated = isvc({"containers": [{"name": "kserve-container", "image": "x"}]}, {
        f"queue.sidecar.serving.knative.dev/{r}-resource-{k}": v
        for r, v in (("cpu", "1"), ("memory", "500Mi")) for k in ("request", "limit")})
    assert findings(annotated) == Counter()


def test_a_logger_brings_kserves_agent() -> None:
    obj = isvc({"containers": [{"name": "kserve-container", "image": "x"}], "logger": {"mode": "all"}}, RAW)
    assert findings(obj) == Counter({
        "requests-not-equal-limits agent spec.predictor.logger.resources.cpu": 1,
        "requests-not-equal-limits agent spec.predictor.logger.resources.memory": 1})


def test_a_model_without_storage_gets_kserves_agent() -> None:
    """IsMMSPredictor (controller utils.go): a model with no storageUri, storage nor storageUris (not huggingface)
    is a multi-model predictor, and agent_injector.go adds the agent (100m/1 CPU): named by the missing storageUri,
    the way out; a storageUri, or the agent's resources whole and equal in inferenceservice-config, avoid it."""
    assert findings(isvc({"model": model()}, RAW), RT) == both(AGENT, "spec.predictor.model.storageUri")
    assert findings(isvc({"model": model(storageUri="pvc://models/m")}, RAW), RT) == Counter()
    whole = {"cpuRequest": "1", "cpuLimit": "1", "memoryRequest": "1Gi", "memoryLimit": "1Gi"}
    assert findings(isvc({"model": model()}, RAW), collect([runtime("rt", "sklearn"), config(agent=whole)],
                                                           RELATED)) == Counter()
    # huggingface takes a model id without storage: never multi-model
    hf = isvc({"model": {"modelFormat": {"name": "huggingface"}, "runtime": "hf"}}, RAW)
    assert findings(hf, collect([runtime("hf", "huggingface")], RELATED)) == Counter()
    # a custom predictor is one when its first container says so
    custom = isvc({"containers": [{"name": "kserve-container", "image": "x",
                                   "env": [{"name": "MULTI_MODEL_SERVER", "value": "true"}]}]}, RAW)
    assert findings(custom) == both(AGENT, "spec.predictor.containers[0].env[0].value")


def test_a_declared_storage_initializer_or_agent_is_not_injected_again() -> None:
    """storage_initializer_injector.go: no injection when an init container of that name is there;
    agent_injector.go InjectAgent: none when a container named agent is."""
    guaranteed = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    own = {"model": model(storageUri="s3://b/m"), "initContainers": [
        {"name": "storage-initializer", "image": "x", "resources": guaranteed}]}
    assert findings(isvc(own, RAW), RT) == Counter()
    assert findings(isvc({"model": model(storageUri="s3://b/m")}, RAW), RT) == \
        both(SI, "spec.predictor.model.storageUri")
    logger = {"model": model(storageUri="pvc://m"), "logger": {"mode": "all"},
              "containers": [{"name": "agent", "image": "x", "resources": guaranteed}]}
    assert findings(isvc(logger, RAW), RT) == Counter()
    del logger["containers"]
    assert findings(isvc(logger, RAW), RT) == both(AGENT, "spec.predictor.logger")
