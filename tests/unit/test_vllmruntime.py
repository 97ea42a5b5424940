"""vLLM production-stack's VLLMRuntime as its operator builds the Deployment (``webhook.core.operators.vllmruntime``):
cpu and memory are each a container's request and limit; the sidecar defaults to 0.5 CPU; the runtime class,
tolerations and node selector terms are the Pod's; a value the operator cannot build leaves no Pod."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_numa import GPU_TAINT, cluster, judge, tainted
from webhook.core.config import Config, parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.resourceblock import ManifestError
from webhook.core.workloads import find_targets


def runtime(resources: dict[str, Any], sidecar: dict[str, Any] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"resources": resources, "image": {"registry": "docker.io", "name": "vllm"}}
    if sidecar is not None:
        config["sidecarConfig"] = {"enabled": True, "name": "sidecar", **sidecar}
    return {"apiVersion": "production-stack.vllm.ai/v1alpha1", "kind": "VLLMRuntime",
            "metadata": {"name": "r", "namespace": "ns"}, "spec": {"deploymentConfig": config}}


def rules(obj: dict[str, Any]) -> set[tuple[str, str]]:
    return {(v.container or "", v.rule) for _, v in evaluate(obj, Config(), Mode.ENFORCE).violations}


def test_each_of_cpu_and_memory_is_both_request_and_limit() -> None:
    [target] = find_targets(runtime({"cpu": "8", "memory": "32Gi", "gpu": "2", "gpuType": "amd.com/gpu"}))
    [vllm] = target.pod_spec().containers
    assert vllm.name == "vllm"
    assert {k: vllm.resources.requests[k].milli for k in ("cpu", "memory")} == {
        k: vllm.resources.limits[k].milli for k in ("cpu", "memory")} == {"cpu": 8000, "memory": 32 * 2**30 * 1000}
    assert target.spec["containers"][0]["resources"]["limits"]["amd.com/gpu"] == "2"
    assert rules(runtime({"cpu": "8", "memory": "32Gi"})) == set()
    assert rules(runtime({"cpu": "7.5", "memory": "32Gi"})) == {("vllm", "cpu-not-integer")}
    assert rules(runtime({"gpu": "1"})) == {("vllm", "limits-missing")}  # neither cpu nor memory: not Guaranteed


def test_the_sidecar_defaults_to_half_a_cpu() -> None:
    assert rules(runtime({"cpu": "8", "memory": "32Gi"}, {})) == {("sidecar", "cpu-not-integer")}
    assert rules(runtime({"cpu": "8", "memory": "32Gi"}, {"resources": {"cpu": "1"}})) == set()
    # no field of the object is a request or a limit: the mutation plans nothing rather than write one
    assert evaluate(runtime({"cpu": "7.5", "memory": "1Gi"}), Config(), Mode.MUTATE).changes == ()


def test_findings_name_the_resources_field_that_makes_each_container() -> None:
    """There is no ``spec.deploymentConfig.containers``: the vllm container is made of deploymentConfig.resources,
    the sidecar of sidecarConfig.resources (``Built.shown``); the mutation still plans nothing there."""
    obj = runtime({"cpu": "7.5", "memory": "32Gi"}, {"resources": {"cpu": "0.5"}})
    found = {v.container: v.message for _, v in evaluate(obj, Config(), Mode.ENFORCE).violations}
    assert 'container "vllm" (spec.deploymentConfig.resources): cpu limit 7.5' in found["vllm"]
    assert 'container "sidecar" (spec.deploymentConfig.sidecarConfig.resources): cpu limit 0.5' in found["sidecar"]
    assert evaluate(obj, Config(), Mode.MUTATE).changes == ()


@pytest.mark.parametrize(("resources", "sidecar", "said"), [
    ({"cpu": "four", "memory": "1Gi"}, None, "spec.deploymentConfig.resources.cpu 'four' is not a quantity"),
    ({"cpu": "4", "memory": "1Gi", "gpu": "x"}, None, "spec.deploymentConfig.resources.gpu 'x' is not a quantity"),
    ({"cpu": "4", "memory": "1Gi"}, {"resources": {"memory": "lots"}},
     "spec.deploymentConfig.sidecarConfig.resources.memory 'lots' is not a quantity"),
    ({"cpu": "-4", "memory": "1Gi"}, None, "spec.deploymentConfig.resources.cpu '-4' is negative"),
])
def test_a_value_the_operator_cannot_build_is_said_not_judged(
        resources: dict[str, Any], sidecar: dict[str, Any] | None, said: str) -> None:
    """resource.MustParse panics on a string that is not a quantity (vllmruntime_controller.go:622-650, 891-932):
    no Deployment, so no Pod, nothing to judge; the API server accepted the VLLMRuntime (a string field). Said
    once for the field, not as two invalid-quantity findings (request and limit) on a container that never
    exists; a negative quantity likewise (the API server refuses the Deployment)."""
    verdict = evaluate(runtime(resources, sidecar), Config(), Mode.ENFORCE)
    assert verdict.violations == [] and verdict.results == ()
    [reason] = verdict.unknown
    assert reason.startswith(f"VLLMRuntime {said}") and "no Pod runs" in reason


def test_a_value_that_is_not_a_string_is_the_objects_error() -> None:
    with pytest.raises(ManifestError, match=r"spec.deploymentConfig.resources.cpu: expected a string"):
        list(find_targets(runtime({"cpu": 4, "memory": "1Gi"})))


def placed(**config: Any) -> dict[str, Any]:
    obj = runtime({"cpu": "16", "memory": "64Gi"})
    obj["spec"]["deploymentConfig"].update(config)
    return obj


def test_runtime_class_defaults_to_nvidia() -> None:
    """The CRD's default (``runtimeClass: default: nvidia``), which the Deployment always carries
    (``RuntimeClassName: &...RuntimeClass``): a file without it is judged as the webhook sees it, defaulted."""
    [target] = find_targets(placed())
    assert target.spec["runtimeClassName"] == "nvidia"
    assert [t.spec["runtimeClassName"] for t in find_targets(placed(runtimeClass=None))] == ["nvidia"]
    assert [t.spec["runtimeClassName"] for t in find_targets(placed(runtimeClass="kata"))] == ["kata"]
    exempt = parse_config({"exemptions": {"runtimeClassNames": ["nvidia"]}})
    assert evaluate(runtime({"cpu": "7.5", "memory": "1Gi"}), exempt, Mode.ENFORCE).violations == []


def test_an_empty_runtime_class_or_node_selector_terms_leaves_no_pod() -> None:
    """``runtimeClass: ""`` is kept (a default fills an absent field only) and set on the Deployment, whose
    runtimeClassName the API server refuses; so does an empty nodeSelectorTerms (a non-nil slice: an affinity
    with no term). No Pod: said, not judged."""
    for config, said in (({"runtimeClass": ""}, "spec.deploymentConfig.runtimeClass: '' is not a RuntimeClass name"),
                         ({"nodeSelectorTerms": []}, "spec.deploymentConfig.nodeSelectorTerms is empty")):
        verdict = evaluate(placed(**config), Config(), Mode.ENFORCE)
        assert verdict.results == () and verdict.unknown[0].startswith(f"VLLMRuntime {said}"), config


def test_tolerations_and_node_selector_terms_choose_the_nodes_judged() -> None:
    """``toleration`` is the Pod's tolerations, ``nodeSelectorTerms`` its required node affinity
    (vllmruntime_controller.go:765-773, 824-826): policy.numa judges the nodes the Pod can land on. 16 CPUs fit
    gpu-1 (tainted) but not small-1."""
    tol = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert judge(placed(), tainted(GPU_TAINT))[0]  # only small-1 is open to it: refused there
    assert judge(placed(toleration=tol), tainted(GPU_TAINT)) == ([], [])
    [target] = find_targets(placed(toleration=tol))
    assert target.spec["tolerations"] == tol
    away = [{"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["gpu"]}]}]
    assert judge(placed(), cluster()) == ([], [])
    denied, _ = judge(placed(nodeSelectorTerms=away), cluster())
    assert len(denied) == 1 and "on node small-1" in denied[0]


def test_advice_names_the_one_value_that_is_request_and_limit() -> None:
    """No resources.limits exists on a VLLMRuntime: spec.deploymentConfig.resources.cpu is both the request and the
    limit (vllmruntime_controller.go:618-650), so the advice names that key (``Built.sizing``)."""
    def messages(obj: dict[str, Any]) -> dict[tuple[str | None, str], str]:
        return {(v.container, v.rule): v.message for _, v in evaluate(obj, Config(), Mode.ENFORCE).violations}
    missing = [v.message for _, v in evaluate(runtime({"gpu": "1"}), Config(), Mode.ENFORCE).violations]
    for resource in ("cpu", "memory"):
        message = [m for m in missing if f"no {resource} limit" in m]
        assert len(message) == 1 and "resources.limits" not in message[0], message
        assert message[0].endswith(f"set spec.deploymentConfig.resources.{resource} (request and limit)"), message
    fractional = messages(runtime({"cpu": "7.5", "memory": "32Gi"}, {}))
    assert fractional[("vllm", "cpu-not-integer")].endswith(
        "set spec.deploymentConfig.resources.cpu (request and limit): use 7 or 8")
    assert "set spec.deploymentConfig.sidecarConfig.resources.cpu (request and limit): use 1; or let this container " \
           "alone share CPUs" in fractional[("sidecar", "cpu-not-integer")]


def test_advice_in_a_list_names_the_item() -> None:
    """The builder's field is from the object's root: in a List it is the item's (``Sizing.rebased``)."""
    listed = {"apiVersion": "v1", "kind": "List", "items": [runtime({"cpu": "7.5", "memory": "32Gi"})]}
    [(_, found)] = evaluate(listed, Config(), Mode.ENFORCE).violations
    assert "set items[0].spec.deploymentConfig.resources.cpu (request and limit)" in found.message, found.message


@pytest.mark.parametrize(("resources", "sidecar", "said"), [
    ({"cpu": "4", "memory": "1Gi", "gpu": "0.5"}, None,
     "spec.deploymentConfig.resources.gpu '0.5' is not a whole number"),
    ({"cpu": "4", "memory": "1Gi", "gpu": "1", "gpuType": "gpu"}, None,
     "spec.deploymentConfig.resources.gpuType 'gpu' is not a resource a container can ask for"),
    ({"cpu": "4", "memory": "1Gi", "gpu": "1", "gpuType": "nvidia.com/gpu!"}, None,
     "spec.deploymentConfig.resources.gpuType 'nvidia.com/gpu!' is not a resource a container can ask for"),
    ({"cpu": "4", "memory": "1Gi"}, {"resources": {"cpu": "1", "gpuType": "gpu"}},
     "spec.deploymentConfig.sidecarConfig.resources.gpuType 'gpu' is not a resource a container can ask for"),
    ({"cpu": "4", "memory": "1Gi"}, {"name": "", "resources": {"cpu": "1"}},
     "spec.deploymentConfig.sidecarConfig.name '' is not a container name"),
    ({"cpu": "4", "memory": "1Gi"}, {"name": "Side_car", "resources": {"cpu": "1"}},
     "spec.deploymentConfig.sidecarConfig.name 'Side_car' is not a container name"),
    ({"cpu": "4", "memory": "1Gi"}, {"name": "vllm", "resources": {"cpu": "1"}},
     "spec.deploymentConfig.sidecarConfig.name 'vllm' is the model container's name too"),
])
def test_a_value_the_api_server_refuses_in_the_deployment_leaves_no_pod(
        resources: dict[str, Any], sidecar: dict[str, Any] | None, said: str) -> None:
    """The operator copies gpu under gpuType and sidecarConfig.name as they are (vllmruntime_controller.go:640-650,
    915-932, 946); the API server refuses the Deployment: an extended resource must be a whole number
    (ValidateResourceQuantityValue, validation.go:8222-8231), a container's resource name a standard one or a
    qualified extended one (validateContainerResourceName, :7548-7561), a container's name a DNS-1123 label and
    required (:3881-3885; the CRD's default "sidecar" fills only an absent name). No Pod: said, not judged."""
    verdict = evaluate(runtime(resources, sidecar), Config(), Mode.ENFORCE)
    assert verdict.violations == [] and verdict.results == ()
    [reason] = verdict.unknown
    assert reason.startswith(f"VLLMRuntime {said}") and "no Pod runs" in reason, reason


def test_a_whole_gpu_count_and_a_qualified_gpu_type_are_built() -> None:
    assert rules(runtime({"cpu": "4", "memory": "1Gi", "gpu": "2", "gpuType": "amd.com/gpu"},
                         {"name": "lora", "resources": {"cpu": "1"}})) == set()


def test_finding_paths_name_the_one_value_field() -> None:
    """A finding is at spec.deploymentConfig.resources.cpu, the field there is (common.go:20-25), not at a
    resources.limits.cpu under it; the mutation still changes nothing, and fix leaves the finding."""
    obj = runtime({"cpu": "7.5", "memory": "32Gi"}, {"resources": {"cpu": "0.5"}})
    paths = {".".join(map(str, v.path)) for _, v in evaluate(obj, Config(), Mode.ENFORCE).violations}
    assert paths == {"spec.deploymentConfig.resources.cpu", "spec.deploymentConfig.sidecarConfig.resources.cpu"}, paths
    missing = {".".join(map(str, v.path))
               for _, v in evaluate(runtime({"gpu": "1"}), Config(), Mode.ENFORCE).violations}
    assert missing == {"spec.deploymentConfig.resources.cpu", "spec.deploymentConfig.resources.memory"}, missing
    for mode in (Mode.MUTATE, Mode.ENFORCE):
        [result] = evaluate(obj, Config(), mode).results
        assert result.changes == ()
        assert {(v.container, v.rule) for v in result.left_by_fix} == {("vllm", "cpu-not-integer"),
                                                                         ("sidecar", "cpu-not-integer")}


def test_a_refusal_line_keeps_the_value_to_use_and_the_way_out() -> None:
    """The template's label had said "each is the container's request and limit", which every finding's advice
    says too: a sidecar's cpu-not-integer line was 534 characters, cut at the refusal's line (LINE_CHARS) before
    "use 1" and the share way out."""
    from webhook.core.refusal import LINE_CHARS, finding

    obj = runtime({"cpu": "2", "memory": "1Gi"}, {"enabled": True, "resources": {"cpu": "0.5", "memory": "128Mi"}})
    (line,) = [finding(v.rule, v.message) for _, v in evaluate(obj, Config(), Mode.ENFORCE).violations
               if v.rule == "cpu-not-integer"]
    assert len(line) <= LINE_CHARS and "use 1" in line and "policy.fractionalCPUContainers" in line, line
