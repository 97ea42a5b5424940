"""``qos-guard audit --report``: findings as policy report objects, the format Policy Reporter, Kyverno
(>= 1.15) and Kubewarden read.

``openreports`` writes ``openreports.io/v1alpha1`` ``Report`` (github.com/openreports/reports-api v0.2.1,
``apis/openreports.io/v1alpha1/report_types.go``); ``policyreport`` writes the older
``wgpolicyk8s.io/v1alpha2`` ``PolicyReport`` for consumers that predate it. Both have the same result shape.

One report per namespace, named ``qos-guard``, owned by nothing (an audit is not a controller) and replaced
whole on each run by server-side apply (``results`` is an atomic list in both CRDs), so an object fixed
between two runs leaves no ``fail`` result behind; a report of ours in a namespace the run no longer covers is
deleted. Building the objects (``build``) is pure; ``write`` hands them to ``cluster.reports.ReportWriter``, the
writer the agent's reports go through too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from webhook.batch.report import Report
from webhook.cluster.client import Listed, Lister
from webhook.cluster.reports import FLAVOURS as FLAVOURS  # re-exported: cli and tests name it here
from webhook.cluster.reports import MANAGED_BY, Flavour, ReportWriter, Written
from webhook.core.fieldpath import dotted
from webhook.core.rules import BY_ID

POLICY = "qos-guard"
REPORT_NAME = "qos-guard"
CATEGORY = "CPU pinning"
DEFAULT_SEVERITY = "high"  # results that are no rule's (pass, error)


@dataclass(frozen=True, slots=True)
class Subject:
    """One judged object, as a ``corev1.ObjectReference``."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    def reference(self) -> dict[str, str]:
        ref = {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name}
        if self.uid:
            ref["uid"] = self.uid
        return ref


class Subjects:
    """Passes listed objects through to ``audit`` unchanged, remembering each as a report subject (so a
    compliant object can be reported as ``pass``, which the findings alone cannot say)."""

    def __init__(self) -> None:
        self.by_namespace: dict[str, list[Subject]] = {}

    def watch(self, objects: Iterable[Listed]) -> Iterator[Listed]:
        for listed in objects:
            if listed.obj is not None:
                meta = listed.obj.get("metadata") or {}
                subject = Subject(str(listed.obj.get("apiVersion", "")), listed.kind, listed.namespace,
                                  str(meta.get("name", "")), str(meta.get("uid", "")))
                self.by_namespace.setdefault(listed.namespace, []).append(subject)
            yield listed


def _timestamp(now: datetime) -> dict[str, int]:
    return {"seconds": int(now.timestamp()), "nanos": now.microsecond * 1000}


def build(flavour: Flavour, report: Report, subjects: Subjects, namespaces: Iterable[str],
          now: datetime | None = None) -> list[dict[str, Any]]:
    """One report object per namespace in ``namespaces`` or with a subject: a ``fail`` result per violation,
    a ``pass`` per object without one, an ``error`` per object or listing that could not be judged."""
    stamp = _timestamp(now or datetime.now(UTC))
    results: dict[str, list[dict[str, Any]]] = {ns: [] for ns in namespaces}
    for ns in subjects.by_namespace:
        results.setdefault(ns, [])
    failed: set[tuple[str, str, str]] = set()
    known = {(s.namespace, s.kind, s.name): s for ss in subjects.by_namespace.values() for s in ss}

    def result(outcome: str, message: str, rule: str = "", subject: Subject | None = None,
               properties: dict[str, str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"source": POLICY, "policy": POLICY}
        if rule:
            out["rule"] = rule
        severity = BY_ID[rule].severity if rule in BY_ID else DEFAULT_SEVERITY
        out |= {"category": CATEGORY, "severity": severity, "result": outcome, "scored": True, "timestamp": stamp,
                "message": message}
        if subject is not None:
            out["resources"] = [subject.reference()]
        if properties:
            out["properties"] = properties
        return out

    for r in report.violations:
        ns = r.namespace or r.location.source
        key = (ns, r.kind, r.name)
        failed.add(key)
        subject = known.get(key) or Subject("", r.kind, ns, r.name, "")
        props = {"path": dotted(r.path), "fixable": str(r.fixable).lower()}
        if r.container:
            props["container"] = r.container
        results.setdefault(ns, []).append(result("fail", r.message, r.rule, subject, props))
    for e in report.errors:  # a listing that failed across all namespaces belongs to no namespace's report
        if e.location.source in results:
            results[e.location.source].append(result("error", e.message))
    for ns, listed in subjects.by_namespace.items():
        for s in listed:
            if (s.namespace, s.kind, s.name) not in failed:
                results[ns].append(result("pass", f"{s.kind}/{s.name} keeps its exclusive CPUs", "", s))
    return [_report_object(flavour, ns, found) for ns, found in sorted(results.items()) if ns]


def _report_object(flavour: Flavour, namespace: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    summary = {outcome: sum(1 for r in results if r["result"] == outcome)
               for outcome in ("pass", "fail", "warn", "error", "skip")}
    obj: dict[str, Any] = {
        "apiVersion": flavour.api_version, "kind": flavour.kind,
        "metadata": {"name": REPORT_NAME, "namespace": namespace, "labels": {MANAGED_BY[0]: MANAGED_BY[1]}},
    }
    if flavour.top_level_source:
        obj["source"] = POLICY
    obj["summary"] = summary
    if results:
        obj["results"] = results
    return obj


def write(lister: Lister, flavour: Flavour, objects: list[dict[str, Any]], scope: list[str] | None) -> Written:
    """Apply each report (create or replace), then delete our reports left in ``scope`` (None: every
    namespace) that this run did not write; the first refusal is a ``ClusterError`` (``cluster.reports``)."""
    writer = ReportWriter(lister, flavour, POLICY)
    return writer.sync(objects, REPORT_NAME, lambda: writer.ours([None] if scope is None else scope,
                                                                 "=".join(MANAGED_BY), REPORT_NAME), strict=True)
