"""A given ``inferenceservice-config`` as KServe v0.20.0 reads it: its JSON values unmarshalled by Go (keys matched
case-insensitively, ``webhook.core.gojson``), and "KServe builds no Pod" where its readers fail
(``v1beta1/configmap.go`` GetStorageInitializerConfigs, NewDeployConfig; ``pod/agent_injector.go``
getAgentConfigs, getLoggerConfigs; ``pod/batcher_injector.go`` getBatcherConfigs: a resource key missing or not a
quantity is an error, the pod webhook (failurePolicy Fail) refuses every KServe Pod; the defaulter's
``resource.MustParse`` of ``inferenceService.resource`` panics for a custom container). Each a failing config and
its compliant twin."""

from __future__ import annotations

import json
from collections import Counter
from functools import partial
from typing import Any

import pytest

from tests.helpers import admission_review
from tests.unit.kserve_cases import AGENT, RAW, SHIPPED, both, config, findings, isvc, model, runtime
from webhook.core.config import Config
from webhook.core.gojson import GoJSONError
from webhook.core.operators import NoPodHere, collect
from webhook.core.operators.kserve import RELATED
from webhook.core.operators.kserve_config import MEMO_SIZE, _unmarshalled, read_section
from webhook.core.operators.kserve_runtimes import NoPod
from webhook.core.workloads import find_targets, walk
from webhook.serving.app import create_app

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
    # annotated ModelMesh, the defaulter leaves the predictor alone (DefaultInferenceService): no MustParse, no
    # refusal; its Pods are modelmesh-serving's. Under defaultDeploymentMode ModelMesh it is defaulted: refused.
    meshed = isvc(CUSTOM["spec"]["predictor"], {"serving.kserve.io/deploymentMode": "ModelMesh"})
    (reason,) = walk(meshed, related=bad)
    assert isinstance(reason, NoPodHere) and not isinstance(reason, NoPod), reason
    by_default = given(inferenceService={"resource": {**SHIPPED["inferenceService"]["resource"], "cpuRequest": "one"}},
                       deploy={"defaultDeploymentMode": "ModelMesh"})
    (reason,) = walk(isvc(CUSTOM["spec"]["predictor"]), related=by_default)
    assert isinstance(reason, NoPod) and "inferenceService.resource.cpuRequest 'one'" in reason, reason


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


def _nested(levels: int) -> str:
    return json.dumps(SHIPPED["agent"])[:-1] + ', "x": ' + "[" * levels + "]" * levels + "}"


def test_a_section_nested_too_deeply_is_not_judged_and_past_go_s_depth_builds_no_pod() -> None:
    """Formerly Python's RecursionError came out of the builder: every InferenceService admission an HTTP 500.
    Go reads 10000 levels (scanner.go maxNestingDepth): 5000 is KServe's to read, qos-guard's not (a reason, not
    judged); past 10000 json.Unmarshal fails (KServe builds no Pod). The webhook answers 200 for both; the twin,
    a shallow extra key, is judged."""
    (unread,) = walk(LOGGED, related=given(agent=_nested(5000)))
    assert isinstance(unread, str) and not isinstance(unread, NoPod), unread
    assert "agent is nested too deeply for qos-guard to read" in unread
    assert unread.endswith("so what KServe makes of it is not known")
    (refused,) = walk(LOGGED, related=given(agent=_nested(10000)))
    assert isinstance(refused, NoPod) and "exceeded max depth" in refused and "KServe builds no Pod" in refused
    assert findings(LOGGED, given(agent=_nested(3))) == both(AGENT, "spec.predictor.logger")
    for levels in (5000, 10000):
        app = create_app(Config(), related=partial(given, agent=_nested(levels)))
        response = app.test_client().post("/validate", data=json.dumps(admission_review(LOGGED, namespace="ml")),
                                          content_type="application/json")
        assert response.status_code == 200 and response.get_json()["response"]["allowed"] is True


LOGGER = SHIPPED["logger"]
ROLLOUT = {"defaultRollout": {"maxSurge": "1", "maxUnavailable": "0"}}


@pytest.mark.parametrize(("bad", "good", "why"), [
    ({"inferenceService": {**SHIPPED["inferenceService"], "explainers": 5}},
     {"inferenceService": {**SHIPPED["inferenceService"], "explainers": {"art": {"image": "a"}}}},
     "inferenceService is not what KServe's Go code reads (cannot unmarshal number into explainers (a struct))"),
    ({"inferenceService": {**SHIPPED["inferenceService"], "explainers": {"art": {"image": 5}}}},
     {"inferenceService": {**SHIPPED["inferenceService"], "explainers": {"ART": {"IMAGE": "a"}}}},
     "into explainers.art.image of type string"),
    ({"localModel": {"jobTTLSecondsAfterFinished": 3000000000}},
     {"localModel": {"jobTTLSecondsAfterFinished": 2**31 - 1}},
     "into jobTTLSecondsAfterFinished of type int32"),
    ({"localModel": {"jobTTLSecondsAfterFinished": -2**31 - 1}},
     {"localModel": {"jobTTLSecondsAfterFinished": -2**31}},
     "into jobTTLSecondsAfterFinished of type int32"),
    ({"logger": {**LOGGER, "storage": 5}}, {"logger": {**LOGGER, "storage": None}},
     "logger is not what KServe's Go code reads (cannot unmarshal number into storage (a struct))"),
    ({"logger": {**LOGGER, "storage": {"path": 1}}}, {"logger": {**LOGGER, "storage": {"path": "/p", "key": "k"}}},
     "into storage.path of type string"),
    ({"logger": {**LOGGER, "storage": {"parameters": {"a": 1}}}},
     {"logger": {**LOGGER, "storage": {"parameters": {"a": "b"}, "serviceAccountName": "sa"}}},
     "into storage.parameters of type map[string]string"),
    ({"deploy": {"defaultDeploymentMode": "Standard", "deploymentRolloutStrategy": "fast"}},
     {"deploy": {"defaultDeploymentMode": "Standard", "deploymentRolloutStrategy": ROLLOUT}},
     "deploy is not what KServe's Go code reads (cannot unmarshal string into deploymentRolloutStrategy (a struct))"),
    ({"deploy": {"defaultDeploymentMode": "Standard",
                 "deploymentRolloutStrategy": {"defaultRollout": {"maxSurge": 1}}}},
     {"deploy": {"defaultDeploymentMode": "Standard", "deploymentRolloutStrategy": {"defaultRollout": None}}},
     "into deploymentRolloutStrategy.defaultRollout.maxSurge of type string"),
])
def test_fields_are_held_to_their_go_types(bad: dict[str, Any], good: dict[str, Any], why: str) -> None:
    """Formerly typed "any" or "*int" (int64) here, so a Pod was judged where json.Unmarshal fails: ExplainersConfig
    (configmap.go:99), LocalModelConfig's *int32 (configmap.go:167), LoggerConfig's *v1beta1.LoggerStorageSpec
    (agent_injector.go:77, inference_service.go:74), DeployConfig's *DeploymentRolloutStrategy (configmap.go:141).
    The twin, each field of its type, is judged."""
    (reason,) = walk(LOGGED, related=given(**bad))
    assert isinstance(reason, NoPod) and why in reason and "KServe builds no Pod" in reason, reason
    assert findings(LOGGED, given(**good)) == both(AGENT, "spec.predictor.logger")


KNATIVE_LOGGED = isvc({"model": model(storageUri="pvc://m"), "logger": {"mode": "all"}})
INGRESS = {"ingressGateway": "knative-serving/knative-ingress-gateway", "ingressDomain": "example.com"}


@pytest.mark.parametrize(("bad", "good", "why"), [
    ("{", None, "credentials is not what KServe's Go code reads (not JSON"),
    ({"s3": {"s3Endpoint": 1}}, {"s3": {"s3Endpoint": "s3.example"}}, "into s3.s3Endpoint of type string"),
    ({"gcs": "key.json"}, {"GCS": {"gcsCredentialFileName": "key.json"}}, "cannot unmarshal string into gcs"),
    ([], {"storageSpecSecretName": "storage-config"}, "cannot unmarshal array into a struct"),
])
def test_credentials_kserve_cannot_read_build_no_pod_in_any_mode(bad: Any, good: Any, why: str) -> None:
    """NewCredentialBuilder (credentials/service_account_credentials.go:85-90) panics where GetCredentialConfig's
    json.Unmarshal fails: KServe's controller calls it before the Deployment (predictor.go:779) and before the
    Knative Service (predictor.go:855), its pod webhook for every KServe Pod (mutator.go:94). Formerly the section
    was not read and the Pods were judged. The twin (null included: it leaves the struct value as it was) is
    judged."""
    for obj in (LOGGED, KNATIVE_LOGGED):
        (reason,) = walk(obj, related=given(credentials=bad))
        assert isinstance(reason, NoPod) and why in reason and "NewCredentialBuilder panics" in reason, reason
    assert findings(LOGGED, given(credentials=good)) == both(AGENT, "spec.predictor.logger")
    assert findings(LOGGED, given(credentials="null")) == both(AGENT, "spec.predictor.logger")


@pytest.mark.parametrize(("bad", "why"), [
    ("not json", "ingress is not what KServe's Go code reads (not JSON"),
    ("null", "ingress is null: NewIngressConfig reads the nil config"),
    ({**INGRESS, "ingressGateway": 5}, "into ingressGateway of type string"),
    ({**INGRESS, "additionalIngressDomains": "a.example"}, "into additionalIngressDomains of type []string"),
    ({}, "no ingressGateway (ingressGateway is required)"),
    ({**INGRESS, "enableGatewayApi": True}, "enableGatewayApi without kserveIngressGateway"),
    ({**INGRESS, "enableGatewayApi": True, "kserveIngressGateway": "Kserve/gw"}, "kserveIngressGateway 'Kserve/gw'"),
    ({**INGRESS, "enableGatewayApi": True, "kserveIngressGateway": "kserve"}, "kserveIngressGateway 'kserve'"),
    ({"ingressGateway": "gw", "pathTemplate": "/serving/{{ .Name }}"}, "a pathTemplate without ingressDomain"),
])
def test_an_ingress_kserve_cannot_read_builds_no_pod_in_standard_mode_only(bad: Any, why: str) -> None:
    """NewIngressConfig (v1beta1/configmap.go:295-330) is read by the Standard-mode reconciler before the
    Deployment (raw_kube_reconciler.go:106-109): it fails, no Pod (formerly judged). In Knative mode the controller
    reads it only after the Knative Service (controller.go:355): the Pod is judged as without it. The twins: a
    valid ingress, a gateway named as Go wants it, and none at all (not read)."""
    (reason,) = walk(LOGGED, related=given(ingress=bad))
    assert isinstance(reason, NoPod) and why in reason and "KServe builds no Pod" in reason, reason
    assert findings(KNATIVE_LOGGED, given(ingress=bad)) == findings(KNATIVE_LOGGED, given()) != Counter()
    for good in (INGRESS, {**INGRESS, "ENABLEGATEWAYAPI": True, "kserveIngressGateway": "kserve/kserve-gw"},
                 {**INGRESS, "pathTemplate": "/serving/{{ .Name }}"}):
        assert findings(LOGGED, given(ingress=good)) == both(AGENT, "spec.predictor.logger"), good
    assert findings(LOGGED, given()) == both(AGENT, "spec.predictor.logger")


def test_the_router_section_is_not_read_for_an_inferenceservice() -> None:
    """Only the InferenceGraph controller reads ``router`` (inferencegraph/controller.go:106-112): an
    InferenceService's Pods are built whatever it holds."""
    assert findings(LOGGED, given(router="not json")) == both(AGENT, "spec.predictor.logger")


def test_a_kept_reading_is_never_the_callers() -> None:
    """read_section keeps Go's reading of each section text (a request reads each section about 17 times, every
    request the same text) and hands out copies: a caller changing its result, nested dicts and lists included,
    leaves the next read as the ConfigMap says."""
    logger = {**LOGGER, "storage": {"path": "/p", "parameters": {"a": "b"}}}
    service = {**SHIPPED["inferenceService"], "serviceAnnotationDisallowedList": ["x"]}
    cm = config(logger=logger, inferenceService=service)
    first, second = read_section(cm, "logger"), read_section(cm, "inferenceService")
    assert first is not None and second is not None
    first["cpuRequest"] = "9"
    first["storage"]["parameters"]["a"] = "z"
    second["serviceAnnotationDisallowedList"].append("y")
    second["resource"].clear()
    assert read_section(cm, "logger") == logger
    assert read_section(cm, "inferenceService") == service
    assert findings(CUSTOM, collect([cm], RELATED)) == Counter()  # the 1 CPU/2Gi defaults are still read


def test_the_kept_readings_are_bounded_and_reused() -> None:
    """At most MEMO_SIZE section texts are kept (the oldest unused dropped); the same text is not parsed again;
    a kept error is raised anew each read, as a fresh exception."""
    _unmarshalled.cache_clear()
    texts = [config(agent={**SHIPPED["agent"], "image": f"agent:{i}"}) for i in range(MEMO_SIZE + 8)]
    for i, cm in enumerate(texts):
        assert read_section(cm, "agent") == {**SHIPPED["agent"], "image": f"agent:{i}"}
    assert _unmarshalled.cache_info().currsize == MEMO_SIZE
    hits = _unmarshalled.cache_info().hits
    read_section(texts[-1], "agent")
    assert _unmarshalled.cache_info().hits == hits + 1
    bad = config(agent={"cpuRequest": 1})
    raised = []
    for _ in range(2):
        with pytest.raises(GoJSONError, match="into cpuRequest of type string") as error:
            read_section(bad, "agent")
        raised.append(error.value)
    assert raised[0] is not raised[1]



def test_only_the_config_map_in_kserves_namespace_is_kserves() -> None:
    """KServe reads ``kserve/inferenceservice-config`` (constants.KServeNamespace): one of that name in another
    namespace is any other ConfigMap. Its broken ingress must not make the InferenceService unjudged."""
    broken = config(ingress={"ingressGateway": ""})
    elsewhere = {**broken, "metadata": {**broken["metadata"], "namespace": "team-a"}}
    burstable = runtime("rt", "sklearn", cpu_request="1")
    obj = isvc({"model": model(storageUri="pvc://m")}, RAW)
    assert not [r for r in walk(obj, related=collect([burstable, elsewhere], RELATED)) if isinstance(r, str)]
    assert findings(obj, collect([burstable, elsewhere], RELATED))
    assert [type(r) for r in walk(obj, related=collect([burstable, broken], RELATED))] == [NoPod]
