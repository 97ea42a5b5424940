"""An InferenceService in ModelMesh mode as KServe v0.20.0 builds it (webhook.core.operators.kserve_modelmesh):
the predictor's Pods are modelmesh-serving's (``NoPodHere``), the transformer and the explainer KServe's own,
built as Knative Services (controller.go:159-176 and :283-291, transformer.go:125-176, explainer.go:132-143)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tests.unit.kserve_cases import QUEUE_PROXY, RT, findings, isvc, model
from webhook.core.operators import NoPodHere, Unjudged
from webhook.core.workloads import find_targets, walk

MESH = {"serving.kserve.io/deploymentMode": "ModelMesh"}
# Knative's queue-proxy made Guaranteed, so that the component's own containers are all that is judged
WHOLE_QUEUE = {f"queue.sidecar.serving.knative.dev/{r}-resource-{k}": v
               for r, v in (("cpu", "1"), ("memory", "500Mi")) for k in ("request", "limit")}
# fractional, yet never judged here: modelmesh-serving builds the predictor's Pods, not KServe
FRACTIONAL_MODEL = model(storageUri="pvc://m", resources={"requests": {"cpu": "500m", "memory": "1Gi"},
                                                          "limits": {"cpu": "500m", "memory": "1Gi"}})


def mesh(cpu: str, *components: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    obj = isvc({"model": FRACTIONAL_MODEL}, {**MESH, **(WHOLE_QUEUE if annotations is None else annotations)})
    resources = {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": cpu, "memory": "1Gi"}}
    for component in components:
        obj["spec"][component] = {"containers": [{"name": "kserve-container", "image": "t", "resources": resources}]}
    return obj


def test_a_modelmesh_transformer_is_built_and_judged() -> None:
    """controller.go:283-291 skips the predictor's reconciler only: the transformer's Pod is KServe's, refused
    for its 1500m (it was passed as one NoPodHere for the whole object); its twin at 2 CPUs passes."""
    fractional = mesh("1500m", "transformer")
    predictor, transformer = walk(fractional, related=RT)
    assert isinstance(predictor, NoPodHere) and not isinstance(predictor, Unjudged)
    assert predictor == ("InferenceService spec.predictor in ModelMesh mode (its Pods are the ServingRuntime's, "
                         "built by modelmesh-serving)")
    assert not isinstance(transformer, str) and transformer.template == "spec.transformer (transformer)"
    assert findings(fractional, RT) == Counter(
        {"cpu-not-integer kserve-container spec.transformer.containers[0].resources.cpu": 1})
    assert findings(mesh("2", "transformer"), RT) == Counter()


def test_a_modelmesh_transformer_is_a_knative_service() -> None:
    """transformer.go:168-179: every mode but Standard builds a Knative Service, so Knative's queue-proxy joins
    the Pod (25m, no limit, unless set); the defaulter fills what the container leaves unset
    (inference_service_defaults.go:187-188: the transformer is defaulted in ModelMesh mode too)."""
    obj = mesh("2", "transformer", annotations={})
    [target] = find_targets(obj, related=RT)
    assert [c.name for c in target.pod_spec().containers] == ["kserve-container", "queue-proxy"]
    assert findings(obj, RT) == Counter(QUEUE_PROXY)
    bare = mesh("2", annotations=WHOLE_QUEUE)
    bare["spec"]["transformer"] = {"containers": [{"image": "t"}]}  # KServe's defaults: 1 CPU, 2Gi, Guaranteed
    assert findings(bare, RT) == Counter()


def test_a_modelmesh_explainer_is_built_after_a_transformer_only() -> None:
    """controller.go:159-176: with a transformer the explainer is built too (and judged); without one KServe's
    controller skips the object whole, so the explainer runs no Pod: one NoPodHere, nothing judged."""
    both = mesh("1500m", "transformer", "explainer")
    assert findings(both, RT) == Counter({
        "cpu-not-integer kserve-container spec.transformer.containers[0].resources.cpu": 1,
        "cpu-not-integer kserve-container spec.explainer.containers[0].resources.cpu": 1})
    alone = mesh("1500m", "explainer")
    (reason,) = walk(alone, related=RT)
    assert isinstance(reason, NoPodHere) and not isinstance(reason, Unjudged)
    assert reason.endswith("without a transformer KServe's controller skips it whole, so spec.explainer runs no Pod")
    assert findings(alone, RT) == Counter()


def test_a_modelmesh_predictor_alone_has_no_pod_here() -> None:
    """Its Pods are the ServingRuntime's Deployment, judged when that Deployment is admitted."""
    (reason,) = walk(mesh("1500m"), related=RT)
    assert isinstance(reason, NoPodHere) and not isinstance(reason, Unjudged)
    assert reason == ("InferenceService in ModelMesh mode (its Pods are the ServingRuntime's, built by "
                      "modelmesh-serving)")
