"""KServe ``InferenceService`` as KServe builds its Pods, read from kserve/kserve v0.20.0 (commit
1fb781055dd1567164358233e1125142ca6ef1fe):

- Defaulting (``pkg/apis/serving/v1beta1/inference_service_defaults.go``): a framework field (``sklearn``,
  ``tensorflow``...) becomes ``spec.predictor.model`` with that ``modelFormat`` (``setPredictorModelDefaults``;
  triton, onnx, huggingface and vLLM get protocol v2); a custom component's first container gets the
  ``inferenceservice-config`` ``inferenceService.resource`` defaults for what it leaves unset
  (``setResourceRequirementDefaults``, from ``predictor_custom.go``, ``transformer_custom.go``,
  ``explainer_custom.go``; KServe's ConfigMap sets 1 CPU and 2Gi, requests equal to limits). A model gets none.
- The runtime (``components/predictor.go`` ``reconcileModel``; ``predictor_model.go`` ``GetSupportingRuntimes``):
  ``model.runtime`` names a ServingRuntime in the namespace, else a ClusterServingRuntime; without it the first
  that supports the model (not disabled, single-model, the ``modelFormat`` among its ``autoSelect`` formats, the
  protocol, multi-node as the predictor), the namespace's before the cluster's, the higher ``priority`` first
  (then the older: creation times a file does not carry, so a tie is said, not guessed).
- The Pod (``buildPodSpec``, ``utils.go`` ``MergeServingRuntimeAndInferenceServiceSpecs``): the runtime's
  ``kserve-container`` with the model's container fields strategically merged over it (``MergeRuntimeContainers``:
  the model's ``resources`` override the runtime's key by key), then the ``transformer-container`` (merged when
  both have one), the runtime's other containers, the predictor's own; the predictor's pod fields over the
  runtime's (``MergePodSpec``).
- Injected (``pkg/webhook/admission/pod``): a ``storage-initializer`` init container for a ``storageUri`` (a
  custom container's ``STORAGE_URI`` env: ``GetStorageUri``) that
  is not ``pvc://`` nor ``oci://`` (``storage_initializer_injector.go``; 100m/1 CPU, 100Mi/1Gi from the
  ``default`` ClusterStorageContainer and the ConfigMap's ``storageInitializer``), the ``agent`` container for a
  ``logger`` or ``batcher`` (``agent_injector.go``, the ConfigMap's ``agent``: the same), and in Knative mode (KServe's
  default, ``deploy.defaultDeploymentMode: Serverless``) Knative's ``queue-proxy`` (knative/serving
  ``config-deployment``: ``queue-sidecar-cpu-request`` 25m by default, no limit).

Where the runtime is not known (not in the input, no cluster read) the model's own container is still judged when
its ``resources`` set both requests and limits of cpu and memory (no runtime can change them): a failure there is
the Pod's, a pass is not (``Built.partial``). Not built here: a multi-node predictor's workers, ModelMesh, a
ClusterStorageContainer other than KServe's default, the ART explainer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.fieldpath import FieldPath
from webhook.core.operators import Built, Related, list_at, mapping_at
from webhook.core.operators.kserve_runtimes import (
    CLUSTER_SERVING_RUNTIME,
    GROUP,
    SERVING_RUNTIME,
    NoPod,
    choose_runtime,
)
from webhook.core.podspec import ManifestError

CONFIG_MAP = ("", "ConfigMap")
RELATED = (SERVING_RUNTIME, CLUSTER_SERVING_RUNTIME, CONFIG_MAP)
# KServe PredictorSpec: the model, and the framework specs KServe's defaulting turns into a model.
FRAMEWORKS = ("sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx", "huggingface", "pmml", "lightgbm",
              "paddle")
MODEL_FIELDS = ("model", *FRAMEWORKS)
V2_FORMATS = ("triton", "onnx", "huggingface", "vLLM")
COMPONENTS = ("predictor", "transformer", "explainer")
MODEL_CONTAINER = "kserve-container"
TRANSFORMER_CONTAINER = "transformer-container"
MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
ISVC_CONFIG = "inferenceservice-config"
# inferenceservice-config as KServe v0.20.0 installs it (config/configmap/inferenceservice.yaml).
DEFAULT_RESOURCE = {"cpuRequest": "1", "cpuLimit": "1", "memoryRequest": "2Gi", "memoryLimit": "2Gi"}
DEFAULT_STORAGE = {"cpuRequest": "100m", "cpuLimit": "1", "memoryRequest": "100Mi", "memoryLimit": "1Gi"}
DEFAULT_MODE = "Serverless"
KNATIVE_CONFIG = "config-deployment"
KNATIVE_DEFAULT = {"queue-sidecar-cpu-request": "25m"}  # knative/serving pkg/deployment/config.go
KNATIVE_ANNOTATION = "queue.sidecar.serving.knative.dev/{resource}-resource-{kind}"
STORAGE_INITIALIZER = "storage-initializer"
QUEUE_PROXY = "queue-proxy"
AGENT = "agent"




def _config(related: Related, key: str) -> tuple[dict[str, Any] | None, str]:
    """A JSON section of ``inferenceservice-config`` when it was given (input or cluster), and where from."""
    for cm in related.of(*CONFIG_MAP, cluster_scoped=True):
        meta = mapping_at(cm.get("metadata"), ("metadata",))
        if meta.get("name") != ISVC_CONFIG:
            continue
        raw = mapping_at(cm.get("data"), ("data",)).get(key)
        try:
            value = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            value = None
        return (value if isinstance(value, dict) else None), f"{ISVC_CONFIG} {key}"
    return None, f"KServe's default {ISVC_CONFIG} {key}"


def _resources(values: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for resource in ("cpu", "memory"):
        for kind, where in (("Request", "requests"), ("Limit", "limits")):
            value = values.get(f"{resource}{kind}")
            if isinstance(value, str | int | float) and str(value):
                out[where][resource] = str(value)
    return out


def default_resources(related: Related) -> dict[str, dict[str, str]]:
    """``inferenceService.resource`` of the ConfigMap when it was given (what it leaves out is not defaulted),
    else KServe's shipped values."""
    section, where = _config(related, "inferenceService")
    if where.startswith("KServe's default"):
        return _resources(DEFAULT_RESOURCE)
    resource = section.get("resource") if section is not None else None
    return _resources(resource if isinstance(resource, Mapping) else {})


def _with_defaults(container: Mapping[str, Any], defaults: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
    """``setResourceRequirementDefaults``: each default request and limit the container does not set."""
    resources = dict(mapping_at(container.get("resources"), ("resources",)))
    for kind in ("requests", "limits"):
        have = dict(mapping_at(resources.get(kind), ("resources", kind)))
        for name, value in defaults.get(kind, {}).items():
            have.setdefault(name, value)
        resources[kind] = have
    return {**container, "resources": resources}


def merge_container(runtime: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``MergeRuntimeContainers``: a strategic merge of ``override`` over ``runtime`` (maps merged key by key,
    ``resources``' requests and limits too; lists and scalars replaced), args concatenated."""
    def merge(base: Any, over: Any) -> Any:
        if isinstance(base, Mapping) and isinstance(over, Mapping):
            out = dict(base)
            for key, value in over.items():
                out[key] = merge(base.get(key), value) if key in base else value
            return out
        return base if over is None else over

    merged = merge(runtime, {k: v for k, v in override.items() if k not in _MODEL_ONLY})
    args = [*list_at(runtime.get("args"), ("args",)), *list_at(override.get("args"), ("args",))]
    if args:
        merged["args"] = args
    return dict(merged)


# ModelSpec's own fields, not the container's (PredictorExtensionSpec and ModelSpec, predictor.go).
_MODEL_ONLY = frozenset({"modelFormat", "runtime", "storageUri", "storage", "protocolVersion", "runtimeVersion",
                         "storageUris"})


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return mapping_at(obj.get("metadata"), ("metadata",))


def deployment_mode(obj: Mapping[str, Any], related: Related) -> str:
    annotations = mapping_at(_meta(obj).get("annotations"), ("metadata", "annotations"))
    mode = annotations.get(MODE_ANNOTATION)
    if not isinstance(mode, str) or not mode:
        section, _ = _config(related, "deploy")
        default = section.get("defaultDeploymentMode") if section is not None else None
        mode = default if isinstance(default, str) and default else DEFAULT_MODE
    return {"Serverless": "Knative", "RawDeployment": "Standard"}.get(mode, mode)


def _injected(name: str, key: str, related: Related) -> dict[str, Any]:
    """A container KServe's pod webhook injects, its resources from ``inferenceservice-config`` ``key`` (KServe's
    own values where the ConfigMap was not given: the same 100m/1 CPU and 100Mi/1Gi for both)."""
    section, _ = _config(related, key)
    values = {k: (section or DEFAULT_STORAGE).get(k, DEFAULT_STORAGE[k]) for k in DEFAULT_STORAGE}
    return {"name": name, "resources": _resources(values)}


def _storage_initializer(uri: Any, related: Related) -> dict[str, Any] | None:
    """The init container KServe's pod webhook injects for ``uri`` (none for pvc:// and oci://)."""
    if not isinstance(uri, str) or not uri or uri.startswith(("pvc://", "oci://")):
        return None
    return _injected(STORAGE_INITIALIZER, "storageInitializer", related)


def queue_proxy(obj: Mapping[str, Any], related: Related) -> dict[str, Any]:
    """Knative's queue-proxy as Knative builds it: the ``config-deployment`` values (25m cpu request by default,
    nothing else), overridden by the ``queue.sidecar.serving.knative.dev/*-resource-*`` annotations KServe
    carries from the InferenceService to the revision."""
    values: dict[str, Any] = dict(KNATIVE_DEFAULT)
    for cm in related.of(*CONFIG_MAP, cluster_scoped=True):
        if _meta(cm).get("name") == KNATIVE_CONFIG:
            values = {**values, **mapping_at(cm.get("data"), ("data",))}
    annotations = mapping_at(_meta(obj).get("annotations"), ("metadata", "annotations"))
    resources: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for resource in ("cpu", "memory"):
        for kind, where in (("request", "requests"), ("limit", "limits")):
            value = annotations.get(KNATIVE_ANNOTATION.format(resource=resource, kind=kind),
                                    values.get(f"queue-sidecar-{resource}-{kind}"))
            if isinstance(value, str) and value:
                resources[where][resource] = value
    return {"name": QUEUE_PROXY, "resources": resources}


def _pod_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """The predictor's own pod fields (its PodSpec inline), without the component's and the model's."""
    skip = {*MODEL_FIELDS, "containers", "art", "alibi", "minReplicas", "maxReplicas", "scaleTarget", "scaleMetric",
            "scaleMetricType", "containerConcurrency", "timeout", "canaryTrafficPercent", "logger", "batcher",
            "labels", "annotations", "deploymentStrategy", "autoScaling", "workerSpec", "storageUri", "storage",
            "name"}
    return {k: v for k, v in body.items() if k not in skip}


def _model_predictor(obj: Mapping[str, Any], body: Mapping[str, Any], field: str, related: Related,
                     here: FieldPath) -> Built | str:
    model = dict(mapping_at(body[field], (*here, field)))
    if field != "model":  # setPredictorModelDefaults
        model["modelFormat"] = {"name": field}
        if field in ("triton", "onnx", "huggingface"):
            model.setdefault("protocolVersion", "v2")
    fmt = mapping_at(model.get("modelFormat"), (*here, field, "modelFormat")).get("name")
    if fmt in V2_FORMATS:
        model.setdefault("protocolVersion", "v2")
    namespace = _meta(obj).get("namespace")
    chosen = choose_runtime(model, namespace if isinstance(namespace, str) else None,
                            body.get("workerSpec") is not None, related)
    own = list_at(body.get("containers"), (*here, "containers"))
    model_field = (*here, field)
    if isinstance(chosen, NoPod):
        return f"InferenceService spec.predictor: {chosen}"
    if isinstance(chosen, str):
        return _partial(model, model_field, own, here, chosen)
    label, runtime = chosen
    spec = mapping_at(runtime.get("spec"), ("spec",))
    rt_containers = [c for c in list_at(spec.get("containers"), ("spec", "containers")) if isinstance(c, Mapping)]
    main = next((c for c in rt_containers if c.get("name") == MODEL_CONTAINER), None)
    if main is None:
        return f"{label} has no {MODEL_CONTAINER} container: KServe builds no Pod (InvalidPredictorSpec)"
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
    pod.update(_pod_fields(body))
    pod["containers"] = containers
    init = list(list_at(body.get("initContainers"), (*here, "initContainers")))
    fields += [(("initContainers", i), (*here, "initContainers", i)) for i in range(len(init))]
    fields.append((("resources",), (*here, "resources")))
    pod["initContainers"] = init
    return Built(here, pod, f"spec.predictor (predictor, {label})", tuple(fields))


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
        return f"InferenceService spec.predictor: {why}"
    return Built(here, {"containers": containers}, "spec.predictor (predictor, its runtime not known)",
                 tuple(fields), partial=f"InferenceService spec.predictor: {why}")


def _custom(component: str, body: Mapping[str, Any], related: Related, here: FieldPath) -> Built:
    """A custom component: its pod spec, its first container given KServe's default resources."""
    containers = list(list_at(body.get("containers"), (*here, "containers")))
    if containers and isinstance(containers[0], Mapping):
        containers[0] = _with_defaults(containers[0], default_resources(related))
    pod = {**_pod_fields(body), "containers": containers}
    fields: list[tuple[FieldPath, FieldPath]] = [(("containers", i), (*here, "containers", i))
                                                 for i in range(len(containers))]
    init = list_at(body.get("initContainers"), (*here, "initContainers"))
    fields += [(("initContainers", i), (*here, "initContainers", i)) for i in range(len(init))]
    fields.append((("resources",), (*here, "resources")))
    return Built(here, pod, f"spec.{component} ({component})", tuple(fields))


def _custom_storage_uri(component: str, body: Mapping[str, Any], here: FieldPath) -> tuple[FieldPath, Any] | None:
    """A custom component's ``STORAGE_URI`` env (``GetStorageUri``: the predictor's kserve-container's, a
    transformer's or explainer's first container's), and where it is."""
    containers = list_at(body.get("containers"), (*here, "containers"))
    for i, c in enumerate(containers):
        if not isinstance(c, Mapping) or (component == "predictor" and c.get("name") != MODEL_CONTAINER) or \
                (component != "predictor" and i > 0):
            continue
        for j, env in enumerate(list_at(c.get("env"), (*here, "containers", i, "env"))):
            if isinstance(env, Mapping) and env.get("name") == "STORAGE_URI":
                return (*here, "containers", i, "env", j, "value"), env.get("value")
    return None


def _with_injected(built: Built, obj: Mapping[str, Any], body: Mapping[str, Any], mode: str,
                   uri: tuple[FieldPath, Any], related: Related) -> Built:
    """``built`` with what is injected into its Pod: the storage-initializer (``uri``), KServe's agent (a
    ``logger`` or ``batcher``: agent_injector.go, the ConfigMap's ``agent`` resources), Knative's queue-proxy
    (Knative mode), each after the component's own."""
    spec = dict(built.spec)
    containers = list(list_at(spec.get("containers"), ()))
    shown: list[tuple[FieldPath, FieldPath]] = []
    storage = _storage_initializer(uri[1], related)
    if storage is not None:
        init = list_at(spec.get("initContainers"), ())
        shown.append((("initContainers", len(init)), uri[0]))
        spec["initContainers"] = [*init, storage]
    cause = next((f for f in ("logger", "batcher") if body.get(f) is not None), None)
    if cause is not None:
        shown.append((("containers", len(containers)), (*built.path, cause)))
        containers.append(_injected(AGENT, "agent", related))
    if mode == "Knative":
        shown.append((("containers", len(containers)), ("metadata", "annotations")))
        containers.append(queue_proxy(obj, related))
    spec["containers"] = containers
    return Built(built.path, spec, built.template, built.fields, built.partial, tuple(shown))


def build(obj: Mapping[str, Any], related: Related) -> Iterator[Built | str]:
    """Each component's Pod as KServe builds it, or why it cannot be known."""
    spec = obj.get("spec")
    if spec is None:
        return
    if not isinstance(spec, Mapping):
        raise ManifestError(("spec",), "expected a mapping")
    mode = deployment_mode(obj, related)
    if mode == "ModelMesh":
        yield "InferenceService in ModelMesh mode (its Pods are the ServingRuntime's, built by modelmesh-serving)"
        return
    for component in COMPONENTS:
        body = spec.get(component)
        if body is None:
            continue
        here = ("spec", component)
        if not isinstance(body, Mapping):
            raise ManifestError(here, "expected a mapping")
        built: Built | str
        field = None
        if component == "predictor":
            field = "model" if body.get("model") is not None else next(
                (f for f in FRAMEWORKS if body.get(f) is not None), None)
            built = _model_predictor(obj, body, field, related, here) if field is not None \
                else _custom(component, body, related, here)
        elif component == "explainer" and body.get("art") is not None:
            built = ("InferenceService spec.explainer.art (its container is built from KServe's "
                     "inferenceservice-config explainers: not read here)")
        else:
            built = _custom(component, body, related, here)
        if isinstance(built, Built):
            uri: tuple[FieldPath, Any] = ((*here, "storageUri"), body.get("storageUri"))
            if field is None:
                uri = _custom_storage_uri(component, body, here) or uri
            elif component == "predictor":
                uri = ((*here, field, "storageUri"), mapping_at(body[field], (*here, field)).get("storageUri"))
            built = _with_injected(built, obj, body, mode, uri, related)
        yield built


__all__ = ["CLUSTER_SERVING_RUNTIME", "COMPONENTS", "GROUP", "ISVC_CONFIG", "KNATIVE_CONFIG", "MODEL_FIELDS", "RELATED",
           "SERVING_RUNTIME", "build", "choose_runtime", "merge_container"]
