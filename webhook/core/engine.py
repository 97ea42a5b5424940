"""``evaluate(object, config, mode, facts) -> ObjectVerdict``: the one call the webhook, ``check``, ``fix`` and
``audit`` all make, so they always reach the same verdict (as Kyverno's engine does for its CLI).

``facts`` is what the cluster says (``webhook.core.facts``), built by the caller; ``config`` only what someone
wrote. The mutation is planned only when a caller asks for it (``changes``, ``remaining``, ``fixable``, or the
verdict of ``mutate`` mode, which is what remains after it): ``enforce`` and ``warn`` answers never pay for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property, partial
from typing import Any

from webhook.core.claims import CLAIM_KINDS
from webhook.core.config import Config
from webhook.core.facts import NO_FACTS, Facts
from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.kubeversion import DEFAULT, Semantics
from webhook.core.mutation import Change, apply_changes, plan_changes, pod_requests, price, raise_text
from webhook.core.operators import Related, Unjudged
from webhook.core.podspec import GUARANTEED, PodSpec, build_pod_spec
from webhook.core.qos import qos_class
from webhook.core.resourceblock import COMPUTE
from webhook.core.rules import Violation, run_claim_rules, run_rules
from webhook.core.target import Target
from webhook.core.workloads import table, walk

MODE_LABEL = "qos-guard.io/mode"  # the namespace label that opts in (docs/contract.md#names)
MODE_LABEL_RULE = "invalid-mode-label"
# A value quoted back in a message: a label value's own limit (63, apimachinery's LabelValueMaxLength). The
# webhook may see what the API server's validation would refuse; a 1 MB value must not make a 1 MB answer.
MAX_QUOTED = 63


class Mode(StrEnum):
    ENFORCE = "enforce"
    MUTATE = "mutate"
    WARN = "warn"


# The label selector of the opted-in namespaces (a mode label with a known mode), for audit, the agent, verify.
MODE_SELECTOR = f"{MODE_LABEL} in ({','.join(m.value for m in Mode)})"


def mode_label_problem(obj: Any) -> str | None:
    """Why a Namespace's ``qos-guard.io/mode`` label is refused (the webhook's and ``check``'s one message), or
    None: absent, or naming a mode. A typo (``enfoce``) is refused at apply time, so ``check`` fails on it too."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    value = labels.get(MODE_LABEL) if isinstance(labels, dict) else None
    if value is None or value in tuple(Mode):
        return None
    modes = ", ".join(m.value for m in Mode)
    return f"namespace label {MODE_LABEL}={quoted(value)} is not one of {modes}; remove the label to opt out"


def quoted(value: object) -> str:
    """``value`` as JSON, its first ``MAX_QUOTED`` characters only, saying how long it was when longer: a 1 MB
    label value must not make a 1 MB message."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if len(text) <= MAX_QUOTED:
        return json.dumps(value, default=str)
    return f"{json.dumps(text[:MAX_QUOTED])}... ({len(text)} characters)"


def namespace_manifests(obj: Any, where: FieldPath = ()) -> Iterator[tuple[FieldPath, Any]]:
    """Each ``v1`` Namespace in ``obj`` (recursing into ``kind: List`` items), with where it is."""
    if not isinstance(obj, dict):
        return
    kind = obj.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(obj.get("items"), list):
        for i, item in enumerate(obj["items"]):
            yield from namespace_manifests(item, (*where, "items", i))
    elif kind == "Namespace" and obj.get("apiVersion") == "v1":
        yield where, obj


@dataclass(frozen=True)
class Finding:
    """A violation, and whether the mutation (``mutate`` mode, ``qos-guard fix``) would remove it."""

    violation: Violation
    fixable: bool


@dataclass(frozen=True)
class TargetResult:
    """The rules' findings for one pod spec; the mutation is planned on first use."""

    target: Target
    pod: PodSpec
    violations: tuple[Violation, ...]
    config: Config = field(repr=False)
    # Reported, never refused (``Violation.advisory``): warnings in admission, notices in check and audit.
    advisories: tuple[Violation, ...] = ()
    facts: Facts = field(default=NO_FACTS, repr=False)

    @cached_property
    def planned(self) -> tuple[Change, ...]:
        """Every change the mutation makes to the Pod: for a pod spec an operator builds, to its injected parts too
        (the webhook patches the Pods it builds at creation, re-invoked after the other webhooks)."""
        return tuple(plan_changes(self.pod, self.config)) if self.violations else ()

    @cached_property
    def changes(self) -> tuple[Change, ...]:
        """The changes to the object, each raise priced from the Pod's effective request (``mutation.price``): for
        a pod spec an operator builds, only to what the object's fields make (``Target.unbase``)."""
        kept = [c for c in self.planned if self.target.unbase(c.path) is not None]
        return tuple(price(kept, self.pod_after)) if kept else ()

    def pod_after(self, changes: Sequence[Change]) -> PodSpec:
        """The pod spec with ``changes`` made (a built spec's: each change moved back where it lands in the built
        spec, ``Target.in_built``)."""
        if not changes:
            return self.pod
        where = self.target.path
        if self.target.built:
            changes = [replace(c, path=self.target.in_built(c.path)) for c in changes]
        in_spec = [c for c in changes if c.path[:len(where)] == where]
        fixed = apply_changes(self.target.spec, in_spec, skip=len(where))
        # The only change outside the spec removes ``status.qosClass``, the one status field that counts.
        status = self.target.status if len(in_spec) == len(changes) else None
        return replace(self.target, spec=fixed, status=status).pod_spec(self.pod.kube, self.facts.stored)

    @cached_property
    def remaining(self) -> tuple[Violation, ...]:
        """What is still wrong after the mutation (``mutate`` mode: in the Pods, patched at creation)."""
        return self._after(self.planned)

    @cached_property
    def left_by_fix(self) -> tuple[Violation, ...]:
        """What is still wrong after ``fix`` edits the object (for a pod spec an operator builds, its injected
        parts are left; for any other, ``remaining``)."""
        return self._after(self.changes) if self.target.built else self.remaining

    def _after(self, changes: tuple[Change, ...]) -> tuple[Violation, ...]:
        if not changes:
            return self.violations
        pod = self.pod_after(changes)
        return tuple(v for v in run_rules(pod, self.config.policy, self.facts) if not v.advisory)

    @cached_property
    def remedies(self) -> dict[tuple[str, FieldPath], str]:
        """For each violation the mutation leaves, the mutation setting that would remove it and what it would
        then do (``mutation.cpuRounding: up would set it to 2: +0.5 CPU reserved exclusively``), keyed by
        (rule, subject). Found by planning the mutation again with the setting changed, never guessed."""
        left = {(v.rule, v.subject) for v in self.remaining}
        found: dict[tuple[str, FieldPath], str] = {}
        for setting, other in _other_mutations(self.config):
            trial = TargetResult(self.target, self.pod, self.violations, other, facts=self.facts)
            fixed = left - {(v.rule, v.subject) for v in trial.remaining} - found.keys()
            for rule, subject in fixed:
                done = [c for c in trial.changes if _subject(c.path) == subject]
                value = next((c.new for c in done if c.path[-2] == "limits"), done[0].new if done else None)
                cost = self._more(trial, done, subject)
                found[(rule, subject)] = (f"{setting} would set it to {value}{cost}" if value is not None
                                          else f"{setting} would fix it")
        return found

    def _more(self, trial: TargetResult, done: list[Change], subject: FieldPath) -> str:
        """What ``done`` (a trial setting's changes to ``subject``) reserves beyond the mutation already made:
        the Pod's effective request with both against it with the mutation alone (never counted twice)."""
        if not any(c.cost for c in done) or not subject or subject[-1] not in COMPUTE:
            return ""
        resource = str(subject[-1])
        base, both = self.pod_after(self.changes), self.pod_after([*self.changes, *done])
        guaranteed = qos_class(trial.pod_after(trial.changes)) == GUARANTEED
        return raise_text(resource, pod_requests(base).get(resource, 0), pod_requests(both).get(resource, 0),
                          both, done[0].container if guaranteed else None, burstable=not guaranteed)

    @cached_property
    def findings(self) -> tuple[Finding, ...]:
        """Every violation, marked fixable when the mutation removes it from what is written (``fix``: for a pod
        spec an operator builds, not its injected parts, though ``mutate`` mode fixes them in its Pods)."""
        left = {(v.rule, v.subject) for v in self.left_by_fix}
        return tuple(Finding(v, (v.rule, v.subject) not in left) for v in self.violations)


def _subject(path: FieldPath) -> FieldPath:
    return tuple(seg for seg in path if seg not in ("requests", "limits"))


def _other_mutations(config: Config) -> list[tuple[str, Config]]:
    """The mutation settings that are off and could fix more, each as the configuration with it on."""
    found = []
    if config.mutation.cpu_rounding != "up":
        found.append(("mutation.cpuRounding: up",
                      replace(config, mutation=replace(config.mutation, cpu_rounding="up"))))
    if not config.mutation.set_limits_from_requests:
        found.append(("mutation.setLimitsFromRequests: true",
                      replace(config, mutation=replace(config.mutation, set_limits_from_requests=True))))
    return found


@dataclass(frozen=True)
class ObjectVerdict:
    mode: Mode
    results: tuple[TargetResult, ...] = ()
    exempt: str | None = None
    # What is not judged for not being known, and why: each builder's reason (``Unjudged``), and each partial
    # target's whose known part passed (``Target.partial``). Unknown is its own answer: the webhook warns with
    # them, ``check`` counts them as skipped; never a pass.
    unknown: tuple[str, ...] = ()
    # What has no Pod to judge, as ``walk`` said it (a kind, ``KIND without a pod template``, ``NoPodHere``), and
    # the first pod spec found (where ``check`` says an exempt object is): kept so no caller walks the object again.
    passed_over: tuple[str, ...] = ()
    first: Target | None = None

    @property
    def violations(self) -> list[tuple[Target, Violation]]:
        """What the mode reports: in ``mutate`` only what the mutation leaves behind."""
        if self.mode is Mode.MUTATE:
            return [(r.target, v) for r in self.results for v in r.remaining]
        return [(r.target, v) for r in self.results for v in r.violations]

    @property
    def advisories(self) -> list[tuple[Target, Violation]]:
        return [(r.target, v) for r in self.results for v in r.advisories]

    @property
    def changes(self) -> tuple[Change, ...]:
        return tuple(c for r in self.results for c in r.changes)

    @property
    def allowed(self) -> bool:
        return self.mode is Mode.WARN or not self.violations


# Namespaces the webhook never judges (its configurations leave them out: the cluster's own components must
# start whatever qos-guard says). ``check`` still judges their objects, and says so beside each finding.
NEVER_JUDGED = frozenset({"kube-system"})
NEVER_JUDGED_HINT = "; the webhook never judges namespace {namespace}: this is what it would say if it did"


def without_containers(verdict: ObjectVerdict) -> list[tuple[FieldPath, str]]:
    """Each pod spec with no containers, where, and why it is no Pod: the API server refuses it
    (``spec.containers: Required value``), so there is nothing Guaranteed about it to report."""
    return [((*r.target.path, "containers"),
             f"{dotted((*r.target.path, 'containers'))}: Required value: a Pod needs at least one container "
             "(the API server refuses it; kubectl apply fails)")
            for r in verdict.results if r.target.kind not in CLAIM_KINDS and not r.pod.containers]


def exemption(config: Config, target: Target | None, namespace: str | None, username: str | None) -> str | None:
    """As Pod Security Admission: by namespace, requesting user or ``runtimeClassName``, never by annotation.
    ``target`` None: an object with no pod spec known, exempt by namespace or user only."""
    ex = config.exemptions
    if username is not None and username in ex.usernames:
        return f"user {username} is exempt"
    namespace = namespace or (target.namespace if target is not None else None)
    if namespace is not None and namespace in ex.namespaces:
        return f"namespace {namespace} is exempt"
    # a claim spec has no runtimeClassName (a pod spec's field): only pod specs are exempt by it
    runtime_class = None if target is None or target.kind in CLAIM_KINDS else target.spec.get("runtimeClassName")
    if isinstance(runtime_class, str) and runtime_class in ex.runtime_class_names:
        return f"runtimeClassName {runtime_class} is exempt"
    return None


def kube_of(config: Config, facts: Facts = NO_FACTS) -> Semantics:
    """The minor whose semantics judge: the API server's (a fact) when read, else the configuration's
    ``kubernetesVersion`` (``--kubernetes-version``), else ``kubeversion.DEFAULT``, the newest released."""
    return facts.kubernetes or config.kubernetes_version or DEFAULT


def related_of(config: Config, facts: Facts) -> Related:
    """What the operators' builders read: the facts' objects, with KServe in the namespace the configuration names
    (``policy.kserveNamespace``), as Kyverno hands a policy its context: an explicit input, never a global."""
    return replace(facts.related, kserve_namespace=config.policy.kserve_namespace)


def evaluate(obj: Any, config: Config, mode: Mode, facts: Facts = NO_FACTS, *, namespace: str | None = None,
             username: str | None = None) -> ObjectVerdict:
    """Judge every pod spec in ``obj`` against ``facts``; raises ``ManifestError`` for an object of the wrong
    shape.

    ``namespace`` defaults to each object's own ``metadata.namespace``. What cannot be known is kept with why
    (``ObjectVerdict.unknown``), apart from what is judged: an exempt object's too, never said as a finding.
    """
    walked = list(walk(obj, kinds=table(config.workloads), related=related_of(config, facts)))
    targets = [t for t in walked if isinstance(t, Target)]
    unknown = [str(r) for r in walked if isinstance(r, Unjudged)]
    said = partial(ObjectVerdict, mode, passed_over=tuple(r for r in walked if isinstance(r, str)
                                                          and not isinstance(r, Unjudged)),
                   first=targets[0] if targets else None)
    if not targets and unknown:  # no pod spec known: exempt as its namespace or requesting user is
        why = _object_exemption(config, obj, namespace, username)
        if why is not None:
            return said((), exempt=why, unknown=tuple(unknown))
    kube = kube_of(config, facts)
    results = []
    exempt: list[tuple[str, bool]] = []
    for target in targets:
        why = exemption(config, target, namespace, username)
        if why is not None:  # and whether by its runtimeClassName alone (its namespace or user not exempt)
            exempt.append((why, exemption(config, None, namespace or target.namespace, username) is None))
            continue
        if target.kind in CLAIM_KINDS:  # a claim spec, judged whole; an empty pod spec for the record
            pod = build_pod_spec({}, target.path, kube=kube)
            found = run_claim_rules(target.kind, target.spec, target.path, config.policy, facts)
        else:
            pod = target.pod_spec(kube, facts.stored)
            found = run_rules(pod, config.policy, facts)
            if target.partial and not any(not v.advisory for v in found):
                unknown.append(target.partial)  # part of the Pod passing is not the Pod passing: said instead
                continue
        results.append(TargetResult(target, pod, tuple(v for v in found if not v.advisory), config,
                                    tuple(v for v in found if v.advisory), facts))
    # Every pod spec exempt: the object is (said once, the first why), unless by runtimeClassName alone with
    # something not known (that is still said).
    if exempt and len(exempt) == len(targets) and (not unknown or not all(by_class for _, by_class in exempt)):
        return said((), exempt=exempt[0][0], unknown=tuple(unknown))
    return said(tuple(results), unknown=tuple(unknown))


def _object_exemption(config: Config, obj: Any, namespace: str | None, username: str | None) -> str | None:
    """Why an object with no pod spec known is exempt, by namespace or user: a ``kind: List``, when each of its
    items is (it has no namespace of its own)."""
    items = obj.get("items") if isinstance(obj, Mapping) and str(obj.get("kind", "")).endswith("List") else None
    if not isinstance(items, list):
        return exemption(config, None, namespace or namespace_of(obj), username)
    whys = [_object_exemption(config, item, namespace, username) for item in items]
    return whys[0] if whys and all(whys) else None


def namespace_of(obj: Any) -> str | None:
    """The namespace an object names in its metadata (None: none)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    found = meta.get("namespace") if isinstance(meta, dict) else None
    return found if isinstance(found, str) and found else None
