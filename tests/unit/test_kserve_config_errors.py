"""A given ``inferenceservice-config`` as KServe v0.20.0 reads it: its JSON values unmarshalled by Go (keys matched
case-insensitively, ``webhook.core.gojson``), and "KServe builds no Pod" where its readers fail
(``v1beta1/configmap.go`` GetStorageInitializerConfigs, NewDeployConfig; ``pod/agent_injector.go``
getAgentConfigs, getLoggerConfigs; ``pod/batcher_injector.go`` getBatcherConfigs: a resource key missing or not a
quantity is an error, the pod webhook (failurePolicy Fail) refuses every KServe Pod; the defaulter's
``resource.MustParse`` of ``inferenceService.resource`` panics for a custom container). Each a failing config and
its compliant twin."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.unit.kserve_cases import AGENT, RAW, SHIPPED, both, config, findings, isvc, model, runtime
from webhook.core.operators import collect
from webhook.core.operators.kserve import RELATED
from webhook.core.operators.kserve_runtimes import NoPod
from webhook.core.workloads import find_targets, walk

LOGGED = isvc({"model": model(storageUri="pvc://m"), "logger": {"mode": "all"}}, RAW)
CUSTOM = isvc({"containers": [{"name": "kserve-container", "image": "x"}]}, RAW)


def given(**sections: Any) -> Any:
    return collect([runtime("rt", "sklearn"), config(**sections)], RELATED)


@pytest.mark.parametrize(("sections", "why"), [
    ({"agent": {k: v for k, v in SHIPPED["agent"].items() if k != "cpuRequest"}}, "agent.cpuRequest is missing"),
    ({"logger": {**SHIPPED["logger"], "cpuLimit": "lots"}}, "logger.cpuLimit is 'lots', not a quantity"),
    ({"batcher": {"image": "x"}}, "batcher.cpuRequest is missing"),
    ({"storageInitializer": {**SHIPPED["storageInitializer"], "ociModelMode": "pull"}}, "ociModelMode 'pull'"),
    ({"storageInitializer": {**SHIPPED["storageInitializer"], "cpuModelcar": "ten"}}, "storageInitializer.cpuModelcar"),
    ({"deploy": {"defaultDeploymentMode": "Raw"}}, "deploy.defaultDeploymentMode is 'Raw'"),
    ({"deploy": {}}, "deploy.defaultDeploymentMode is ''"),
    ({"agent": None}, "agent is null"),
    ({"localModel": {"enabled": "yes"}}, "localModel is not what KServe's Go code reads"),
    ({"explainers": {"ART": {"image": 5}}}, "explainers is not what KServe's Go code reads"),
])
def test_a_config_kserve_cannot_read_builds_no_pod(sections: dict[str, Any], why: str) -> None:
    """Formerly KServe's shipped values stood in for what was missing, and a Pod was judged."""
    (reason,) = walk(LOGGED, related=given(**sections))
    assert isinstance(reason, NoPod) and why in reason and "KServe builds no Pod" in reason, reason
    # the twin: the shipped section
    assert findings(LOGGED, given()) == both(AGENT, "spec.predictor.logger")


def test_an_unparsable_default_resource_refuses_only_a_custom_container() -> None:
    """setResourceRequirementDefaults MustParse runs for custom components only (a model gets no defaults)."""
    bad = given(inferenceService={"resource": {**SHIPPED["inferenceService"]["resource"], "cpuRequest": "one"}})
    (reason,) = walk(CUSTOM, related=bad)
    assert isinstance(reason, NoPod) and "inferenceService.resource.cpuRequest 'one'" in reason
    assert findings(isvc({"model": model(storageUri="pvc://m")}, RAW), bad) == Counter()
    assert findings(CUSTOM, given()) == Counter()


def test_keys_are_matched_as_go_matches_them() -> None:
    """json.Unmarshal fills cpuRequest from "CPUREQUEST" (case-insensitive), the last of two keys winning: the
    agent's resources and the default mode read so (formerly KServe's defaults were used, and a queue-proxy)."""
    agent = {"image": "x", "CPUREQUEST": "1", "CpuLimit": "1", "memoryrequest": "1Gi", "MemoryLimit": "2Gi",
             "memoryLimit": "1Gi"}
    assert findings(LOGGED, given(agent=agent)) == Counter()
    assert findings(LOGGED, given(agent={**agent, "CPULIMIT": "2"})) == Counter(
        {"requests-not-equal-limits agent spec.predictor.logger.resources.cpu": 1})
    knative = isvc({"model": model(storageUri="pvc://m")})
    [target] = find_targets(knative, related=given(deploy={"DefaultDeploymentMode": "Standard"}))
    assert [c.name for c in target.pod_spec().containers] == ["kserve-container"]
    [default] = find_targets(knative, related=given())
    assert [c.name for c in default.pod_spec().containers] == ["kserve-container", "queue-proxy"]
