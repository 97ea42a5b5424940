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
merged over it; for ``oci://`` a ``modelcar`` sidecar and ``modelcar-init`` (10m, 15Mi each)
(``llmisvc_storage``), after the managed DRA claim (``llmisvc_dra``). The scheduler then loses a ``tokenizer``
its config does not need (``llmisvc_scheduler``).

What the builder knows: a config given in the input (or read from the cluster) is used; a well-known preset not
given is KServe v0.20.0's as it ships (only what judging reads is kept below: container names, resources,
``restartPolicy``, the scheduler's version); a ``baseRefs`` config or a preset KServe does not ship (pipeline
parallel) that is not given is unknown, said with its name, and nothing of the object is judged (it may change
any Pod).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from webhook.core.fieldpath import FieldPath
from webhook.core.operators import Built, NoPodHere, Related
from webhook.core.operators.kserve_config import CONFIG_MAP
from webhook.core.operators.llmisvc_base import KIND, Unknown, get, merge, positive
from webhook.core.operators.llmisvc_config import config_or_no_pods
from webhook.core.operators.llmisvc_dra import managed, with_claim
from webhook.core.operators.llmisvc_scheduler import (
    TOKENIZER,
    VERSION,
    check_config_ref,
    drops_tokenizer,
    transforms,
    without_tokenizer,
)
from webhook.core.operators.llmisvc_storage import (
    STORAGE_DEFAULTS,
    attach_model,
    local_model,
)
from webhook.core.operators.llmisvc_validation import refusal
from webhook.core.resourceblock import ManifestError

GROUP = "serving.kserve.io"
CONFIG = (GROUP, "LLMInferenceServiceConfig")
RELATED = (CONFIG, CONFIG_MAP)
STOP = "serving.kserve.io/stop"

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
    "kserve-config-llm-scheduler": {"router": {"scheduler": {
        "annotations": {VERSION: "0.9.0"},  # the scheduler's version: it drops an unneeded tokenizer
        "template": {"containers": [
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
def _workload_preset(worker: Any, parallelism: Any, single: str, data: str, pipeline: str) -> str | None:
    """Which preset a workload (main, or prefill) takes (config_merge.go's switch)."""
    if worker is None:
        return single
    if positive(parallelism, "data") or positive(parallelism, "dataLocal"):
        return data
    if positive(parallelism, "pipeline"):
        return pipeline
    return None


def well_known(resolved: Mapping[str, Any]) -> list[str]:
    """The presets KServe applies to a spec shaped like ``resolved`` (the object's spec with its baseRefs), in
    order (``combineBaseRefsConfig``)."""
    refs = []
    router = resolved.get("router")
    scheduler = get(router, "scheduler")
    if scheduler is not None and not get(scheduler, "pool", "ref", "name"):
        refs.append("kserve-config-llm-scheduler")
    if _latency_producer(scheduler):
        refs.append("kserve-config-llm-scheduler-latency-predictor")
    route = get(router, "route")
    if route is not None and not get(route, "http", "refs"):
        refs.append("kserve-config-llm-router-route")
    if resolved.get("tracing") is not None:
        refs.append("kserve-config-llm-tracing")
    prefill = resolved.get("prefill")
    worker, parallelism = resolved.get("worker"), resolved.get("parallelism")
    if prefill is not None:
        refs.append(_workload_preset(get(prefill, "worker"), get(prefill, "parallelism"),
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
    plugins = get(scheduler, "config", "inline", "plugins")
    return isinstance(plugins, list) and any(isinstance(p, Mapping) and p.get("type") == "predicted-latency-producer"
                                             for p in plugins)


def _config(name: str, namespace: str | None, related: Related, shipped: bool, why: str) -> Mapping[str, Any]:
    """The spec of the LLMInferenceServiceConfig ``name``: the object's namespace first, then KServe's; a
    well-known preset not given is the shipped one."""
    kserve = related.kserve_namespace
    found = related.named(*CONFIG, name, namespace) or related.named(*CONFIG, name, kserve)
    if found is not None:
        spec = found.get("spec")
        return spec if isinstance(spec, Mapping) else {}
    if related.complete(*CONFIG):
        raise Unknown(f'{why}: LLMInferenceServiceConfig "{name}" is in neither {namespace} nor {kserve} '
                      "of the cluster, so KServe builds no Pods (ConfigNotFound) until it is")
    if shipped:
        return PRESETS[name]
    raise Unknown(f'{why}: LLMInferenceServiceConfig "{name}" not in {related.where()}; give it with the '
                  f"{KIND} (or --kubeconfig to read it)")


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
        names = [get(c, "name") for c in mine] if isinstance(mine, list) else []
        for i, container in enumerate(built.get(group) or []):
            name = get(container, "name")
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
    if str(get(annotations, STOP)).lower() == "true":
        yield NoPodHere(f"{KIND} stopped ({STOP}: true): KServe runs none of its Pods")
        return
    try:
        yield from _build(spec, meta, related)
    except Unknown as unknown:
        yield str(unknown)


def _build(spec: Mapping[str, Any], meta: Mapping[str, Any], related: Related) -> Iterator[Built | str]:
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else None
    storage = config_or_no_pods(related)  # the defaulter, then loadConfig: before the baseRefs, whatever the model
    refs = spec.get("baseRefs") or []
    if not isinstance(refs, Sequence) or isinstance(refs, str):
        raise ManifestError(("spec", "baseRefs"), "expected a list")
    bases = [_config(str(get(r, "name")), namespace, related, False, f"{KIND} spec.baseRefs[{i}]")
             for i, r in enumerate(refs)]
    resolved: Any = spec
    for base in bases:
        resolved = merge(resolved, base)  # what is "enabled" is known after the baseRefs (resolvedSpec)
    presets = [(name, _config(name, namespace, related, name in PRESETS, f"{KIND} (KServe's preset for its shape)"))
               for name in well_known(resolved)]
    final: Any = {}
    for layer in [*(p for _, p in presets), *bases, spec]:
        final = merge(final, layer)
    scheduler = get(final, "router", "scheduler")
    check_config_ref(scheduler, related, namespace)
    if (refused := refusal(final, spec, str(meta.get("name")))) is not None:
        raise Unknown(refused)
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), Mapping) else {}
    assert isinstance(annotations, Mapping)
    dra = managed(annotations)
    labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
    assert isinstance(labels, Mapping)
    local = local_model(labels, annotations)
    made: list[tuple[At, str]] = []
    prefill = get(final, "prefill")
    if final.get("worker") is None:
        made.append((MAIN, "main"))
    else:
        made += [(MAIN, "leader"), (WORKER, "worker")]
    if prefill is not None:
        made += [(PREFILL, "prefill")] if get(prefill, "worker") is None else [(PREFILL, "prefill leader"),
                                                                               (PREFILL_WORKER, "prefill worker")]
    if scheduler is not None and not get(scheduler, "pool", "ref", "name"):
        made.append((SCHEDULER, "scheduler"))
    for at, role in made:
        pod = get(final, *at)
        if pod is None:
            continue
        here = ("spec", *at)
        own = _mapping(get(spec, *at), here)
        if not isinstance(pod, Mapping):
            raise ManifestError(here, "expected a mapping")
        partial = ""
        shown: tuple[tuple[FieldPath, FieldPath], ...] = ()
        if at != SCHEDULER:
            if dra:  # injectManagedDRAIntoConfig: on the merged spec, before the model is attached
                pod, shown = with_claim(pod, str(meta.get("name")), annotations)
            pod = attach_model(pod, final, local, storage)
        elif isinstance(transform := transforms(scheduler), str):
            yield transform
            continue
        elif any(get(c, "name") == TOKENIZER for c in pod.get("containers") or []):
            # scheduler.go: a scheduler with the tokenizer sidecar (isUsingTokenizerSidecar) gets the model too,
            # for the tokenizer, without the LoRA adapters (LLMISVCSchedulerAttachesLoRA false); then
            # schedulerTransform may drop the tokenizer (llmisvc_scheduler)
            pod = attach_model(pod, final, local, storage, lora=False)
            drops = drops_tokenizer(pod, scheduler, related, namespace) if transform else False
            if drops is not False:
                pod, partial = without_tokenizer(pod), drops if isinstance(drops, str) else ""
        sources = [name for name, p in presets if get(p, *at)] + [
            str(get(r, "name")) for r, b in zip(refs, bases, strict=True) if get(b, *at)]
        over = f", over {' and '.join(sources)}" if sources else ""
        yield Built(here, pod, f"spec.{'.'.join(at)} ({role}{over})", _fields(own, pod, here), partial,
                    shown)


__all__ = ["GROUP", "KIND", "PRESETS", "RELATED", "STORAGE_DEFAULTS", "TEMPLATES", "attach_model", "build",
           "merge", "well_known"]
