"""The oracle processes (one per mode for the whole session) and the printed counts of what was compared."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.fidelity.divergences import TALLY
from tests.fidelity.oracle import Oracle

# The grammar's seed: fixed so `make test` is repeatable; set QOS_GUARD_FIDELITY_SEED to explore others.
SEED = int(os.environ.get("QOS_GUARD_FIDELITY_SEED", "20261130"))


@pytest.fixture(scope="session")
def objects_oracle() -> Iterator[Oracle]:
    with Oracle("objects") as oracle:
        yield oracle


@pytest.fixture(scope="session")
def quantities_oracle() -> Iterator[Oracle]:
    with Oracle("quantities") as oracle:
        yield oracle


@pytest.fixture(scope="session")
def topology_oracle() -> Iterator[Oracle]:
    with Oracle("topology") as oracle:
        yield oracle


@pytest.fixture(scope="session")
def placement_oracle() -> Iterator[Oracle]:
    with Oracle("placement") as oracle:
        yield oracle


@pytest.fixture(scope="session")
def read_oracle() -> Iterator[Oracle]:
    with Oracle("read") as oracle:
        yield oracle


@pytest.fixture(scope="session")
def reserved_oracle() -> Iterator[Oracle]:
    with Oracle("reserved") as oracle:
        yield oracle


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = TALLY.lines()
    if lines:
        terminalreporter.section(f"fidelity: qos-guard against Kubernetes' own code (seed {SEED})")
        for line in lines:
            terminalreporter.write_line(line)
