"""The oracle processes (one per mode for the whole session) and the printed counts of what was compared."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.fidelity.divergences import TALLY
from tests.fidelity.oracle import Oracle

# The grammar's seed: fixed so `make test` is repeatable; set QOS_GUARD_FIDELITY_SEED to explore others.
SEED = int(os.environ.get("QOS_GUARD_FIDELITY_SEED", "20261130"))
# The Kubernetes releases the admission and NUMA-fit differentials run against, comma-separated: the tools'
# default release when unset (`make test`); `make test-versions` names the newest patch of every minor.
ORACLE_VERSIONS: list[str | None] = [v for v in os.environ.get("QOS_GUARD_ORACLE_VERSIONS", "").split(",") if v] \
    or [None]


def _release(version: str | None) -> str:
    return version or "default"


@pytest.fixture(scope="session", params=ORACLE_VERSIONS, ids=_release)
def objects_oracle(request: pytest.FixtureRequest) -> Iterator[Oracle]:
    with Oracle("objects", version=request.param) as oracle:
        yield oracle


@pytest.fixture(scope="session", params=ORACLE_VERSIONS, ids=_release)
def quantities_oracle(request: pytest.FixtureRequest) -> Iterator[Oracle]:
    with Oracle("quantities", version=request.param) as oracle:
        yield oracle


@pytest.fixture(scope="session", params=ORACLE_VERSIONS, ids=_release)
def topology_oracle(request: pytest.FixtureRequest) -> Iterator[Oracle]:
    with Oracle("topology", version=request.param) as oracle:
        yield oracle


@pytest.fixture(scope="session", params=ORACLE_VERSIONS, ids=_release)
def placement_oracle(request: pytest.FixtureRequest) -> Iterator[Oracle]:
    with Oracle("placement", version=request.param) as oracle:
        yield oracle


@pytest.fixture(scope="session", params=ORACLE_VERSIONS, ids=_release)
def read_oracle(request: pytest.FixtureRequest) -> Iterator[Oracle]:
    with Oracle("read", version=request.param) as oracle:
        yield oracle


@pytest.fixture(scope="session", params=ORACLE_VERSIONS, ids=_release)
def readfile_oracle(request: pytest.FixtureRequest) -> Iterator[Oracle]:
    with Oracle("readfile", version=request.param) as oracle:
        yield oracle


@pytest.fixture(scope="session", params=ORACLE_VERSIONS, ids=_release)
def reserved_oracle(request: pytest.FixtureRequest) -> Iterator[Oracle]:
    with Oracle("reserved", version=request.param) as oracle:
        yield oracle


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = TALLY.lines()
    if lines:
        terminalreporter.section(f"fidelity: qos-guard against Kubernetes' own code (seed {SEED})")
        for line in lines:
            terminalreporter.write_line(line)
