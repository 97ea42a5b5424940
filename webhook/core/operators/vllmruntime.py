"""vLLM production-stack's ``VLLMRuntime`` as its operator builds the Pod, read from vllm-project/production-stack
at commit a6c01db05f65f556235413ba8dbcfb0c01132fff (``operator/internal/controller/vllmruntime_controller.go``,
``deploymentForVLLMRuntime`` and ``buildSidecarContainer``; no release tag holds the operator).

One Deployment, one ``vllm`` container: ``spec.deploymentConfig.resources`` ``cpu`` and ``memory`` are each set as
both request and limit (unset: neither), ``gpu`` likewise under ``gpuType`` (``nvidia.com/gpu``). With
``spec.deploymentConfig.sidecarConfig.enabled`` a sidecar container follows, its ``resources`` the same way but
defaulting to cpu 0.5 and memory 128Mi (and 0 GPUs) where unset. So a container's request always equals its
limit, and what can be wrong is a missing or fractional cpu or memory: findings name the built container, and
``fix`` and the webhook's mutation change nothing (no field of the object is a request or a limit).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.fieldpath import FieldPath
from webhook.core.operators import Built, Related, mapping_at

GROUP = "production-stack.vllm.ai"
KIND = "VLLMRuntime"
CONFIG: FieldPath = ("spec", "deploymentConfig")
SIDECAR: FieldPath = (*CONFIG, "sidecarConfig")
SIDECAR_DEFAULTS = {"cpu": "0.5", "memory": "128Mi", "gpu": "0"}
LABEL = ("spec.deploymentConfig (Deployment; resources.cpu and resources.memory, and sidecarConfig's, are each "
         "the container's request and limit)")



def _resources(given: Mapping[str, Any], defaults: Mapping[str, str]) -> dict[str, Any]:
    """The operator's ResourceRequirements: each of cpu, memory and the GPU as both request and limit."""
    wanted: dict[str, Any] = {}
    for key, name in (("cpu", "cpu"), ("memory", "memory"), ("gpu", str(given.get("gpuType") or "nvidia.com/gpu"))):
        value = given.get(key) or defaults.get(key)
        if value:
            wanted[name] = str(value)
    return {"requests": dict(wanted), "limits": dict(wanted)}


def build(obj: Mapping[str, Any], related: Related) -> Iterator[Built | str]:
    """The Deployment's pod spec."""
    spec = mapping_at(obj.get("spec"), ("spec",))
    if not spec:
        return
    config = mapping_at(spec.get("deploymentConfig"), CONFIG)
    resources = mapping_at(config.get("resources"), (*CONFIG, "resources"))
    containers: list[dict[str, Any]] = [{"name": "vllm", "resources": _resources(resources, {})}]
    sidecar = mapping_at(config.get("sidecarConfig"), SIDECAR)
    if sidecar.get("enabled") is True:
        own = mapping_at(sidecar.get("resources"), (*SIDECAR, "resources"))
        containers.append({"name": str(sidecar.get("name") or "sidecar"),
                           "resources": _resources(own, SIDECAR_DEFAULTS)})
    pod: dict[str, Any] = {"containers": containers}
    if config.get("runtimeClass"):
        pod["runtimeClassName"] = config["runtimeClass"]
    # No field of the object is a container's requests or limits (each of cpu and memory is both): findings
    # name the built containers, and no mutation is planned (the mechanism maps containers, not quantities).
    yield Built(CONFIG, pod, LABEL)


__all__ = ["GROUP", "KIND", "build"]
