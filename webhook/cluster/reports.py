"""The policy report APIs qos-guard writes into (``audit --report`` and ``agent --report``): where their objects
live, and the one writer both use. ``openreports.io/v1alpha1`` ``Report`` (github.com/openreports/reports-api
v0.2.1) and the older ``wgpolicyk8s.io/v1alpha2`` ``PolicyReport`` have the same result shape.

A report is replaced whole by server-side apply (``results`` is an atomic list in both CRDs, so a result fixed
since the last write leaves nothing behind), then our reports of the namespaces no longer covered are deleted:
``ReportWriter.sync``. What goes into the reports is the caller's (``batch/policyreports.py``, ``node/agent.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.cluster.backoff import OVERLOADED
from webhook.cluster.client import ClusterError, Lister

MANAGED_BY = ("app.kubernetes.io/managed-by", "qos-guard")


@dataclass(frozen=True, slots=True)
class Flavour:
    """One report API: where its objects live."""

    group: str
    version: str
    kind: str
    plural: str
    top_level_source: bool  # openreports' Report carries `source` at the top as well as per result

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def path(self, namespace: str | None, name: str | None = None) -> str:
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"/apis/{self.api_version}{where}/{self.plural}" + (f"/{name}" if name else "")


FLAVOURS: dict[str, Flavour] = {
    "openreports": Flavour("openreports.io", "v1alpha1", "Report", "reports", True),
    "policyreport": Flavour("wgpolicyk8s.io", "v1alpha2", "PolicyReport", "policyreports", False),
}


APPLIED = (200, 201)
DELETED = (200, 202, 404)  # 404: already gone, which is what was asked
# The cause the API server's NamespaceLifecycle admission gives when it refuses new content in a namespace being
# deleted (metav1.NamespaceTerminatingCause): the namespace and its report are going, so this is no failure.
TERMINATING_CAUSE = "NamespaceTerminating"


def namespace_terminating(status: int, reply: Any) -> bool:
    """Whether an answer is NamespaceLifecycle's refusal of a write into a namespace being deleted (by the
    Status's cause, as client-go's ``HasStatusCause``, never by its message's words; a StatusCause's type is
    serialized as ``reason``)."""
    details = reply.get("details") if isinstance(reply, dict) else None
    causes = details.get("causes") if isinstance(details, dict) else None
    return status == 403 and isinstance(causes, list) and any(
        isinstance(c, dict) and c.get("reason") == TERMINATING_CAUSE for c in causes)


@dataclass(frozen=True, slots=True)
class Failure:
    """One report the API server did not take (or did not delete), as a line for the log or the error."""

    verb: str  # "writing" or "deleting"
    kind: str
    namespace: str
    name: str
    status: int
    message: str
    retry_after: float | None = None  # seconds the answer's Retry-After asked to wait

    def __str__(self) -> str:
        return f"{self.verb} {self.kind} {self.namespace}/{self.name}: HTTP {self.status} {self.message[:200]}".rstrip()


@dataclass(frozen=True, slots=True)
class Written:
    """What one ``sync`` did: the namespaces whose report was applied, those whose stale one was deleted, those
    not written because they are being deleted, and what failed (empty with ``strict``, which raises instead)."""

    applied: list[str]
    deleted: list[str]
    failures: list[Failure] = field(default_factory=list)
    terminating: list[str] = field(default_factory=list)


class ReportWriter:
    """Server-side apply of report objects of one flavour under one field manager, then deletion of the stale
    ones: the one place that writes reports, on top of ``cluster.client``."""

    def __init__(self, api: Lister, flavour: Flavour, manager: str) -> None:
        self._api, self._flavour, self._manager = api, flavour, manager

    def ours(self, scope: Iterable[str | None], selector: str, name: str) -> list[str]:
        """The namespaces in ``scope`` (None: every namespace) holding a report called ``name`` that ``selector``
        (our labels) matches."""
        found: list[str] = []
        for ns in scope:
            for item in self._api.list_objects(self._flavour.path(ns), selector):
                meta = item.get("metadata") or {}
                if meta.get("name") == name and meta.get("namespace"):
                    found.append(str(meta["namespace"]))
        return found

    def sync(self, objects: Sequence[dict[str, Any]], name: str, existing: Callable[[], Iterable[str]],
             keep: Collection[str] = (), strict: bool = False) -> Written:
        """Apply each of ``objects`` (create or replace), then delete the report ``name`` in each namespace of
        ``existing()`` (asked after the applies) that is neither one just written nor in ``keep`` (reports the
        caller left as they were). ``strict``: the first failure raises ``ClusterError``, else each is returned;
        an overloaded API server's answer (429, 5xx) ends the sync there: the caller backs off before the rest."""
        applied: list[str] = []
        terminating: list[str] = []
        failures: list[Failure] = []

        def failed(failure: Failure) -> None:
            if strict:
                raise ClusterError(str(failure))
            failures.append(failure)

        for obj in objects:
            ns = obj["metadata"]["namespace"]
            answer = self._api.request("PATCH", self._flavour.path(ns, name),
                                       [("fieldManager", self._manager), ("force", "true")], json.dumps(obj),
                                       "application/apply-patch+yaml")
            if answer.status in APPLIED:
                applied.append(ns)
            elif namespace_terminating(answer.status, answer.body):
                terminating.append(ns)
            else:
                failed(Failure("writing", self._flavour.kind, ns, name, answer.status,
                               str(answer.body.get("message", "")), answer.retry_after))
                if answer.status in OVERLOADED:
                    return Written(applied, [], failures, terminating)
        written = {str(obj["metadata"]["namespace"]) for obj in objects}
        deleted: list[str] = []
        for ns in sorted(set(existing()) - written - set(keep)):
            answer = self._api.request("DELETE", self._flavour.path(ns, name), [], None, None)
            if answer.status in DELETED:
                deleted.append(ns)
            else:
                failed(Failure("deleting", self._flavour.kind, ns, name, answer.status,
                               str(answer.body.get("message", "")), answer.retry_after))
                if answer.status in OVERLOADED:
                    break
        return Written(applied, deleted, failures, terminating)
