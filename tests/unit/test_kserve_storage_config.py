"""``inferenceservice-config`` ``storageInitializer`` read once for both KServe builders (InferenceService and
LLMInferenceService, ``webhook.core.operators.kserve_config``), as KServe v0.20.0 reads it:
``GetStorageInitializerConfigs`` unmarshals it into an empty ``StorageInitializerConfig`` and panics when it is
not a JSON object (the controllers and the pod webhook fail: no Pods), ``ResolveOciModelMode`` picks the OCI
mode, the modelcar takes ``cpuModelcar``/``memoryModelcar`` (10m/15Mi when unset) as request and limit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.kserve_cases import SHIPPED, config
from webhook.core.operators import collect, kserve, llmisvc
from webhook.core.operators.kserve_config import read_section, resolve_oci_mode
from webhook.core.operators.kserve_pod import modelcar_container
from webhook.core.workloads import find_targets, walk

STANDARD = {"serving.kserve.io/deploymentMode": "Standard"}


def config_map(storage: str | None) -> dict[str, Any]:
    """KServe's shipped ConfigMap with this storageInitializer (None: without one)."""
    made = config(storageInitializer=storage or "")
    if storage is None:
        del made["data"]["storageInitializer"]
    return made


def isvc(uri: str = "oci://registry/model:1") -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "m", "namespace": "ml", "annotations": STANDARD},
            "spec": {"predictor": {"containers": [{"name": "kserve-container", "image": "x", "env": [
                {"name": "STORAGE_URI", "value": uri}]}]}}}


def llm(uri: str = "oci://registry/model:1") -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService",
            "metadata": {"name": "m", "namespace": "ml"},
            "spec": {"model": {"uri": uri}, "template": {"containers": [{"name": "main"}]}}}


@pytest.mark.parametrize("text", ["{not json", "[]", '"modelcar"', "1", '{"cpuRequest": 5}',
                                  '{"enableModelcar": "yes"}', '{"uidModelcar": 1.5}', '{"uidModelcar": true}'])
def test_a_storage_initializer_kserve_cannot_read_builds_no_pods_in_either_builder(text: str) -> None:
    """Not a JSON object, or a key KServe reads holding another type (json.Unmarshal fails, GetStorageInitializerConfigs
    panics). The InferenceService builder took such a ConfigMap for "OCI models off" (a storage-initializer), the
    LLMInferenceService one for KServe's shipped values ([], strings, mistyped keys) or unknown: both say now that
    KServe builds no Pods, for any model URI."""
    for obj, module in ((isvc(), kserve), (isvc("s3://b/m"), kserve), (llm(), llmisvc), (llm("hf://o/m"), llmisvc)):
        related = collect([config_map(text)], module.RELATED)
        out = list(walk(obj, related=related))
        assert len(out) == 1 and isinstance(out[0], str), (obj, out)
        assert "storageInitializer is not what KServe's Go code reads (" in out[0], out[0]
        assert "builds no Pods" in out[0] and out[0].endswith('"memoryModelcar":"15Mi"}'), out[0]


def test_a_storage_initializer_kserve_cannot_read_is_said_with_go_s_error_and_the_way_out() -> None:
    """Formerly one fixed sentence, naming no key and listing the types wrongly (no integer): now Go's error
    (which key, what type) and KServe's shipped values. uidModelcar is an *int64: 10**4000 overflows it, 1010 (as
    shipped) is read."""
    big = json.dumps({**SHIPPED["storageInitializer"], "uidModelcar": 10**4000})
    for obj, module in ((isvc("s3://b/m"), kserve), (llm("hf://o/m"), llmisvc)):
        (reason,) = walk(obj, related=collect([config_map(big)], module.RELATED))
        assert isinstance(reason, str) and "cannot unmarshal number into uidModelcar of type int64" in reason
        assert "uidModelcar an int64" in reason and '"cpuRequest":"100m"' in reason, reason
        # the twin: KServe's own uidModelcar
        assert all(not isinstance(t, str) for t in walk(obj, related=collect(
            [config_map(json.dumps(SHIPPED["storageInitializer"]))], module.RELATED)))


def test_an_absent_or_null_storage_initializer_builds_no_pods() -> None:
    """GetStorageInitializerConfigs (v1beta1/configmap.go): an absent section sets nothing, and its empty
    cpuRequest, cpuLimit, memoryRequest, memoryLimit fail ParseQuantity, so the controller and the pod webhook fail
    (no Pods; KServe's code wins over the former reading, which took it for "OCI models off"); null clears the
    pointer KServe then reads (a panic). A key set with another case fills the field (Go's json matches keys
    case-insensitively); null leaves a field unset; unknown keys are ignored."""
    assert read_section(config_map(None), "storageInitializer") == {}
    assert read_section(config_map("null"), "storageInitializer") is None
    assert read_section(config_map('{"CPUREQUEST": "1", "cpuRequest": null, "uidModelcar": 1000, "other": 5}'),
                        "storageInitializer") == {
        "cpuRequest": "1", "uidModelcar": 1000}
    for text, why in ((None, "storageInitializer.cpuRequest is missing"), ("null", "storageInitializer is null"),
                      ("{}", "storageInitializer.cpuRequest is missing")):
        related = collect([config_map(text)], kserve.RELATED)
        (reason,) = walk(isvc("s3://b/m"), related=related)
        assert isinstance(reason, str) and why in reason and "KServe builds no Pod" in reason, reason
        # the LLMInferenceService builder reads it too (toConfig): no Pods either
        (llm_reason,) = walk(llm("hf://o/m"), related=collect([config_map(text)], llmisvc.RELATED))
        assert isinstance(llm_reason, str) and why in llm_reason, llm_reason
    [shipped] = find_targets(isvc())
    assert [c.name for c in shipped.pod_spec().containers] == ["kserve-container", "modelcar"]
    [given] = find_targets(isvc(), related=collect([config_map(json.dumps(SHIPPED["storageInitializer"]))],
                                                   kserve.RELATED))
    assert [c.name for c in given.pod_spec().containers] == ["kserve-container", "modelcar"]


def test_both_builders_make_the_same_modelcar() -> None:
    values = json.dumps({**SHIPPED["storageInitializer"], "cpuModelcar": "2", "memoryModelcar": "64Mi"})
    [built] = find_targets(isvc(), related=collect([config_map(values)], kserve.RELATED))
    [llm_built] = find_targets(llm(), related=collect([config_map(values)], llmisvc.RELATED))
    expected = modelcar_container("modelcar", {"cpuModelcar": "2", "memoryModelcar": "64Mi"})
    assert expected["resources"] == {"requests": {"cpu": "2", "memory": "64Mi"},
                                     "limits": {"cpu": "2", "memory": "64Mi"}}
    for target in (built, llm_built):
        [car] = [c for c in target.spec["containers"] if c["name"] == "modelcar"]
        assert car == expected


@given(st.fixed_dictionaries({}, optional={
    "ociModelMode": st.sampled_from(["", "modelcar", "native", "fetch"]),
    "enableModelcar": st.booleans(), "enableOciModelSupport": st.booleans()}))
def test_resolve_oci_mode_is_kserves(storage: dict[str, Any]) -> None:
    """types/config.go ResolveOciModelMode: an explicit mode first, then either backward-compatible flag."""
    mode = storage.get("ociModelMode") or ""
    expected = mode or ("modelcar" if storage.get("enableModelcar") or storage.get("enableOciModelSupport") else "")
    assert resolve_oci_mode(storage) == expected


FULL = {"cpuRequest": "100m", "cpuLimit": "1", "memoryRequest": "100Mi", "memoryLimit": "1Gi"}


@pytest.mark.parametrize(("text", "said"), [
    (None, "storageInitializer.cpuRequest is missing"), ("null", "storageInitializer is null"),
    ('{"enableModelcar": true}', "storageInitializer.cpuRequest is missing"),
    (json.dumps({**FULL, "memoryLimit": ""}), "storageInitializer.memoryLimit is missing"),
    (json.dumps({**FULL, "cpuLimit": "one"}), "storageInitializer.cpuLimit is 'one', not a quantity"),
    (json.dumps({**FULL, "cpuModelcar": "10 m"}), "storageInitializer.cpuModelcar is '10 m', not a quantity")])
def test_a_configmap_the_llmisvc_controller_cannot_load_means_no_llmisvc_pods(text: str | None, said: str) -> None:
    """config_loader.go toConfig: GetStorageInitializerConfigs parses the four requests and limits (an absent key
    or section is "") and a set cpuModelcar/memoryModelcar as quantities; an error fails every reconcile before
    any Pod, whatever the model's URI (pvc:// here); a null section is a nil pointer it then reads (a panic). KServe's
    shipped values are not filled in. The reason is config_refusal's, shared with the InferenceService builder."""
    related = collect([config_map(text)], llmisvc.RELATED)
    [reason] = list(walk(llm("pvc://models/m"), related=related))
    assert isinstance(reason, str) and reason.startswith("LLMInferenceService: ") and said in reason
    assert "KServe builds no Pod" in reason
    [built] = find_targets(llm("pvc://models/m"), related=collect([config_map(json.dumps(FULL))], llmisvc.RELATED))
    assert [c.name for c in built.pod_spec().containers] == ["main"]


def test_a_storage_initializer_nested_too_deeply_is_not_judged_by_either_builder() -> None:
    """Formerly a RecursionError out of both builders: 5000 levels Go reads (not judged here), 10001 it refuses
    (exceeded max depth: no Pods)."""
    def nested(levels: int) -> str:
        return json.dumps(SHIPPED["storageInitializer"])[:-1] + ', "x": ' + "[" * levels + "]" * levels + "}"
    for obj, module in ((isvc("s3://b/m"), kserve), (llm("hf://o/m"), llmisvc)):
        (unread,) = walk(obj, related=collect([config_map(nested(5000))], module.RELATED))
        assert isinstance(unread, str) and "nested too deeply for qos-guard to read" in unread, unread
        assert unread.endswith("so what KServe makes of it is not known") and "builds no Pod" not in unread
        (refused,) = walk(obj, related=collect([config_map(nested(10000))], module.RELATED))
        assert isinstance(refused, str) and "exceeded max depth" in refused and "builds no Pods" in refused
