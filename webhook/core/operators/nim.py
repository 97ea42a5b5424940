"""NVIDIA NIM operator's ``NIMService`` as the operator builds its Pods, read from NVIDIA/k8s-nim-operator v3.1.2
(commit f9e3047e0bf40eea8f195d3b73c83432f75d983a).

On the standalone platform (the default) the operator renders a Deployment (``manifests/deployment.yaml``;
``NIMService.GetDeploymentParams``, api/apps/v1alpha1/nimservice_types.go), or with ``spec.multiNode`` a
LeaderWorkerSet (``manifests/lws.yaml``, ``GetLWSParams``). Its one model container (``<name>-ctr``; ``nim-leader``
and ``nim-worker``) has ``spec.resources``' requests and limits as they are; the GPUs the operator adds from a
NIMCache profile when ``spec.resources`` names none (``addGPUResources``) are added to both, equal, so they change
no QoS class. ``GetInitContainers`` and ``GetSidecarContainers`` build a container of each
``spec.initContainers`` and ``spec.sidecarContainers`` entry (and an ``update-ca-certificates`` init container
with ``spec.proxy.certConfigMap``) with no resources at all: ``NIMContainerSpec`` has no field for them, so a
NIMService with any of them runs a Pod that cannot be Guaranteed. With ``spec.inferencePlatform: kserve`` the
operator writes a KServe InferenceService instead, judged as KServe builds it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.fieldpath import FieldPath
from webhook.core.operators import Built, NoPodHere, Related, mapping_at, metadata_at
from webhook.core.podspec import ManifestError

GROUP = "apps.nvidia.com"
KIND = "NIMService"
PROXY_INIT = "update-ca-certificates"
NO_RESOURCES = "NIM gives its init and sidecar containers no resources"



def _named(spec: Mapping[str, Any], key: str) -> list[str]:
    """The names of ``spec.initContainers`` or ``spec.sidecarContainers`` (NIMContainerSpec)."""
    items = spec.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        raise ManifestError(("spec", key), "expected a list")
    names = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ManifestError(("spec", key, i), "expected a mapping")
        names.append(str(item.get("name") or f"{key}[{i}]"))
    return names


def build(obj: Mapping[str, Any], related: Related) -> Iterator[Built | str]:
    """The Deployment's pod spec, or the LeaderWorkerSet's leader and worker; why none where the operator
    writes a KServe InferenceService."""
    spec = mapping_at(obj.get("spec"), ("spec",))
    if not spec:
        return
    if spec.get("inferencePlatform") == "kserve":
        yield NoPodHere(f"{KIND} with spec.inferencePlatform: kserve (the operator writes a KServe InferenceService "
                        "from it: judged as the InferenceService and Pods KServe creates)")
        return
    meta = metadata_at(obj)
    resources = mapping_at(spec.get("resources"), ("spec", "resources"))
    kept = {k: resources[k] for k in ("requests", "limits") if k in resources}  # GetResources: claims dropped
    proxy = mapping_at(spec.get("proxy"), ("spec", "proxy"))
    init = ([PROXY_INIT] if proxy.get("certConfigMap") else []) + _named(spec, "initContainers")
    sidecars = _named(spec, "sidecarContainers")
    pod: dict[str, Any] = {key: spec[key] for key in ("runtimeClassName", "schedulerName") if spec.get(key)}
    if init:
        pod["initContainers"] = [{"name": n} for n in init]
    note = f"; {NO_RESOURCES}" if init or sidecars else ""
    fields: tuple[tuple[FieldPath, FieldPath], ...] = ((("containers", 0), ("spec",)),)
    if spec.get("multiNode") is None:
        main = {"name": f"{meta.get('name') or 'nimservice'}-ctr", "resources": kept}
        yield Built(("spec",), {**pod, "containers": [main, *({"name": n} for n in sidecars)]},
                    f"spec (Deployment{note})", fields)
        return
    for role in ("leader", "worker"):
        main = {"name": f"nim-{role}", "resources": kept}
        yield Built(("spec",), {**pod, "containers": [main, *({"name": n} for n in sidecars)]},
                    f"spec ({role}{note})", fields)


__all__ = ["GROUP", "KIND", "build"]
