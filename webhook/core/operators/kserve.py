"""KServe ``InferenceService`` as KServe builds its Pods (kserve/kserve; the release is named where it is read).

The predictor, the transformer and the explainer are each a pod spec inline (``PredictorSpec``,
``TransformerSpec`` and ``ExplainerSpec`` embed ``v1.PodSpec``), each run as a Deployment (or Knative Service)
of its own. A predictor with ``model`` (or a framework field, which KServe's defaulting turns into ``model``:
``setPredictorModelDefaults``, inference_service_defaults.go) runs its model container merged over a
ServingRuntime's (``MergeRuntimeContainers``); an ART explainer's container is built from the
``inferenceservice-config`` ConfigMap (explainer/art.go).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.operators import Built, Related
from webhook.core.podspec import ManifestError

GROUP = "serving.kserve.io"
# KServe PredictorSpec: the model, and the framework specs KServe's defaulting turns into a model.
MODEL_FIELDS = ("model", "sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx", "huggingface", "pmml",
                "lightgbm", "paddle")
COMPONENTS = ("predictor", "transformer", "explainer")


def build(obj: Mapping[str, Any], related: Related) -> Iterator[Built | str]:
    """Each component's pod spec, or why it cannot be known."""
    spec = obj.get("spec")
    if spec is None:
        return
    if not isinstance(spec, Mapping):
        raise ManifestError(("spec",), "expected a mapping")
    for component in COMPONENTS:
        body = spec.get(component)
        if body is None:
            continue
        if not isinstance(body, Mapping):
            raise ManifestError(("spec", component), "expected a mapping")
        if component == "predictor":
            hidden = next((f for f in MODEL_FIELDS if body.get(f) is not None), None)
            if hidden is not None:
                yield (f"InferenceService with spec.predictor.{hidden} (its model container is merged from the "
                       "ServingRuntime: judged as the Deployment and Pods KServe creates)")
                continue
        if component == "explainer" and body.get("art") is not None:
            yield ("InferenceService with spec.explainer.art (its explainer container is built from KServe's "
                   "inferenceservice-config: judged as the Deployment and Pods KServe creates)")
            continue
        here = ("spec", component)
        yield Built(here, body, f"spec.{component} ({component})",
                    tuple(((f,), (*here, f)) for f in ("containers", "initContainers", "resources")))


__all__ = ["COMPONENTS", "GROUP", "MODEL_FIELDS", "build"]
