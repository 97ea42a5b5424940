"""The one series the Grafana dashboard takes from kube-apiserver rather than from qos-guard: the real API
server counts the calls to qos-guard's webhooks it could not complete, by webhook name and error type (here
the calls refused before ``certs --patch-webhooks``, when the caBundle did not match the certificate)."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import Cluster, Webhook
from tests.ecosystem.test_observability import dashboard, dashboard_exprs, selectors

METRIC = "apiserver_admission_webhook_rejection_count"


def test_failed_calls_series_the_dashboard_reads(cluster: Cluster, webhook: Webhook) -> None:
    assert "failed calling webhook" in webhook.fresh_config_error
    text = cluster.kubectl("get", "--raw", "/metrics", check=True).stdout
    # (the family, not the sample name: the Python parser renames a counter's samples to ..._total)
    samples = [s for family in text_string_to_metric_families(text) if family.name == METRIC for s in family.samples]
    assert f"\n{METRIC}{{" in text  # as exposed, the name the dashboard queries
    names = {s.labels["name"] for s in samples if s.labels.get("error_type") == "calling_webhook_error"}
    assert "validate.qos-guard.io" in names, sorted(names)
    # The dashboard's selector matches those series.
    (query,) = [e for e in dashboard_exprs(dashboard()) if METRIC in e]
    assert [name for name, _ in selectors([query])] == [METRIC]
    pattern = re.search(r'name=~"([^"]+)"', query)
    assert pattern is not None and re.fullmatch(pattern.group(1), "validate.qos-guard.io")
