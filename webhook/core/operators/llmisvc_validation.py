"""What KServe v0.20.0 refuses in an LLMInferenceService's merged spec (presets, baseRefs and the object) before it
builds any Pod (``combineBaseRefsConfig``, ``pkg/controller/v1alpha2/llmisvc/config_merge.go``): its validator
(``pkg/apis/serving/v1alpha2/llm_inference_service_validation.go``; the object's own spec is refused at admission by
the same webhook) and the LoRA adapters it resolves (``enumerateLoRAAdapters``, ``workload_lora.go``). Each is an
error that stops the reconcile: no Pods, said."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.operators.llmisvc_base import KIND, get, positive

NO_PODS = "so KServe builds no Pods"


def _parallelism(where: str, workload: Any) -> str | None:
    """``validateWorkloadParallelism``: a worker needs data (and dataLocal) or pipeline parallelism, not both;
    data and dataLocal come together; each value set is above 0."""
    parallelism = get(workload, "parallelism")
    data = positive(parallelism, "data") or positive(parallelism, "dataLocal")
    pipeline = positive(parallelism, "pipeline")
    if get(workload, "worker") is not None and not (data or pipeline):
        return f"{where}worker needs {where}parallelism data (with dataLocal) or pipeline above 0"
    if data and pipeline:
        return f"{where}parallelism sets both pipeline and data parallelism"
    if isinstance(parallelism, Mapping):
        if (parallelism.get("data") is None) != (parallelism.get("dataLocal") is None):
            return f"{where}parallelism sets one of data and dataLocal without the other"
        for key in ("pipeline", "data", "dataLocal"):
            if parallelism.get(key) is not None and not positive(parallelism, key):
                return f"{where}parallelism.{key} is not above 0"
    return None


def refusal(final: Mapping[str, Any]) -> str | None:
    """Why KServe builds no Pods of the merged spec ``final``, or None."""
    for where, workload in (("spec.", final), ("spec.prefill.", get(final, "prefill"))):
        said = _parallelism(where, workload) if isinstance(workload, Mapping) else None
        if said is not None:
            return f"{KIND} (with its presets and baseRefs): {said}, {NO_PODS}"
    return None


__all__ = ["refusal"]
