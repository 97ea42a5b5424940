"""``evaluate(object, config, mode) -> Verdict``: the one call the webhook, ``check``, ``fix`` and
``audit`` all make, so they always reach the same verdict (as Kyverno's engine does for its CLI)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from webhook.config import Config
from webhook.mutation import Change, apply_changes, plan_changes
from webhook.podspec import build_pod_spec
from webhook.rules import Violation, run_rules
from webhook.workloads import Target, find_targets

MODE_LABEL = "qos-guard.io/mode"  # the namespace label that opts in (SPEC §1)


class Mode(StrEnum):
    ENFORCE = "enforce"
    MUTATE = "mutate"
    WARN = "warn"


@dataclass(frozen=True, slots=True)
class Finding:
    """A violation, and whether the mutation (``mutate`` mode, ``qos-guard fix``) would remove it."""

    violation: Violation
    fixable: bool


@dataclass(frozen=True, slots=True)
class TargetResult:
    target: Target
    findings: tuple[Finding, ...]
    remaining: tuple[Violation, ...]
    changes: tuple[Change, ...]

    def reported(self, mode: Mode) -> tuple[Finding, ...]:
        """What a front end reports in ``mode``: in ``mutate`` only what mutation leaves behind."""
        if mode is Mode.MUTATE:
            return tuple(Finding(v, False) for v in self.remaining)
        return self.findings


@dataclass(frozen=True, slots=True)
class Verdict:
    mode: Mode
    results: tuple[TargetResult, ...] = ()
    exempt: str | None = None
    changes: tuple[Change, ...] = field(default=())

    @property
    def violations(self) -> list[tuple[Target, Finding]]:
        return [(r.target, f) for r in self.results for f in r.reported(self.mode)]

    @property
    def allowed(self) -> bool:
        return self.mode is Mode.WARN or not self.violations


def _judge(target: Target, config: Config, plan: bool) -> TargetResult:
    pod = build_pod_spec(target.spec, target.path)
    violations = run_rules(pod, config.policy)
    if not violations:
        return TargetResult(target, (), (), ())
    if not plan:
        return TargetResult(target, tuple(Finding(v, False) for v in violations), tuple(violations), ())
    changes = plan_changes(target.spec, target.segments, config)
    if changes:
        fixed = apply_changes(target.spec, changes, skip=len(target.segments))
        remaining = run_rules(build_pod_spec(fixed, target.path), config.policy)
    else:
        remaining = violations
    left = {(v.rule, v.subject) for v in remaining}
    findings = tuple(Finding(v, (v.rule, v.subject) not in left) for v in violations)
    return TargetResult(target, findings, tuple(remaining), tuple(changes))


def _exemption(config: Config, namespace: str | None, username: str | None) -> str | None:
    ex = config.exemptions
    if username is not None and username in ex.usernames:
        return f"user {username} is exempt"
    if namespace is not None and namespace in ex.namespaces:
        return f"namespace {namespace} is exempt"
    return None


def evaluate(obj: Any, config: Config, mode: Mode, *, namespace: str | None = None,
             username: str | None = None, plan: bool = True) -> Verdict:
    """Judge every pod spec in ``obj``; raises ``ManifestError`` for an object of the wrong shape.

    ``namespace`` defaults to each object's own ``metadata.namespace``; exemptions work as in Pod
    Security Admission: by namespace, requesting user or ``runtimeClassName``, never by annotation.
    ``plan=False`` skips planning the mutation (no changes, every finding marked not fixable): the
    ``enforce`` and ``warn`` webhooks answer without it. ``mutate`` mode always plans.
    """
    plan = plan or mode is Mode.MUTATE
    targets = list(find_targets(obj))
    results = []
    for target in targets:
        why = _exemption(config, namespace or target.namespace, username)
        if why is None:
            runtime_class = target.spec.get("runtimeClassName")
            if isinstance(runtime_class, str) and runtime_class in config.exemptions.runtime_class_names:
                why = f"runtimeClassName {runtime_class} is exempt"
        if why is not None:
            if len(targets) == 1:
                return Verdict(mode, (), exempt=why)
            continue
        results.append(_judge(target, config, plan))
    changes = tuple(c for r in results for c in r.changes)
    return Verdict(mode, tuple(results), changes=changes)
