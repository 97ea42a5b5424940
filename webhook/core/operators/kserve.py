"""KServe ``InferenceService`` as KServe builds its Pods, read from kserve/kserve v0.20.0 (commit
1fb781055dd1567164358233e1125142ca6ef1fe):

- Defaulting (``pkg/apis/serving/v1beta1/inference_service_defaults.go``): a framework field (``sklearn``,
  ``tensorflow``...) becomes ``spec.predictor.model`` with that ``modelFormat`` (``setPredictorModelDefaults``;
  the triton, onnx and huggingface fields get protocol v2, a ``model`` only when its format is triton or vLLM); a
  custom component's first container is named ``kserve-container`` (a predictor's when alone or unnamed) and gets
  the ``inferenceservice-config`` ``inferenceService.resource`` defaults for what it leaves unset
  (``setResourceRequirementDefaults``, from ``predictor_custom.go``, ``transformer_custom.go``,
  ``explainer_custom.go``; KServe's ConfigMap sets 1 CPU and 2Gi, requests equal to limits). A model gets none.
  A custom predictor's Pod is built only when its first container is its one ``kserve-container``: the
  controller copies that container over the first (``buildPredictorResources``), so another first container
  leaves two of that name (the API server refuses the Pod) and none leaves nothing to copy (it fails).
- The mode (controller ``utils.go`` ``GetDeploymentMode``): ``status.deploymentMode``, else the annotation when it
  names a mode KServe knows, else ``deploy.defaultDeploymentMode`` (KServe's: ``Serverless``, Knative).
- The runtime (``components/predictor.go`` ``reconcileModel``; ``predictor_model.go`` ``GetSupportingRuntimes``):
  ``model.runtime`` names a ServingRuntime in the namespace, else a ClusterServingRuntime; without it the first
  that supports the model (not disabled, single-model, the ``modelFormat`` among its ``autoSelect`` formats, the
  protocol, multi-node as the predictor), the namespace's before the cluster's, the higher ``priority`` first
  (then the older: creation times a file does not carry, so a tie is said, not guessed).
- The Pod (``buildPodSpec``, ``utils.go`` ``MergeServingRuntimeAndInferenceServiceSpecs``): the runtime's
  ``kserve-container`` with the model's container fields strategically merged over it (``MergeRuntimeContainers``:
  the model's ``resources`` override the runtime's key by key), then the ``transformer-container`` (merged when
  both have one), the runtime's other containers, the predictor's own; the predictor's pod fields over the
  runtime's (``MergePodSpec``). A multi-node predictor's workers (Standard mode, ``multiNodeProcess``): the
  runtime's ``worker-container`` with ``workerSpec.containers[0]`` merged over it, alone. Each
  ``spec.canary[i].predictor`` merged over the stable predictor (``buildCanaryPredictor``, mergo) and built as one,
  its own containers as written (the defaulter never sees a canary). Outside Standard mode (the annotation as the
  defaulter writes it) KServe's validating webhook refuses the whole InferenceService (``validateCanarySpecs``).
- Injected (``webhook.core.operators.kserve_pod``; ``pkg/webhook/admission/pod``, the controller for
  ``storageUris``): a ``storage-initializer`` init container for a ``storageUri``, a model's ``storage.path``
  (``addStorageSpecAnnotations``), a custom container's ``STORAGE_URI`` env (``GetStorageUri``) or the
  ``storageUris`` (one for all) that are not ``pvc://`` nor OCI (``storage_initializer_injector.go``; 100m/1 CPU,
  100Mi/1Gi from the ``default`` ClusterStorageContainer and the ConfigMap's ``storageInitializer``), not when an
  init container of that name is there; for an OCI URI in modelcar mode (``ResolveOciModelMode``: KServe's ConfigMap
  has ``enableModelcar: true``) the ``modelcar`` sidecar and ``modelcar-init`` (``utils/storage.go``: 10m, 15Mi,
  requests equal to limits), none for ``oci+native://``; the ``agent`` container for a ``logger``, a ``batcher`` or
  a multi-model predictor (``IsMMSPredictor``: a model with no storage at all), not when a container of that name is
  there (``agent_injector.go``, the ConfigMap's ``agent``: 100m/1 CPU, 100Mi/1Gi); in Knative mode Knative's
  ``queue-proxy`` (knative/serving ``config-deployment``: ``queue-sidecar-cpu-request`` 25m by default, no limit).
  The ConfigMaps are read when given (input or cluster), their JSON values as Go reads them
  (``webhook.core.gojson``), else KServe's and Knative's shipped values are used; a given
  ``inferenceservice-config`` KServe cannot read builds no Pod (``kserve_config.config_refusal``).
- The order (``controller.go``): the predictor, its canaries, the transformer, the explainer, stopping at the
  first that KServe builds no Pod for.

Where the runtime is not known (not in the input, no cluster read) the model's own container is still judged when
its ``resources`` set both requests and limits of cpu and memory (no runtime can change them): a failure there is
the Pod's, a pass is not (``Built.partial``; a model's Pod is built in ``kserve_model``). Not built here: a
ModelMesh predictor (``kserve_modelmesh``: its transformer and explainer are), a ClusterStorageContainer other than
KServe's default, the ART explainer.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.gojson import TooDeep
from webhook.core.operators import Built, Related, annotations_at, list_at, mapping_at
from webhook.core.operators.kserve_canary import DEFAULT_MODE, MODE_ANNOTATION, MODES, canaries, canary_refusal
from webhook.core.operators.kserve_config import (
    CONFIG_MAP,
    DEFAULT_STORAGE,
    ISVC_CONFIG,
    config_refusal,
    config_section,
    config_unknown,
)
from webhook.core.operators.kserve_ingress import ingress_refusal
from webhook.core.operators.kserve_model import FRAMEWORKS, MODEL_CONTAINER, MODEL_FIELDS, model_predictor, pod_fields
from webhook.core.operators.kserve_modelmesh import BUILT_AS, MODEL_MESH, model_mesh
from webhook.core.operators.kserve_pod import (
    AGENT,
    KNATIVE_CONFIG,
    MODELCAR,
    MODELCAR_INIT,
    QUEUE_PROXY,
    STORAGE_INITIALIZER,
    oci_mode,
    queue_proxy,
    with_defaults,
    with_injected,
)
from webhook.core.operators.kserve_runtimes import (
    CLUSTER_SERVING_RUNTIME,
    GROUP,
    SERVING_RUNTIME,
    NoPod,
    choose_runtime,
    merge_container,
)
from webhook.core.resourceblock import ManifestError

RELATED = (SERVING_RUNTIME, CLUSTER_SERVING_RUNTIME, CONFIG_MAP)
COMPONENTS: tuple[str, ...] = ("predictor", "transformer", "explainer")


def deployment_mode(obj: Mapping[str, Any], related: Related) -> str:
    """``GetDeploymentMode`` (controller ``utils.go``): the mode recorded in ``status.deploymentMode`` (an update),
    else the annotation when it names a mode KServe knows (``Standard``, ``Knative``, ``ModelMesh``, or the legacy
    ``RawDeployment``, ``Serverless``), else ``inferenceservice-config`` ``deploy.defaultDeploymentMode``: any
    other annotation value is ignored, not taken at its word."""
    status = obj.get("status")
    recorded = status.get("deploymentMode") if isinstance(status, Mapping) else None
    if isinstance(recorded, str) and recorded:
        return MODES.get(recorded, recorded)  # ParseDeploymentMode: legacy names mapped, the rest as recorded
    annotations = annotations_at(obj)
    mode = annotations.get(MODE_ANNOTATION)
    if isinstance(mode, str) and mode in MODES:
        return MODES[mode]
    section, _ = config_section(related, "deploy")
    default = section.get("defaultDeploymentMode") if section is not None else None
    return MODES.get(default if isinstance(default, str) else "", MODES[DEFAULT_MODE])


def _predictor_container(containers: list[Any], here: FieldPath, defaulted: bool) -> NoPod | None:
    """Why KServe builds no Pod for a custom predictor's (defaulted) containers, or None. Its controller
    (``buildPredictorResources``, predictor.go) copies the first container named ``kserve-container``
    (``CustomPredictor.GetContainer``) over the first container: none, and it fails (a nil container); one that is
    not first, or two, and the Pod holds two containers of that name, which the API server refuses (Duplicate
    value). The defaulter names the first ``kserve-container`` only when it is alone or unnamed."""
    if not all(isinstance(c, Mapping) for c in containers):
        return None  # the Pod's reading names the field that is not a container
    where = dotted(here)
    names = [c.get("name") for c in containers]
    if MODEL_CONTAINER not in names:
        if not defaulted:
            return NoPod(f"InferenceService {where}: no container is named {MODEL_CONTAINER}, and KServe names and "
                         "defaults no canary's containers (its defaulting covers predictor, transformer and "
                         "explainer only): GetContainer finds none, so its controller fails at this canary and "
                         "builds no Pod for it nor for the canaries after it; name the canary's serving container "
                         f"{MODEL_CONTAINER}")
        return NoPod(f"InferenceService {where}.containers: none is named {MODEL_CONTAINER} (KServe's defaulter "
                     "names the first only when it is alone or unnamed): GetContainer finds none, so its controller "
                     f"fails and KServe builds no Pod; name the serving container {MODEL_CONTAINER} and put it first")
    first = names.index(MODEL_CONTAINER)
    if first == 0 and names.count(MODEL_CONTAINER) == 1:
        return None
    twice = first if first else names.index(MODEL_CONTAINER, 1)
    return NoPod(f"InferenceService {where}.containers[{twice}]: KServe's controller copies the first container "
                 f"named {MODEL_CONTAINER} over {where}.containers[0] (predictor.go), so the Pod would hold two "
                 f"containers named {MODEL_CONTAINER}, which the API server refuses (Duplicate value): KServe builds "
                 f"no Pod; make the {MODEL_CONTAINER} the first container and the only one of that name"
                 + ("" if defaulted or first == 0 else " (a canary's containers are taken as written)"))


def _custom(component: str, body: Mapping[str, Any], related: Related, here: FieldPath, role: str,
            defaulted: bool = True) -> Built | str:
    """A custom component as KServe's defaulting leaves it: its first container named ``kserve-container`` (a
    transformer's and explainer's always, a predictor's when it is alone or unnamed) and given KServe's default
    resources for what it leaves unset. Not ``defaulted`` (a canary's own containers: the defaulter never sees
    ``spec.canary``), the containers as written. A predictor's Pod is built only when its first container is its
    one ``kserve-container`` (``_predictor_container``)."""
    containers = list(list_at(body.get("containers"), (*here, "containers")))
    if defaulted and containers and isinstance(containers[0], Mapping):
        first = with_defaults(containers[0], related)
        if component != "predictor" or len(containers) == 1 or not first.get("name"):
            first["name"] = MODEL_CONTAINER
        containers[0] = first
    if component == "predictor" and containers:
        refused = _predictor_container(containers, here, defaulted)
        if refused is not None:
            return refused
    pod = {**pod_fields(body), "containers": containers}
    fields: list[tuple[FieldPath, FieldPath]] = [(("containers", i), (*here, "containers", i))
                                                 for i in range(len(containers))]
    init = list_at(body.get("initContainers"), (*here, "initContainers"))
    fields += [(("initContainers", i), (*here, "initContainers", i)) for i in range(len(init))]
    fields.append((("resources",), (*here, "resources")))
    return Built(here, pod, f"{dotted(here)} ({role})", tuple(fields))


def _env(container: Any, at: FieldPath, name: str) -> tuple[FieldPath, Any] | None:
    if not isinstance(container, Mapping):
        return None
    for j, env in enumerate(list_at(container.get("env"), (*at, "env"))):
        if isinstance(env, Mapping) and env.get("name") == name:
            return (*at, "env", j, "value"), env.get("value")
    return None


def _custom_storage_uri(built: Built, component: str, here: FieldPath) -> tuple[FieldPath, Any] | None:
    """A custom component's ``STORAGE_URI`` env (``GetStorageUri``: the predictor's kserve-container's, a
    transformer's or explainer's first container's, named as defaulting names them), and where it is."""
    containers = list_at(built.spec.get("containers"), ())
    for i, c in enumerate(containers):
        if isinstance(c, Mapping) and ((component == "predictor" and c.get("name") == MODEL_CONTAINER)
                                       or (component != "predictor" and i == 0)):
            return _env(c, (*here, "containers", i), "STORAGE_URI")
    return None


def _mms(body: Mapping[str, Any], field: str | None, here: FieldPath) -> FieldPath | None:
    """``IsMMSPredictor`` (controller ``utils.go``), which makes KServe inject its agent as a model puller: a
    predictor with containers whose first sets ``MULTI_MODEL_SERVER=true``; without containers, a model (not
    huggingface) with no ``storageUri``, ``storage`` nor ``storageUris``. The field that makes it so, or None."""
    containers = list_at(body.get("containers"), (*here, "containers"))
    if containers:
        env = _env(containers[0], (*here, "containers", 0), "MULTI_MODEL_SERVER")
        return env[0] if env is not None and env[1] == "true" else None
    if field is None:
        return None
    model = mapping_at(body[field], (*here, field))
    fmt = mapping_at(model.get("modelFormat"), (*here, field, "modelFormat")).get("name")
    if field == "huggingface" or (field == "model" and fmt == "huggingface"):
        return None
    if model.get("storageUri") is not None or model.get("storage") is not None or body.get("storageUris"):
        return None
    return (*here, field, "storageUri")


def _storage(body: Mapping[str, Any], field: str | None, here: FieldPath,
             built: Built, component: str) -> tuple[FieldPath, Any] | str | None:
    """The one source URI KServe's pod webhook reads (``storage-initializer-sourceuri``): the model's
    ``storageUri``, its ``storage.path`` (``addStorageSpecAnnotations``), a custom container's ``STORAGE_URI``;
    a reason when KServe refuses both (``must provide only one of storageUri and storage.path``)."""
    if field is None:
        return _custom_storage_uri(built, component, here) or ((*here, "storageUri"), body.get("storageUri"))
    model = mapping_at(body[field], (*here, field))
    storage = mapping_at(model.get("storage"), (*here, field, "storage"))
    path = storage.get("path")
    if isinstance(path, str):
        if model.get("storageUri") is not None:
            return (f"InferenceService {dotted((*here, field))}: sets both storageUri and storage.path, which KServe "
                    "refuses (must provide only one of storageUri and storage.path): it builds no Pod")
        # the URI's scheme comes from the storage secret; any is downloaded by the storage-initializer
        return (*here, field, "storage", "path"), f"storage://{path}"
    return (*here, field, "storageUri"), model.get("storageUri")


def _storage_uris(body: Mapping[str, Any], here: FieldPath) -> list[tuple[FieldPath, str]]:
    out = []
    for i, item in enumerate(list_at(body.get("storageUris"), (*here, "storageUris"))):
        uri = mapping_at(item, (*here, "storageUris", i)).get("uri")
        if isinstance(uri, str) and uri:
            out.append(((*here, "storageUris", i, "uri"), uri))
    return out


def _component(obj: Mapping[str, Any], component: str, body: Mapping[str, Any], here: FieldPath, role: str,
               mode: str, related: Related, multinode: bool, canary: bool = False,
               defaulted: bool = True) -> Iterator[Built | str]:
    """One component's Pod (and a multi-node predictor's workers') with what is injected into it; ``defaulted``:
    its containers are ones KServe's defaulter saw (not a canary's own)."""
    field = None
    worker: Built | str | None = None
    built: Built | str
    if component == "predictor":
        field = "model" if body.get("model") is not None else next(
            (f for f in FRAMEWORKS if body.get(f) is not None), None)
        if field is not None:
            built, worker = model_predictor(obj, body, field, related, here, role, multinode)
        else:
            built = _custom(component, body, related, here, role, defaulted)
    elif component == "explainer" and body.get("art") is not None:
        built = ("InferenceService spec.explainer.art (its container is built from KServe's "
                 "inferenceservice-config explainers: not read here)")
    else:
        built = _custom(component, body, related, here, role)
    if isinstance(worker, NoPod):  # Reconcile stops at reconcileWorker's error, in any mode: no Pod at all
        yield worker
        return
    if isinstance(built, Built):
        mms_cause = _mms(body, field, here) if component == "predictor" else None
        cause = mms_cause or next(((*here, f) for f in ("logger", "batcher") if body.get(f) is not None), None)
        legacy = _storage(body, field, here, built, component)
        if isinstance(legacy, str):
            yield legacy
            return
        # a canary's Deployment gets no storageUris (reconcileCanaryDeployments passes none)
        uris = [] if canary else _storage_uris(body, here)
        built = with_injected(built, obj, mode, related, legacy, uris, cause, mms_cause is not None)
        if isinstance(worker, Built):
            # the workers' Deployment: the predictor's annotations (storage URI, logger, batcher), its storageUris
            logger = next(((*here, f) for f in ("logger", "batcher") if body.get(f) is not None), None)
            worker = with_injected(worker, obj, "Standard", related, legacy, uris, logger, False)
    yield built
    if worker is not None and mode == "Standard":  # the workers' Deployment is the Standard reconciler's only
        yield worker


def build(obj: Mapping[str, Any], related: Related) -> Iterator[Built | str]:
    """Each component's Pod as KServe builds it (a canary's, a multi-node predictor's workers'), or why it cannot
    be known (an ``inferenceservice-config`` section nested too deeply for qos-guard to read: not judged)."""
    try:
        yield from _build(obj, related)
    except TooDeep as deep:
        yield f"InferenceService: {deep}"


def _build(obj: Mapping[str, Any], related: Related) -> Iterator[Built | str]:
    spec = obj.get("spec")
    if spec is None:
        return
    if not isinstance(spec, Mapping):
        raise ManifestError(("spec",), "expected a mapping")
    if (unread := config_unknown(related)) is not None:  # KServe reads it before anything else: nothing known
        yield f"InferenceService: {unread}"
        return
    meshed = annotations_at(obj).get(MODE_ANNOTATION) == MODEL_MESH  # DefaultInferenceService skips its predictor
    custom = any(isinstance(spec.get(c), Mapping) and (c != "predictor" or (not meshed and not any(
        spec[c].get(f) is not None for f in MODEL_FIELDS))) for c in COMPONENTS)
    refusal = config_refusal(related, custom)
    refused = NoPod(f"InferenceService: {refusal}") if refusal is not None else canary_refusal(obj, spec, related)
    if refused is not None:  # KServe's defaulter, controller or pod webhook fails, or its validator refuses
        yield refused
        return
    mode, components = deployment_mode(obj, related), COMPONENTS
    if mode == MODEL_MESH:  # the predictor is modelmesh-serving's; the transformer and explainer Knative Services
        reason, components = model_mesh(spec)
        yield reason
        mode = BUILT_AS
    refusal = ingress_refusal(related) if mode == "Standard" else None
    if refusal is not None:  # NewRawKubeReconciler reads it before the predictor's Deployment
        yield NoPod(f"InferenceService: {refusal}")
        return
    failed = False
    for component in components:
        body = spec.get(component)
        if body is None:
            continue
        here: FieldPath = ("spec", component)
        if not isinstance(body, Mapping):
            raise ManifestError(here, "expected a mapping")
        if failed:  # controller.go: the components in turn, stopping at the first that fails
            yield NoPod(f"InferenceService {dotted(here)}: not built: KServe's controller reconciles the predictor "
                        "(its canaries with it), the transformer and the explainer in turn and stops at the first "
                        "that fails, as above")
            continue
        multinode = component == "predictor" and body.get("workerSpec") is not None
        for built in _component(obj, component, body, here, component, mode, related, multinode):
            failed = failed or isinstance(built, NoPod)
            yield built
        if component == "predictor" and not failed:  # the predictor's Reconcile builds its canaries next
            for built in canaries(obj, spec, related, _component):
                failed = failed or isinstance(built, NoPod)
                yield built

__all__ = ["AGENT", "CLUSTER_SERVING_RUNTIME", "COMPONENTS", "DEFAULT_STORAGE", "GROUP", "ISVC_CONFIG",
           "KNATIVE_CONFIG", "MODELCAR", "MODELCAR_INIT", "MODEL_FIELDS", "QUEUE_PROXY", "RELATED", "SERVING_RUNTIME",
           "STORAGE_INITIALIZER", "build", "choose_runtime", "deployment_mode", "merge_container",
           "oci_mode", "queue_proxy"]
