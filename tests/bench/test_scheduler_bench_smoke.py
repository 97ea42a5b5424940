"""``python -m bench.scheduler`` in miniature (a real control plane, the real kube-scheduler with and without the
extender, a few nodes and Pods): it cannot rot. No timing is asserted; that every Pod was bound in both profiles
(with the scheduler's client throttled as kube-scheduler's defaults and unthrottled), the extender synced, and both
containers' memory was read and set against the chart's limits is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_scheduler_benchmark_smoke_run(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.scheduler", "--smoke", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((tmp_path / "scheduler.json").read_text())
    from bench.scheduler import CLIENTS
    labels = {f"{profile}, {client}" for profile in ("default scheduler", "through the extender") for client in CLIENTS}
    assert set(results["rate"]) == labels and len(labels) == 4
    assert results["bound"] == {label: [12] for label in labels}
    assert all(rate > 0 for rates in results["rate"].values() for rate in rates)
    assert results["memory_nodes"] == 40 and results["memory_pods"] == 4
    for container in ("extender", "scheduler"):
        figures = results[container]
        assert 0 < figures["pssMiB"] <= figures["rssMiB"] <= figures["peakMiB"] + 1, figures
    assert results["extender"]["processes"] == 2  # gunicorn's master and its one worker
    assert set(results["limits"]) == {"kube-scheduler", "extender"}
    table = (tmp_path / "scheduler.md").read_text()
    assert "| extender |" in table and "| kube-scheduler |" in table
