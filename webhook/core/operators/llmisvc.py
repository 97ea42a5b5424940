"""KServe ``LLMInferenceService`` (what llm-d deploys) as KServe's llmisvc controller builds its Pods, read from
kserve/kserve v0.20.0 (``pkg/controller/v1alpha2/llmisvc``; ``v1alpha1`` and ``v1alpha2`` hold the same pod specs).

The object holds five pod specs (``spec.template``, ``spec.worker``, ``spec.prefill.template``,
``spec.prefill.worker``, ``spec.router.scheduler.template``), but they are not the Pods. ``combineBaseRefsConfig``
(config_merge.go) first merges, in order, the well-known ``LLMInferenceServiceConfig`` presets the object's shape
selects (``kserve-config-llm-template`` for one node, ``...-decode-template`` and ``...-prefill-template`` with a
prefill, the data-parallel ones with a worker, ``...-scheduler`` with a managed scheduler), then the configs
``spec.baseRefs`` names, then the object's own spec: a strategic merge (``mergeSpecs``), containers by name, a
container's requests and limits key by key, the later winning. Each config is read from the object's namespace,
else from KServe's (``kserve``). Then every model-serving Pod (the scheduler's only with the ``tokenizer``
container, ``isUsingTokenizerSidecar``, and without LoRA adapters) gets the model
(``attachModelArtifacts``, workload_storage.go): for ``hf://`` and ``s3://`` (and LoRA adapters from them) a
``storage-initializer`` init container whose resources are the ``inferenceservice-config`` ConfigMap's
``storageInitializer`` (100m of 1 CPU, 100Mi of 1Gi as KServe ships it), a user's init container of that name
merged over it; for ``oci://`` a ``modelcar`` sidecar and ``modelcar-init`` (10m, 15Mi each).

What the builder knows: a config given in the input (or read from the cluster) is used; a well-known preset not
given is KServe v0.20.0's as it ships (only what judging reads is kept below: container names, resources,
``restartPolicy``); a ``baseRefs`` config or a preset KServe does not ship (pipeline parallel) that is not given
is unknown, said with its name, and nothing of the object is judged (it may change any Pod).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from webhook.core.fieldpath import FieldPath
from webhook.core.operators import Built, Related
from webhook.core.operators.kserve_pod import (
    ISVC_CONFIG,
    MODELCAR,
    MODELCAR_INIT,
    SHIPPED_STORAGE,
    config_refusal,
    modelcar_container,
    parse_storage_initializer,
    resolve_oci_mode,
)
from webhook.core.podspec import ManifestError

GROUP = "serving.kserve.io"
KIND = "LLMInferenceService"
CONFIG = (GROUP, "LLMInferenceServiceConfig")
CONFIG_MAP = ("", "ConfigMap")
RELATED = (CONFIG, CONFIG_MAP)
KSERVE_NAMESPACE = "kserve"  # constants.KServeNamespace (the controller's POD_NAMESPACE)
STOP = "serving.kserve.io/stop"
LOCAL_MODEL = "internal.serving.kserve.io/localmodel"
STORAGE_INITIALIZER = "storage-initializer"
TOKENIZER = "tokenizer"  # scheduler.go tokenizerContainerName

# Where each pod spec is in the spec, and how a finding names it.
At = tuple[str, ...]
MAIN: At = ("template",)
WORKER: At = ("worker",)
PREFILL: At = ("prefill", "template")
PREFILL_WORKER: At = ("prefill", "worker")
SCHEDULER: At = ("router", "scheduler", "template")
TEMPLATES = ((MAIN, "main"), (WORKER, "worker"), (PREFILL, "prefill"), (PREFILL_WORKER, "prefill worker"),
             (SCHEDULER, "scheduler"))

_MAIN = {"name": "main"}
_SIDECAR = {"name": "llm-d-routing-sidecar", "restartPolicy": "Always"}  # resources: {} as shipped
_WORKLOAD = {"containers": [_MAIN]}
# KServe v0.20.0's well-known presets (config/llmisvcconfig/*.yaml), what judging reads of them.
PRESETS: dict[str, Mapping[str, Any]] = {
    "kserve-config-llm-template": {"template": _WORKLOAD},
    "kserve-config-llm-decode-template": {"template": {"containers": [_MAIN], "initContainers": [_SIDECAR]}},
    "kserve-config-llm-prefill-template": {"prefill": {"template": _WORKLOAD}},
    "kserve-config-llm-worker-data-parallel": {"template": _WORKLOAD, "worker": _WORKLOAD},
    "kserve-config-llm-decode-worker-data-parallel": {
        "template": {"containers": [_MAIN], "initContainers": [_SIDECAR]}, "worker": _WORKLOAD},
    "kserve-config-llm-prefill-worker-data-parallel": {"prefill": {"template": _WORKLOAD, "worker": _WORKLOAD}},
    "kserve-config-llm-scheduler": {"router": {"scheduler": {"template": {"containers": [
        {"name": "main", "resources": {"limits": {"cpu": "6", "memory": "16Gi"},
                                       "requests": {"cpu": "1", "memory": "2Gi"}}},
        {"name": "tokenizer", "resources": {"requests": {"cpu": "256m", "memory": "500Mi"}}}]}}}},
    "kserve-config-llm-scheduler-latency-predictor": {"router": {"scheduler": {"template": {"containers": [
        {"name": "main"},
        {"name": "training-server", "resources": {"requests": {"cpu": "2000m", "memory": "4Gi"},
                                                  "limits": {"cpu": "4000m", "memory": "8Gi"}}},
        {"name": "prediction-server", "resources": {"requests": {"cpu": "8000m", "memory": "4Gi"},
                                                    "limits": {"cpu": "28000m", "memory": "8Gi"}}}]}}}},
    # no pod spec in these two
    "kserve-config-llm-router-route": {},
    "kserve-config-llm-tracing": {},
}
# The inferenceservice-config ConfigMap's storageInitializer as KServe v0.20.0 ships it (kserve_pod.SHIPPED_STORAGE).
STORAGE_DEFAULTS = SHIPPED_STORAGE
# What a given ConfigMap's storageInitializer says of OCI models replaces the shipped words: KServe unmarshals it
# into an empty StorageInitializerConfig (v1beta1.GetStorageInitializerConfigs), so a key it omits is off.
_OCI_KEYS = ("enableModelcar", "enableOciModelSupport", "ociModelMode")
# Lists a strategic merge of a PodSpec merges by name (patchMergeKey); every other list is replaced.
_BY_NAME = frozenset({"containers", "initContainers", "ephemeralContainers", "resourceClaims"})


class Unknown(Exception):
    """What the builder cannot know (an object it was not given): said, never judged."""


def merge(base: Any, override: Any) -> Any:
    """``override`` strategically merged over ``base`` (KServe's ``mergeSpecs`` and ``MergeContainerWithPatch``):
    mappings key by key, containers by name, other lists and values replaced; an absent or null value keeps the
    base's (the patch is made from the typed override, which drops them)."""
    if not isinstance(base, Mapping) or not isinstance(override, Mapping):
        return base if override is None else override
    out = dict(base)
    for key, value in override.items():
        if value is None:
            continue
        before = out.get(key)
        if key in _BY_NAME and isinstance(before, list) and isinstance(value, list):
            out[key] = _by_name(before, value)
        else:
            out[key] = merge(before, value) if isinstance(before, Mapping) else value
    return out


def _by_name(base: list[Any], override: list[Any]) -> list[Any]:
    merged = list(base)
    for item in override:
        name = item.get("name") if isinstance(item, Mapping) else None
        at = next((i for i, b in enumerate(merged) if isinstance(b, Mapping) and b.get("name") == name), None)
        if at is None or name is None:
            merged.append(item)
        else:
            merged[at] = merge(merged[at], item)
    return merged


def _get(node: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _positive(node: Any, key: str) -> bool:
    value = _get(node, key)
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _workload_preset(worker: Any, parallelism: Any, single: str, data: str, pipeline: str) -> str | None:
    """Which preset a workload (main, or prefill) takes (config_merge.go's switch)."""
    if worker is None:
        return single
    if _positive(parallelism, "data") or _positive(parallelism, "dataLocal"):
        return data
    if _positive(parallelism, "pipeline"):
        return pipeline
    return None


def well_known(resolved: Mapping[str, Any]) -> list[str]:
    """The presets KServe applies to a spec shaped like ``resolved`` (the object's spec with its baseRefs), in
    order (``combineBaseRefsConfig``)."""
    refs = []
    router = resolved.get("router")
    scheduler = _get(router, "scheduler")
    if scheduler is not None and not _get(scheduler, "pool", "ref", "name"):
        refs.append("kserve-config-llm-scheduler")
    if _latency_producer(scheduler):
        refs.append("kserve-config-llm-scheduler-latency-predictor")
    route = _get(router, "route")
    if route is not None and not _get(route, "http", "refs"):
        refs.append("kserve-config-llm-router-route")
    if resolved.get("tracing") is not None:
        refs.append("kserve-config-llm-tracing")
    prefill = resolved.get("prefill")
    worker, parallelism = resolved.get("worker"), resolved.get("parallelism")
    if prefill is not None:
        refs.append(_workload_preset(_get(prefill, "worker"), _get(prefill, "parallelism"),
                                     "kserve-config-llm-prefill-template",
                                     "kserve-config-llm-prefill-worker-data-parallel",
                                     "kserve-config-llm-prefill-worker-pipeline-parallel") or "")
        refs.append(_workload_preset(worker, parallelism, "kserve-config-llm-decode-template",
                                     "kserve-config-llm-decode-worker-data-parallel",
                                     "kserve-config-llm-decode-worker-pipeline-parallel") or "")
    else:
        refs.append(_workload_preset(worker, parallelism, "kserve-config-llm-template",
                                     "kserve-config-llm-worker-data-parallel",
                                     "kserve-config-llm-worker-pipeline-parallel") or "")
    return [r for r in refs if r]


def _latency_producer(scheduler: Any) -> bool:
    """``hasLatencyProducerInSpec``: the inline scheduler config names the predicted-latency-producer plugin."""
    plugins = _get(scheduler, "config", "inline", "plugins")
    return isinstance(plugins, list) and any(isinstance(p, Mapping) and p.get("type") == "predicted-latency-producer"
                                             for p in plugins)


def _config(name: str, namespace: str | None, related: Related, shipped: bool, why: str) -> Mapping[str, Any]:
    """The spec of the LLMInferenceServiceConfig ``name``: the object's namespace first, then KServe's; a
    well-known preset not given is the shipped one."""
    found = related.named(*CONFIG, name, namespace) or related.named(*CONFIG, name, KSERVE_NAMESPACE)
    if found is not None:
        spec = found.get("spec")
        return spec if isinstance(spec, Mapping) else {}
    if related.complete(*CONFIG):
        raise Unknown(f'{why}: LLMInferenceServiceConfig "{name}" is in neither {namespace} nor {KSERVE_NAMESPACE} '
                      "of the cluster, so KServe builds no Pods (ConfigNotFound) until it is")
    if shipped:
        return PRESETS[name]
    raise Unknown(f'{why}: LLMInferenceServiceConfig "{name}" not in {related.where()}; give it with the '
                  f"{KIND} (or --kubeconfig to read it)")


def _storage_config(related: Related) -> Mapping[str, Any]:
    """``storageInitializer`` of the ``inferenceservice-config`` ConfigMap in KServe's namespace, else as shipped;
    unknown where KServe cannot read it (``config_refusal``, shared with the InferenceService builder: toConfig's
    GetStorageInitializerConfigs fails, also for a ConfigMap without the section, whose resource keys are then
    empty)."""
    found = related.named(*CONFIG_MAP, ISVC_CONFIG, KSERVE_NAMESPACE)
    if found is None:
        return STORAGE_DEFAULTS
    why = config_refusal(related, False, ("storageInitializer",), found)
    if why is not None:
        raise Unknown(f"{KIND}: {why}")
    parsed = parse_storage_initializer(_get(found, "data", "storageInitializer")) or {}
    return {**{k: v for k, v in STORAGE_DEFAULTS.items() if k not in _OCI_KEYS}, **parsed}


def _resources(cpu: Any, memory: Any) -> dict[str, Any]:
    return {"requests": {"cpu": cpu[0], "memory": memory[0]}, "limits": {"cpu": cpu[1], "memory": memory[1]}}


def _storage_initializer(pod: dict[str, Any], storage: Mapping[str, Any]) -> None:
    """``attachStorageInitializer``: the user's ``storage-initializer`` merged over KServe's, appended last."""
    own = [c for c in pod.get("initContainers") or [] if _get(c, "name") == STORAGE_INITIALIZER]
    pod["initContainers"] = [c for c in pod.get("initContainers") or [] if _get(c, "name") != STORAGE_INITIALIZER]
    made = {"name": STORAGE_INITIALIZER,
            "resources": _resources((storage["cpuRequest"], storage["cpuLimit"]),
                                    (storage["memoryRequest"], storage["memoryLimit"]))}
    pod["initContainers"].append(merge(made, own[0]) if own else made)


def _strip_storage_initializer(pod: dict[str, Any]) -> None:
    if pod.get("initContainers"):
        pod["initContainers"] = [c for c in pod["initContainers"] if _get(c, "name") != STORAGE_INITIALIZER]


def _modelcar(pod: dict[str, Any], storage: Mapping[str, Any]) -> None:
    """``ConfigureModelcarToContainer``: a ``modelcar`` sidecar and a ``modelcar-init`` init container."""
    if any(_get(c, "name") == MODELCAR for c in pod.get("containers") or []):
        return
    pod["containers"] = [*(pod.get("containers") or []), modelcar_container(MODELCAR, storage)]
    pod["initContainers"] = [*(pod.get("initContainers") or []), modelcar_container(MODELCAR_INIT, storage)]


def attach_model(pod: Mapping[str, Any], spec: Mapping[str, Any], labels: Mapping[str, Any],
                 storage: Mapping[str, Any], lora: bool = True) -> dict[str, Any]:
    """``attachModelArtifacts`` on one pod spec: what the model's URI (and, unless ``lora`` is off, as for the
    scheduler, its LoRA adapters) adds to the Pod."""
    out = dict(pod)
    uri = _get(spec, "model", "uri")
    if not isinstance(uri, str) or "://" not in uri:
        raise Unknown(f"{KIND}: spec.model.uri {uri!r} has no scheme, so KServe builds no Pods (invalid model URI)")
    if _get(spec, "storageInitializer", "enabled") is False:
        return out
    scheme = "pvc" if LOCAL_MODEL in labels else uri.split("://", 1)[0]
    adapters = _get(spec, "model", "lora", "adapters") if lora else None
    downloads = any(isinstance(_get(a, "uri"), str) and a["uri"].split("://", 1)[0] in ("hf", "s3")
                    for a in adapters) if isinstance(adapters, list) else False
    if scheme in ("hf", "s3") or (scheme in ("pvc", "oci", "oci+native") and downloads):
        if scheme == "oci":
            _oci(out, storage)
        _storage_initializer(out, storage)
    elif scheme in ("pvc", "oci"):
        if scheme == "oci":
            _oci(out, storage)
        _strip_storage_initializer(out)
    elif scheme != "oci+native":
        raise Unknown(f"{KIND}: spec.model.uri scheme {scheme}:// is not one KServe serves (hf, s3, pvc, oci, "
                      "oci+native), so it builds no Pods")
    return out


def _oci(pod: dict[str, Any], storage: Mapping[str, Any]) -> None:
    mode = resolve_oci_mode(storage)
    if not mode:
        raise Unknown(f"{KIND}: spec.model.uri is oci:// but the inferenceservice-config's storageInitializer "
                      "enables no OCI model mode, so KServe builds no Pods")
    if mode == "modelcar":
        _modelcar(pod, storage)


def _mapping(node: Any, where: FieldPath) -> Mapping[str, Any] | None:
    if node is None:
        return None
    if not isinstance(node, Mapping):
        raise ManifestError(where, "expected a mapping")
    return node


def _fields(own: Mapping[str, Any] | None, built: Mapping[str, Any], here: FieldPath) -> tuple[
        tuple[FieldPath, FieldPath], ...]:
    """Which built container is the object's own (by name): its findings name the object's field. Containers
    only a preset or KServe adds are named by no field of the object."""
    out: list[tuple[FieldPath, FieldPath]] = [(("resources",), (*here, "resources"))]
    for group in ("containers", "initContainers"):
        mine = (own or {}).get(group)
        names = [_get(c, "name") for c in mine] if isinstance(mine, list) else []
        for i, container in enumerate(built.get(group) or []):
            name = _get(container, "name")
            if name in names:
                out.append(((group, i), (*here, group, names.index(name))))
    return tuple(out)


def build(obj: Mapping[str, Any], related: Related) -> Iterator[Built | str]:
    """Each Pod template KServe makes of the object, or why it cannot be known."""
    spec = _mapping(obj.get("spec"), ("spec",))
    if spec is None:
        return
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), Mapping) else {}
    if str(_get(annotations, STOP)).lower() == "true":
        yield f"{KIND} stopped ({STOP}: true): KServe runs none of its Pods"
        return
    try:
        yield from _build(spec, meta, related)
    except Unknown as unknown:
        yield str(unknown)


def _build(spec: Mapping[str, Any], meta: Mapping[str, Any], related: Related) -> Iterator[Built]:
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
    refs = spec.get("baseRefs") or []
    if not isinstance(refs, Sequence) or isinstance(refs, str):
        raise ManifestError(("spec", "baseRefs"), "expected a list")
    bases = [_config(str(_get(r, "name")), namespace, related, False, f"{KIND} spec.baseRefs[{i}]")
             for i, r in enumerate(refs)]
    resolved: Any = spec
    for base in bases:
        resolved = merge(resolved, base)  # what is "enabled" is known after the baseRefs (resolvedSpec)
    presets = [(name, _config(name, namespace, related, name in PRESETS, f"{KIND} (KServe's preset for its shape)"))
               for name in well_known(resolved)]
    final: Any = {}
    for layer in [*(p for _, p in presets), *bases, spec]:
        final = merge(final, layer)
    storage: Mapping[str, Any] | None = None
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    assert isinstance(labels, Mapping)
    made: list[tuple[At, str]] = []
    prefill = _get(final, "prefill")
    if final.get("worker") is None:
        made.append((MAIN, "main"))
    else:
        made += [(MAIN, "leader"), (WORKER, "worker")]
    if prefill is not None:
        made += [(PREFILL, "prefill")] if _get(prefill, "worker") is None else [(PREFILL, "prefill leader"),
                                                                               (PREFILL_WORKER, "prefill worker")]
    scheduler = _get(final, "router", "scheduler")
    if scheduler is not None and not _get(scheduler, "pool", "ref", "name"):
        made.append((SCHEDULER, "scheduler"))
    for at, role in made:
        pod = _get(final, *at)
        if pod is None:
            continue
        here = ("spec", *at)
        own = _mapping(_get(spec, *at), here)
        if not isinstance(pod, Mapping):
            raise ManifestError(here, "expected a mapping")
        if at != SCHEDULER:
            storage = storage or _storage_config(related)
            pod = attach_model(pod, final, labels, storage)
        elif any(_get(c, "name") == TOKENIZER for c in pod.get("containers") or []):
            # scheduler.go: a scheduler with the tokenizer sidecar (isUsingTokenizerSidecar) gets the model too,
            # for the tokenizer, without the LoRA adapters (LLMISVCSchedulerAttachesLoRA false)
            storage = storage or _storage_config(related)
            pod = attach_model(pod, final, labels, storage, lora=False)
        sources = [name for name, p in presets if _get(p, *at)] + [
            str(_get(r, "name")) for r, b in zip(refs, bases, strict=True) if _get(b, *at)]
        over = f", over {' and '.join(sources)}" if sources else ""
        yield Built(here, pod, f"spec.{'.'.join(at)} ({role}{over})", _fields(own, pod, here))


__all__ = ["GROUP", "KIND", "PRESETS", "RELATED", "STORAGE_DEFAULTS", "TEMPLATES", "attach_model", "build",
           "merge", "well_known"]
