"""`make bench` in miniature, so the benchmark cannot rot: every path runs for seconds. No timing is asserted
(that is the benchmark's job); what is asserted is that it measured something and nothing failed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_benchmark_smoke_run(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.run", "--smoke", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["saturation"]) == {"/noop", "/validate", "/mutate", "reference /noop"}
    assert all(rate > 0 for rates in results["saturation"].values() for rate in rates)
    assert results["errors"] == {"/noop": 0, "/validate": 0, "/mutate": 0, "reference /noop": 0}  # all right
    for by_rate in results["latency"].values():
        for runs in by_rate.values():
            assert all(0 < run["p50"] <= run["p99"] <= run["p999"] for run in runs)
    assert results["server_peak_mib"] > 10
    assert {"YAML floor (CSafeLoader)", "qos-guard check"} <= set(results["cli"])
    assert results["cli_documents"] >= 100
    docs = [row["documents"] for row in results["scaling"]]
    assert docs == sorted(docs) and len(docs) == 2
    after = results["bodies"]["after"]
    assert set(after) == {"small", "inference", "1 MB", "3 MiB"}
    assert all(e["bytes"] > 0 for by_path in after.values() for e in by_path.values())
    assert all(e["us"] > 0 for name, by_path in after.items() if name != "3 MiB" for e in by_path.values())
    assert {"qos-guard check", "qos-guard check (no bytecode)"} <= set(results["plain"])
    table = (tmp_path / "README.md").read_text()
    for heading in ("## Webhook", "## CLI", "## Scaling", "Goals:", "Goals (what bounds a missed one",
                    "## Per request, by body", "## `check` on many small files"):
        assert heading in table
    assert "the bare Flask + gunicorn + TLS reference" in table  # each webhook goal, met or missed


def test_fix_speed_bench_smoke_run(tmp_path: Path) -> None:
    """``bench.fix_speed`` (part of ``make bench``) on a small file: both fix commands run side by side on the
    same file, the dry run's diff is printed, and the goal line is written."""
    out = subprocess.run([sys.executable, "-m", "bench.fix_speed", "--mib", "0.05", "--repeats", "1",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=600, check=False)
    assert "Traceback" not in out.stderr, out.stderr
    res = json.loads((tmp_path / "fix.json").read_text())
    runs = res["runs"]
    assert set(runs) == {"check", "fix (in place)", "fix --dry-run"} and res["pods"] > 100
    assert runs["fix (in place)"][0]["returncode"] == 0 and runs["fix --dry-run"][0]["returncode"] == 0
    assert runs["fix --dry-run"][0]["output_bytes"] > res["pods"] * 50  # one hunk per Pod, on stdout
    assert "- Goal: `fix --dry-run` within 1.5x of an in-place `fix`: " in (tmp_path / "fix.md").read_text()
