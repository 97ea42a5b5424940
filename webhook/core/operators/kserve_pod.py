"""What KServe's ConfigMap and pod webhook, and Knative, add to an InferenceService's built Pod (kserve/kserve
v0.20.0, commit 1fb781055dd1567164358233e1125142ca6ef1fe; ``pkg/webhook/admission/pod``, ``pkg/utils/storage.go``;
knative/serving ``config-deployment``): their resources from the ``inferenceservice-config`` sections
(``kserve_config``: the ConfigMap's when given, input or cluster, else KServe's shipped values). Used by
``webhook.core.operators.kserve``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.fieldpath import FieldPath
from webhook.core.operators import Built, Related, annotations_at, list_at, mapping_at, metadata_at
from webhook.core.operators.kserve_config import CONFIG_MAP, config_section, resolve_oci_mode

KNATIVE_CONFIG = "config-deployment"
KNATIVE_DEFAULT = {"queue-sidecar-cpu-request": "25m"}  # knative/serving pkg/deployment/config.go
KNATIVE_ANNOTATION = "queue.sidecar.serving.knative.dev/{resource}-resource-{kind}"
STORAGE_INITIALIZER = "storage-initializer"
QUEUE_PROXY = "queue-proxy"
AGENT = "agent"
MODELCAR = "modelcar"
MODELCAR_INIT = "modelcar-init"


def modelcar_container(name: str, storage: Mapping[str, Any]) -> dict[str, Any]:
    """``CreateModelcarContainer``/``CreateModelcarInitContainer``: ``cpuModelcar`` and ``memoryModelcar`` (10m,
    15Mi when unset) as both request and limit."""
    cpu, memory = storage.get("cpuModelcar") or "10m", storage.get("memoryModelcar") or "15Mi"
    both = {"cpu": str(cpu), "memory": str(memory)}
    return {"name": name, "resources": {"requests": dict(both), "limits": dict(both)}}


def _resources(values: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for resource in ("cpu", "memory"):
        for kind, where in (("Request", "requests"), ("Limit", "limits")):
            value = values.get(f"{resource}{kind}")
            if isinstance(value, str) and value:  # Go reads a string; another type is refused before
                out[where][resource] = str(value)
    return out


def default_resources(related: Related) -> dict[str, dict[str, str]]:
    """``inferenceService.resource`` of the ConfigMap when it was given (what it leaves out is not defaulted),
    else KServe's shipped values."""
    section, _ = config_section(related, "inferenceService")
    resource = (section or {}).get("resource")
    return _resources(resource if isinstance(resource, Mapping) else {})


def with_defaults(container: Mapping[str, Any], related: Related) -> dict[str, Any]:
    """``setResourceRequirementDefaults``: each default request and limit (``default_resources``) the container
    does not set."""
    resources, defaults = dict(mapping_at(container.get("resources"), ("resources",))), default_resources(related)
    for kind in ("requests", "limits"):
        have = dict(mapping_at(resources.get(kind), ("resources", kind)))
        for name, value in defaults.get(kind, {}).items():
            have.setdefault(name, value)
        resources[kind] = have
    return {**container, "resources": resources}


def _injected(name: str, key: str, related: Related) -> dict[str, Any]:
    """A container KServe's pod webhook injects, its resources from ``inferenceservice-config`` ``key`` (KServe's
    own values where the ConfigMap was not given: the same 100m/1 CPU and 100Mi/1Gi for both; a given one that
    lacks one builds no Pod, ``config_refusal``)."""
    section, _ = config_section(related, key)
    return {"name": name, "resources": _resources(section or {})}


def _oci(uri: str) -> tuple[str, bool]:
    """``ParseOciScheme``: the mode an ``oci+<mode>://`` URI names ("" for ``oci://``), and whether it is OCI."""
    if uri.startswith("oci+") and "://" in uri[4:] and uri.index("://") > 4:
        return uri[4:uri.index("://")], True
    return "", uri.startswith("oci://")


def oci_mode(related: Related) -> str:
    """``ResolveOciModelMode`` of ``inferenceservice-config`` ``storageInitializer`` (without the ConfigMap,
    KServe's shipped one: ``enableModelcar: true``, so "modelcar"). The builder says ``config_refusal`` before
    any Pod where KServe cannot read it."""
    return resolve_oci_mode(config_section(related, "storageInitializer")[0] or {})


def _modelcar(name: str, related: Related) -> dict[str, Any]:
    return modelcar_container(name, config_section(related, "storageInitializer")[0] or {})


def queue_proxy(obj: Mapping[str, Any], related: Related) -> dict[str, Any]:
    """Knative's queue-proxy as Knative builds it: the ``config-deployment`` values (25m cpu request by default,
    nothing else), overridden by the ``queue.sidecar.serving.knative.dev/*-resource-*`` annotations KServe
    carries from the InferenceService to the revision."""
    values: dict[str, Any] = dict(KNATIVE_DEFAULT)
    for cm in related.of(*CONFIG_MAP, cluster_scoped=True):
        if metadata_at(cm).get("name") == KNATIVE_CONFIG:
            values = {**values, **mapping_at(cm.get("data"), ("data",))}
    annotations = annotations_at(obj)
    resources: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for resource in ("cpu", "memory"):
        for kind, where in (("request", "requests"), ("limit", "limits")):
            value = annotations.get(KNATIVE_ANNOTATION.format(resource=resource, kind=kind),
                                    values.get(f"queue-sidecar-{resource}-{kind}"))
            if isinstance(value, str) and value:
                resources[where][resource] = value
    return {"name": QUEUE_PROXY, "resources": resources}


def _names(containers: list[Any]) -> set[Any]:
    return {c.get("name") for c in containers if isinstance(c, Mapping)}


def with_injected(built: Built, obj: Mapping[str, Any], mode: str, related: Related,
                   legacy: tuple[FieldPath, Any] | None, uris: list[tuple[FieldPath, str]],
                   agent: FieldPath | None, mms: bool) -> Built:
    """``built`` with what KServe and Knative add to its Pod, in their order:

    - the controller, for ``storageUris`` (``CommonStorageInitialization``, not for a multi-model predictor): a
      ``modelcar`` sidecar and ``modelcar-init`` per OCI URI in modelcar mode (none in native mode: an image
      volume), one ``storage-initializer`` for the URIs neither pvc:// nor OCI, unless one is already there;
    - Knative's queue-proxy (Knative mode);
    - KServe's pod webhook, for the one ``storageUri``/``storage.path``/``STORAGE_URI``: the
      ``storage-initializer`` (not for pvc://, nor an OCI URI while OCI models are on, nor when an init container
      of that name is there, nor for a multi-model predictor), the ``agent`` (a logger, batcher or multi-model
      predictor; not when a container of that name is there), the ``modelcar`` and ``modelcar-init`` for an OCI
      URI in modelcar mode (``InjectModelcar``)."""
    spec = dict(built.spec)
    containers = list(list_at(spec.get("containers"), ()))
    init = list(list_at(spec.get("initContainers"), ()))
    shown: list[tuple[FieldPath, FieldPath]] = []
    configured = oci_mode(related)

    def add(target: list[Any], kind: str, container: dict[str, Any], cause: FieldPath) -> None:
        shown.append(((kind, len(target)), cause))
        target.append(container)

    if uris and not mms:
        index = 0
        for at, each in uris:
            parsed, is_oci = _oci(each)
            effective = parsed or configured
            if not is_oci or not effective:
                continue
            if effective != "native":
                name, init_name = (MODELCAR, MODELCAR_INIT) if index == 0 else \
                    (f"{MODELCAR}-{index}", f"{MODELCAR_INIT}-{index}")
                if name not in _names(containers):
                    add(containers, "containers", _modelcar(name, related), at)
                    add(init, "initContainers", _modelcar(init_name, related), at)
            index += 1
        download = [at for at, u in uris if not _oci(u)[1] and not u.startswith("pvc://")]
        if download and STORAGE_INITIALIZER not in _names(init):
            add(init, "initContainers", _injected(STORAGE_INITIALIZER, "storageInitializer", related), download[0])
    if mode == "Knative":
        add(containers, "containers", queue_proxy(obj, related), ("metadata", "annotations"))
    uri: str | None = legacy[1] if legacy is not None and isinstance(legacy[1], str) and legacy[1] else None
    parsed, is_oci = _oci(uri) if uri is not None else ("", False)
    if legacy is not None and uri is not None and not mms and not (is_oci and (parsed or configured)) \
            and STORAGE_INITIALIZER not in _names(init) and not uri.startswith("pvc://"):
        add(init, "initContainers", _injected(STORAGE_INITIALIZER, "storageInitializer", related), legacy[0])
    if agent is not None and AGENT not in _names(containers):
        add(containers, "containers", _injected(AGENT, "agent", related), agent)
    if legacy is not None and is_oci and configured and (parsed or configured) != "native" \
            and MODELCAR not in _names(containers):
        add(containers, "containers", _modelcar(MODELCAR, related), legacy[0])
        add(init, "initContainers", _modelcar(MODELCAR_INIT, related), legacy[0])
    spec["containers"] = containers
    if init or "initContainers" in spec:
        spec["initContainers"] = init
    return Built(built.path, spec, built.template, built.fields, built.partial, tuple(shown))


__all__ = [
    "AGENT",
    "KNATIVE_CONFIG",
    "MODELCAR",
    "MODELCAR_INIT",
    "QUEUE_PROXY",
    "STORAGE_INITIALIZER",
    "default_resources",
    "modelcar_container",
    "oci_mode",
    "queue_proxy",
    "with_defaults",
    "with_injected",
]
