"""``python -m bench.numa`` in miniature (a real control plane, two servers, seconds): it cannot rot. No timing
is asserted; that it measured both servers, answered everything, and wrote its table is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_numa_benchmark_smoke_run(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.numa", "--smoke", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((tmp_path / "numa.json").read_text())
    assert set(results["saturation"]) == {"without", "numa: auto"}
    assert all(rate > 0 for rates in results["saturation"].values() for rate in rates)
    assert results["errors"] == {"without": 0, "numa: auto": 0}
    assert results["nodes"] == 30
    assert "Goal: `/validate` with `numa: auto` within 10 % of `/validate` without it" in \
        (tmp_path / "numa.md").read_text()
