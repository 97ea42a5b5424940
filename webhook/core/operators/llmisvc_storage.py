"""What an LLMInferenceService's model adds to each Pod KServe v0.20.0's llmisvc controller builds
(``attachModelArtifacts``, ``pkg/controller/v1alpha2/llmisvc/workload_storage.go``), and the
``inferenceservice-config`` ``storageInitializer`` it reads for that (``llmisvc_config``): for ``hf://`` and
``s3://`` (and LoRA adapters from them) a ``storage-initializer`` init container, a user's init container of that
name merged over it; for ``oci://`` a ``modelcar`` sidecar and ``modelcar-init`` (10m, 15Mi each)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.operators.kserve_config import SHIPPED_STORAGE, resolve_oci_mode
from webhook.core.operators.kserve_pod import MODELCAR, MODELCAR_INIT, modelcar_container
from webhook.core.operators.llmisvc_base import KIND, Unknown, get, merge, scheme

LOCAL_MODEL = "internal.serving.kserve.io/localmodel"
# What KServe's defaulter sets with the label (defaulter.go SetLocalModelLabel), and attachModelArtifacts reads.
LOCAL_MODEL_ANNOTATIONS = ("internal.serving.kserve.io/localmodel-sourceuri",
                           "internal.serving.kserve.io/localmodel-pvc-name")
STORAGE_INITIALIZER = "storage-initializer"
# The inferenceservice-config ConfigMap's storageInitializer as KServe v0.20.0 ships it (kserve_config.SHIPPED_STORAGE).
STORAGE_DEFAULTS = SHIPPED_STORAGE


def _resources(cpu: Any, memory: Any) -> dict[str, Any]:
    return {"requests": {"cpu": cpu[0], "memory": memory[0]}, "limits": {"cpu": cpu[1], "memory": memory[1]}}


def _storage_initializer(pod: dict[str, Any], storage: Mapping[str, Any]) -> None:
    """``attachStorageInitializer``: the user's ``storage-initializer`` merged over KServe's, appended last."""
    own = [c for c in pod.get("initContainers") or [] if get(c, "name") == STORAGE_INITIALIZER]
    pod["initContainers"] = [c for c in pod.get("initContainers") or [] if get(c, "name") != STORAGE_INITIALIZER]
    made = {"name": STORAGE_INITIALIZER,
            "resources": _resources((storage["cpuRequest"], storage["cpuLimit"]),
                                    (storage["memoryRequest"], storage["memoryLimit"]))}
    pod["initContainers"].append(merge(made, own[0]) if own else made)


def _strip_storage_initializer(pod: dict[str, Any]) -> None:
    if pod.get("initContainers"):
        pod["initContainers"] = [c for c in pod["initContainers"] if get(c, "name") != STORAGE_INITIALIZER]


def _modelcar(pod: dict[str, Any], storage: Mapping[str, Any]) -> None:
    """``ConfigureModelcarToContainer``: a ``modelcar`` sidecar and a ``modelcar-init`` init container."""
    if any(get(c, "name") == MODELCAR for c in pod.get("containers") or []):
        return
    pod["containers"] = [*(pod.get("containers") or []), modelcar_container(MODELCAR, storage)]
    pod["initContainers"] = [*(pod.get("initContainers") or []), modelcar_container(MODELCAR_INIT, storage)]


def local_model(labels: Mapping[str, Any], annotations: Mapping[str, Any]) -> bool:
    """Whether the model is read from KServe's local model cache (a pvc://): KServe's defaulter sets the
    ``localmodel`` label with its two annotations from a matching LocalModelCache, and deletes all three otherwise
    (local models off, as shipped, or no cache matches: ``applyDefaults``); a label without them is not the
    defaulter's, and the model's URI decides."""
    return LOCAL_MODEL in labels and all(key in annotations for key in LOCAL_MODEL_ANNOTATIONS)


def attach_model(pod: Mapping[str, Any], spec: Mapping[str, Any], local: bool, storage: Mapping[str, Any],
                 lora: bool = True) -> dict[str, Any]:
    """``attachModelArtifacts`` on one pod spec: what the model's URI (pvc:// when ``local``) and, unless
    ``lora`` is off, as for the scheduler, its LoRA adapters add to the Pod."""
    out = dict(pod)
    uri = get(spec, "model", "uri")
    if not isinstance(uri, str) or "://" not in uri:
        raise Unknown(f"{KIND}: spec.model.uri {uri!r} has no scheme, so KServe builds no Pods (invalid model URI)")
    if get(spec, "storageInitializer", "enabled") is False:
        return out
    kind = "pvc" if local else scheme(uri)
    adapters = get(spec, "model", "lora", "adapters") if lora else None
    downloads = any(isinstance(get(a, "uri"), str) and scheme(a["uri"]) in ("hf", "s3")
                    for a in adapters) if isinstance(adapters, list) else False
    if kind in ("hf", "s3") or (kind in ("pvc", "oci", "oci+native") and downloads):
        if kind == "oci":
            _oci(out, storage)
        _storage_initializer(out, storage)
    elif kind in ("pvc", "oci"):
        if kind == "oci":
            _oci(out, storage)
        _strip_storage_initializer(out)
    elif kind != "oci+native":
        raise Unknown(f"{KIND}: spec.model.uri scheme {kind}:// is not one KServe serves (hf, s3, pvc, oci, "
                      "oci+native), so it builds no Pods")
    return out


def _oci(pod: dict[str, Any], storage: Mapping[str, Any]) -> None:
    """workload_storage.go: no mode, no Pods; ``native`` an image volume; any other mode (``modelcar``, and
    ``fetch``, "handled in a future commit") the modelcar."""
    mode = resolve_oci_mode(storage)
    if not mode:
        raise Unknown(f"{KIND}: spec.model.uri is oci:// but the inferenceservice-config's storageInitializer "
                      "enables no OCI model mode, so KServe builds no Pods")
    if mode != "native":
        _modelcar(pod, storage)


__all__ = ["LOCAL_MODEL", "STORAGE_DEFAULTS", "attach_model", "local_model"]
