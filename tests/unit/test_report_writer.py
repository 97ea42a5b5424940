"""``cluster.reports.ReportWriter``: the one writer of ``audit --report`` and the agent's reports. Server-side
apply of each report, then deletion of ours that the caller neither wrote nor kept; the real API server's side is
tests/e2e/test_reports.py and tests/e2e/test_agent_watch.py."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from webhook.cluster.client import ClusterError, Lister, Reply
from webhook.cluster.reports import FLAVOURS, ReportWriter

FLAVOUR = FLAVOURS["openreports"]


class API:
    """Reports by namespace; a status per (method, namespace) to answer instead."""

    def __init__(self, reports: dict[str, str], refuse: dict[tuple[str, str], int] | None = None) -> None:
        self.reports = dict(reports)  # namespace -> name
        self.refuse = refuse or {}
        self.sent: list[tuple[str, str]] = []

    def list_objects(self, path: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        assert label_selector == "app.kubernetes.io/managed-by=qos-guard"
        ns = path.split("/namespaces/")[1].split("/")[0] if "/namespaces/" in path else None
        return [{"metadata": {"namespace": n, "name": name}} for n, name in sorted(self.reports.items())
                if ns in (None, n)]

    def request(self, method: str, path: str, query: list[tuple[str, str]], body: Any,
                content_type: str | None) -> Reply:
        """``Lister.request``: ``send``'s answer (no Retry-After)."""
        return Reply(*self.send(method, path, query, body, content_type))

    def send(self, method: str, path: str, query: list[tuple[str, str]], body: str | None,
             content_type: str | None) -> tuple[int, dict[str, Any]]:
        ns, name = path.split("/namespaces/")[1].split("/")[0], path.rsplit("/", 1)[1]
        self.sent.append((method, ns))
        if (method, ns) in self.refuse:
            return self.refuse[method, ns], {"message": "no"}
        if method == "PATCH":
            assert query == [("fieldManager", "me"), ("force", "true")]
            assert content_type == "application/apply-patch+yaml" and json.loads(body or "")["kind"] == "Report"
            self.reports[ns] = name
        else:
            self.reports.pop(ns, None)
        return 200, {}


def _report(ns: str) -> dict[str, Any]:
    return {"apiVersion": FLAVOUR.api_version, "kind": FLAVOUR.kind, "metadata": {"name": "r", "namespace": ns}}


def _writer(api: API) -> ReportWriter:
    return ReportWriter(cast(Lister, api), FLAVOUR, "me")


def test_applies_then_deletes_what_was_neither_written_nor_kept() -> None:
    api = API({"a": "r", "b": "r", "c": "r", "d": "other"})
    writer = _writer(api)
    done = writer.sync([_report("a"), _report("e")], "r", lambda: writer.ours([None], "app.kubernetes.io/"
                                                                              "managed-by=qos-guard", "r"), keep={"b"})
    assert (done.applied, done.deleted, done.failures) == (["a", "e"], ["c"], [])
    assert api.sent == [("PATCH", "a"), ("PATCH", "e"), ("DELETE", "c")]  # applies first: no gap without a report
    assert api.reports == {"a": "r", "b": "r", "d": "other", "e": "r"}  # another name is not ours to delete


def test_failures_are_returned_or_raised() -> None:
    refuse = {("PATCH", "a"): 422, ("DELETE", "c"): 403}
    done = _writer(API({"c": "r"}, refuse)).sync([_report("a"), _report("b")], "r", lambda: ["c"])
    assert [str(f) for f in done.failures] == ["writing Report a/r: HTTP 422 no", "deleting Report c/r: HTTP 403 no"]
    assert (done.applied, done.deleted) == (["b"], [])
    api = API({"c": "r"}, refuse)
    with pytest.raises(ClusterError, match=r"^writing Report a/r: HTTP 422 no$"):
        _writer(api).sync([_report("a"), _report("b")], "r", lambda: ["c"], strict=True)
    assert api.sent == [("PATCH", "a")]  # strict: nothing more is changed after the first refusal


def test_a_report_already_gone_counts_as_deleted() -> None:
    done = _writer(API({}, {("DELETE", "x"): 404})).sync([], "r", lambda: ["x"])
    assert (done.deleted, done.failures) == (["x"], [])


class TerminatingAPI(API):
    """NamespaceLifecycle's answer to a write into a namespace being deleted, as kube-apiserver v1.36.3 gave it
    (a StatusCause's type is serialized as ``reason``)."""

    def __init__(self, reports: dict[str, str], going: str, cause: str = "NamespaceTerminating") -> None:
        super().__init__(reports)
        self.going, self.cause = going, cause

    def send(self, method: str, path: str, query: list[tuple[str, str]], body: str | None,
             content_type: str | None) -> tuple[int, dict[str, Any]]:
        if method == "PATCH" and f"/namespaces/{self.going}/" in path:
            return 403, {"kind": "Status", "reason": "Forbidden", "message": f"unable to create new content in "
                         f"namespace {self.going} because it is being terminated", "details": {
                             "name": "r", "kind": "reports", "causes": [{
                                 "reason": self.cause, "message": f"namespace {self.going} is being terminated",
                                 "field": "metadata.namespace"}]}, "code": 403}
        return super().send(method, path, query, body, content_type)


def test_a_namespace_being_deleted_is_no_failure_even_when_strict() -> None:
    api = TerminatingAPI({}, going="gone")
    done = _writer(api).sync([_report("a"), _report("gone"), _report("b")], "r", lambda: [], strict=True)
    assert (done.applied, done.terminating, done.failures) == (["a", "b"], ["gone"], [])


def test_a_403_for_another_cause_is_still_a_failure() -> None:
    api = TerminatingAPI({}, going="gone", cause="FieldValueForbidden")
    with pytest.raises(ClusterError, match="writing Report gone/r: HTTP 403 unable to create"):
        _writer(api).sync([_report("gone")], "r", lambda: [], strict=True)
    done = _writer(TerminatingAPI({}, going="gone", cause="FieldValueForbidden")).sync(
        [_report("gone")], "r", lambda: [])
    assert done.terminating == [] and [f.status for f in done.failures] == [403]
