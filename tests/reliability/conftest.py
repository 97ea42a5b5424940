"""Counts fuzz cases and soak figures, printed at the end of the run (docs/reliability.md quotes them)."""

from __future__ import annotations

import collections
from typing import Any

CASES: collections.Counter[str] = collections.Counter()
FIGURES: list[str] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if CASES:
        detail = ", ".join(f"{name} {n}" for name, n in sorted(CASES.items()))
        terminalreporter.write_line(f"fuzz: {sum(CASES.values())} generated cases ({detail})")
    for line in FIGURES:
        terminalreporter.write_line(line)
