"""One chart replica's capacity: ``qos-guard serve`` as the chart runs it (its ``server.workers``) held to the
chart's default CPU (250m: a cgroup v1 CFS quota of 25 ms per 100 ms, as kubelet sets a 250m limit), driven by
bench/loadgen with the corpus' AdmissionReviews. Prints requests/s at saturation, then the latency at fixed offered
rates, so an operator can size ``replicaCount`` or ``autoscaling`` (README.md "Sizing", charts/qos-guard/README.md
"Scaling out").

    sudo .venv/bin/python -m bench.capacity [--cpu-milli 250] [--workers N] [--seconds 10] [--repeats 3]

Needs root (it makes a cgroup) and a cgroup v1 ``cpu`` hierarchy, as on the machine the numbers were taken.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench import load
from bench.corpus import admission_review, corpus_objects
from tests.serving import start_server

CPU_ROOT = Path("/sys/fs/cgroup/cpu")
VALUES = Path(__file__).resolve().parent.parent / "charts" / "qos-guard" / "values.yaml"


def chart_workers() -> int:
    """The chart's default ``server.workers``: the replica measured is the one the chart deploys."""
    return int(yaml.safe_load(VALUES.read_text())["server"]["workers"])


def _cgroup(milli: int) -> Path:
    group = CPU_ROOT / f"qos-guard-capacity-{os.getpid()}"
    group.mkdir()
    (group / "cpu.cfs_period_us").write_text("100000")
    (group / "cpu.cfs_quota_us").write_text(str(milli * 100))
    return group


def _move(group: Path, pids: list[int]) -> None:
    for pid in pids:
        (group / "cgroup.procs").write_text(str(pid))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-milli", type=int, default=250)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--workers", type=int, default=chart_workers(), help="default: the chart's server.workers")
    args = parser.parse_args(argv)
    if not (CPU_ROOT / "cpu.cfs_quota_us").exists():
        print("bench.capacity: needs a cgroup v1 cpu hierarchy at /sys/fs/cgroup/cpu (and root)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="qos-guard-capacity-"))
    bodies = work / "bodies.jsonl"
    bodies.write_bytes(b"\n".join(admission_review(o) for o in corpus_objects()) + b"\n")
    group = _cgroup(args.cpu_milli)
    server = start_server(work / "server", "--workers", str(args.workers))
    try:
        time.sleep(2)  # every worker booted before it is confined and measured
        _move(group, server.tree())
        load.run(server.port, server.ca, "/validate", bodies, 2, args.connections)  # warm-up
        rates, p99s = [], []
        for _ in range(args.repeats):
            r = load.run(server.port, server.ca, "/validate", bodies, args.seconds, args.connections)
            rates.append(r.rate)
            p99s.append(r.p99)
            assert r.errors == 0, r
        saturation = statistics.median(rates)
        open_loop: list[dict[str, float]] = []
        for share in (0.5, 0.8):
            rate = round(saturation * share)
            r = load.run(server.port, server.ca, "/validate", bodies, args.seconds, args.connections, rate=rate)
            open_loop.append({"offered": rate, "achieved": r.rate, "p50_ms": r.p50, "p99_ms": r.p99,
                              "p999_ms": r.p999, "errors": r.errors})
        result = {"cpu_milli": args.cpu_milli, "workers": args.workers, "connections": args.connections,
                  "saturation_rps": rates, "saturation_p99_ms": p99s, "open_loop": open_loop}
        print(json.dumps(result, indent=2))
    finally:
        server.stop()
        for pid in (group / "cgroup.procs").read_text().split():
            (CPU_ROOT / "cgroup.procs").write_text(pid)
        group.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
