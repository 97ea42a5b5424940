"""The kinds qos-guard judges and where each keeps its Pod templates; every other kind is ignored.

``KINDS`` is the one table of judged kinds, keyed by (API group, kind) as the API server knows them: the
engine finds pod specs by it, ``audit`` lists by it, the admission layer decides what it judges by it, the
generated admission policies read each template path from it and the chart's webhook rules and RBAC are
generated from it. Workloads are judged by their Pod templates so that ``kubectl apply`` of a bad Deployment
(or LeaderWorkerSet, JobSet, RayCluster...) fails at once instead of its Pods failing later, one by one, in a
controller's events.

A kind is matched by its ``apiVersion``'s group and its ``kind``, never by ``kind`` alone: ``apiVersion:
example.com/v1, kind: Deployment`` is not a Deployment (counted as skipped, ``Deployment of example.com/v1``).
A document naming a judged kind without ``apiVersion`` is an error: ``kubectl apply`` refuses it ("apiVersion
not set"), so no verdict on it could match what the cluster does.

Template paths (``webhook.core.templatepaths``) are dotted field names with two wildcards: ``[*]`` for every item
of a list (``spec.replicatedJobs[*].template.spec.template.spec``) and ``*`` for every value of a map
(``spec.pytorchReplicaSpecs.*.template.spec``). A kind whose Pods an operator builds has a builder instead
(``Kind.build``, ``webhook.core.operators``). Users declare more kinds in the configuration
(``workloads``, ``webhook.core.config``); ``table(extra)`` is the built-in table with them. Each pod spec ``walk``
finds is a ``Target`` (``webhook.core.target``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from webhook.core.claims import CLAIM_KINDS, ClaimKind, claim_kind, claim_spec
from webhook.core.fieldpath import FieldPath, Segment
from webhook.core.operators import NO_RELATED, Build, NoPodHere, Related, Unjudged, llmisvc, nim, vllmruntime
from webhook.core.operators.kserve import COMPONENTS, GROUP
from webhook.core.operators.kserve import RELATED as KSERVE_RELATED
from webhook.core.operators.kserve import build as kserve_build
from webhook.core.resourceblock import ManifestError
from webhook.core.target import Target, several_pods
from webhook.core.templatepaths import (
    LIST,
    LWS_SIZE_ONE,
    MAP,
    PathError,
    Template,
    parse_path,
    role,
    template_label,
    unused,
    walk_template,
)

POD = "Pod"
@dataclass(frozen=True, slots=True)
class Kind:
    """A judged kind: its API group, the versions judged (the first is listed by ``audit``), plural (as
    discovery names them), where its pod specs are, and whether it controls Pods (then ``audit`` reports its
    Pods, and the objects it creates, through it).

    ``operations`` are the requests judged on the object itself, ``subresources`` the judged subresource
    requests (a Pod is judged once, when created; a template on every change; a Pod's resize too).
    ``declared``: from the configuration's ``workloads``, not built in.

    ``build``: the kind's Pods are built by its operator, not held as literal templates: the builder
    (``webhook.core.operators``) yields them, reading the ``related`` kinds ((group, kind) pairs) from the same
    input or the cluster; ``templates`` are then where the object's own pod-spec fields are (for the docs' table),
    not read by the engine."""

    kind: str
    group: str
    versions: tuple[str, ...]
    plural: str
    templates: tuple[Template, ...]
    controller: bool = True
    operations: tuple[str, ...] = ("CREATE", "UPDATE")
    subresources: tuple[tuple[str, str], ...] = ()
    declared: bool = False
    build: Build | None = field(default=None, compare=False)
    related: tuple[tuple[str, str], ...] = ()
    # Namespaced (the webhook judges it by its namespace's mode label); a cluster-scoped kind (KServe's
    # ClusterServingRuntime) is judged by check and audit only, and listed by audit across all namespaces only.
    namespaced: bool = True

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.kind)

    @property
    def api_version(self) -> str:
        """The apiVersion ``audit`` lists it at."""
        return f"{self.group}/{self.versions[0]}" if self.group else self.versions[0]

    @property
    def core(self) -> bool:
        """One of the nine kinds Kubernetes itself serves (their admission requests have a fixed shape)."""
        return not self.declared and self.group in _CORE_GROUPS

    @property
    def single(self) -> bool:
        """One pod spec at a fixed place: its findings need no template named."""
        return len(self.templates) == 1 and not self.templates[0].wild


_CORE_GROUPS = frozenset({"", "apps", "batch"})


def _k(kind: str, group: str, versions: str, plural: str, *paths: str | tuple[str, str] | Template,
       controller: bool = True) -> Kind:
    templates = tuple(p if isinstance(p, Template) else Template(*((p,) if isinstance(p, str) else p)) for p in paths)
    return Kind(kind, group, tuple(versions.split(",")), plural, templates, controller)


_T = "spec.template.spec"


def _ray(prefix: str) -> tuple[tuple[str, str], str]:
    return ((f"{prefix}headGroupSpec.template.spec", "head"), f"{prefix}workerGroupSpecs[*].template.spec")


def _kubeflow(kind: str, replicas: str, versions: str = "v1") -> Kind:
    return _k(kind, "kubeflow.org", versions, kind.lower() + "s", f"spec.{replicas}ReplicaSpecs.*.template.spec")


BUILTIN: tuple[Kind, ...] = (
    Kind(POD, "", ("v1",), "pods", (Template("spec"),), False, ("CREATE",), (("resize", "UPDATE"),)),
    _k("ReplicationController", "", "v1", "replicationcontrollers", _T),
    _k("PodTemplate", "", "v1", "podtemplates", "template.spec", controller=False),
    _k("Deployment", "apps", "v1", "deployments", _T),
    _k("ReplicaSet", "apps", "v1", "replicasets", _T),
    _k("StatefulSet", "apps", "v1", "statefulsets", _T),
    _k("DaemonSet", "apps", "v1", "daemonsets", _T),
    _k("Job", "batch", "v1", "jobs", _T),
    _k("CronJob", "batch", "v1", "cronjobs", "spec.jobTemplate.spec.template.spec"),
    # sigs.k8s.io/lws v0.7.0: no leader template: the leader uses the worker's; with one and size 1, no worker runs.
    _k("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets",
       ("spec.leaderWorkerTemplate.leaderTemplate.spec", "leader"),
       Template("spec.leaderWorkerTemplate.workerTemplate.spec", "worker", LWS_SIZE_ONE)),
    # sigs.k8s.io/lws v0.10.0 (DisaggregatedSet is new in v0.9.0): each role is a LeaderWorkerSet's metadata and
    # spec inline (LeaderWorkerSetTemplateSpec); the controller makes one LeaderWorkerSet per role and slice from
    # them, adding labels, annotations and (with spec.placementPolicy) affinities only (lws_manager.go).
    _k("DisaggregatedSet", "disaggregatedset.x-k8s.io", "v1", "disaggregatedsets",
       ("spec.roles[*].spec.leaderWorkerTemplate.leaderTemplate.spec", "leader"),
       Template("spec.roles[*].spec.leaderWorkerTemplate.workerTemplate.spec", "worker", LWS_SIZE_ONE)),
    # sigs.k8s.io/jobset v0.12.0
    _k("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", "spec.replicatedJobs[*].template.spec.template.spec"),
    # github.com/ray-project/kuberay v1.7.0 (v1alpha1 is still served, the same fields)
    _k("RayCluster", "ray.io", "v1,v1alpha1", "rayclusters", *_ray("spec.")),
    _k("RayService", "ray.io", "v1,v1alpha1", "rayservices", *_ray("spec.rayClusterConfig.")),
    _k("RayJob", "ray.io", "v1,v1alpha1", "rayjobs", *_ray("spec.rayClusterSpec.")),
    # KServe (webhook.core.operators.kserve): its Pods built from the InferenceService and a ServingRuntime.
    Kind("InferenceService", GROUP, ("v1beta1",), "inferenceservices",
         (*(Template(f"spec.{c}", c) for c in COMPONENTS), Template("spec.canary[*].predictor", "canary")),
         controller=False, build=kserve_build,
         related=KSERVE_RELATED),
    # KServe v0.20.0 ServingRuntimePodSpec: the containers every model it serves runs (with the model's resources
    # over its kserve-container's), and a multi-node runtime's workers.
    _k("ServingRuntime", GROUP, "v1alpha1", "servingruntimes", ("spec", "runtime"), ("spec.workerSpec", "worker"),
       controller=False),
    replace(_k("ClusterServingRuntime", GROUP, "v1alpha1", "clusterservingruntimes", ("spec", "runtime"),
               ("spec.workerSpec", "worker"), controller=False), namespaced=False),
    # KServe's LLMInferenceService (webhook.core.operators.llmisvc): its Pods built from the object over KServe's
    # presets and its baseRefs' LLMInferenceServiceConfigs. Not a controller for audit: the Deployments and
    # LeaderWorkerSets KServe creates are judged themselves.
    Kind(llmisvc.KIND, llmisvc.GROUP, ("v1alpha2", "v1alpha1"), "llminferenceservices",
         tuple(Template(f"spec.{'.'.join(at)}", name) for at, name in llmisvc.TEMPLATES), controller=False,
         build=llmisvc.build, related=llmisvc.RELATED),
    # NVIDIA NIM operator v3.1.2 (webhook.core.operators.nim): a Deployment (or with spec.multiNode a
    # LeaderWorkerSet) whose model container has spec.resources. Not a controller for audit: those are judged.
    Kind(nim.KIND, nim.GROUP, ("v1alpha1",), "nimservices", (Template("spec", "NIM's pod"),), controller=False,
         build=nim.build),
    # vLLM production-stack's operator (webhook.core.operators.vllmruntime): one Deployment from
    # spec.deploymentConfig. Not a controller for audit: the Deployment is judged.
    Kind(vllmruntime.KIND, vllmruntime.GROUP, ("v1alpha1",), "vllmruntimes",
         (Template("spec.deploymentConfig", "Deployment"),), controller=False, build=vllmruntime.build),
    # Argo Rollouts: spec.template (a Rollout with spec.workloadRef has none: its Deployment is judged).
    _k("Rollout", "argoproj.io", "v1alpha1", "rollouts", _T),
    # Kubeflow training-operator v1 (MPIJob also as mpi-operator's v2beta1)
    _kubeflow("PyTorchJob", "pytorch"),
    _kubeflow("TFJob", "tf"),
    _kubeflow("MPIJob", "mpi", "v2beta1,v1"),
    _kubeflow("XGBoostJob", "xgb"),
    _kubeflow("PaddleJob", "paddle"),
    _kubeflow("JAXJob", "jax"),
)

KINDS: dict[tuple[str, str], Kind] = {k.key: k for k in BUILTIN}
# Kinds that hold Pod parts but are not judged themselves, with why (``check`` says it in its skipped summary).
NOT_JUDGED: dict[tuple[str, str], str] = {
    (llmisvc.GROUP, "LLMInferenceServiceConfig"):
        "LLMInferenceServiceConfig (its pod specs are merged under the LLMInferenceServices that name it in "
        "spec.baseRefs, or take it as KServe's preset: judged there, given with them)",
    (nim.GROUP, "NIMCache"):
        "NIMCache (the NIM operator runs its model-caching Job from it: not judged here; that Job and its Pods are)",
}
CONTROLLERS = frozenset(k.key for k in KINDS.values() if k.controller)


@lru_cache(maxsize=8)
def table(extra: tuple[Kind, ...] = ()) -> dict[tuple[str, str], Kind]:
    """The judged kinds: the built-in ones and ``extra`` (declared in the configuration; never replacing a
    built-in one, which ``webhook.core.config`` refuses)."""
    if not extra:
        return KINDS
    return {**KINDS, **{k.key: k for k in extra}}


def group_of(api_version: Any) -> str | None:
    """The API group of ``apiVersion`` (``apps/v1`` -> ``apps``, ``v1`` -> the core group ``""``); None when
    it is missing or not a string."""
    if not isinstance(api_version, str) or not api_version:
        return None
    return api_version.rpartition("/")[0]


def find_kind(obj: Mapping[str, Any], kinds: Mapping[tuple[str, str], Kind] = KINDS) -> Kind | None:
    group = group_of(obj.get("apiVersion"))
    kind = obj.get("kind")
    if group is None or not isinstance(kind, str):
        return None
    return kinds.get((group, kind))


def _meta(obj: Mapping[str, Any], where: FieldPath) -> tuple[str, str | None]:
    meta = obj.get("metadata")
    if meta is None:
        return "<unnamed>", None
    if not isinstance(meta, Mapping):
        raise ManifestError((*where, "metadata"), "expected a mapping")
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    namespace = meta.get("namespace")
    return str(name), str(namespace) if namespace is not None else None


def walk(obj: Any, where: FieldPath = (), kinds: Mapping[tuple[str, str], Kind] = KINDS,
         related: Related = NO_RELATED) -> Iterator[Target | str]:
    """Each object in ``obj`` (recursing into ``kind: List`` items): each of its pod specs as a ``Target``,
    or why it has none to judge (its kind, ``document without a kind``, ``KIND without a pod template``,
    ``KIND without apiVersion``), so that ``check`` can count what it passed over instead of passing over it
    silently; a DRA claim's claim spec is a ``Target`` too (``webhook.core.claims``). A judged kind's name
    without ``apiVersion`` is a ``ManifestError``. A kind its operator builds (``Kind.build``) yields what its
    builder yields, reading ``related`` (a reason where the builder cannot know: ``Unjudged``; ``NoPodHere``
    where there is nothing of its own to judge)."""
    if not isinstance(obj, Mapping):
        return
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        yield "document without a kind"
        return
    if kind.endswith("List") and "items" in obj:
        items = obj.get("items")
        if items is None:
            return
        if not isinstance(items, list):
            raise ManifestError((*where, "items"), "expected a list")
        for i, item in enumerate(items):
            yield from walk(item, (*where, "items", i), kinds, related)
        return
    group = group_of(obj.get("apiVersion"))
    if group is None:
        same = [k.api_version for k in kinds.values() if k.kind == kind]
        same += [c.api_version for c in CLAIM_KINDS.values() if c.kind == kind]
        if not same:
            yield kind
            return
        # kubectl apply refuses it ("apiVersion not set"), so the API server never sees it: an error, never a
        # verdict on a kind guessed from the name alone.
        hint = " or ".join(same)
        written = obj.get("apiVersion")
        unset = written is None or written == ""
        what = "not set" if unset else f"{json.dumps(written, default=str)} is not a string"
        raise ManifestError((*where, "apiVersion"), f"{what}, so kubectl apply refuses the {kind}; "
                                                    f"{'add' if unset else 'use'} apiVersion: {hint}")
    known = kinds.get((group, kind))
    claim = claim_kind(obj) if known is None else None
    if claim is not None:  # DRA's claims: their claim spec, judged whole (``webhook.core.claims``)
        claimed = claim_spec(obj, claim, where)
        if isinstance(claimed, str):
            yield claimed
        else:
            yield Target(claim.kind, *_meta(obj, where), *claimed, root=where)
        return
    if known is None:
        noted = NOT_JUDGED.get((group, kind))
        yield noted or (kind if not any(k == kind for _, k in kinds) else f"{kind} of {obj.get('apiVersion')}")
        return
    name, namespace = _meta(obj, where)
    if known.build is not None:
        yield from _built(known, obj, where, name, namespace, related)
        return
    found = False
    for template in known.templates:
        for path, spec, item_name in walk_template(obj, template.segments, where, None):
            if spec is None or unused(template, obj, path[len(where):]):
                continue
            found = True
            yield Target(known.kind, name, namespace, path, spec, obj.get("status") if kind == POD else None,
                         template_label(template, path[len(where):], item_name, known.single,
                                        role(known.templates, template)), where, several=several_pods(kind, obj))
    if not found:
        yield f"{kind} without a pod template"  # e.g. a kustomize patch that only sets replicas


def _built(known: Kind, obj: Mapping[str, Any], where: FieldPath, name: str, namespace: str | None,
           related: Related) -> Iterator[Target | str]:
    """What ``known``'s builder yields, as Targets located in the document (``where``), or its reasons."""
    assert known.build is not None
    found = False
    for built in known.build(obj, related):
        found = True
        if isinstance(built, str):
            yield built if isinstance(built, (Unjudged, NoPodHere)) else Unjudged(built)
            continue
        path = (*where, *built.path)
        fields = tuple(((*path, *prefix), (*where, *field_path))
                       for prefix, field_path in sorted(built.fields, key=lambda f: -len(f[0])))
        shown = tuple(((*path, *prefix), (*where, *field_path))
                      for prefix, field_path in sorted(built.shown, key=lambda f: -len(f[0])))
        sizing = tuple(((*path, *prefix), how.rebased(where)) for prefix, how in built.sizing)
        notes = tuple(((*path, *prefix), note) for prefix, note in built.notes)
        yield Target(known.kind, name, namespace, path, built.spec, None, built.template, where, fields, True,
                     built.partial, shown, sizing=sizing, notes=notes)
    if not found:
        yield f"{known.kind} without a pod template"


def find_targets(obj: Any, where: FieldPath = (), kinds: Mapping[tuple[str, str], Kind] = KINDS,
                 related: Related = NO_RELATED) -> Iterator[Target]:
    """The pod specs in ``obj`` (recursing into ``kind: List`` items)."""
    return (t for t in walk(obj, where, kinds, related) if isinstance(t, Target))


def related_kinds(kinds: Mapping[tuple[str, str], Kind] = KINDS) -> frozenset[tuple[str, str]]:
    """The kinds the builders read (``Kind.related``): what ``check`` collects from its input first."""
    return frozenset(r for k in kinds.values() for r in k.related)


def judged(group: str, kind: str, operation: str, subresource: str = "",
           kinds: Mapping[tuple[str, str], Kind] = KINDS) -> bool:
    """Whether a request for ``group``/``kind`` (``operation`` on the object or its ``subresource``) is
    judged (a workload's or Pod's, or DRA's claims: ``webhook.core.claims``)."""
    claim = CLAIM_KINDS.get(kind)
    found: Kind | ClaimKind | None = kinds.get((group, kind)) or (
        claim if claim is not None and claim.group == group else None)
    if found is None:
        return False
    if subresource:
        return (subresource, operation) in found.subresources
    return operation in found.operations


def describe(kinds: Iterable[Kind]) -> list[tuple[str, str, str]]:
    """(kind, apiVersions, template paths) for the docs' table."""
    return [(k.kind, ", ".join(f"{k.group}/{v}" if k.group else v for v in k.versions),
             "<br>".join(f"`{t.path}`" + (f" ({t.name})" if t.name else "") for t in k.templates)) for k in kinds]


__all__ = [
    "BUILTIN",
    "CONTROLLERS",
    "KINDS",
    "LIST",
    "MAP",
    "POD",
    "Kind",
    "PathError",
    "Segment",
    "Template",
    "describe",
    "find_kind",
    "find_targets",
    "group_of",
    "judged",
    "parse_path",
    "related_kinds",
    "role",
    "table",
    "template_label",
    "walk",
]
