"""An InferenceService in ModelMesh mode as KServe v0.20.0 builds it (kserve/kserve commit
1fb781055dd1567164358233e1125142ca6ef1fe): its predictor's Pods are the ServingRuntime's Deployment, which
modelmesh-serving builds (judged when that Deployment is admitted), but KServe's own controller still builds the
transformer and the explainer:

- ``controller.go:159-176``: without ``spec.transformer`` it skips the object whole (no explainer either); with
  one it reconciles on;
- ``controller.go:283-291``: no predictor reconciler, the transformer's and the explainer's as in any mode;
- ``components/transformer.go:125-176``, ``components/explainer.go:132-143``: once modelmesh-serving has written
  the predictor's URL, each is built as a Knative Service (every mode but Standard), so Knative's queue-proxy
  joins its Pod;
- ``inference_service_defaults.go:187-197``: the defaulter defaults the transformer and the explainer (their
  ``kserve-container`` name and default resources) whatever the mode; the predictor not where the annotation
  names ModelMesh as written (under ``deploy.defaultDeploymentMode`` ModelMesh it is)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.operators import NoPodHere

MODEL_MESH = "ModelMesh"
# the mode the transformer and explainer are built in: their Knative Services (controller mode != Standard)
BUILT_AS = "Knative"
_RUNTIMES = "its Pods are the ServingRuntime's, built by modelmesh-serving"


def model_mesh(spec: Mapping[str, Any]) -> tuple[NoPodHere, tuple[str, ...]]:
    """The predictor's reason (its Pods are not KServe's) and the components KServe builds, in its order."""
    if spec.get("transformer") is None:
        skipped = ("; without a transformer KServe's controller skips it whole, so spec.explainer runs no Pod"
                   if spec.get("explainer") is not None else "")
        return NoPodHere(f"InferenceService in ModelMesh mode ({_RUNTIMES}){skipped}"), ()
    return NoPodHere(f"InferenceService spec.predictor in ModelMesh mode ({_RUNTIMES})"), ("transformer", "explainer")


__all__ = ["BUILT_AS", "MODEL_MESH", "model_mesh"]
