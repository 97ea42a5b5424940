"""NVIDIA NIM operator's ``NIMService`` as the operator builds its Pods, read from NVIDIA/k8s-nim-operator v3.1.2
(commit f9e3047e0bf40eea8f195d3b73c83432f75d983a).

On the standalone platform (the default) the operator renders a Deployment (``manifests/deployment.yaml``;
``NIMService.GetDeploymentParams``, api/apps/v1alpha1/nimservice_types.go), or, when ``IsMultiNode``
(``spec.multiNode.parallelism.pipeline`` above 1), a LeaderWorkerSet (``manifests/lws.yaml``, ``GetLWSParams``).
Its one model container (``<name>-ctr``; ``nim-leader`` and ``nim-worker``) has ``spec.resources``' requests and
limits as they are; the GPUs the operator adds from a NIMCache profile when ``spec.resources`` names none
(``addGPUResources``) are added to both, equal, so they change no QoS class. The Deployment carries
``runtimeClassName``, ``schedulerName``, ``affinity``, ``nodeSelector`` and ``tolerations``; the LeaderWorkerSet's
templates ``nodeSelector`` and ``tolerations``, and ``schedulerName`` on the leader only. ``spec.draResources``
become pod claims that every non-init container takes (``nim_dra``). ``GetInitContainers`` and
``GetSidecarContainers`` build a container of each ``spec.initContainers`` and ``spec.sidecarContainers`` entry
(and an ``update-ca-certificates`` init container with ``spec.proxy.certConfigMap``) with no resources at all:
``NIMContainerSpec`` has no field for them, so a NIMService with any of them runs a Pod that cannot be
Guaranteed; so is the endpoint picker's Deployment ``spec.expose.router.eppConfig`` makes. With
``spec.inferencePlatform: kserve`` the operator writes a KServe InferenceService instead, judged as KServe builds
it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.fieldpath import FieldPath
from webhook.core.operators import Built, NoPodHere, Related, list_at, mapping_at, metadata_at
from webhook.core.operators.nim_dra import pod_claims, with_claims
from webhook.core.resourceblock import ManifestError
from webhook.core.sizing import Sizing

GROUP = "apps.nvidia.com"
KIND = "NIMService"
PROXY_INIT = "update-ca-certificates"
EPP = ("spec", "expose", "router", "eppConfig")
EPP_NOTE = "EPP Deployment; NIM gives it no resources"
# NIMContainerSpec (common_types.go:501-514) has no resources field: the advice for a container made of one, or
# added for spec.proxy.certConfigMap, is removing what makes it (``Built.sizing``).
# The way out first, so the caps (a warning's 120 characters, a refusal line's 360) keep it.
_WAY_OUT = ("{remove}, or exempt the namespace (exemptions.namespaces): no field of the NIMService sets its "
            "resources ({why})")
ENTRY = Sizing(way_out=_WAY_OUT.format(why="a NIMContainerSpec has none", remove="remove the entry"))
CERTS = Sizing(way_out=_WAY_OUT.format(why="NIM adds it for the proxy's CA certificates",
                                       remove="remove spec.proxy.certConfigMap"))
EPP_SIZING = Sizing(way_out=_WAY_OUT.format(why="none in a NIMContainerSpec; its refusal also stops the model's",
                                            remove="remove spec.expose.router.eppConfig"))


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


def _multi_node(spec: Mapping[str, Any]) -> bool:
    """``IsMultiNode``: ``spec.multiNode.parallelism.pipeline`` above 1 (unset is 0); ``backendType`` can only be
    ``lws``. A multiNode with pipeline 1 (tensor parallelism only) is the Deployment."""
    multi = mapping_at(spec.get("multiNode"), ("spec", "multiNode"))
    parallelism = mapping_at(multi.get("parallelism"), ("spec", "multiNode", "parallelism"))
    pipeline = parallelism.get("pipeline")
    return isinstance(pipeline, int) and not isinstance(pipeline, bool) and pipeline > 1


def _tolerations(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``spec.tolerations`` as both templates render them: key, operator, value and effect only."""
    out = []
    for i, raw in enumerate(list_at(spec.get("tolerations"), ("spec", "tolerations"))):
        toleration = mapping_at(raw, ("spec", "tolerations", i))
        out.append({k: toleration[k] for k in ("key", "operator", "value", "effect") if k in toleration})
    return out


def _placement(spec: Mapping[str, Any], role: str) -> dict[str, Any]:
    """The pod-level fields each template renders: the Deployment (deployment.yaml) schedulerName,
    runtimeClassName, affinity, nodeSelector and tolerations; the LeaderWorkerSet (lws.yaml) nodeSelector and
    tolerations, and schedulerName on the leader only, though ``GetLWSParams`` sets all but affinity."""
    keys = {"Deployment": ("schedulerName", "runtimeClassName", "affinity", "nodeSelector"),
            "leader": ("schedulerName", "nodeSelector"), "worker": ("nodeSelector",)}[role]
    pod: dict[str, Any] = {k: spec[k] for k in keys if spec.get(k)}
    if tolerations := _tolerations(spec):
        pod["tolerations"] = tolerations
    return pod


def _epp(spec: Mapping[str, Any]) -> Built | None:
    """``reconcileEPP`` (standalone/nimservice.go), run before the model workload: with
    ``spec.expose.router.eppConfig`` a Deployment ``<name>-epp`` of one container ``epp`` with no resources
    (``GetEPPDeploymentParams``), named by ``eppConfig.containerSpec`` (a NIMContainerSpec). Refused, it keeps the
    operator from making the model's Pods too."""
    expose = mapping_at(spec.get("expose"), EPP[:2])
    if mapping_at(expose.get("router"), EPP[:3]).get("eppConfig") is None:
        return None
    return Built(EPP, {"containers": [{"name": "epp"}]}, f"{'.'.join(EPP)} ({EPP_NOTE})",
                 shown=((("containers", 0), (*EPP, "containerSpec")),), sizing=((("containers", 0), EPP_SIZING),))


def build(obj: Mapping[str, Any], related: Related) -> Iterator[Built | str]:
    """The EPP Deployment's pod spec if any, then the Deployment's, or the LeaderWorkerSet's leader and worker;
    why none where the operator writes a KServe InferenceService."""
    spec = mapping_at(obj.get("spec"), ("spec",))
    if not spec:
        return
    if spec.get("inferencePlatform") == "kserve":
        yield NoPodHere(f"{KIND} with spec.inferencePlatform: kserve (the operator writes a KServe InferenceService "
                        "from it: judged as the InferenceService and Pods KServe creates)")
        return
    if (epp := _epp(spec)) is not None:
        yield epp
    name = str(metadata_at(obj).get("name") or "nimservice")
    resources = mapping_at(spec.get("resources"), ("spec", "resources"))
    kept = {k: resources[k] for k in ("requests", "limits") if k in resources}  # GetResources: claims dropped
    proxy = mapping_at(spec.get("proxy"), ("spec", "proxy"))
    injected = [PROXY_INIT] if proxy.get("certConfigMap") else []
    init = injected + _named(spec, "initContainers")
    sidecars = _named(spec, "sidecarContainers")
    # Findings name the field behind each container: NIMContainerSpec, so no resources can be set there.
    shown: list[tuple[FieldPath, FieldPath]] = [(("initContainers", 0), ("spec", "proxy", "certConfigMap"))] \
        if injected else []
    shown += [(("initContainers", len(injected) + i), ("spec", "initContainers", i))
              for i in range(len(init) - len(injected))]
    shown += [(("containers", 1 + j), ("spec", "sidecarContainers", j)) for j in range(len(sidecars))]
    # none of them has a resources field to set (NIMContainerSpec): the advice is what makes them
    sizing = tuple((built, CERTS if field == ("spec", "proxy", "certConfigMap") else ENTRY) for built, field in shown)
    multi = _multi_node(spec)
    claims = pod_claims(spec, name, multi)
    # each pod claim is named by the entry that makes it, the list by draResources (or the compute domain alone)
    shown += [(("resourceClaims", i), field) for i, (_, _, field, _) in enumerate(claims)]
    if claims:
        shown.append((("resourceClaims",), claims[0][2][:2] if claims[0][2][1] == "draResources" else claims[0][2]))
    notes = tuple((("resourceClaims", i), note) for i, (*_, note) in enumerate(claims) if note)
    fields: tuple[tuple[FieldPath, FieldPath], ...] = ((("containers", 0), ("spec",)),)
    roles = (("leader", "nim-leader"), ("worker", "nim-worker")) if multi else (("Deployment", f"{name}-ctr"),)
    for role, main in roles:
        pod = _placement(spec, role)
        if init:
            pod["initContainers"] = [{"name": n} for n in init]
        containers: list[dict[str, Any]] = [{"name": main, "resources": dict(kept)}, *({"name": n} for n in sidecars)]
        if claims:
            pod["resourceClaims"] = [dict(c) for c, *_ in claims]
            with_claims(containers, claims)
        yield Built(("spec",), {**pod, "containers": containers}, f"spec ({role})", fields,
                    shown=tuple(shown), sizing=sizing, notes=notes)


__all__ = ["GROUP", "KIND", "build"]
