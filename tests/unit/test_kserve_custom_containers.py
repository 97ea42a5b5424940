"""A custom component's containers as KServe v0.20.0's defaulter and controller leave them
(``predictor_custom.go``, ``setResourceRequirementDefaults``)."""

from __future__ import annotations

from collections import Counter

from tests.unit.kserve_cases import (
    RAW,
    SI,
    both,
    config,
    findings,
    isvc,
)
from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate
from webhook.core.operators import collect
from webhook.core.operators.kserve import RELATED
from webhook.core.operators.kserve_runtimes import NoPod
from webhook.core.workloads import find_targets, walk


def test_kserves_defaults_fill_a_custom_container() -> None:
    """A custom predictor that sets no resources gets 1 CPU and 2Gi from inferenceservice-config (not
    limits-missing); with the ConfigMap in the input its values are used instead."""
    custom = isvc({"containers": [{"name": "kserve-container", "image": "x"}]}, RAW)
    assert findings(custom) == Counter()
    config_map = config(inferenceService={"resource": {"cpuRequest": "500m", "cpuLimit": "1"}})
    # the ConfigMap's own values only: memory it leaves out is not defaulted (an empty MemoryRequest sets none)
    assert findings(custom, collect([config_map], RELATED)) == Counter(
        {"requests-not-equal-limits kserve-container spec.predictor.containers[0].resources.cpu": 1,
         "limits-missing kserve-container spec.predictor.containers[0].resources.memory": 1})


def test_a_custom_predictors_lone_container_is_kserves_container() -> None:
    """predictor_custom.go Default: a lone (or unnamed first) container is renamed kserve-container, so
    GetStorageUri finds its STORAGE_URI and the storage-initializer is injected."""
    lone = isvc({"containers": [{"name": "server", "image": "x", "env": [{"name": "STORAGE_URI",
                                                                          "value": "s3://b/m"}]}]}, RAW)
    assert findings(lone) == both(SI, "spec.predictor.containers[0].env[0].value")
    [target] = find_targets(lone)
    assert target.pod_spec().containers[0].name == "kserve-container"
    lone["spec"]["predictor"]["containers"][0]["env"][0]["value"] = "pvc://models/m"
    assert findings(lone) == Counter()


WHOLE = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}


def test_a_custom_predictor_is_built_only_when_its_kserve_container_is_first() -> None:
    """predictor_custom.go: Default renames containers[0] only when it is alone or unnamed (and defaults it),
    GetContainer takes the first container named kserve-container; predictor.go buildPredictorResources copies it
    over containers[0]. Not first (or a second of that name): two containers named kserve-container, which the
    API server refuses, so KServe builds no Pod (said, nothing judged); none: GetContainer finds none and the
    controller fails. The compliant twin, kserve-container first, is built and judged as written."""
    side = {"name": "side", "image": "y", "resources": WHOLE}
    main = {"name": "kserve-container", "image": "x", "resources": WHOLE,
            "env": [{"name": "STORAGE_URI", "value": "pvc://models/m"}]}
    second = isvc({"containers": [side, main]}, RAW)
    (reason,) = walk(second)
    assert isinstance(reason, NoPod) and reason.startswith("InferenceService spec.predictor.containers[1]: ")
    assert "two containers named kserve-container" in reason and "KServe builds no Pod" in reason
    assert evaluate(second, Config(), Mode.ENFORCE).results == ()
    # an unnamed first container is renamed kserve-container by the defaulter: a second of that name
    (unnamed,) = walk(isvc({"containers": [{"image": "y", "resources": WHOLE}, main]}, RAW))
    assert isinstance(unnamed, NoPod) and "containers[1]" in unnamed
    # none named kserve-container, the first named: GetContainer finds none
    (none,) = walk(isvc({"containers": [side, {**main, "name": "server"}]}, RAW))
    assert isinstance(none, NoPod) and "none is named kserve-container" in none
    # a canary's own containers, as written: the same copy over its first container
    canary = isvc({"containers": [main]}, {"serving.kserve.io/deploymentMode": "Standard"})
    canary["spec"]["canary"] = [{"predictor": {"containers": [side, main]}}]
    reasons = [r for r in walk(canary) if isinstance(r, str)]
    assert len(reasons) == 1 and reasons[0].startswith("InferenceService spec.canary[0].predictor.containers[1]: ")
    # the twin: kserve-container first, then the sidecar; its STORAGE_URI is read (a pvc:// one: no initializer)
    first = isvc({"containers": [main, side]}, RAW)
    [target] = find_targets(first)
    assert [c.name for c in target.pod_spec().containers] == ["kserve-container", "side"]
    assert findings(first) == Counter()
    first["spec"]["predictor"]["containers"][0]["env"][0]["value"] = "s3://b/m"
    assert findings(first) == both(SI, "spec.predictor.containers[0].env[0].value")


def test_a_predictor_kserve_builds_no_pod_for_leaves_the_transformer_unbuilt() -> None:
    """controller.go reconciles the predictor (and its canaries), the transformer and the explainer in turn and
    returns at the first error: no transformer Pod is judged after a predictor that builds none (formerly it was,
    here refused for its 500m of a 1-CPU limit); the twin, the predictor built, has its transformer judged."""
    bare = {"containers": [{"name": "kserve-container", "image": "t", "resources": {"requests": {"cpu": "500m"}}}]}
    broken = isvc({"containers": [{"name": "side", "image": "y", "resources": WHOLE},
                                  {"name": "kserve-container", "image": "x", "resources": WHOLE}]}, RAW)
    broken["spec"]["transformer"] = bare
    predictor, transformer = walk(broken)
    assert isinstance(predictor, NoPod) and isinstance(transformer, NoPod)
    assert transformer.startswith("InferenceService spec.transformer: not built: ")
    assert findings(broken) == Counter()
    fine = isvc({"containers": [{"name": "kserve-container", "image": "x", "resources": WHOLE}]}, RAW)
    fine["spec"]["transformer"] = bare
    assert findings(fine) == Counter(
        {"requests-not-equal-limits kserve-container spec.transformer.containers[0].resources.cpu": 1})
