"""Shared test settings: hypothesis profiles sized for a 2-core CI machine, and the test tiers.

Tiers are markers set by folder, so a new test file lands in the right one: ``e2e`` (a real etcd and
kube-apiserver), ``node`` (a real kubelet with containerd), ``slow`` (real servers, helm, fuzzing, soak,
the benchmark smoke run, the differential oracle, and the tools of users' loops: pre-commit, promtool, kubectl
plugins, the GitHub action). ``make test-fast`` runs what is left, in under a minute.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.binaries import kube_version
from webhook import interpreter

# PYTHONDONTWRITEBYTECODE (set in the Dockerfile and in many shells) also stops pytest from keeping the test
# modules it rewrote for its assertions: every run, every xdist worker parsed, rewrote and compiled all of them
# again (about 6 of each worker's 9 CPU-seconds of collection). pytest's cache of rewritten modules is keyed by
# its own version and each source's size and mtime, so it is never stale. Commands run as subprocesses still
# see the variable.
sys.dont_write_bytecode = False

# The test process reads documents in process as a qos-guard command does: the same start-up settings (the
# recursion limit deep documents need; webhook/interpreter.py). Not the batch collector thresholds: pytest runs
# for minutes and keeps the default ones.
interpreter.configure(batch=False)

settings.register_profile("ci", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

_TIERS = {"e2e": "e2e", "node": "node", "server": "slow", "reliability": "slow", "chart": "slow",
          "bench": "slow", "fidelity": "slow", "ecosystem": "slow"}


def pytest_configure(config: pytest.Config) -> None:
    """A Kubernetes release that is not one (``QOS_GUARD_KUBE_VERSION=1.37``) stops the run before any test."""
    try:
        kube_version()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_report_header(config: pytest.Config) -> str:
    return f"kubernetes: {kube_version()} (QOS_GUARD_KUBE_VERSION picks another)"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        folder = Path(item.path).relative_to(root).parts[0]
        if folder in _TIERS:
            item.add_marker(getattr(pytest.mark, _TIERS[folder]))


@pytest.fixture
def measured(record_property: Callable[[str, object], None]) -> Callable[[str], None]:
    """Note a figure a test measured (a time, a count, the API server's own words) for the run's summary.

    Kept as the test's report property, so it reaches the summary from xdist workers too, and only from a test
    that passed: a figure never stands in for an assertion."""
    return lambda line: record_property("measured", line)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The figures of the tests that passed (``measured``), one line each, after the results."""
    lines = [f"{report.nodeid}: {value}" for report in terminalreporter.stats.get("passed", [])
             for name, value in getattr(report, "user_properties", ()) if name == "measured"]
    if lines:
        terminalreporter.section("measured")
        for line in lines:
            terminalreporter.write_line(line)
