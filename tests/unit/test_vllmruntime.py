"""vLLM production-stack's VLLMRuntime as its operator builds the Deployment (``webhook.core.operators.vllmruntime``):
cpu and memory are each a container's request and limit; the sidecar defaults to 0.5 CPU."""

from __future__ import annotations

from typing import Any

from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate
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
