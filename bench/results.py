"""What ``make bench`` measures with (``Settings``) and what it found (``Results``), apart from both the run
(``bench/run.py``) and the writing of its report (``bench/report.py``), which each import this and not each
other."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

REFERENCE = "reference /noop"  # bench/reference.py: bare Flask + gunicorn + TLS


@dataclass
class Settings:
    seconds: float = 8.0
    repeats: int = 3
    rates: tuple[int, ...] = (100, 500, 1000)
    connections: int = 4
    cli_documents: int = 10_000
    cli_repeats: int = 3
    scaling: tuple[int, ...] = (1_000, 10_000, 100_000)
    peers: bool = True
    plot: bool = True
    pinned: bool = True
    body_iterations: int = 300
    body_rounds: int = 6
    plain_rounds: int = 9


SMOKE = Settings(seconds=1.0, repeats=1, rates=(100,), connections=2, cli_documents=150, cli_repeats=1,
                 scaling=(100, 200), peers=False, plot=False, pinned=False, body_iterations=3, body_rounds=1,
                 plain_rounds=1)


@dataclass
class Results:
    machine: dict[str, Any] = field(default_factory=dict)
    saturation: dict[str, list[float]] = field(default_factory=dict)       # endpoint -> req/s per repeat
    pinned: str = ""                                                       # how client and server were pinned
    pinned_saturation: dict[str, list[float]] = field(default_factory=dict)
    pinned_latency: dict[str, dict[int, list[dict[str, float]]]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)                   # endpoint -> failed answers
    latency: dict[str, dict[int, list[dict[str, float]]]] = field(default_factory=dict)
    server_peak_mib: float = 0.0
    baseline: str = ""                                                     # git revision compared against
    baseline_saturation: dict[str, list[float]] = field(default_factory=dict)
    baseline_latency: dict[str, dict[int, list[dict[str, float]]]] = field(default_factory=dict)
    cli: dict[str, list[dict[str, float]]] = field(default_factory=dict)   # command -> [{seconds, peak_mib}]
    cli_documents: int = 0
    cli_subset_documents: int = 0
    cli_memory_sampled: bool = True  # False in runs before peak memory was sampled from /proc (then unknown)
    scaling: list[dict[str, float]] = field(default_factory=list)
    # Per request, in-process (bench/bodies.py): {"after"|"before": {body: {path: {size, bytes, us, ...}}}}
    bodies: dict[str, Any] = field(default_factory=dict)
    bodies_baseline: str = ""
    # The plain corpus, one invocation per tool per round: {command: [{"seconds", "cpu_seconds"}]}
    plain: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    plain_files: int = 0


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")
