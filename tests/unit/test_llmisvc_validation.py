"""What KServe v0.20.0 refuses in an LLMInferenceService's merged spec before any Pod
(``webhook.core.operators.llmisvc_validation``; config_merge.go combineBaseRefsConfig, its validator and
``enumerateLoRAAdapters``): each means no Pods, said, never a verdict on Pods that do not exist."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_llmisvc import config, llmisvc, main, targets
from webhook.core.operators import collect
from webhook.core.operators.llmisvc import RELATED
from webhook.core.workloads import walk


def reasons(obj: dict[str, Any], *related: dict[str, Any]) -> list[str]:
    return [r for r in walk(obj, related=collect(related, RELATED)) if isinstance(r, str)]


@pytest.mark.parametrize(("spec", "said"), [
    ({"worker": main()}, "spec.worker needs spec.parallelism data (with dataLocal) or pipeline above 0"),
    ({"worker": main(), "parallelism": {"tensor": 2}}, "spec.worker needs spec.parallelism"),
    ({"worker": main(), "parallelism": {"data": 2}}, "sets one of data and dataLocal without the other"),
    ({"worker": main(), "parallelism": {"data": 2, "dataLocal": 1, "pipeline": 2}}, "sets both pipeline and data"),
    ({"parallelism": {"pipeline": 0}}, "spec.parallelism.pipeline is not above 0"),
    ({"prefill": {"template": main(), "worker": main()}}, "spec.prefill.worker needs spec.prefill.parallelism"),
])
def test_parallelism_kserve_refuses_means_no_pods(spec: dict[str, Any], said: str) -> None:
    """validateWorkloadParallelism on the merged spec (config_merge.go:432-445): the leader and worker judged
    before, with no preset, are Pods KServe never makes."""
    obj = llmisvc({"template": main(), **spec})
    [reason] = reasons(obj)
    assert said in reason and reason.endswith("so KServe builds no Pods")
    assert targets(obj) == []


def test_valid_parallelism_builds_the_leader_and_worker() -> None:
    """The twin: data with dataLocal (KServe's data-parallel preset), or pipeline with its preset given."""
    data = llmisvc({"template": main(), "worker": main(), "parallelism": {"data": 2, "dataLocal": 1}})
    assert [t.template.split(" (")[1].split(",")[0] for t in targets(data)] == ["leader", "worker"]
    pipeline = llmisvc({"template": main(), "worker": main(), "parallelism": {"pipeline": 2}})
    preset = config("kserve-config-llm-worker-pipeline-parallel", {"worker": main()})
    assert reasons(pipeline, preset) == [] and len(targets(pipeline, preset)) == 2


def test_a_base_ref_can_make_the_merged_spec_invalid() -> None:
    """The validator judges the merged spec: a worker from a baseRef without parallelism is refused too."""
    obj = llmisvc({"template": main(), "baseRefs": [{"name": "workers"}]})
    [reason] = reasons(obj, config("workers", {"worker": main()}))
    assert "spec.worker needs spec.parallelism" in reason


def lora(*adapters: dict[str, Any], **spec: Any) -> dict[str, Any]:
    obj = llmisvc({"template": main(), **spec})
    obj["spec"]["model"]["lora"] = {"adapters": list(adapters)}
    return obj


@pytest.mark.parametrize(("obj", "said"), [
    (lora({"name": "a", "uri": "oci://registry/adapter:1"}), "adapters[0].uri 'oci://registry/adapter:1' is not"),
    (lora({"name": "a", "uri": "gs://b/a"}), "adapters[0].uri 'gs://b/a' is not hf://, s3:// or pvc://"),
    (lora({"name": "a", "uri": "no-scheme"}), "adapters[0].uri 'no-scheme' is not"),
    (lora({"name": "a", "uri": "hf://o/a"}, storageInitializer={"enabled": False}), "needs the storage initializer"),
    (lora({"name": "a", "uri": "pvc://v/a"}, storageInitializer={"enabled": False}), "needs the storage initializer"),
    (lora({"uri": "hf://o/a"}), "adapters[0].name None is not an adapter name"),
    (lora({"name": "a", "uri": "hf://o/a"}, {"name": "a", "uri": "hf://o/b"}), "adapters[1].name 'a' is used twice"),
    (lora({"name": "m", "uri": "hf://o/a"}), "adapters[0].name 'm' is the base model name"),
])
def test_lora_adapters_kserve_refuses_mean_no_pods(obj: dict[str, Any], said: str) -> None:
    """enumerateLoRAAdapters (workload_lora.go:70-126) and validateLoRAAdapters fail the reconcile: the Pods
    qos-guard judged (without a storage-initializer where it was turned off) never exist."""
    [reason] = reasons(obj)
    assert said in reason and reason.endswith("so KServe builds no Pods"), reason


def test_lora_adapters_kserve_takes_build_their_pods() -> None:
    """The twin: hf:// (downloaded with the model: a storage-initializer on a pvc:// model) and pvc:// adapters."""
    obj = lora({"name": "a", "uri": "HF://o/a"}, {"name": "b", "uri": "pvc://v/b"})
    assert reasons(obj) == []
    [built] = targets(obj)
    assert [c.name for c in built.pod_spec().init_containers] == ["storage-initializer"]


@pytest.mark.parametrize(("scheduler", "said"), [
    ({"replicas": 0}, "spec.router.scheduler.replicas is not above 0"),
    ({"config": {}}, "config has neither inline nor a ref with a name"),
    ({"config": {"ref": {"name": ""}}}, "config has neither inline nor a ref with a name"),
    ({"config": {"inline": {}}}, "spec.router.scheduler.config.inline {} is not a configuration"),
    ({"config": {"inline": []}}, "spec.router.scheduler.config.inline [] is not a configuration"),
    ({"config": {"inline": ""}}, 'spec.router.scheduler.config.inline "" is not a configuration'),
    ({"config": {"inline": 1}}, "spec.router.scheduler.config.inline 1 is not a configuration"),
    ({"config": {"inline": 1.0}}, "spec.router.scheduler.config.inline 1.0 is not a configuration"),  # stored as 1
    ({"config": {"inline": {"kind": "EndpointPickerConfig"}, "ref": {"name": "epp"}}}, "sets both inline and ref"),
])
def test_a_scheduler_config_kserve_refuses_means_no_pods(scheduler: dict[str, Any], said: str) -> None:
    """validateSchedulerConfig (llm_inference_service_validation.go:364-418), at admission and on the merged
    spec."""
    [reason] = reasons(llmisvc({"template": main(), "router": {"scheduler": scheduler}}))
    assert said in reason and reason.endswith("so KServe builds no Pods")


@pytest.mark.parametrize("inline", [{"kind": "EndpointPickerConfig"}, "ab", 100, [1], "\ud800", 2.5])
def test_an_inline_scheduler_config_of_3_bytes_or_more_passes_the_length_check(inline: Any) -> None:
    """The twin: len(Inline.Raw) >= 3 (llm_inference_service_validation.go:399) is not refused for its length."""
    obj = llmisvc({"template": main(), "router": {"scheduler": {"config": {"inline": inline}}}})
    assert not any("inline" in r for r in reasons(obj))


def test_an_empty_model_name_is_the_base_name_not_the_object_s() -> None:
    """ptr.Deref(Model.Name, llmSvc.Name) (llm_inference_service_validation.go:445): model.name "" is the base
    name "", so an adapter named as the object is taken (formerly refused as the base model name); the twin, no
    model.name, takes the object's name and refuses it."""
    obj = lora({"name": "m", "uri": "hf://o/a"})
    obj["spec"]["model"]["name"] = ""
    assert not any("base model name" in r for r in reasons(obj))
    [reason] = reasons(lora({"name": "m", "uri": "hf://o/a"}))
    assert "adapters[0].name 'm' is the base model name" in reason


def test_a_ref_over_an_inline_preset_config_is_resolved_not_refused() -> None:
    """Only the object's own spec may not set both: a ref in the object over a baseRef's inline config is
    resolved into the inline config (config_merge.go:370-405) before the merged spec is validated."""
    base = config("epp", {"router": {"scheduler": {"config": {"inline": {"kind": "EndpointPickerConfig"}}}}})
    obj = llmisvc({"template": main(), "baseRefs": [{"name": "epp"}], "router": {"scheduler": {
        "replicas": 1, "config": {"ref": {"name": "mine"}}}}})
    assert not any("builds no Pods" in r for r in reasons(obj, base))
