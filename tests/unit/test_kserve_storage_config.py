"""``inferenceservice-config`` ``storageInitializer`` read once for both KServe builders (InferenceService and
LLMInferenceService, ``webhook.core.operators.kserve_pod``), as KServe v0.20.0 reads it:
``GetStorageInitializerConfigs`` unmarshals it into an empty ``StorageInitializerConfig`` and panics when it is
not a JSON object (the controllers and the pod webhook fail: no Pods), ``ResolveOciModelMode`` picks the OCI
mode, the modelcar takes ``cpuModelcar``/``memoryModelcar`` (10m/15Mi when unset) as request and limit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.operators import collect, kserve, llmisvc
from webhook.core.operators.kserve_pod import (
    STORAGE_UNREADABLE,
    modelcar_container,
    parse_storage_initializer,
    resolve_oci_mode,
)
from webhook.core.workloads import find_targets, walk

STANDARD = {"serving.kserve.io/deploymentMode": "Standard"}


def config_map(storage: str | None) -> dict[str, Any]:
    data = {} if storage is None else {"storageInitializer": storage}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "inferenceservice-config", "namespace": "kserve"}, "data": data}


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
        assert len(out) == 1 and isinstance(out[0], str) and out[0].endswith(STORAGE_UNREADABLE), (obj, out)


def test_an_absent_or_null_storage_initializer_is_an_empty_config() -> None:
    """json.Unmarshal of null sets nothing; an absent key is not read: OCI models off in both cases, a given
    ConfigMap's own word (not KServe's shipped enableModelcar)."""
    assert parse_storage_initializer(None) == {} and parse_storage_initializer("null") == {}
    assert parse_storage_initializer('{"cpuRequest": null, "uidModelcar": 1000, "other": 5}') == {
        "cpuRequest": None, "uidModelcar": 1000, "other": 5}  # null sets nothing; unknown keys are ignored
    for text in (None, "null"):
        related = collect([config_map(text)], kserve.RELATED)
        [target] = find_targets(isvc(), related=related)
        assert [c.name for c in target.pod_spec().init_containers] == ["storage-initializer"]
    [shipped] = find_targets(isvc())
    assert [c.name for c in shipped.pod_spec().containers] == ["kserve-container", "modelcar"]


def test_both_builders_make_the_same_modelcar() -> None:
    values = ('{"enableModelcar": true, "cpuModelcar": "2", "memoryModelcar": "64Mi", "cpuRequest": "100m", '
              '"cpuLimit": "1", "memoryRequest": "100Mi", "memoryLimit": "1Gi"}')
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
    (None, "has no cpuRequest"), ("null", "has no cpuRequest"), ('{"enableModelcar": true}', "has no cpuRequest"),
    (json.dumps({**FULL, "memoryLimit": ""}), "has no memoryLimit"),
    (json.dumps({**FULL, "cpuLimit": "one"}), "cpuLimit 'one' is not a quantity"),
    (json.dumps({**FULL, "cpuModelcar": "10 m"}), "cpuModelcar '10 m' is not a quantity")])
def test_a_configmap_the_llmisvc_controller_cannot_load_means_no_llmisvc_pods(text: str | None, said: str) -> None:
    """config_loader.go toConfig: GetStorageInitializerConfigs parses the four requests and limits (an absent key
    or section is "") and a set cpuModelcar/memoryModelcar as quantities; an error fails every reconcile before
    any Pod, whatever the model's URI (pvc:// here). KServe's shipped values are not filled in."""
    related = collect([config_map(text)], llmisvc.RELATED)
    [reason] = list(walk(llm("pvc://models/m"), related=related))
    assert isinstance(reason, str) and said in reason and reason.endswith("builds no Pods until it is mended")
    [built] = find_targets(llm("pvc://models/m"), related=collect([config_map(json.dumps(FULL))], llmisvc.RELATED))
    assert [c.name for c in built.pod_spec().containers] == ["main"]
