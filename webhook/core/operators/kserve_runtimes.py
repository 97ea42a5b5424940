"""KServe's runtime choice for an InferenceService's model, as kserve/kserve v0.20.0 makes it
(``pkg/controller/v1beta1/inferenceservice/components/predictor.go`` ``reconcileModel``,
``pkg/apis/serving/v1beta1/predictor_model.go`` ``GetSupportingRuntimes``, ``RuntimeSupportsModel``,
``pkg/apis/serving/v1alpha1/servingruntime_types.go``), from the ServingRuntimes and ClusterServingRuntimes the
builder was given (``webhook.core.operators.Related``); the runtime's containers merged with the InferenceService's
(``utils.go`` ``MergeRuntimeContainers``; ``predictor.go`` ``multiNodeProcess`` for the workers). Used by
``webhook.core.operators.kserve``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.operators import Built, Related, Unjudged, list_at, mapping_at, metadata_at

GROUP = "serving.kserve.io"
SERVING_RUNTIME = (GROUP, "ServingRuntime")
CLUSTER_SERVING_RUNTIME = (GROUP, "ClusterServingRuntime")
WORKER_CONTAINER = "worker-container"


class NoPod(Unjudged):
    """A reason that is also a verdict of KServe's: it builds no Pod (InvalidSpec), so nothing of one is judged."""

    __slots__ = ()




def _name(obj: Mapping[str, Any]) -> str:
    return str(metadata_at(obj).get("name"))


def _supports(runtime: Mapping[str, Any], model: Mapping[str, Any], explicit: bool) -> bool:
    """``RuntimeSupportsModel``: the model's ``mt:name[:version]`` among the runtime's formats (only the
    ``autoSelect`` ones when the runtime is not named)."""
    fmt = mapping_at(model.get("modelFormat"), ("modelFormat",))
    label = f"{fmt.get('name')}:{fmt['version']}" if fmt.get("version") is not None else str(fmt.get("name"))
    labels = set()
    for supported in list_at(mapping_at(runtime.get("spec"), ("spec",)).get("supportedModelFormats"), ()):
        if isinstance(supported, Mapping) and (explicit or supported.get("autoSelect") is True):
            labels.add(str(supported.get("name")))
            if supported.get("version") is not None:
                labels.add(f"{supported.get('name')}:{supported['version']}")
    return label in labels


def _protocol_ok(runtime: Mapping[str, Any], protocol: str | None) -> bool:
    versions = mapping_at(runtime.get("spec"), ("spec",)).get("protocolVersions")
    return not protocol or not versions or protocol in versions


def _priority(runtime: Mapping[str, Any], fmt: Any) -> int | None:
    for supported in list_at(mapping_at(runtime.get("spec"), ("spec",)).get("supportedModelFormats"), ()):
        if isinstance(supported, Mapping) and supported.get("name") == fmt:
            p = supported.get("priority")
            return p if isinstance(p, int) else None
    return None


def choose_runtime(model: Mapping[str, Any], namespace: str | None, multinode: bool,
                   related: Related) -> tuple[str, Mapping[str, Any]] | str:
    """(kind and name, runtime) as KServe chooses it, or why it cannot be known (or KServe would build nothing)."""
    protocol = model.get("protocolVersion") if isinstance(model.get("protocolVersion"), str) else None
    named = model.get("runtime")
    if isinstance(named, str) and named:
        found = related.named(*SERVING_RUNTIME, named, namespace)
        kind = "ServingRuntime"
        if found is None:
            found = related.named(*CLUSTER_SERVING_RUNTIME, named, cluster_scoped=True)
            kind = "ClusterServingRuntime"
        if found is None:
            if related.complete(*SERVING_RUNTIME) and related.complete(*CLUSTER_SERVING_RUNTIME):
                return NoPod(f"no ServingRuntime or ClusterServingRuntime named {named!r} in the cluster: "
                             "KServe builds no Pod until one exists")
            return (f"its ServingRuntime {named!r} is not in {related.where()}: give the ServingRuntime (or "
                    f"ClusterServingRuntime) with it, or run with --kubeconfig to read the cluster's")
        spec = mapping_at(found.get("spec"), ("spec",))
        if spec.get("disabled") is True or not _protocol_ok(found, protocol) or not _supports(found, model, True):
            return NoPod(f"KServe refuses {kind} {named!r} for this model (disabled, or not its format or protocol): "
                         "it builds no Pod")
        return f"{kind} {named}", found
    fmt = mapping_at(model.get("modelFormat"), ("modelFormat",)).get("name")
    protocol = protocol or "v1"  # ModelSpec.GetProtocol: v1 when the model names none
    for key, kind, scoped in ((SERVING_RUNTIME, "ServingRuntime", False),
                              (CLUSTER_SERVING_RUNTIME, "ClusterServingRuntime", True)):
        candidates = [r for r in related.of(*key, namespace, scoped)
                      if mapping_at(r.get("spec"), ("spec",)).get("disabled") is not True
                      and mapping_at(r.get("spec"), ("spec",)).get("multiModel") is not True
                      and (mapping_at(r.get("spec"), ("spec",)).get("workerSpec") is not None) == multinode
                      and _supports(r, model, False) and _protocol_ok(r, protocol)]
        if not candidates:
            if not related.complete(*key):
                return (f"KServe chooses its runtime among the cluster's ServingRuntimes and ClusterServingRuntimes, "
                        f"and {related.where()} does not hold them all: name one in spec.predictor.model.runtime "
                        "(and give it), or run with --kubeconfig")
            continue
        if not related.complete(*key):
            return (f"KServe chooses its runtime among the cluster's {kind}s ({_name(candidates[0])} in "
                    f"{related.where()} supports it, others may rank first): name it in spec.predictor.model.runtime, "
                    "or run with --kubeconfig")
        best = max((_priority(r, fmt) is not None, _priority(r, fmt) or 0) for r in candidates)
        top = [r for r in candidates if (_priority(r, fmt) is not None, _priority(r, fmt) or 0) == best]
        if len(top) > 1:
            names = ", ".join(sorted(_name(r) for r in top))
            return (f"{kind}s {names} rank the same for it (KServe takes the newest): name one in "
                    "spec.predictor.model.runtime")
        return f"{kind} {_name(top[0])}", top[0]
    return NoPod(f"no ServingRuntime or ClusterServingRuntime in the cluster supports modelFormat {fmt!r}: "
                 "KServe builds no Pod until one does")


# ModelSpec's own fields, not the container's (PredictorExtensionSpec and ModelSpec, predictor.go).
_MODEL_ONLY = frozenset({"modelFormat", "runtime", "storageUri", "storage", "protocolVersion", "runtimeVersion",
                         "storageUris"})


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


def worker_pod(body: Mapping[str, Any], spec: Mapping[str, Any], label: str, here: FieldPath,
            role: str) -> Built | NoPod:
    """``multiNodeProcess``: the runtime's ``worker-container`` with the predictor's ``workerSpec.containers[0]``
    merged over it (``MergeServingRuntimeAndInferenceServiceSpecs``), alone in the Pod; the predictor's
    ``workerSpec`` pod fields over the runtime's."""
    at = (*here, "workerSpec")
    worker = mapping_at(body.get("workerSpec"), at)
    rt_worker = mapping_at(spec.get("workerSpec"), ("spec", "workerSpec"))
    if not rt_worker:
        return NoPod(f"InferenceService {dotted(at)}: {label} has no workerSpec: KServe builds no Pod "
                     "(InvalidWorkerSpecNotSet)")
    rt_containers = list_at(rt_worker.get("containers"), ("spec", "workerSpec", "containers"))
    main = next((c for c in rt_containers if isinstance(c, Mapping) and c.get("name") == WORKER_CONTAINER), None)
    if main is None:
        return NoPod(f"InferenceService {dotted(at)}: {label} has no {WORKER_CONTAINER} in its workerSpec: "
                     "KServe builds no Pod (InvalidPredictorSpec)")
    own = list_at(worker.get("containers"), (*at, "containers"))
    override = own[0] if own and isinstance(own[0], Mapping) else {}
    pod = {k: rt_worker[k] for k in ("nodeSelector", "affinity", "tolerations", "schedulerName") if k in rt_worker}
    pod.update({k: v for k, v in worker.items() if k not in ("containers", "pipelineParallelSize",
                                                             "tensorParallelSize")})
    pod["containers"] = [merge_container(main, override)]
    fields: list[tuple[FieldPath, FieldPath]] = [(("containers", 0), (*at, "containers", 0))] if override else []
    init = list_at(worker.get("initContainers"), (*at, "initContainers"))
    fields += [(("initContainers", i), (*at, "initContainers", i)) for i in range(len(init))]
    fields.append((("resources",), (*at, "resources")))
    return Built(at, pod, f"{dotted(at)} ({role} worker, {label})", tuple(fields))


__all__ = ["CLUSTER_SERVING_RUNTIME", "GROUP", "SERVING_RUNTIME", "WORKER_CONTAINER", "NoPod", "choose_runtime",
           "merge_container", "worker_pod"]
