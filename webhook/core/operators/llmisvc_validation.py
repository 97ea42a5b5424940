"""Part of what KServe v0.20.0 refuses in an LLMInferenceService's merged spec (presets, baseRefs and the object)
before it builds any Pod (``combineBaseRefsConfig``, ``pkg/controller/v1alpha2/llmisvc/config_merge.go:435``, the
validator's ``ValidateCreate``; the object's own spec is refused at admission by the same webhook). Modelled, from
``pkg/apis/serving/v1alpha2/llm_inference_service_validation.go``: ``validateParallelismConstraints`` (:244-334),
``validateSchedulerConfig`` (:364-418) and ``validateLoRAAdapters`` (:420-488), with the LoRA adapters KServe
resolves (``enumerateLoRAAdapters``, ``workload_lora.go``); ``validateManagedDRAAnnotations`` is
``llmisvc_dra``'s. Not modelled: ``validateRouterCrossFieldConstraints``, ``validateTrafficFields``,
``validateScaling``, ``validateKVCacheOffloading`` and ``validateConfidential`` (:100-117): a merged spec only they
refuse is judged here as Pods KServe does not build. Each modelled one is an error that stops the reconcile: no
Pods, said."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from webhook.core.operators.llmisvc_base import KIND, get, positive, scheme

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


def _lora(final: Mapping[str, Any], name: str) -> str | None:
    """``validateLoRAAdapters`` (limits of at least 1; each adapter named, not "." or "..", once, not the base
    model's name) and ``enumerateLoRAAdapters`` (a URI with a scheme: hf:// and s3:// downloaded, pvc://
    mounted, none of them with ``storageInitializer.enabled: false``; oci:// and any other refused)."""
    lora = get(final, "model", "lora")
    for key in ("maxRank", "maxAdapters", "maxCpuAdapters"):
        value = get(lora, key)
        if isinstance(value, int) and value < 1:
            return f"spec.model.lora.{key} is below 1"
    adapters = get(lora, "adapters")
    model_name = get(final, "model", "name")
    base = name if model_name is None else model_name  # ptr.Deref(Model.Name, llmSvc.Name) (:445): "" stays ""
    seen: set[str] = set()
    disabled = get(final, "storageInitializer", "enabled") is False
    for i, adapter in enumerate(adapters if isinstance(adapters, list) else []):
        where, named = f"spec.model.lora.adapters[{i}]", get(adapter, "name")
        if not isinstance(named, str) or named in ("", ".", ".."):
            return f"{where}.name {named!r} is not an adapter name"
        if named in seen or named == base:
            return f"{where}.name {named!r} is {'used twice' if named in seen else 'the base model name'}"
        seen.add(named)
        uri = get(adapter, "uri")
        kind = scheme(uri) if isinstance(uri, str) and "://" in uri else None
        if kind not in ("hf", "s3", "pvc"):
            return f"{where}.uri {uri!r} is not hf://, s3:// or pvc://"
        if disabled:
            return (f"{where} ({kind}://) needs the storage initializer spec.storageInitializer.enabled: false "
                    "turns off")
    return None


def _scheduler(final: Mapping[str, Any], own: Mapping[str, Any]) -> str | None:
    """``validateSchedulerConfig``: replicas above 0; a config with ``inline`` or ``ref`` (a ``ref`` is resolved
    into ``inline`` before the merged spec is validated, so both are refused in the object's own spec only), an
    inline config whose JSON (``RawExtension.Raw``, compact: the merge marshals it) is 3 bytes at least (:399):
    ``{}``, ``[]``, ``""``, ``1`` are refused."""
    scheduler = get(final, "router", "scheduler")
    replicas = get(scheduler, "replicas")
    if isinstance(replicas, int) and replicas <= 0:
        return "spec.router.scheduler.replicas is not above 0"
    if get(own, "router", "scheduler", "config", "inline") is not None and \
            get(own, "router", "scheduler", "config", "ref") is not None:
        return "spec.router.scheduler.config sets both inline and ref"
    config = get(scheduler, "config")
    if config is None:
        return None
    inline, ref = get(config, "inline"), get(config, "ref")
    if inline is None and (ref is None or not get(ref, "name")):
        return "spec.router.scheduler.config has neither inline nor a ref with a name"
    if inline is not None and _stored_size(inline) < 3:
        return f"spec.router.scheduler.config.inline {json.dumps(inline)} is not a configuration (under 3 bytes)"
    return None


def _stored_size(value: Any) -> int:
    """The bytes of ``value`` as the API server stores it (compact JSON, a whole float as an integer) and KServe's
    validateSchedulerConfig measures it; a lone surrogate counts as the three bytes Go writes for it."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))


def refusal(final: Mapping[str, Any], own: Mapping[str, Any], name: str) -> str | None:
    """Why KServe builds no Pods of the merged spec ``final`` of the object ``name`` (whose own spec is ``own``),
    or None."""
    said = None
    for where, workload in (("spec.", final), ("spec.prefill.", get(final, "prefill"))):
        said = said or (_parallelism(where, workload) if isinstance(workload, Mapping) else None)
    said = said or _scheduler(final, own) or _lora(final, name)
    return None if said is None else f"{KIND} (with its presets and baseRefs): {said}, {NO_PODS}"


__all__ = ["refusal"]
