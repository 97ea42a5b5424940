"""The ``inferenceservice-config`` sections KServe v0.20.0 reads before it builds any Pod of an
LLMInferenceService (``webhook.core.operators.llmisvc_config``; commit 1fb781055dd1567164358233e1125142ca6ef1fe):
the defaulter's ``localModel`` (defaulter.go:144-152), then ``toConfig`` (llmisvc/config_loader.go:208-240, from
``loadConfig`` at controller.go:264): ``ingress``, ``storageInitializer``, ``credentials``, ``scheduler``,
``autoscaling-wva-controller-config``. Formerly only ``storageInitializer`` was read, and the Pods were judged
where KServe builds none. Each a failing section and its compliant twin."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.kserve_cases import config
from webhook.core.operators import collect
from webhook.core.operators.llmisvc import RELATED
from webhook.core.workloads import find_targets, walk

INGRESS = {"enableGatewayApi": False, "kserveIngressGateway": "kserve/kserve-ingress-gateway",
           "ingressGateway": "knative-serving/knative-ingress-gateway", "ingressDomain": "example.com",
           "urlScheme": "http"}
CREDENTIALS = {"storageSpecSecretName": "storage-config", "gcs": {"gcsCredentialFileName": "gcloud.json"},
               "s3": {"s3AccessKeyIDName": "AWS_ACCESS_KEY_ID", "s3Endpoint": ""}}
LOCAL_MODEL = {"enabled": False, "jobNamespace": "kserve-localmodel-jobs", "fsGroup": 1000,
               "jobTTLSecondsAfterFinished": 3600, "reconcilationFrequencyInSecs": 60}
SHIPPED = {"ingress": INGRESS, "credentials": CREDENTIALS, "localModel": LOCAL_MODEL}
NO_CONFIG = "so KServe's llmisvc controller cannot load its config (toConfig"


def llm(uri: str = "pvc://models/m", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService",
            "metadata": {"name": "m", "namespace": "ml"},
            "spec": {"model": {"uri": uri}, "template": {"containers": [{"name": "main"}]}, **spec}}


def reasons(obj: dict[str, Any], **sections: Any) -> list[Any]:
    return list(walk(obj, related=collect([config(**{**SHIPPED, **sections})], RELATED)))


def built(obj: dict[str, Any], **sections: Any) -> list[str]:
    """The templates built with KServe's shipped ConfigMap but ``sections``: the twin loads."""
    related = collect([config(**{**SHIPPED, **sections})], RELATED)
    assert all(not isinstance(r, str) for r in walk(obj, related=related)), list(walk(obj, related=related))
    return [t.template for t in find_targets(obj, related=related)]


def refused(obj: dict[str, Any], said: str, **sections: Any) -> str:
    (reason,) = reasons(obj, **sections)
    assert isinstance(reason, str) and reason.startswith("LLMInferenceService: the inferenceservice-config "
                                                         "ConfigMap's "), reason
    assert said in reason and "builds no Pods until it is mended" in reason, reason
    return reason


@pytest.mark.parametrize(("bad", "said"), [
    ("not json", "ingress is not what KServe's Go code reads (not JSON"),
    ("null", "ingress is null: NewIngressConfig reads the nil config"),
    ({**INGRESS, "ingressGateway": 5}, "into ingressGateway of type string"),
    ({**INGRESS, "enableLLMInferenceServiceTLS": "yes"}, "into enableLLMInferenceServiceTLS of type bool"),
    ({k: v for k, v in INGRESS.items() if k != "ingressGateway"}, "has no ingressGateway (ingressGateway is required)"),
    ({**INGRESS, "enableGatewayApi": True, "kserveIngressGateway": ""},
     "enableGatewayApi without kserveIngressGateway"),
    ({**INGRESS, "enableGatewayApi": True, "kserveIngressGateway": "kserve-ingress-gateway"},
     "kserveIngressGateway 'kserve-ingress-gateway' is not <namespace>/<name>"),
    ({**INGRESS, "ingressDomain": "", "pathTemplate": "/serving/{{ .Name }}"}, "a pathTemplate without ingressDomain"),
])
def test_an_ingress_newingressconfig_refuses_builds_no_llmisvc_pods(bad: Any, said: str) -> None:
    """toConfig reads ingress first (NewIngressConfig, v1beta1/configmap.go:295-330): its error fails every
    reconcile before any workload, in any mode (the InferenceService's Knative mode reads it later). The twins: the
    shipped ingress, one with the Gateway API on and its gateway named as Go wants, a pathTemplate with its domain,
    and none at all (not read: KServe's defaults)."""
    reason = refused(llm(), said, ingress=bad)
    assert NO_CONFIG in reason and "KServe ships ingressGateway knative-serving/knative-ingress-gateway" in reason
    for good in (INGRESS, {**INGRESS, "EnableGatewayAPI": True}, {**INGRESS, "pathTemplate": "/s/{{ .Name }}"}):
        assert built(llm(), ingress=good) == ["spec.template (main, over kserve-config-llm-template)"], good
    cm = config(**SHIPPED)
    del cm["data"]["ingress"]
    assert [t.template for t in find_targets(llm(), related=collect([cm], RELATED))] == [
        "spec.template (main, over kserve-config-llm-template)"]


@pytest.mark.parametrize(("bad", "said"), [
    ("{", "credentials is not what KServe's Go code reads (not JSON"),
    ({"s3": {"s3Endpoint": 1}}, "into s3.s3Endpoint of type string"),
    ({"gcs": "key.json"}, "cannot unmarshal string into gcs"),
    ([], "cannot unmarshal array into a struct"),
])
def test_credentials_getcredentialconfig_refuses_build_no_llmisvc_pods(bad: Any, said: str) -> None:
    """toConfig's GetCredentialConfig (credentials/service_account_credentials.go:74-83) returns json.Unmarshal's
    error (the llmisvc controller does not panic: it fails the reconcile). The twin: KServe's keys as typed, keys
    of another case (Go matches them so), and null (it leaves the struct value as it was)."""
    reason = refused(llm("hf://o/m"), said, credentials=bad)
    assert "GetCredentialConfig fails" in reason and "s3 and gcs objects of strings" in reason
    for good in (CREDENTIALS, {"S3": {"S3ENDPOINT": "s3.example"}}, "null"):
        assert built(llm("hf://o/m"), credentials=good) == ["spec.template (main, over kserve-config-llm-template)"]


@pytest.mark.parametrize(("bad", "said"), [
    ("expirationAnnotations", "scheduler is not what KServe's Go code reads (not JSON"),
    ({"expirationAnnotations": "certificates.kserve.io/expiration"}, "into expirationAnnotations of type []string"),
    ({"expirationAnnotations": [1]}, "into expirationAnnotations of type []string"),
])
def test_a_scheduler_section_newschedulerconfig_refuses_builds_no_llmisvc_pods(bad: Any, said: str) -> None:
    """NewSchedulerConfig (config_loader.go:73-86) unmarshals ``scheduler`` into a SchedulerConfig: an error fails
    toConfig. KServe ships no such key; the twins: a list of strings, an empty object, null."""
    reason = refused(llm(), said, scheduler=bad)
    assert "NewSchedulerConfig fails" in reason and "expirationAnnotations a list of strings" in reason
    for good in ({"expirationAnnotations": ["a", "b"]}, {}, "null"):
        assert built(llm(), scheduler=good) == ["spec.template (main, over kserve-config-llm-template)"], good


WVA = "autoscaling-wva-controller-config"


@pytest.mark.parametrize(("bad", "said"), [
    ("prometheus", f"{WVA} is not what KServe's Go code reads (not JSON"),
    ({"prometheus": {"url": 9090}}, "into prometheus.url of type string"),
    ({"prometheus": {"url": "http://p:9090", "tlsInsecureSkipVerify": "true"}},
     "into prometheus.tlsInsecureSkipVerify of type bool"),
    ({"prometheus": []}, "cannot unmarshal array into prometheus"),
])
def test_a_wva_autoscaling_config_go_cannot_read_builds_no_llmisvc_pods(bad: Any, said: str) -> None:
    """toConfig unmarshals ``autoscaling-wva-controller-config`` into a WVAAutoscalingConfig when present
    (config_loader.go:231-237): an error fails every reconcile. The twins: typed as Go wants, and null."""
    reason = refused(llm(), said, **{WVA: bad})
    assert "json.Unmarshal fails" in reason and "tlsInsecureSkipVerify true or false" in reason
    for good in ({"prometheus": {"url": "http://p:9090", "tlsInsecureSkipVerify": True, "authModes": "bearer"}},
                 "null"):
        assert built(llm(), **{WVA: good}) == ["spec.template (main, over kserve-config-llm-template)"], good


@pytest.mark.parametrize(("bad", "said"), [
    ("{enabled}", "localModel is not what KServe's Go code reads (not JSON"),
    ({**LOCAL_MODEL, "enabled": "false"}, "into enabled of type bool"),
    ({**LOCAL_MODEL, "jobTTLSecondsAfterFinished": 2**31}, "into jobTTLSecondsAfterFinished of type int32"),
    ("null", "localModel is null: NewLocalModelConfig leaves a nil config"),
])
def test_a_local_model_section_the_defaulter_cannot_read_refuses_the_object(bad: Any, said: str) -> None:
    """KServe's LLMInferenceService defaulter (defaulter.go:144-152, failurePolicy Fail) reads ``localModel``
    (NewLocalModelConfig) on every CREATE and UPDATE: an error (or a nil config it then reads) refuses the object,
    so no Pod is built. The twin: the shipped section, and none at all."""
    reason = refused(llm(), said, localModel=bad)
    assert "defaulter (failurePolicy Fail) refuses the object" in reason and "fsGroup 1000" in reason
    assert built(llm(), localModel={**LOCAL_MODEL, "ENABLED": True}) == [
        "spec.template (main, over kserve-config-llm-template)"]


def test_the_first_section_kserve_cannot_read_is_named_in_its_order_and_before_the_base_refs() -> None:
    """The defaulter before the controller; toConfig reads ingress, storageInitializer, credentials, scheduler,
    then the WVA config, and stops at the first error; loadConfig (controller.go:264) runs before
    reconcileBaseRefs (:277), so a ConfigMap KServe cannot load is said even where a baseRef is not given."""
    bad = {"localModel": "null", "ingress": "null", "storageInitializer": "[]", "credentials": "[]",
           "scheduler": "[]", WVA: "[]"}
    order = ["localModel", "ingress", "storageInitializer", "credentials", "scheduler", WVA]
    for i, key in enumerate(order):
        sections = {k: v for k, v in bad.items() if k in order[i:]}
        refused(llm(), f"ConfigMap's {key} is ", **sections)
    with_ref = llm(baseRefs=[{"name": "not-given"}])
    refused(with_ref, "ConfigMap's credentials is not what", credentials="[]")
    (unknown,) = reasons(with_ref)
    assert isinstance(unknown, str) and 'LLMInferenceServiceConfig "not-given" not in' in unknown


def test_a_section_nested_too_deeply_is_not_judged() -> None:
    """qos-guard cannot read a section nested deeper than its own bound: said, not judged (no Pod, no refusal)."""
    deep = '{"url": "x", "x": ' + "[" * 5000 + "]" * 5000 + "}"
    (unread,) = reasons(llm(), **{WVA: '{"prometheus": ' + deep + "}"})
    assert isinstance(unread, str) and f"{WVA} is nested too deeply for qos-guard to read" in unread, unread
    assert unread.endswith("so what KServe makes of it is not known") and "builds no Pods" not in unread
