"""``Target``: one pod spec to judge, as ``workloads.walk`` finds it in a document: the object it belongs to, where
it is, which of the object's templates, how a pod spec an operator builds maps back to the document's fields (what
the mutation may change, where a finding is shown), and how many of its Pods the object runs at once
(``several_pods``, which ``dra-cpu-shared`` reads)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from webhook.core.fieldpath import FieldPath
from webhook.core.kubeversion import DEFAULT, Semantics
from webhook.core.podspec import PodSpec, build_pod_spec, rebase
from webhook.core.resourceblock import Amount, Container
from webhook.core.sizing import Sizing


@dataclass(frozen=True, slots=True)
class Target:
    """One pod spec to judge: the object it belongs to, the path from the document root, the Pod's own
    ``status`` (templates have none), and which template it is when the kind has more than one place for
    them (``spec.replicatedJobs[1] (workers)``; empty for a kind with one fixed template)."""

    kind: str
    name: str
    namespace: str | None
    path: FieldPath
    spec: Mapping[str, Any]
    status: Any = None
    template: str = ""
    root: FieldPath = ()  # where the object is in the document (a List's item): one object, several templates
    # A pod spec an operator builds (``Kind.build``): built-spec paths -> the document's fields a user changes
    # (``webhook.core.operators.Built.fields``, rebased on the document).
    fields: tuple[tuple[FieldPath, FieldPath], ...] = ()
    built: bool = False  # built by an operator: ``spec`` is not in the document, only ``fields`` are
    partial: str = ""  # part of the Pod only: a pass is not the Pod's (``webhook.core.operators.Built.partial``)
    shown: tuple[tuple[FieldPath, FieldPath], ...] = ()  # as ``fields``, to name only (``Built.shown``)
    # built-spec container path -> how the object sets its resources otherwise (``Built.sizing``, rebased)
    sizing: tuple[tuple[FieldPath, Sizing], ...] = ()
    notes: tuple[tuple[FieldPath, str], ...] = ()  # built-spec path -> what a finding there adds (``Built.notes``)
    several: str = ""  # how the object runs several Pods of the template at once (``several_pods``), '' if not known

    def unbase(self, path: FieldPath) -> FieldPath | None:
        """A built target's document ``path`` back in the built spec (the inverse of ``fields``): None where no
        object field makes that part of the Pod (the mutation cannot change it). A literal template's: ``path``."""
        if not self.built:
            return path
        if any(path[:len(shown)] == shown for _, shown in self.shown):  # an injected part, named by a field
            return None
        for prefix, field_path in self.fields:
            if path[:len(field_path)] == field_path:
                return (*prefix, *path[len(field_path):])
        return None

    def in_built(self, path: FieldPath) -> FieldPath:
        """A finding's or change's ``path`` (named by the object's fields) back where it is in the built spec, for
        any part of the Pod: injected ones too (``shown``)."""
        for prefix, named in (*self.shown, *self.fields):
            if path[:len(named)] == named:
                return (*prefix, *path[len(named):])
        return path

    def pod_spec(self, kube: Semantics = DEFAULT, stored: bool = False) -> PodSpec:
        """The pod spec as ``kube``'s API server stores it (``stored``: as it was stored, status included)."""
        spec = build_pod_spec(self.spec, self.path, self.status, self.template, kube, stored,
                              self.fields + self.shown, dict(self.notes))
        if self.sizing:
            spec = _sized(spec, {rebase(built, self.fields + self.shown): how for built, how in self.sizing})
        return replace(spec, several=self.several) if self.several else spec


def _sized(spec: PodSpec, sizing: Mapping[FieldPath, Sizing]) -> PodSpec:
    """``spec`` with each container ``sizing`` names (by its path as findings name it) carrying how it is sized,
    on its resources block, which the rules' advice reads; a value that is both request and limit is where its
    findings are (``Block.at``), the block's own path kept for the mutation (``Target.in_built``)."""
    def one(c: Container) -> Container:
        how = sizing.get(c.path)
        if how is None:
            return c
        block = c.resources
        if how.one_value:
            def moved(amounts: Mapping[str, Amount]) -> dict[str, Amount]:
                return {r: replace(a, path=(*how.one_value, r)) for r, a in amounts.items()}
            block = replace(block, requests=moved(block.requests), limits=moved(block.limits))
        return replace(c, resources=replace(block, sizing=how))
    return replace(spec, containers=tuple(map(one, spec.containers)),
                   init_containers=tuple(map(one, spec.init_containers)))


def _count(obj: Any, *keys: str) -> int:
    """An integer field under ``keys`` (1, its default, when absent or not an integer)."""
    for key in keys:
        obj = obj.get(key) if isinstance(obj, Mapping) else None
    return obj if isinstance(obj, int) and not isinstance(obj, bool) else 1


EVERY_NODE = "its Pod on every node"  # ``several_pods`` of a DaemonSet: its Pods are on different nodes


def several_pods(kind: str, obj: Mapping[str, Any]) -> str:
    """How a built-in controller runs several Pods of its one template at once ('' for one, or a kind whose count
    is not read here): replicas, a Job's parallelism, a DaemonSet's one Pod per node."""
    if kind in ("Deployment", "ReplicaSet", "StatefulSet", "ReplicationController"):
        n = _count(obj, "spec", "replicas")
        return f"its {n} replicas" if n > 1 else ""
    if kind == "Job":
        n = _count(obj, "spec", "parallelism")
        return f"its parallelism {n}" if n > 1 else ""
    if kind == "CronJob":
        n = _count(obj, "spec", "jobTemplate", "spec", "parallelism")
        return f"its jobs' parallelism {n}" if n > 1 else ""
    return EVERY_NODE if kind == "DaemonSet" else ""


__all__ = ["EVERY_NODE", "Target", "several_pods"]
