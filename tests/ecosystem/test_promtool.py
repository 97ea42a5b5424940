"""The chart's PrometheusRule through the real ``promtool`` (built from the Go module proxy): the rules parse
(``check rules``) and fire when, and only when, the cases in tests/fixtures/prometheus say (``test rules``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from tests.binaries import ROOT, binary
from tests.ecosystem.test_observability import render

CASES = ROOT / "tests" / "fixtures" / "prometheus" / "qos-guard-rules.test.yaml"
AGENT_CASES = ROOT / "tests" / "fixtures" / "prometheus" / "qos-guard-agent-rules.test.yaml"
TOPOLOGY_CASES = ROOT / "tests" / "fixtures" / "prometheus" / "qos-guard-topology-rules.test.yaml"


def _rules_folder(tmp_path: Path, *values: str, cases: Path = CASES) -> Path:
    (rule,) = [d for d in render("prometheusRule.enabled=true", *values) if d["kind"] == "PrometheusRule"]
    (tmp_path / "qos-guard-rules.yaml").write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    shutil.copy(cases, tmp_path / cases.name)
    return tmp_path


def _promtool(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary("promtool"), *args], cwd=folder, capture_output=True, text=True, timeout=300)


def test_rules_are_valid(tmp_path: Path) -> None:
    folder = _rules_folder(tmp_path)
    proc = _promtool(folder, "check", "rules", "qos-guard-rules.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 4 rules found" in proc.stdout


def test_rules_fire_as_the_cases_say(tmp_path: Path) -> None:
    proc = _promtool(_rules_folder(tmp_path), "test", "rules", CASES.name)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_the_cases_can_fail(tmp_path: Path) -> None:
    """Other thresholds, same cases: promtool must report the alerts that now do not fire."""
    folder = _rules_folder(tmp_path, "prometheusRule.certificateExpiryDays=5", "prometheusRule.latencyP99Seconds:=1.0",
                           "prometheusRule.refusalsSpikeFactor=20")
    proc = _promtool(folder, "test", "rules", CASES.name)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for alert in ("QosGuardCertificateExpiresSoon", "QosGuardAdmissionSlow", "QosGuardRefusalsSpiking"):
        assert f"alertname: {alert}" in proc.stdout + proc.stderr, alert


def test_agent_rules_fire_as_the_cases_say(tmp_path: Path) -> None:
    """With the node agent on: four more alerts, on its per-container series (checked against a real agent's
    /metrics in tests/node/test_agent.py)."""
    folder = _rules_folder(tmp_path, "agent.enabled=true", cases=AGENT_CASES)
    checked = _promtool(folder, "check", "rules", "qos-guard-rules.yaml")
    assert checked.returncode == 0 and "SUCCESS: 8 rules found" in checked.stdout, checked.stdout + checked.stderr
    proc = _promtool(folder, "test", "rules", AGENT_CASES.name)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_agent_cases_can_fail(tmp_path: Path) -> None:
    folder = _rules_folder(tmp_path, "agent.enabled=true", "prometheusRule.placementFor=25m", cases=AGENT_CASES)
    proc = _promtool(folder, "test", "rules", AGENT_CASES.name)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for alert in ("QosGuardContainerNotPinned", "QosGuardContainerNUMAMisaligned", "QosGuardContainerNUMAUnknown",
                  "QosGuardContainerRemoteMemory"):
        assert f"alertname: {alert}" in proc.stdout + proc.stderr, alert


def test_topology_stale_fires_as_the_cases_say(tmp_path: Path) -> None:
    """With the agent publishing NodeResourceTopology: one more alert, on the age of its last successful apply."""
    folder = _rules_folder(tmp_path, "agent.enabled=true", "agent.publishTopology=true", cases=TOPOLOGY_CASES)
    checked = _promtool(folder, "check", "rules", "qos-guard-rules.yaml")
    assert checked.returncode == 0 and "SUCCESS: 9 rules found" in checked.stdout, checked.stdout + checked.stderr
    proc = _promtool(folder, "test", "rules", TOPOLOGY_CASES.name)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_topology_stale_cases_can_fail(tmp_path: Path) -> None:
    """Another bound, same cases: the alert that fired at 7 minutes no longer does."""
    folder = _rules_folder(tmp_path, "agent.enabled=true", "agent.publishTopology=true",
                           "prometheusRule.topologyStaleSeconds=600", cases=TOPOLOGY_CASES)
    proc = _promtool(folder, "test", "rules", TOPOLOGY_CASES.name)
    assert proc.returncode == 1 and "alertname: QosGuardTopologyStale" in proc.stdout + proc.stderr, proc.stdout
