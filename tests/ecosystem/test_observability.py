"""The chart's alerts and dashboard query only what exists: every metric, label value and histogram bound in
the PrometheusRule and the Grafana dashboard is scraped from a real ``qos-guard serve`` (gunicorn, TLS, two
workers) after it has answered requests. The rules themselves are checked by promtool (test_promtool.py)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests import waiting
from tests.binaries import ROOT, binary
from tests.builders import container, guaranteed, pod, rl
from tests.helpers import admission_review
from tests.serving import Server, start_server
from webhook.serving.certs import write_bundle
from webhook.serving.metrics import EXPIRY_METRIC, certificate_expiry

CHART = ROOT / "charts" / "qos-guard"
# Made by others, not by qos-guard: Prometheus adds `up` to every target; kube-apiserver counts the webhook
# calls it could not complete (tests/e2e/test_apiserver_metrics.py finds it on a real API server).
EXTERNAL = {"up", "apiserver_admission_webhook_rejection_count"}
# The node agent's per-container series: queried by the dashboard (and the rules with agent.enabled), checked
# against a real agent's /metrics on a real kubelet in tests/node/test_agent.py.
AGENT_PREFIX = "qos_guard_container_"


def render(*values: str) -> list[dict[str, Any]]:
    """The chart rendered with ``values`` (``key=value``; ``key:=value`` sets a string)."""
    flags = [a for v in values for a in (("--set-string", v.replace(":=", "=", 1)) if ":=" in v else ("--set", v))]
    proc = subprocess.run([binary("helm"), "template", "qos-guard", str(CHART), "--namespace", "qos-guard", *flags],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def rule_exprs() -> list[str]:
    (rule,) = [d for d in render("prometheusRule.enabled=true") if d["kind"] == "PrometheusRule"]
    return [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]


def dashboard() -> dict[str, Any]:
    (cm,) = [d for d in render("dashboard.enabled=true") if d["kind"] == "ConfigMap" and "qos-guard.json" in
             d.get("data", {})]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    parsed: dict[str, Any] = json.loads(cm["data"]["qos-guard.json"])
    return parsed


def dashboard_exprs(dash: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if isinstance(v.get("query"), dict)]
    return exprs


_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_LABEL_VALUES = re.compile(r"label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)")
_MATCHER = re.compile(r'([a-zA-Z_]+)\s*(=|!=)\s*"([^"$]*)"')


def selectors(exprs: list[str]) -> list[tuple[str, dict[str, str]]]:
    """(metric, {label: value}) for every selector; only literal equality matchers are kept."""
    found: list[tuple[str, dict[str, str]]] = []
    for expr in exprs:
        for name, body in _SELECTOR.findall(expr):
            found.append((name, {k: v for k, op, v in _MATCHER.findall(body) if op == "="}))
        found += [(name, {}) for name in _LABEL_VALUES.findall(expr)]
    assert found, exprs
    return found


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, list[dict[str, Any]]]]:
    server = start_server(tmp_path_factory.mktemp("observed"))
    try:
        fractional = pod(container("app", rl("1500m", "1Gi"), rl("1500m", "1Gi")))
        for path, obj in (("/validate", fractional), ("/validate", pod(guaranteed())), ("/warn", fractional),
                          ("/mutate", pod(container("app", None, rl("2", "1Gi"))))):
            assert server.post(path, admission_review(obj)).status_code == 200
        text = requests.get(server.metrics + "/metrics", timeout=10).text
        samples = [{"name": s.name, "labels": s.labels, "value": s.value}
                   for family in text_string_to_metric_families(text) for s in family.samples]
        yield server, samples
    finally:
        server.stop()


def _exists(samples: list[dict[str, Any]], name: str, labels: dict[str, str]) -> bool:
    wanted = {k: v for k, v in labels.items() if k not in ("job", "namespace")}  # added by the scrape
    return any(s["name"] == name and wanted.items() <= s["labels"].items() for s in samples)


@pytest.mark.parametrize("source", ["rules", "dashboard"])
def test_every_queried_series_exists(scraped: tuple[Server, list[dict[str, Any]]], source: str) -> None:
    _, samples = scraped
    exprs = rule_exprs() if source == "rules" else dashboard_exprs(dashboard())
    missing = [(name, labels) for name, labels in selectors(exprs)
               if name not in EXTERNAL and not name.startswith(AGENT_PREFIX) and not _exists(samples, name, labels)]
    assert not missing, f"queried by the {source} but not exposed by the server: {missing}"
    assert {name for name, _ in selectors(exprs)} - EXTERNAL  # the server's own metrics are queried


def test_every_allowed_latency_bound_is_a_histogram_bucket(scraped: tuple[Server, list[dict[str, Any]]]) -> None:
    _, samples = scraped
    bounds = {s["labels"]["le"] for s in samples if s["name"] == "qos_guard_admission_duration_seconds_bucket"}
    schema = json.loads((CHART / "values.schema.json").read_text())
    allowed = schema["properties"]["prometheusRule"]["properties"]["latencyP99Seconds"]["enum"]
    assert set(allowed) <= bounds, set(allowed) - bounds


def test_certificate_expiry_is_the_served_certificate(scraped: tuple[Server, list[dict[str, Any]]]) -> None:
    server, samples = scraped
    (value,) = [s["value"] for s in samples if s["name"] == EXPIRY_METRIC]
    cert = next(Path(server.folder).rglob("tls.crt"))
    assert value == certificate_expiry(str(cert))
    dash = dashboard()
    assert any(EXPIRY_METRIC in t["expr"] for p in dash["panels"] for t in p["targets"])
    titles = {p["title"] for p in dash["panels"]}
    assert {"Decisions by mode", "Violations by rule", "Answer time quantiles"} <= titles


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_certificate_expiry_follows_a_rotated_certificate(tmp_path: Path) -> None:
    """The gauge is set where the workers load the certificate, so a renewal (as cert-manager's) shows up."""
    pki = tmp_path / "pki"
    write_bundle(pki, ["localhost", "127.0.0.1"], 30, keep_ca_key=True)
    server = start_server(tmp_path / "serve", cert_dir=pki)
    try:
        def expiry() -> float:
            # Any TLS handshake makes a worker look at the files (whichever CA signed them right now).
            requests.post(server.url + "/validate", json=admission_review(pod(guaranteed())), verify=False,
                          timeout=10)
            text = requests.get(server.metrics + "/metrics", timeout=10).text
            (value,) = [s.value for f in text_string_to_metric_families(text) for s in f.samples
                        if s.name == EXPIRY_METRIC]
            return float(value)

        assert expiry() == certificate_expiry(str(pki / "tls.crt"))
        write_bundle(pki, ["localhost", "127.0.0.1"], 5, keep_ca_key=True)  # renewed: a shorter life
        renewed = certificate_expiry(str(pki / "tls.crt"))
        waiting.eventually("the renewed certificate's expiry in the metric", lambda: expiry() == renewed, 20,
                           every=0.5, seen=expiry)
        assert expiry() == renewed
    finally:
        server.stop()
