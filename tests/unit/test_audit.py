"""The audit layer: listed objects -> report, grouped by namespace, errors kept and the rest still judged."""

from __future__ import annotations

from tests.builders import container, guaranteed, pod, rl
from webhook.batch.audit import audit
from webhook.batch.formats import render
from webhook.cluster.client import Listed
from webhook.core.config import parse_config
from webhook.core.engine import Mode


def _pod(name: str, ns: str, spec: dict) -> Listed:  # type: ignore[type-arg]
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}
    return Listed(ns, "Pod", obj=obj)


def test_findings_grouped_by_namespace_with_errors_kept() -> None:
    bad = pod(container("app", limits=rl("1500m", "1Gi")))["spec"]
    items = [
        _pod("b1", "zeta", bad),
        _pod("ok", "alpha", pod(guaranteed())["spec"]),
        Listed("beta", "CronJob", error="GET /apis/batch/v1/namespaces/beta/cronjobs: HTTP 403 forbidden"),
        _pod("a1", "alpha", bad),
        Listed("alpha", "Pod", obj={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "broken"},
                                    "spec": {"containers": {"name": "x"}}}),
    ]
    seen: list[tuple[int, str, str]] = []
    report = audit(items, parse_config(None), Mode.ENFORCE, progress=lambda n, ns, kind: seen.append((n, ns, kind)))
    assert [(r.location.source, r.name) for r in report.violations] == [("alpha", "a1"), ("zeta", "b1")]
    assert report.counts.objects == 3
    assert [e.location.source for e in report.errors] == ["alpha", "beta"]
    assert "Pod/broken: malformed object" in report.errors[0].message
    assert "HTTP 403" in report.errors[1].message
    assert report.exit_code == 1
    assert seen[-1] == (4, "alpha", "Pod")
    text = render(report, "text")
    assert "alpha: Pod/a1: cpu-not-integer: " in text  # no line number for a live object


def test_listing_errors_alone_exit_2_and_exemptions_apply() -> None:
    bad = pod(container("app", limits=rl("1500m", "1Gi")))["spec"]
    config = parse_config({"exemptions": {"namespaces": ["batch"]}})
    report = audit([_pod("x", "batch", bad), Listed("", "Pod", error="HTTP 401")], config, Mode.ENFORCE)
    assert report.violations == []
    assert report.exit_code == 2
    assert report.errors[0].location.source == "(cluster)"
