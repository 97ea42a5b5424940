"""A model predictor's Pod (``spec.predictor.model``, or a framework field KServe's defaulting turns into one) as
kserve/kserve v0.20.0 builds it: the model defaulted (``setPredictorModelDefaults``), its runtime chosen
(``kserve_runtimes``), the runtime's ``kserve-container`` with the model merged over it and the predictor's own
containers and pod fields beside (``buildPodSpec``); where the runtime is not known, what is known of the Pod
whatever the runtime (``Built.partial``). Used by ``webhook.core.operators.kserve``, which injects into it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.operators import Built, Related, list_at, mapping_at, metadata_at
from webhook.core.operators.kserve_runtimes import NoPod, choose_runtime, merge_container, worker_pod

# KServe PredictorSpec: the model, and the framework specs KServe's defaulting turns into a model.
FRAMEWORKS = ("sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx", "huggingface", "pmml", "lightgbm",
              "paddle")
MODEL_FIELDS = ("model", *FRAMEWORKS)
# setPredictorModelDefaults: protocol v2 for a model of these formats; the triton, onnx and huggingface framework
# fields get it too (assignTritonRuntime, assignONNXRuntime, assignHuggingFaceRuntime), a model of those formats not.
V2_FORMATS = ("triton", "vLLM")
V2_FRAMEWORKS = ("triton", "onnx", "huggingface")
MODEL_CONTAINER = "kserve-container"
TRANSFORMER_CONTAINER = "transformer-container"


def pod_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """A component's own pod fields (its PodSpec inline: the predictor's, a transformer's, an explainer's),
    without the component's other fields and the model's."""
    skip = {*MODEL_FIELDS, "containers", "art", "alibi", "minReplicas", "maxReplicas", "scaleTarget", "scaleMetric",
            "scaleMetricType", "containerConcurrency", "timeout", "canaryTrafficPercent", "logger", "batcher",
            "labels", "annotations", "deploymentStrategy", "autoScaling", "workerSpec", "storageUri", "storage",
            "name", "storageUris", "storageContainerName", "metrics", "behavior"}
    return {k: v for k, v in body.items() if k not in skip}


def model_predictor(obj: Mapping[str, Any], body: Mapping[str, Any], field: str, related: Related,
                     here: FieldPath, role: str, multinode: bool) -> tuple[Built | str, Built | str | None]:
    """The predictor's Pod (``buildPodSpec``) and, multi-node, its workers' (``multiNodeProcess``)."""
    where = dotted(here)
    model = dict(mapping_at(body[field], (*here, field)))
    if field != "model":  # setPredictorModelDefaults
        model["modelFormat"] = {"name": field}
        if field in V2_FRAMEWORKS:
            model.setdefault("protocolVersion", "v2")
    fmt = mapping_at(model.get("modelFormat"), (*here, field, "modelFormat")).get("name")
    if fmt in V2_FORMATS:
        model.setdefault("protocolVersion", "v2")
    namespace = metadata_at(obj).get("namespace")
    chosen = choose_runtime(model, namespace if isinstance(namespace, str) else None, multinode, related)
    own = list_at(body.get("containers"), (*here, "containers"))
    model_field = (*here, field)
    if isinstance(chosen, NoPod):
        return f"InferenceService {where}: {chosen}", None
    if isinstance(chosen, str):
        worker = f"InferenceService {where}.workerSpec: {chosen}" if multinode else None
        return _partial(model, model_field, own, here, chosen), worker
    label, runtime = chosen
    spec = mapping_at(runtime.get("spec"), ("spec",))
    rt_containers = [c for c in list_at(spec.get("containers"), ("spec", "containers")) if isinstance(c, Mapping)]
    main = next((c for c in rt_containers if c.get("name") == MODEL_CONTAINER), None)
    if main is None:
        return f"{label} has no {MODEL_CONTAINER} container: KServe builds no Pod (InvalidPredictorSpec)", None
    containers: list[Any] = [merge_container(main, model)]
    fields: list[tuple[FieldPath, FieldPath]] = [(("containers", 0), model_field)]
    own_transformer = next((i for i, c in enumerate(own) if isinstance(c, Mapping)
                            and c.get("name") == TRANSFORMER_CONTAINER), None)
    rt_transformer = next((c for c in rt_containers if c.get("name") == TRANSFORMER_CONTAINER), None)
    if own_transformer is not None:
        fields.append((("containers", len(containers)), (*here, "containers", own_transformer)))
        containers.append(merge_container(rt_transformer, own[own_transformer]) if rt_transformer is not None
                          else own[own_transformer])
    elif rt_transformer is not None:
        containers.append(rt_transformer)
    containers += [c for c in rt_containers if c.get("name") not in (MODEL_CONTAINER, TRANSFORMER_CONTAINER)]
    for i, c in enumerate(own):
        if isinstance(c, Mapping) and c.get("name") != TRANSFORMER_CONTAINER:
            fields.append((("containers", len(containers)), (*here, "containers", i)))
            containers.append(c)
    pod = {k: spec[k] for k in ("nodeSelector", "affinity", "tolerations", "schedulerName") if k in spec}
    pod.update(pod_fields(body))
    pod["containers"] = containers
    init = list(list_at(body.get("initContainers"), (*here, "initContainers")))
    fields += [(("initContainers", i), (*here, "initContainers", i)) for i in range(len(init))]
    fields.append((("resources",), (*here, "resources")))
    pod["initContainers"] = init
    head = Built(here, pod, f"{where} ({role}, {label})", tuple(fields))
    return head, (worker_pod(body, spec, label, here, role) if multinode else None)


def _fixed(container: Mapping[str, Any], where: FieldPath) -> bool:
    """Its own resources set every cpu and memory request and limit: a merge under it changes none of them."""
    resources = mapping_at(container.get("resources"), (*where, "resources"))
    requests = mapping_at(resources.get("requests"), (*where, "resources", "requests"))
    limits = mapping_at(resources.get("limits"), (*where, "resources", "limits"))
    return all(r in requests and r in limits for r in ("cpu", "memory"))


def _partial(model: Mapping[str, Any], model_field: FieldPath, own: list[Any], here: FieldPath,
             why: str) -> Built | str:
    """Without the runtime, what is known of the Pod whatever the runtime: the model container when its own
    resources fix every cpu and memory request and limit, the predictor's own containers (a
    ``transformer-container`` only when it fixes them too: the runtime's may be merged under it); else why."""
    containers: list[Any] = []
    fields: list[tuple[FieldPath, FieldPath]] = []
    if _fixed(model, model_field):
        fields.append((("containers", 0), model_field))
        containers.append({"name": MODEL_CONTAINER, "resources": model.get("resources")})
    for i, c in enumerate(own):
        if isinstance(c, Mapping) and (c.get("name") != TRANSFORMER_CONTAINER or _fixed(c, (*here, "containers", i))):
            fields.append((("containers", len(containers)), (*here, "containers", i)))
            containers.append(c)
    if not containers:
        return f"InferenceService {dotted(here)}: {why}"
    return Built(here, {"containers": containers}, f"{dotted(here)} (predictor, its runtime not known)",
                 tuple(fields), partial=f"InferenceService {dotted(here)}: {why}")
