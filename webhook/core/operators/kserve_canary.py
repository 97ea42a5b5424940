"""An InferenceService's canaries (``spec.canary[*].predictor``) as KServe v0.20.0 builds and admits them
(``components/predictor.go`` ``reconcileCanaryDeployments``, ``buildCanaryPredictor``;
``inference_service_validation.go`` ``validateCanarySpecs``; ``inference_service_defaults.go``
``DefaultInferenceService``): each canary merged over the stable predictor (mergo) and built by the predictor's
builder (``webhook.core.operators.kserve``, handed in), its own containers as written. The deployment-mode names
live here, read by both."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from webhook.core.fieldpath import FieldPath
from webhook.core.operators import Built, Related, annotations_at, list_at, mapping_at
from webhook.core.operators.kserve_config import config_section
from webhook.core.operators.kserve_runtimes import NoPod
from webhook.core.resourceblock import ManifestError

MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
DEFAULT_MODE = "Serverless"
MODES = {"Standard": "Standard", "Knative": "Knative", "ModelMesh": "ModelMesh", "RawDeployment": "Standard",
         "Serverless": "Knative"}

# kserve._component: (obj, component, body, here, role, mode, related, multinode, canary=, defaulted=)
Component = Callable[..., Iterator[Built | str]]


def _mergo(base: Any, over: Any) -> Any:
    """``mergo.Merge(&stable, canary, mergo.WithOverride)``: structs and maps merged key by key, a canary's value
    that is set (not empty, zero or false) replacing the stable's; lists replaced whole."""
    if isinstance(base, Mapping) and isinstance(over, Mapping):
        out = dict(base)
        for key, value in over.items():
            out[key] = _mergo(base.get(key), value) if key in base else value
        return out
    if over is None or over == "" or over == 0 or over is False or over == [] or over == {}:
        return base
    return over


def canary_mode(obj: Mapping[str, Any], related: Related) -> str | None:
    """The ``serving.kserve.io/deploymentMode`` annotation as KServe's defaulter leaves it, which
    ``validateCanarySpecs`` reads (``DefaultInferenceService``): a legacy value renamed (``RawDeployment`` to
    ``Standard``, ``Serverless`` to ``Knative``); without one, ``deploy.defaultDeploymentMode`` (legacy names
    renamed, ``NewDeployConfig``) written when it is ``Standard`` or ``ModelMesh``; else None."""
    annotations = annotations_at(obj)
    if MODE_ANNOTATION in annotations:
        written = str(annotations[MODE_ANNOTATION])
        return MODES.get(written, written)
    section, _ = config_section(related, "deploy")
    default = section.get("defaultDeploymentMode") if section is not None else None
    mode = MODES.get(default) if isinstance(default, str) else None
    return mode if mode in ("Standard", "ModelMesh") else None


def canary_refusal(obj: Mapping[str, Any], spec: Mapping[str, Any], related: Related) -> NoPod | None:
    """Why KServe's validating webhook refuses the whole InferenceService for its canaries, or None:
    ``validateCanarySpecs`` (``inference_service_validation.go:183-192``, run by ``validateInferenceService`` on
    CREATE and UPDATE, ``failurePolicy: Fail``) errs on any canary unless the defaulted annotation is Standard.
    The object is never stored, so no Pod at all is built, the stable predictor's neither."""
    if not list_at(spec.get("canary"), ("spec", "canary")) or canary_mode(obj, related) == "Standard":
        return None
    return NoPod("InferenceService spec.canary: KServe refuses a canary unless the serving.kserve.io/deploymentMode "
                 "annotation is Standard (or, without it, inferenceservice-config deploy.defaultDeploymentMode is): "
                 "its validating webhook (validateCanarySpecs) refuses the whole InferenceService, so KServe builds "
                 "no Pod, the stable predictor's neither; set the annotation to Standard or remove spec.canary")


def canaries(obj: Mapping[str, Any], spec: Mapping[str, Any], related: Related,
             component: Component) -> Iterator[Built | str]:
    """``reconcileCanaryDeployments``: each ``spec.canary[i].predictor`` merged over the stable predictor
    (``buildCanaryPredictor``) and built as it is, single-node, in its own Deployment (Standard mode only: outside
    it ``canary_refusal`` refuses the object first). The canary's own containers replace the stable's whole
    (mergo) as written: KServe's defaulting never sees them."""
    canaries = list_at(spec.get("canary"), ("spec", "canary"))
    if not canaries:
        return
    stable = mapping_at(spec.get("predictor"), ("spec", "predictor"))
    for i, item in enumerate(canaries):
        at: FieldPath = ("spec", "canary", i, "predictor")
        own = mapping_at(mapping_at(item, ("spec", "canary", i)).get("predictor"), at)
        merged = dict(_mergo({k: v for k, v in stable.items() if k != "workerSpec"}, own))
        defaulted = not list_at(own.get("containers"), (*at, "containers"))  # else the canary's, as written
        try:
            for built in component(obj, "predictor", merged, at, f"canary {own.get('name')}", "Standard",
                                    related, False, canary=True, defaulted=defaulted):
                yield built if isinstance(built, str) else _canary_fields(built, own, at)
                if isinstance(built, NoPod):
                    return  # reconcileCanaryDeployments stops at its first failing canary
        except ManifestError as bad:
            raise ManifestError(_whose(bad.path, own, at), bad.message) from None


def _whose(path: FieldPath, own: Mapping[str, Any], at: FieldPath) -> FieldPath:
    """Where a merged canary's value is written: the canary's own field when it sets it (its value wins the
    merge), else the stable predictor's."""
    if path[:len(at)] != at:
        return path
    node: Any = own
    for key in path[len(at):]:
        held = (isinstance(node, Mapping) and key in node) or (
            isinstance(node, list) and isinstance(key, int) and key < len(node))
        if not held:
            return ("spec", "predictor", *path[len(at):])
        node = node[key]
    return path


def _canary_fields(built: Built, own: Mapping[str, Any], at: FieldPath) -> Built:
    """A canary's fields: the canary's own where it sets the field (its value wins the merge), else the stable
    predictor's (the canary inherits it)."""
    def rebase(field: FieldPath) -> FieldPath:
        if field[:len(at)] == at and len(field) > len(at) and field[len(at)] not in own:
            return ("spec", "predictor", *field[len(at):])
        return field
    return Built(built.path, built.spec, built.template, tuple((b, rebase(f)) for b, f in built.fields),
                 built.partial, tuple((b, rebase(f)) for b, f in built.shown))


__all__ = ["DEFAULT_MODE", "MODES", "MODE_ANNOTATION", "canaries", "canary_mode", "canary_refusal"]
