"""KServe's LLMInferenceService as KServe v0.20.0's llmisvc controller builds its Pods
(``webhook.core.operators.llmisvc``): presets by shape, baseRefs, the strategic merge, and what the model's URI
adds; what cannot be known is a reason naming the object it needs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import rl
from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.operators import CLUSTER, Related, collect
from webhook.core.operators.llmisvc import CONFIG, RELATED, merge, well_known
from webhook.core.target import Target
from webhook.core.workloads import find_targets, walk

GOOD = {"requests": rl("4", "8Gi"), "limits": rl("4", "8Gi")}


def llmisvc(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService",
            "metadata": {"name": "m", "namespace": "ns", **meta},
            "spec": {"model": {"uri": "pvc://models/m"}, **spec}}


def main(resources: dict[str, Any] = GOOD, **extra: Any) -> dict[str, Any]:
    return {"containers": [{"name": "main", "resources": resources}], **extra}


def config(name: str, spec: dict[str, Any], namespace: str = "ns") -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceServiceConfig",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def targets(obj: dict[str, Any], *related: dict[str, Any]) -> list[Target]:
    return list(find_targets(obj, related=collect(related, RELATED)))


def violations(obj: dict[str, Any], *related: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(template, container path, rule) of each violation."""
    facts = Facts(related=collect(related, RELATED))
    return sorted((t.template, dotted(v.path), v.rule) for t, v in evaluate(obj, Config(), Mode.ENFORCE,
                                                                               facts).violations)


def test_the_issue_sample_fails_whatever_the_presets_say() -> None:
    """KServe's single-node-gpu sample: cpu request 2, limit 4. The user's keys win the merge: Burstable."""
    sample = llmisvc({"template": main({"requests": rl("2", "16Gi"), "limits": rl("4", "32Gi")})},
                     name="qwen2-7b-instruct-single")
    sample["spec"]["model"]["uri"] = "hf://Qwen/Qwen2.5-7B-Instruct"
    found = violations(sample)
    assert ("spec.template (main, over kserve-config-llm-template)",
            "spec.template.containers[0].resources.requests.cpu", "requests-not-equal-limits") in found
    # hf:// adds KServe's storage-initializer (100m of 1 CPU as shipped): Burstable too, said
    assert any("initContainers" in path and rule == "requests-not-equal-limits" for _, path, rule in found)


def test_presets_by_shape() -> None:
    assert well_known({}) == ["kserve-config-llm-template"]
    assert well_known({"worker": {}, "parallelism": {"data": 4}}) == ["kserve-config-llm-worker-data-parallel"]
    assert well_known({"worker": {}, "parallelism": {"pipeline": 2}}) == ["kserve-config-llm-worker-pipeline-parallel"]
    assert well_known({"worker": {}}) == []  # a worker, neither data nor pipeline parallel: no preset
    assert well_known({"prefill": {}, "router": {"scheduler": {}, "route": {}}}) == [
        "kserve-config-llm-scheduler", "kserve-config-llm-router-route", "kserve-config-llm-prefill-template",
        "kserve-config-llm-decode-template"]
    assert well_known({"router": {"scheduler": {"pool": {"ref": {"name": "mine"}}}}}) == [
        "kserve-config-llm-template"]


def test_merge_is_by_container_name_and_resource_key() -> None:
    base = {"containers": [{"name": "main", "image": "a", "resources": {"limits": {"cpu": "6"}, "requests":
                                                                        {"cpu": "1"}}},
                           {"name": "side"}], "initContainers": [{"name": "x"}]}
    over = {"containers": [{"name": "main", "resources": {"requests": {"cpu": "6"}}}, {"name": "new"}],
            "initContainers": None}
    assert merge(base, over) == {"containers": [
        {"name": "main", "image": "a", "resources": {"limits": {"cpu": "6"}, "requests": {"cpu": "6"}}},
        {"name": "side"}, {"name": "new"}], "initContainers": [{"name": "x"}]}


def test_the_decode_presets_routing_sidecar_needs_resources_of_its_own() -> None:
    """P/D: KServe's decode preset adds llm-d-routing-sidecar (a native sidecar, resources {}): the Pod is not
    Guaranteed until the object gives it resources; named by the object's field once it does."""
    pd = llmisvc({"template": main(), "prefill": {"template": main()}})
    found = violations(pd)
    assert {(t, rule) for t, path, rule in found if "initContainers[0]" in path} == {
        ("spec.template (main, over kserve-config-llm-decode-template)", "limits-missing")}
    mended = llmisvc({"template": main(initContainers=[{"name": "llm-d-routing-sidecar", "resources": GOOD}]),
                      "prefill": {"template": main()}})
    assert violations(mended) == []
    [decode, _] = targets(mended)
    assert [dotted(c.path) for c in decode.pod_spec().init_containers] == ["spec.template.initContainers[0]"]


def test_the_storage_initializer_is_kserves_unless_overridden_or_configured() -> None:
    hf = llmisvc({"template": main()})
    hf["spec"]["model"]["uri"] = "hf://org/model"
    assert {rule for _, path, rule in violations(hf) if "initContainers" in path} == {"requests-not-equal-limits"}
    # the user's storage-initializer is merged over KServe's (MergeContainerWithPatch)
    hf["spec"]["template"]["initContainers"] = [{"name": "storage-initializer", "resources": GOOD}]
    assert violations(hf) == []
    # or the cluster's inferenceservice-config says so
    del hf["spec"]["template"]["initContainers"]
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inferenceservice-config",
                                                                "namespace": "kserve"},
          "data": {"storageInitializer": json.dumps({"cpuRequest": "1", "cpuLimit": "1", "memoryRequest": "1Gi",
                                                     "memoryLimit": "1Gi"})}}
    assert violations(hf, cm) == []
    # disabled: no init container at all
    off = llmisvc({"template": main(), "storageInitializer": {"enabled": False}})
    off["spec"]["model"]["uri"] = "s3://bucket/model"
    assert violations(off) == []
    # pvc://: the user's storage-initializer is dropped (extractAndStripStorageInitializer)
    pvc = llmisvc({"template": main(initContainers=[{"name": "storage-initializer"}])})
    assert violations(pvc) == []


@pytest.mark.parametrize(("uri", "initializer"), [("HF://org/m", True), ("S3://b/m", True), ("Pvc://v/m", False)])
def test_the_uri_scheme_is_read_as_go_parses_it(uri: str, initializer: bool) -> None:
    """spec.model.uri is an apis.URL: url.Parse lowercases the scheme, so HF:// is hf:// (a storage-initializer),
    not a scheme KServe refuses."""
    obj = llmisvc({"template": main()})
    obj["spec"]["model"]["uri"] = uri
    [target] = targets(obj)
    assert [c.name for c in target.pod_spec().init_containers] == (["storage-initializer"] if initializer else [])


def test_the_local_model_cache_is_kserves_label_with_its_annotations() -> None:
    """KServe's defaulter sets the localmodel label with its source-uri and pvc-name annotations from a matching
    LocalModelCache (the model then mounts a PVC: no storage-initializer), and deletes all three otherwise: a label
    alone is not its, and hf:// keeps its storage-initializer."""
    label = {"internal.serving.kserve.io/localmodel": "cache"}
    alone = llmisvc({"template": main()}, labels=label)
    alone["spec"]["model"]["uri"] = "hf://org/m"
    assert {rule for _, path, rule in violations(alone) if "initContainers" in path} == {"requests-not-equal-limits"}
    cached = llmisvc({"template": main()}, labels=label, annotations={
        "internal.serving.kserve.io/localmodel-sourceuri": "hf://org/m",
        "internal.serving.kserve.io/localmodel-pvc-name": "cache-gpu"})
    cached["spec"]["model"]["uri"] = "hf://org/m"
    assert violations(cached) == []


def test_oci_adds_the_modelcar() -> None:
    oci = llmisvc({"template": main()})
    oci["spec"]["model"]["uri"] = "oci://registry/model:1"
    [target] = targets(oci)
    assert [c.name for c in target.pod_spec().containers] == ["main", "modelcar"]
    assert {(path.rsplit(".", 2)[0], rule) for _, path, rule in violations(oci)} == {
        ("spec.template.containers[1].resources", "cpu-not-integer"),
        ("spec.template.initContainers[0].resources", "cpu-not-integer")}


def test_oci_follows_the_given_configmaps_own_words_on_oci_models() -> None:
    """``ResolveOciModelMode`` reads the ConfigMap's JSON keys (``enableModelcar``, not the Go field's name), and a
    given ConfigMap that names no OCI mode turns OCI models off (KServe builds no Pods), whatever KServe ships."""
    oci = llmisvc({"template": main()})
    oci["spec"]["model"]["uri"] = "oci://registry/model:1"

    def isvc_config(section: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inferenceservice-config",
                                                                      "namespace": "kserve"},
                "data": {"storageInitializer": json.dumps({"cpuRequest": "1", "cpuLimit": "1",
                                                           "memoryRequest": "1Gi", "memoryLimit": "1Gi", **section})}}

    [on] = targets(oci, isvc_config({"enableModelcar": True}))
    assert [c.name for c in on.pod_spec().containers] == ["main", "modelcar"]
    [reason] = list(walk(oci, related=collect([isvc_config({})], RELATED)))
    assert isinstance(reason, str) and "enables no OCI model mode, so KServe builds no Pods" in reason


@pytest.mark.parametrize(("mode", "made"), [("modelcar", True), ("fetch", True), ("native", False)])
def test_every_oci_mode_but_native_is_the_modelcar(mode: str, made: bool) -> None:
    """workload_storage.go: ResolveOciModelMode returns ociModelMode as written; every mode but native takes the
    modelcar branch (fetch included), whose 10m containers are not whole CPUs."""
    oci = llmisvc({"template": main()})
    oci["spec"]["model"]["uri"] = "oci://registry/model:1"
    storage = {"cpuRequest": "1", "cpuLimit": "1", "memoryRequest": "1Gi", "memoryLimit": "1Gi", "ociModelMode": mode}
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "inferenceservice-config", "namespace": "kserve"},
          "data": {"storageInitializer": json.dumps(storage)}}
    [target] = targets(oci, cm)
    assert [c.name for c in target.pod_spec().containers] == (["main", "modelcar"] if made else ["main"])
    assert bool(violations(oci, cm)) is made


def test_a_base_ref_not_given_is_unknown_and_given_is_merged() -> None:
    obj = llmisvc({"baseRefs": [{"name": "mine"}], "template": main()})
    assert list(walk(obj)) == ['LLMInferenceService spec.baseRefs[0]: LLMInferenceServiceConfig "mine" not in '
                               "the input; give it with the LLMInferenceService (or --kubeconfig to read it)"]
    assert list(find_targets(obj)) == []
    bursty = config("mine", {"template": {"containers": [{"name": "main", "resources": {"limits": rl("8")}}]}})
    [target] = targets(obj, bursty)
    assert target.template == "spec.template (main, over kserve-config-llm-template and mine)"
    # the object's requests and limits (4) win over the config's limit (8)
    assert violations(obj, bursty) == []
    # from KServe's namespace too; from the cluster, a config that is not there means no Pods
    assert targets(obj, config("mine", {}, namespace="kserve"))
    cluster = Related({CONFIG: ()}, CLUSTER, frozenset({CONFIG}))
    [reason] = list(walk(obj, related=cluster))
    assert isinstance(reason, str) and "KServe builds no Pods (ConfigNotFound)" in reason


def test_a_preset_kserve_does_not_ship_is_unknown() -> None:
    obj = llmisvc({"template": main(), "worker": main(), "parallelism": {"pipeline": 2}})
    [reason] = list(walk(obj))
    assert isinstance(reason, str) and '"kserve-config-llm-worker-pipeline-parallel" not in the input' in reason


@pytest.mark.parametrize(("change", "said"), [
    ({"metadata": {"annotations": {"serving.kserve.io/stop": "true"}}}, "KServe runs none of its Pods"),
    ({"spec": {"model": {"uri": "gs://bucket/m"}}}, "gs:// is not one KServe serves"),
    ({"spec": {"model": {"uri": "no-scheme"}}}, "has no scheme"),
])
def test_objects_kserve_builds_no_pods_for(change: dict[str, Any], said: str) -> None:
    obj = llmisvc({"template": main()})
    for key, value in change.items():
        obj[key] = {**obj[key], **value}
    [reason] = list(walk(obj))
    assert isinstance(reason, str) and said in reason


def test_the_scheduler_preset_is_burstable_unless_the_object_says_otherwise() -> None:
    obj = llmisvc({"template": main(), "router": {"scheduler": {}}})
    found = violations(obj)
    assert {t for t, _, _ in found} == {"spec.router.scheduler.template (scheduler, over kserve-config-llm-scheduler)"}
    fixed = llmisvc({"template": main(), "router": {"scheduler": {"template": {"containers": [
        {"name": "main", "resources": GOOD}, {"name": "tokenizer", "resources": GOOD}]}}}})
    assert violations(fixed) == []


def test_a_scheduler_with_the_tokenizer_gets_the_model_too() -> None:
    """scheduler.go (isUsingTokenizerSidecar): a managed scheduler with the tokenizer container gets the model's
    artifacts as a model-serving Pod does (attachModelArtifacts, without LoRA adapters): hf:// adds the
    storage-initializer (100m of 1 CPU as shipped), oci:// the modelcar; pvc:// nothing. They stay when KServe then
    drops the tokenizer (test_llmisvc_scheduler). The compliant twin is the guaranteed scheduler above, on a
    pvc:// model."""
    guaranteed = {"template": main(), "router": {"scheduler": {"template": {"containers": [
        {"name": "main", "resources": GOOD}, {"name": "tokenizer", "resources": GOOD}]}}}}
    scheduler = "spec.router.scheduler.template (scheduler, over kserve-config-llm-scheduler)"
    hf = llmisvc(guaranteed)
    hf["spec"]["model"]["uri"] = "hf://facebook/opt-125m"
    found = {(t, p, r) for t, p, r in violations(hf) if t == scheduler}
    assert found == {(scheduler, "spec.router.scheduler.template.initContainers[0].resources.requests.cpu",
                      "requests-not-equal-limits"),
                     (scheduler, "spec.router.scheduler.template.initContainers[0].resources.requests.memory",
                      "requests-not-equal-limits")}
    oci = llmisvc(guaranteed)
    oci["spec"]["model"]["uri"] = "oci://registry/opt:1"
    [built] = [t for t in targets(oci) if t.template == scheduler]
    assert [c.name for c in built.pod_spec().containers] == ["main", "modelcar"]
    assert violations(llmisvc(guaranteed)) == []


def _name(container: dict[str, Any]) -> Any:
    return container["name"]


_NAMES = st.sampled_from(["main", "side", "init", "x"])
_LIST = st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.sampled_from(["1", "2", "500m"]),
                        max_size=3)
_CONTAINER = st.fixed_dictionaries({"name": _NAMES}, optional={"resources": st.fixed_dictionaries(
    {}, optional={"requests": _LIST, "limits": _LIST}), "image": st.text(max_size=3)})
_POD = st.fixed_dictionaries({}, optional={
    "containers": st.lists(_CONTAINER, max_size=3, unique_by=_name),
    "initContainers": st.lists(_CONTAINER, max_size=2, unique_by=_name)})


@given(_POD, _POD)
def test_merge_keeps_every_container_and_the_overrides_own_values(base: dict[str, Any], over: dict[str, Any]) -> None:
    """Strategic merge of pod specs (KServe's mergeSpecs): every container of either, by name; each request and
    limit the override sets is the merged one's, and the base's others stay."""
    merged = merge(base, over)
    for group in ("containers", "initContainers"):
        names = [c["name"] for c in base.get(group, [])] + [c["name"] for c in over.get(group, [])]
        got = {c["name"]: c for c in merged.get(group, [])}
        assert set(got) == set(names) and len(got) == len(merged.get(group, []))
        for c in over.get(group, []):
            for side in ("requests", "limits"):
                for key, value in c.get("resources", {}).get(side, {}).items():
                    assert got[c["name"]]["resources"][side][key] == value
        for c in base.get(group, []):
            mine: dict[str, Any] = next((o for o in over.get(group, []) if o["name"] == c["name"]), {})
            for side in ("requests", "limits"):
                for key, value in c.get("resources", {}).get(side, {}).items():
                    if key not in mine.get("resources", {}).get(side, {}):
                        assert got[c["name"]]["resources"][side][key] == value


def test_the_webhook_refuses_the_issue_sample_naming_template_and_container() -> None:
    """At apply time: the webhook judges the LLMInferenceService as KServe will build its Pods."""
    import json as _json

    from tests.helpers import admission_review
    from webhook.serving.app import create_app

    sample = llmisvc({"template": main({"requests": rl("2", "16Gi"), "limits": rl("4", "32Gi")})})
    client = create_app(Config()).test_client()
    answer = client.post("/validate", data=_json.dumps(admission_review(sample, namespace="llm")),
                         content_type="application/json")
    response = answer.get_json()["response"]
    assert response["allowed"] is False
    assert ('requests-not-equal-limits: spec.template (main, over kserve-config-llm-template): container "main" '
            "(spec.template.containers[0]): cpu request 2 differs from its limit 4") in response["status"]["message"]


def test_a_config_alone_is_skipped_saying_where_it_is_judged() -> None:
    assert list(walk(config("mine", {"template": main()}))) == [
        "LLMInferenceServiceConfig (its pod specs are merged under the LLMInferenceServices that name it in "
        "spec.baseRefs, or take it as KServe's preset: judged there, given with them)"]
