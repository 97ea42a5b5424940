"""Kinds whose Pods a controller builds: the pod spec is not written in the object, the operator makes it from the
object and other objects (KServe merges a ``ServingRuntime``'s container under an ``InferenceService``'s model).
Each such kind has a *builder*, one module per operator here, read from that operator's code at a pinned release
(named in the module and in docs/contract.md).

The interface (all pure; nothing here reads a file or the API server):

- ``Build = Callable[[obj, Related], Iterable[Built | str]]``: set as ``Kind.build`` in
  ``webhook.core.workloads.BUILTIN``. Given the object (a mapping, as decoded) and what else is known, it yields
  one ``Built`` per Pod template the operator would make, or a string saying why one cannot be known (the object
  it needs and what it would take: ``InferenceService spec.predictor: ServingRuntime "x" not in the input; give
  it with the InferenceService, or --kubeconfig``). Unknown is its own answer, never a compliant one: ``check``
  counts the string as skipped (with the reason); the webhook judges nothing it cannot know and warns with it
  (``Unjudged``). A malformed object is a ``ManifestError`` naming the field, as for any kind.
- ``Built``: the pod spec as the operator builds it, where in the object the template is (``path``, from the
  object's root), how a finding names it (``template``: ``spec.predictor (predictor, runtime kserve-sklearn)``),
  and ``fields``: for paths *in the built spec*, the object's field a user changes instead (the model container's
  ``("containers", 0)`` is the object's ``("spec", "predictor", "model")``, so a finding says
  ``spec.predictor.model.resources.limits.cpu``). Prefixes, the longest first; a built path no prefix covers keeps
  ``path + its own``, and the mutation does not change it.
- ``Built.shown``: as ``fields``, for parts of the Pod no object field makes but one causes (a container the
  operator or a webhook injects): findings name that field, the mutation leaves them.
- ``Built.notes``: for a built-spec path ``shown`` names, what a finding there adds about that field (NIM's
  ``claimCreationSpec`` takes no ``matchAttribute``: the way out is another field).
- ``Built.partial``: the builder knows part of the Pod only (KServe's model container when the runtime is not
  known, its own resources fixing every request and limit): a finding there is the Pod's (no other part can undo
  it), a pass is not, so where nothing is found the engine keeps no result and ``check`` counts the reason.
- ``Built.sizing``: for a built container (by its built-spec path) whose resources the object does not write as a
  ``resources`` block of its own, how it sets them (``webhook.core.sizing.Sizing``: one value that is both the
  request and the limit, or no field at all and the way out), so that advice names what the user can write.
- ``Related``: the other objects a builder may read (Kyverno's context entries): from the same input (``check``
  reads every document first) or from the API server (``source="cluster"``: then a kind listed in ``read`` was
  read whole, and an object absent from it does not exist). An object absent from the input may still exist in
  the cluster: the builder says "unknown", naming it. ``NO_RELATED``: nothing known (every builder must answer).

``webhook.core.workloads.walk`` turns a ``Built`` into a ``Target`` (its ``fields`` rebased on the document),
so the engine, ``check``, ``audit`` and the admission layer judge it as any pod template. The changes to the
object (``fix``, ``TargetResult.changes``) are only to what ``fields`` cover (``Target.unbase``: a change to the
object's ``spec.predictor.model.resources`` is one to the built model container's); a part of the Pod no object
field makes (a runtime's own sidecar, an injected proxy) is not changed there, so ``fix`` leaves its findings
(``TargetResult.left_by_fix``). ``mutate`` mode judges the Pods as patched at creation (the webhook is
re-invoked after the other mutating webhooks), every part included (``TargetResult.remaining``). Map only fields
whose value the operator carries into the Pod as it is (a strategic merge's override does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.fieldpath import FieldPath
from webhook.core.resourceblock import ManifestError
from webhook.core.sizing import Sizing

# Where ``Related`` objects come from: said in the builders' reasons.
INPUT = "input"
CLUSTER = "cluster"
# constants.KServeNamespace's default (kserve/kserve v0.20.0 pkg/constants/constants.go: the controller's
# POD_NAMESPACE, else "kserve"); ``policy.kserveNamespace`` names another (``Related.kserve_namespace``).
KSERVE_NAMESPACE = "kserve"


@dataclass(frozen=True, slots=True)
class Built:
    """One Pod template as the operator builds it (see the module docstring)."""

    path: FieldPath  # where in the object the template is, from the object's root (``("spec", "predictor")``)
    spec: Mapping[str, Any]  # the pod spec the operator builds
    template: str  # how findings name it
    fields: tuple[tuple[FieldPath, FieldPath], ...] = ()  # built-spec prefix -> object field (from the root)
    # Part of the Pod only (the rest needs an object not given): its findings are the Pod's, its pass is not; the
    # reason is said instead when it has none.
    partial: str = ""
    # Built-spec prefix -> the object field that makes the operator add it (an injected container: the
    # ``storageUri`` behind a storage initializer), to name it by; never changed by the mutation.
    shown: tuple[tuple[FieldPath, FieldPath], ...] = ()
    # Built-spec container path -> how the object sets its resources when not as its own resources block.
    sizing: tuple[tuple[FieldPath, Sizing], ...] = ()
    # Built-spec path -> what a finding naming it says of the field that makes it (``Built.notes``).
    notes: tuple[tuple[FieldPath, str], ...] = ()


@dataclass(frozen=True, eq=False)
class Related:
    """Other objects a builder may read, by (API group, kind); ``source`` says whence (``INPUT`` or ``CLUSTER``),
    ``read`` which kinds were read whole from the cluster (an object absent from those does not exist);
    ``kserve_namespace`` where KServe runs, so where it reads its own ConfigMaps and presets (a configuration
    fact, set by the caller from ``policy.kserveNamespace``: one of those names elsewhere is any other object);
    ``config_unknown`` why KServe's ``inferenceservice-config`` there is not known ("" known: read, or absent and
    so shipped): the webhook's watch of it not synced or refused, so what KServe builds from it is not judged."""

    objects: Mapping[tuple[str, str], tuple[Mapping[str, Any], ...]]
    source: str = INPUT
    read: frozenset[tuple[str, str]] = frozenset()
    kserve_namespace: str = KSERVE_NAMESPACE
    config_unknown: str = ""

    def of(self, group: str, kind: str, namespace: str | None = None,
           cluster_scoped: bool = False) -> tuple[Mapping[str, Any], ...]:
        """The objects of ``group``/``kind`` (in ``namespace`` unless ``cluster_scoped``; an object without a
        namespace in the input is taken to be in the one asked for, as ``kubectl apply -n`` would put it)."""
        found = self.objects.get((group, kind), ())
        if cluster_scoped:
            return found
        return tuple(o for o in found if _namespace(o) in (None, namespace))

    def named(self, group: str, kind: str, name: str, namespace: str | None = None,
              cluster_scoped: bool = False) -> Mapping[str, Any] | None:
        return next((o for o in self.of(group, kind, namespace, cluster_scoped) if _name(o) == name), None)

    def complete(self, group: str, kind: str) -> bool:
        """Every object of the kind is known (read from the cluster): an absent one does not exist."""
        return self.source == CLUSTER and (group, kind) in self.read

    def where(self) -> str:
        """How a reason names where the objects were looked for."""
        return "the cluster" if self.source == CLUSTER else "the input"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> str | None:
    name = _meta(obj).get("name")
    return name if isinstance(name, str) else None


def _namespace(obj: Mapping[str, Any]) -> str | None:
    namespace = _meta(obj).get("namespace")
    return namespace if isinstance(namespace, str) else None


NO_RELATED = Related({})


class Unjudged(str):
    """A builder's reason as ``workloads.walk`` yields it: part of an object whose Pod is not known, so it is not
    judged. Apart from walk's other strings (a kind with no pod template, a document without a kind), which say
    there is no Pod to judge: the engine keeps these (``ObjectVerdict.unknown``) so the webhook says them."""

    __slots__ = ()


class NoPodHere(str):
    """A builder's word that the object (or a part of it) has no Pod of its own to judge, by design: none runs (a
    stopped LLMInferenceService), or its Pods are another object's, judged when that one is admitted (the
    InferenceService a NIMService writes, the Deployment ModelMesh makes for a predictor). Not ``Unjudged``:
    ``check`` counts it as skipped with the reason, the webhook has nothing to warn about."""

    __slots__ = ()


Build = Callable[[Mapping[str, Any], Related], Iterable[Built | str]]


def collect(objects: Iterable[Any], kinds: Iterable[tuple[str, str]], source: str = INPUT,
            read: Iterable[tuple[str, str]] = ()) -> Related:
    """The objects of ``kinds`` among ``objects`` (recursing into ``kind: List`` items): what ``check`` hands the
    builders from its own input, or the callers that list a cluster from what they listed."""
    wanted = set(kinds)
    found: dict[tuple[str, str], list[Mapping[str, Any]]] = {}

    def visit(obj: Any) -> None:
        if not isinstance(obj, Mapping):
            return
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(obj.get("items"), list):
            for item in obj["items"]:
                visit(item)
            return
        if not isinstance(kind, str) or not isinstance(api_version, str):
            return
        key = (api_version.rpartition("/")[0], kind)
        if key in wanted:
            found.setdefault(key, []).append(obj)

    for obj in objects:
        visit(obj)
    return Related({k: tuple(v) for k, v in found.items()}, source, frozenset(read))


def merge(first: Related, then: Related) -> Related:
    """``first``'s objects, then ``then``'s of another name (the input over the cluster it is applied to): from
    the cluster, with its ``read``, when ``then`` is."""
    out: dict[tuple[str, str], tuple[Mapping[str, Any], ...]] = dict(first.objects)
    for key, objects in then.objects.items():
        have = {(_namespace(o), _name(o)) for o in out.get(key, ())}
        out[key] = (*out.get(key, ()), *(o for o in objects if (_namespace(o), _name(o)) not in have))
    if then.source == CLUSTER:
        return Related(out, CLUSTER, then.read, first.kserve_namespace, then.config_unknown)
    return Related(out, first.source, first.read, first.kserve_namespace, first.config_unknown)


__all__ = ["CLUSTER", "INPUT", "KSERVE_NAMESPACE", "NO_RELATED", "Build", "Built", "NoPodHere", "Related", "Unjudged",
           "collect", "merge"]


def mapping_at(value: Any, path: FieldPath) -> Mapping[str, Any]:
    """An object's field read as a mapping (absent or null: empty); anything else is the object's error, named."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ManifestError(path, "expected a mapping")
    return value


def list_at(value: Any, path: FieldPath) -> list[Any]:
    """An object's field read as a list (absent or null: empty); anything else is the object's error, named."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ManifestError(path, "expected a list")
    return value


def metadata_at(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's ``metadata`` read as a mapping (absent: empty); anything else is the object's error, named."""
    return mapping_at(obj.get("metadata"), ("metadata",))


def annotations_at(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's ``metadata.annotations`` read as a mapping (absent: empty), as ``metadata_at``."""
    return mapping_at(metadata_at(obj).get("annotations"), ("metadata", "annotations"))
