"""The Pod as the API server stores it and kubelet reads it: containers, init containers and sidecars, the
pod-level ``resources`` block (``webhook.core.podlevel``) and the QoS class.

Built from a raw (JSON-like) pod spec; each container's ``resources`` is read as a ``Block``
(``webhook.core.resourceblock``). Rules walk the ``Block``s that ``PodSpec.blocks`` and ``PodSpec.qos_blocks``
yield, as Pod Security Admission's checks walk ``visitContainers``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.core.dra_requests import pod_claim_sources, pod_claims
from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.kubeversion import DEFAULT, Semantics
from webhook.core.podlevel import dropped_block, pod_level_block
from webhook.core.resourceblock import Block, Container, list_field, mapping_field, read_container
from webhook.core.scheduling import NodeConstraints, node_constraints

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"


@dataclass(frozen=True, slots=True)
class PodSpec:
    path: FieldPath
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    # ``spec.resources`` when present at all, even ``{}``: its presence alone moves the QoS class there.
    pod_level: Block | None = None
    # ``status.qosClass`` as the manifest carries it (Pods only): the API server keeps it on create.
    declared_qos: str | None = None
    # Where the Pod may be scheduled (nodeName, nodeSelector, required node affinity): ``policy.numa: auto``.
    node_constraints: NodeConstraints = field(default_factory=NodeConstraints)
    # ``spec.resourceClaims`` by name: devices allocated through DRA (``webhook.core.dra_requests``).
    resource_claims: tuple[str, ...] = ()
    # each claim's source: name -> (ResourceClaim or ResourceClaimTemplate, its name)
    claim_sources: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # A pod spec an operator builds: where findings about its claims are, and each claim's name -> the object's
    # field that makes it and what a finding adds of that field (``Built.shown``, ``Built.notes``).
    claims_at: FieldPath = ()
    claim_fields: Mapping[str, tuple[FieldPath, str]] = field(default_factory=dict)
    # The Kubernetes minor judged: what its API server stores and its kubelet pins (``webhook.core.kubeversion``).
    kube: Semantics = DEFAULT
    # How the object runs several Pods of this template at once ('its 3 replicas'), '' for one or not known.
    several: str = ""
    # ``spec.resources`` as written where the API server drops it (1.33): decoded first, so a value that is not
    # a quantity is still refused (``invalid-quantity``), though the block decides nothing.
    dropped: Block | None = None

    @property
    def pod_level_decides(self) -> bool:
        """The pod-level block alone decides the QoS class (``ComputePodQOS``): whenever ``spec.resources`` is
        there up to 1.36, even ``{}``; from 1.37 (PodLevelResourcesFixKubeletQOSClass) only when it sets a
        supported resource."""
        level = self.pod_level
        return level is not None and (level.sets_supported or not self.kube.pod_level_qos_needs_set)

    @property
    def pod_level_set(self) -> bool:
        """``IsPodLevelResourcesSet``: kubelet's CPU and Memory Managers skip the Pod (PodLevelResourceManagers
        is off by default in every supported minor)."""
        return self.pod_level is not None and self.pod_level.sets_supported and \
            not self.kube.pod_level_resource_managers

    @property
    def claims_path(self) -> FieldPath:
        """Where a finding about the Pod's claims is: ``spec.resourceClaims``, or the object's field that makes them."""
        return self.claims_at or (*self.path, "resourceClaims")

    def claim_label(self, name: str) -> str:
        """A claim as findings name it: its name, or the object's field that makes it (an operator's hashed name
        would send a reader nowhere)."""
        made = self.claim_fields.get(name)
        return dotted(made[0]) if made is not None else name

    def claims_named(self, names: Sequence[str]) -> str:
        """``names`` as a finding lists them: ``spec.resourceClaims: a, b``; where an operator makes every one, the
        object's fields that make them, each with what it cannot do (``Built.notes``)."""
        if names and all(n in self.claim_fields for n in names):
            return ", ".join(self.claim_label(n) + (f" ({self.claim_fields[n][1]})" if self.claim_fields[n][1] else "")
                             for n in names)
        return f"{dotted(self.path)}.resourceClaims: {', '.join(map(self.claim_label, names))}"

    @property
    def all_containers(self) -> tuple[Container, ...]:
        """Regular then init containers: the set kubelet's QoS computation walks."""
        return self.containers + self.init_containers

    def blocks(self) -> Iterator[Block]:
        """Every resources block: each container's, then the pod-level one."""
        for c in self.all_containers:
            yield c.resources
        if self.pod_level is not None:
            yield self.pod_level

    def qos_blocks(self) -> Iterator[Block]:
        """The blocks that decide the QoS class: the pod-level block alone when it does
        (``pod_level_decides``; ``ComputePodQOS``, pkg/apis/core/helper/qos/qos.go), else every container's."""
        if self.pod_level is not None and self.pod_level_decides:
            yield self.pod_level
        else:
            for c in self.all_containers:
                yield c.resources


def rebase(path: FieldPath, fields: Sequence[tuple[FieldPath, FieldPath]]) -> FieldPath:
    """``path`` in a built pod spec as the object's field a user changes: the first of ``fields`` (built-spec
    prefix -> object field, the longest first) that covers it (``webhook.core.operators.Built.fields``)."""
    for prefix, field_path in fields:
        if path[:len(prefix)] == prefix:
            return (*field_path, *path[len(prefix):])
    return path


def build_pod_spec(spec: Any, path: FieldPath, status: Any = None, template: str = "",
                   kube: Semantics = DEFAULT, stored: bool = False,
                   fields: Sequence[tuple[FieldPath, FieldPath]] = (),
                   notes: Mapping[FieldPath, str] | None = None) -> PodSpec:
    """The pod spec at ``path`` as ``kube``'s API server stores it; ``status`` is a Pod's own ``status``;
    ``template`` names it among its object's several (``webhook.core.target.Target.template``). ``stored``:
    the Pod was read from the API server, so its ``status.qosClass`` is the class the server gave it at
    create, which kubelet reads back (``GetPodQOS``) whatever the minor judging it now. ``fields``: a pod spec
    an operator builds, its containers and claims named by the object's fields (``rebase``), with ``notes``."""
    body = mapping_field(spec, path)
    containers = tuple(
        read_container(c, rebase((*path, "containers", i), fields), init=False, template=template)
        for i, c in enumerate(list_field(body.get("containers"), (*path, "containers")))
    )
    init_containers = tuple(
        read_container(c, rebase((*path, "initContainers", i), fields), init=True, template=template)
        for i, c in enumerate(list_field(body.get("initContainers"), (*path, "initContainers")))
    )
    claims_at: FieldPath = ()
    claim_fields: dict[str, tuple[FieldPath, str]] = {}
    if fields and kube.dra:
        claims_at = rebase((*path, "resourceClaims"), fields)
        for i, claim in enumerate(list_field(body.get("resourceClaims"), (*path, "resourceClaims"))):
            made = rebase((*path, "resourceClaims", i), fields)
            name = claim.get("name") if isinstance(claim, Mapping) else None
            if isinstance(name, str) and made != (*path, "resourceClaims", i):
                claim_fields[name] = (made, (notes or {}).get((*path, "resourceClaims", i), ""))
        claims_at = claims_at if claims_at != (*path, "resourceClaims") else ()
    keeps = stored or kube.keeps_declared_qos
    declared = status.get("qosClass") if isinstance(status, Mapping) and keeps else None
    return PodSpec(
        path=path,
        containers=containers,
        init_containers=init_containers,
        pod_level=pod_level_block(body, path, containers, init_containers, template, kube),
        declared_qos=declared if isinstance(declared, str) and declared else None,
        node_constraints=node_constraints(body, kube.toleration_comparison_operators),
        # DynamicResourceAllocation off (1.33): the API server drops spec.resourceClaims on create.
        resource_claims=pod_claims(body) if kube.dra else (),
        claim_sources=pod_claim_sources(body) if kube.dra else {},
        claims_at=claims_at,
        claim_fields=claim_fields,
        kube=kube,
        dropped=dropped_block(body, path, template, kube),
    )


__all__ = ["BEST_EFFORT", "BURSTABLE", "GUARANTEED", "PodSpec", "build_pod_spec", "rebase"]
