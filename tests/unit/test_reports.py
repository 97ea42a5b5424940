"""``reports.build``: findings to policy report objects, without a cluster (the e2e tests write them)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests.e2e.conftest import compliant_pod, violating_pod
from webhook.batch.audit import audit
from webhook.batch.policyreports import FLAVOURS, Subjects, build
from webhook.cluster.client import Listed
from webhook.core.config import Config
from webhook.core.engine import Mode

NOW = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)


def _listed(ns: str, pod: dict[str, Any], uid: str) -> Listed:
    pod = {**pod, "metadata": {**pod["metadata"], "namespace": ns, "uid": uid}}
    return Listed(ns, "Pod", obj=pod)


def _build(flavour: str, objects: list[Listed], namespaces: list[str], mode: Mode = Mode.ENFORCE,
           config: Config | None = None) -> list[dict[str, Any]]:
    subjects = Subjects()
    report = audit(subjects.watch(objects), config or Config(), mode)
    return build(FLAVOURS[flavour], report, subjects, namespaces, NOW)


def test_one_report_per_namespace_with_fail_pass_and_error_results() -> None:
    objects = [_listed("a", violating_pod("frac"), "u1"), _listed("a", compliant_pod("good"), "u2"),
               _listed("b", compliant_pod("fine"), "u3"), Listed("b", "Job", error="HTTP 403 forbidden")]
    reports = _build("openreports", objects, ["a", "b", "empty"])
    assert [r["metadata"]["namespace"] for r in reports] == ["a", "b", "empty"]
    a, b, empty = reports
    assert a["apiVersion"] == "openreports.io/v1alpha1" and a["kind"] == "Report" and a["source"] == "qos-guard"
    assert a["metadata"]["name"] == "qos-guard" and "ownerReferences" not in a["metadata"]
    fail = a["results"][0]
    assert fail["result"] == "fail" and fail["rule"] == "cpu-not-integer" and fail["policy"] == "qos-guard"
    assert fail["resources"] == [{"apiVersion": "v1", "kind": "Pod", "namespace": "a", "name": "frac", "uid": "u1"}]
    assert fail["severity"] == "high" and fail["timestamp"] == {"seconds": int(NOW.timestamp()), "nanos": 600000000}
    assert fail["properties"] == {"container": "app", "path": "spec.containers[0].resources.limits.cpu",
                                  "fixable": "false"}
    assert [(r["result"], r["resources"][0]["name"]) for r in a["results"][1:]] == [("pass", "good")]
    assert a["summary"] == {"pass": 1, "fail": 1, "warn": 0, "error": 0, "skip": 0}
    assert b["summary"] == {"pass": 1, "fail": 0, "warn": 0, "error": 1, "skip": 0}
    assert "HTTP 403" in next(r["message"] for r in b["results"] if r["result"] == "error")
    assert empty["summary"]["pass"] == 0 and "results" not in empty  # replaces an older report with nothing


def test_a_listing_that_failed_cluster_wide_is_in_no_report() -> None:
    objects = [_listed("a", compliant_pod("good"), "u1"), Listed("", "Job", error="HTTP 403 forbidden")]
    (a,) = _build("openreports", objects, [])  # -A: no namespace list
    assert a["metadata"]["namespace"] == "a" and a["summary"]["error"] == 0


def test_policyreport_has_the_same_results_without_a_top_level_source() -> None:
    objects = [_listed("a", violating_pod("frac"), "u1")]
    (old,) = _build("policyreport", objects, [])
    (new,) = _build("openreports", objects, [])
    assert old["apiVersion"] == "wgpolicyk8s.io/v1alpha2" and old["kind"] == "PolicyReport"
    assert "source" not in old and old["results"] == new["results"]


def test_every_violation_is_one_fail_result_and_mutate_reports_what_is_left() -> None:
    pod = violating_pod("two")
    pod["spec"]["containers"].append({**pod["spec"]["containers"][0], "name": "side"})
    (enforce,) = _build("openreports", [_listed("a", pod, "u")], [])
    assert [(r["result"], r["properties"]["container"]) for r in enforce["results"]] == [
        ("fail", "app"), ("fail", "side")]
    # Mutation fills requests from limits but cannot make 1500m whole: the cpu rule stays a fail.
    (mutate,) = _build("openreports", [_listed("a", pod, "u")], [], Mode.MUTATE)
    assert {r["rule"] for r in mutate["results"]} == {"cpu-not-integer"}


def test_skipped_reasons_of_one_kind_share_its_line_and_are_capped() -> None:
    """One line per kind, its reasons counted most frequent first; past three, how many more (a builder's reason
    may name each object: the summary must not grow with them)."""
    from collections import Counter

    from webhook.batch.report import skipped_lines

    skipped = Counter({"Service": 4, "DaemonSet of extensions/v1beta1": 1, "document without a kind": 2,
                       "Deployment without a pod template": 1,
                       **{f'InferenceService "m{i}": ServingRuntime "r{i}" not in the input': i for i in range(1, 6)}})
    plain, kinds = skipped_lines(skipped)
    assert plain == "4 Service, 2 documents without a kind, 1 DaemonSet of extensions/v1beta1"
    assert kinds == [
        '15 InferenceService: 5 "m5": ServingRuntime "r5" not in the input, 4 "m4": ServingRuntime "r4" not in the '
        'input, 3 "m3": ServingRuntime "r3" not in the input, 3 more for 2 other reasons (--format json lists each)',
        "1 Deployment without a pod template"]
    assert skipped_lines(Counter()) == ("", [])
