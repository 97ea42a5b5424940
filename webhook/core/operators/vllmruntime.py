"""vLLM production-stack's ``VLLMRuntime`` as its operator builds the Pod, read from vllm-project/production-stack
at commit a6c01db05f65f556235413ba8dbcfb0c01132fff (``operator/internal/controller/vllmruntime_controller.go``,
``deploymentForVLLMRuntime`` and ``buildSidecarContainer``; no release tag holds the operator).

One Deployment, one ``vllm`` container: ``spec.deploymentConfig.resources`` ``cpu`` and ``memory`` are each set as
both request and limit (unset: neither), ``gpu`` likewise under ``gpuType`` (``nvidia.com/gpu``). With
``spec.deploymentConfig.sidecarConfig.enabled`` a sidecar container follows, its ``resources`` the same way but
defaulting to cpu 0.5 and memory 128Mi (and 0 GPUs) where unset. So a container's request always equals its
limit, and what can be wrong is a missing or fractional cpu or memory: findings name the ``resources`` field that
makes the container (``Built.shown``), and ``fix`` and the webhook's mutation change nothing (no field of the
object is a request or a limit). The Pod's ``runtimeClassName`` is ``runtimeClass`` (the CRD defaults it to
``nvidia``), its ``tolerations`` ``toleration``, its required node affinity ``nodeSelectorTerms``: where it can
land, which ``policy.numa: auto`` reads.

The operator parses each value with ``resource.MustParse``: one that is not a quantity panics its reconcile, so
it builds no Deployment; one the API server refuses in the Deployment (a negative quantity, a fractional GPU count,
a ``gpuType`` that is no resource a container can ask for, a sidecar name that is no container name, an invalid
runtimeClassName, an empty ``nodeSelectorTerms``) leaves it none either. Both are said, not judged: no Pod runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.names import DNS1123_LABEL, MAX_LABEL, shown, subdomain_problem
from webhook.core.operators import Built, Related, list_at, mapping_at
from webhook.core.quantity import QuantityError, parse_quantity
from webhook.core.resourceblock import ManifestError
from webhook.core.sizing import Sizing

GROUP = "production-stack.vllm.ai"
KIND = "VLLMRuntime"
CONFIG: FieldPath = ("spec", "deploymentConfig")
SIDECAR: FieldPath = (*CONFIG, "sidecarConfig")
SIDECAR_DEFAULTS = {"cpu": "0.5", "memory": "128Mi", "gpu": "0"}
RUNTIME_CLASS = "nvidia"  # the CRD's default for spec.deploymentConfig.runtimeClass
LABEL = "spec.deploymentConfig (Deployment)"  # each finding's advice says a value is both request and limit
_NO_POD = "so the operator makes no Deployment and no Pod runs until it is mended"
GPU_TYPE = "nvidia.com/gpu"  # the operator's default for gpuType
# IsQualifiedName's name part (k8s.io/apimachinery/pkg/util/validation); the standard container resources
# (pkg/apis/core/helper/helpers.go standardContainerResources, and hugepages-*).
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_REFUSED = "the API server refuses the operator's Deployment"


def _qualified(name: str) -> bool:
    """``IsQualifiedName``: an optional DNS-1123 subdomain prefix and '/', then a name of at most 63 characters."""
    parts = name.split("/")
    if len(parts) > 2 or (len(parts) == 2 and (not parts[0] or subdomain_problem(parts[0], "") is not None)):
        return False
    return len(parts[-1]) <= MAX_LABEL and _QUALIFIED_NAME.fullmatch(parts[-1]) is not None


def _extended(name: str) -> bool | None:
    """Whether a container may ask for ``name`` (``validateContainerResourceName``, pkg/apis/core/validation
    validation.go:7528-7561): True for an extended resource (``IsExtendedResourceName``: its amount must then be a
    whole number, ``ValidateResourceQuantityValue`` :8222-8231), False for a standard one, None where refused."""
    if not _qualified(name):
        return None
    if "/" not in name:
        return False if name in _CONTAINER_RESOURCES or name.startswith("hugepages-") else None
    if "kubernetes.io/" in name:  # IsNativeResource: no further check
        return False
    return None if name.startswith("requests.") or not _qualified(f"requests.{name}") else True


def _string(given: Mapping[str, Any], key: str, where: FieldPath) -> str:
    """A string field of the CRD (absent or null: ""); another type the API server refuses in the object."""
    value = given.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ManifestError((*where, key), f"expected a string (the CRD's type): write {str(value)!r} in quotes")
    return value


def _resources(given: Mapping[str, Any], defaults: Mapping[str, str],
               where: FieldPath) -> dict[str, Any] | str:
    """The operator's ResourceRequirements: each of cpu, memory and the GPU as both request and limit; or why
    there is no Pod (a value ``resource.MustParse`` panics on, or a negative one the API server refuses)."""
    wanted: dict[str, Any] = {}
    gpu_type = _string(given, "gpuType", where) or GPU_TYPE
    for key in ("cpu", "memory", "gpu"):
        value = _string(given, key, where) or defaults.get(key, "")
        if not value:
            continue
        at = dotted((*where, key))
        try:
            quantity = parse_quantity(value)
        except QuantityError as error:
            return (f"{KIND} {at} {value!r} is not a quantity ({error}): the operator's resource.MustParse panics "
                    f"on it, {_NO_POD}; write e.g. \"4\" or \"4000m\"")
        if quantity.milli < 0:
            return (f"{KIND} {at} {value!r} is negative: the API server refuses the operator's Deployment (a "
                    f"request and limit must be >= 0), {_NO_POD}")
        if key == "gpu":
            extended = _extended(gpu_type)
            if extended is None:
                return (f"{KIND} {dotted((*where, 'gpuType'))} {shown(gpu_type)} is not a resource a container can "
                        f"ask for (a standard one, or an extended one of a qualified name such as {GPU_TYPE}): "
                        f"{_REFUSED}, {_NO_POD}; leave it out ({GPU_TYPE}) or name the device plugin's resource")
            if extended and quantity.milli % 1000:
                return (f"{KIND} {at} {value!r} is not a whole number: {gpu_type} is an extended resource, which a "
                        f"container asks for in whole units only; {_REFUSED}, {_NO_POD}; write a whole count")
            key = gpu_type
        wanted[key] = value
    return {"requests": dict(wanted), "limits": dict(wanted)}


def _sidecar_problem(sidecar: Mapping[str, Any]) -> str | None:
    """Why the API server refuses the Deployment with ``sidecarConfig.name`` as a container's name (the CRD's default
    ``sidecar`` fills an absent one only) (a container name is required, a DNS-1123 label, and unique:
    validation.go:3881-3885)."""
    if sidecar.get("name") is None:
        return None
    name = _string(sidecar, "name", SIDECAR)
    at = dotted((*SIDECAR, "name"))
    if name == "vllm":
        return (f"{KIND} {at} 'vllm' is the model container's name too: {_REFUSED} (a duplicate container name), "
                f"{_NO_POD}; name the sidecar otherwise")
    if len(name) > MAX_LABEL or not DNS1123_LABEL.fullmatch(name):
        return (f"{KIND} {at} {shown(name)} is not a container name (a DNS-1123 label: at most 63 lower-case "
                f"letters, digits and '-'; the CRD's default, sidecar, fills only an absent name): {_REFUSED}, "
                f"{_NO_POD}; leave it out or name it so")
    return None


def _placement(config: Mapping[str, Any]) -> dict[str, Any] | str:
    """runtimeClassName, tolerations and required node affinity as the operator sets them, or why the API server
    refuses its Deployment."""
    pod: dict[str, Any] = {}
    # absent or null (pruned first) is defaulted by the API server; "" is kept
    runtime_class = _string(config, "runtimeClass", CONFIG) if config.get("runtimeClass") is not None else RUNTIME_CLASS
    problem = subdomain_problem(runtime_class, "RuntimeClass")
    if problem is not None:  # the operator sets it whatever it is, "" included: &RuntimeClass
        return (f"{KIND} {dotted((*CONFIG, 'runtimeClass'))}: {problem}; the API server refuses the operator's "
                f"Deployment with it, {_NO_POD}; leave it out (the default is {RUNTIME_CLASS}) or name a RuntimeClass")
    pod["runtimeClassName"] = runtime_class
    tolerations = list_at(config.get("toleration"), (*CONFIG, "toleration"))
    if tolerations:
        pod["tolerations"] = tolerations
    if config.get("nodeSelectorTerms") is not None:  # a nil slice sets no affinity; an empty one does
        terms = list_at(config["nodeSelectorTerms"], (*CONFIG, "nodeSelectorTerms"))
        if not terms:
            return (f"{KIND} {dotted((*CONFIG, 'nodeSelectorTerms'))} is empty: the operator makes a required node "
                    "affinity of it, which the API server refuses (must have at least one node selector term), "
                    f"{_NO_POD}; leave it out or give a term")
        pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    return pod


def build(obj: Mapping[str, Any], related: Related) -> Iterator[Built | str]:
    """The Deployment's pod spec, or why the operator makes none."""
    spec = mapping_at(obj.get("spec"), ("spec",))
    if not spec:
        return
    config = mapping_at(spec.get("deploymentConfig"), CONFIG)
    main = _resources(mapping_at(config.get("resources"), (*CONFIG, "resources")), {}, (*CONFIG, "resources"))
    if isinstance(main, str):
        yield main
        return
    containers: list[dict[str, Any]] = [{"name": "vllm", "resources": main}]
    # No field of the object is a container's requests or limits (each of cpu and memory is both): findings
    # name the resources field that makes the container, and no mutation is planned (``shown``, not ``fields``).
    shown: list[tuple[FieldPath, FieldPath]] = [(("containers", 0), (*CONFIG, "resources"))]
    sidecar = mapping_at(config.get("sidecarConfig"), SIDECAR)
    if sidecar.get("enabled") is True:
        own = _resources(mapping_at(sidecar.get("resources"), (*SIDECAR, "resources")), SIDECAR_DEFAULTS,
                         (*SIDECAR, "resources"))
        if isinstance(own, str):
            yield own
            return
        problem = _sidecar_problem(sidecar)
        if problem is not None:
            yield problem
            return
        containers.append({"name": str(sidecar.get("name") or "sidecar"), "resources": own})
        shown.append((("containers", 1), (*SIDECAR, "resources")))
    pod = _placement(config)
    if isinstance(pod, str):
        yield pod
        return
    # each key of the resources field is one value, the request and the limit: the advice names that key
    yield Built(CONFIG, {**pod, "containers": containers}, LABEL, shown=tuple(shown),
                sizing=tuple((built, Sizing(one_value=field)) for built, field in shown))


__all__ = ["GROUP", "KIND", "RUNTIME_CLASS", "build"]
