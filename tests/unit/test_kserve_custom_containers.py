"""A custom component's containers as KServe v0.20.0's defaulter and controller leave them
(``predictor_custom.go``, ``setResourceRequirementDefaults``)."""

from __future__ import annotations

import json
from collections import Counter

from tests.unit.kserve_cases import (
    RAW,
    SI,
    both,
    findings,
    isvc,
)
from webhook.core.operators import collect
from webhook.core.operators.kserve import RELATED
from webhook.core.workloads import find_targets


def test_kserves_defaults_fill_a_custom_container() -> None:
    """A custom predictor that sets no resources gets 1 CPU and 2Gi from inferenceservice-config (not
    limits-missing); with the ConfigMap in the input its values are used instead."""
    custom = isvc({"containers": [{"name": "kserve-container", "image": "x"}]}, RAW)
    assert findings(custom) == Counter()
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inferenceservice-config",
                                                                        "namespace": "kserve"},
                  "data": {"inferenceService": json.dumps({"resource": {"cpuRequest": "500m", "cpuLimit": "1"}})}}
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
