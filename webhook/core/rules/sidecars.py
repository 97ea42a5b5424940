"""Containers beside the workload's own, and the service-mesh proxies among them: what the rules' messages say
so that the fix happens at the source.

A sidecar (an init container, a native sidecar, any container after the first, or a known mesh proxy) may be
the one container that should share CPUs: ``policy.fractionalCPUContainers`` lets it, and only it, keep a
fractional cpu while the Pod's other containers stay pinned (the static CPU Manager sizes each container on
its own). A mesh injector sets its proxy's resources from the Pod's annotations, so editing the injected
container is lost at the next injection: the message names the annotations instead. Names as upstream spells
them: Istio's injection template (``sidecar.istio.io/proxyCPU``, ``proxyCPULimit``, ``proxyMemory``,
``proxyMemoryLimit`` on the ``istio-proxy`` container), Linkerd's ``pkg/k8s/labels.go``
(``config.linkerd.io/proxy-cpu-request``, ``-cpu-limit``, ``-memory-request``, ``-memory-limit`` on
``linkerd-proxy``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.resourceblock import CPU, MEMORY, Block
from webhook.core.rules.base import Text, cel_string


@dataclass(frozen=True, slots=True)
class Mesh:
    name: str
    annotations: Mapping[str, tuple[str, str]]  # resource -> (request annotation, limit annotation)
    where: str = "the Pod annotations"  # where those keys are set
    also: str = ""  # another way out, said after the keys
    # field name -> another way out, said when an operator's finding names the container by that field (the field
    # that makes the operator inject it: ``Built.shown``), never for a Pod's own container
    caused: Mapping[str, str] = field(default_factory=dict)


# Knative's queue-proxy: the revision annotations (knative/serving, pkg/apis/serving/register.go; KServe carries an
# InferenceService's annotations to its revision) or, for every revision, config-deployment's queue-sidecar-* keys.
_KNATIVE = "queue.sidecar.serving.knative.dev/{}-resource-{}"
_KNATIVE_WHERE = ("the annotations (or config-deployment's queue-sidecar-{resource}-request and "
                  "queue-sidecar-{resource}-limit in knative-serving, for every revision)")
# KServe's storage-initializer: the ClusterStorageContainer's spec.container.resources, or inferenceservice-config's
# storageInitializer keys (kserve v0.20.0 storage_initializer_injector.go).
_KSERVE_WHERE = "the ClusterStorageContainer's spec.container.resources or inferenceservice-config storageInitializer"


MESH_PROXIES: dict[str, Mesh] = {
    "istio-proxy": Mesh("Istio", {CPU: ("sidecar.istio.io/proxyCPU", "sidecar.istio.io/proxyCPULimit"),
                                  MEMORY: ("sidecar.istio.io/proxyMemory", "sidecar.istio.io/proxyMemoryLimit")}),
    "linkerd-proxy": Mesh("Linkerd", {CPU: ("config.linkerd.io/proxy-cpu-request", "config.linkerd.io/proxy-cpu-limit"),
                                      MEMORY: ("config.linkerd.io/proxy-memory-request",
                                               "config.linkerd.io/proxy-memory-limit")}),
    "queue-proxy": Mesh("Knative", {CPU: (_KNATIVE.format("cpu", "request"), _KNATIVE.format("cpu", "limit")),
                                    MEMORY: (_KNATIVE.format("memory", "request"),
                                             _KNATIVE.format("memory", "limit"))}, _KNATIVE_WHERE),
    "storage-initializer": Mesh("KServe", {CPU: ("cpuRequest", "cpuLimit"),
                                           MEMORY: ("memoryRequest", "memoryLimit")}, _KSERVE_WHERE),
    # KServe's agent: for a model with no storage (IsMMSPredictor, named by its missing storageUri) the cheaper way
    # out is the model's storage; for a logger or batcher only the agent's keys.
    "agent": Mesh("KServe", {CPU: ("cpuRequest", "cpuLimit"), MEMORY: ("memoryRequest", "memoryLimit")},
                  "inferenceservice-config agent",
                  caused={"storageUri": "; or give the model its storage (its storageUri or storage, or the "
                                        "predictor's storageUris): KServe then takes it for one model and injects "
                                        "no agent (a pvc:// URI adds no container; other schemes add the "
                                        "storage-initializer)"}),
    # KServe's OCI modelcar (kserve v0.20.0 utils/storage.go CreateModelcarContainer, CreateModelcarInitContainer):
    # one key is both its request and its limit.
    **{name: Mesh("KServe", {CPU: ("cpuModelcar", "cpuModelcar"), MEMORY: ("memoryModelcar", "memoryModelcar")},
                  "inferenceservice-config storageInitializer",
                  "; or name the model by an oci+native:// URI (an image volume, no container)")
       for name in ("modelcar", "modelcar-init")},
}

# A container an operator builds whose resources the object sets otherwise (``Block.sizing``, from the builder):
# one key that is both its request and its limit, or no field at all (the builder's way out).
ONE_VALUE = Text("set {field} (request and limit)")  # short: the line keeps the value to use and the way out


def sized(block: Block, resource: str, then: str = "") -> str | None:
    """The advice for ``resource`` of a container an operator builds and the object does not size by a resources
    block of its own (``webhook.core.sizing``), said instead of "set resources..." (``then`` follows the field
    that sizes it: which values); None for any other."""
    how = block.sizing
    if how is None:
        return None
    return how.way_out or ONE_VALUE(field=dotted((*how.one_value, resource))) + then


SHARE = Text("; or let this container alone share CPUs (the others stay pinned): add {name} to "
             "policy.fractionalCPUContainers")
MESH = Text("; {mesh} injects this container: set its {resource} with {where} {request} and {limit} "
            "(both to the same value)")
MESH_ONE = Text("; {mesh} injects this container: set its {resource} (request and limit) with {where} {request}")


def is_sidecar(index: int, name: str, init: bool) -> bool:
    """Not the workload's main container: any init or native sidecar container, any container after the
    first, or a mesh proxy wherever the injector put it (Istio puts it first to hold the application)."""
    return init or index > 0 or name in MESH_PROXIES


def share_hint(name: str | None, is_sidecar: bool) -> str:
    return SHARE(name=name) if is_sidecar and name else ""


def mesh_hint(name: str | None, resource: str, block: FieldPath = ()) -> str:
    """How the injector of container ``name`` sets its ``resource``; ``block``, the container's resources as a
    finding names them (for an injected one, ``<the field that causes it>.resources``), may add a way out."""
    mesh = MESH_PROXIES.get(name or "")
    if mesh is None or resource not in mesh.annotations:
        return ""
    request, limit = mesh.annotations[resource]
    where = mesh.where.format(resource=resource)
    cause = block[-2] if len(block) >= 2 and block[-1] == "resources" else None
    also = mesh.also + (mesh.caused.get(cause, "") if isinstance(cause, str) else "")
    if request == limit:
        return MESH_ONE(mesh=mesh.name, resource=resource, where=where, request=request) + also
    return MESH(mesh=mesh.name, resource=resource, where=where, request=request, limit=limit) + also


def share_hint_cel(block: str) -> str:
    """``share_hint`` in CEL, for a block record with ``name`` and ``sidecar`` (webhook.core.rules.cel)."""
    return f"({block}.sidecar && {block}.name != '' ? {SHARE.cel(name=f'{block}.name')} : '')"


def mesh_hint_cel(name: str, resource: str) -> str:
    """``mesh_hint`` in CEL: the same sentences, chosen by the container name and resource expressions."""
    out = "''"
    for proxy, mesh in reversed(MESH_PROXIES.items()):
        by_resource = "''"
        for res in reversed(list(mesh.annotations)):
            by_resource = f"{resource} == {cel_string(res)} ? {cel_string(mesh_hint(proxy, res))} : {by_resource}"
        out = f"{name} == {cel_string(proxy)} ? ({by_resource}) : {out}"
    return f"({out})"


__all__ = ["MESH_PROXIES", "ONE_VALUE", "Mesh", "is_sidecar", "mesh_hint", "mesh_hint_cel", "share_hint",
           "share_hint_cel", "sized"]
