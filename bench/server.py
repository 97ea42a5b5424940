"""The servers a benchmark runs, started by the one launcher the tests use (tests/serving.py): qos-guard
(``bench.serve``, ``/noop`` on), the bare reference app, and pinning them to CPUs."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.serving import Server, memory_mib, process_tree, start_reference, start_server

Served = Server  # the name bench/run.py has used


def serve(folder: Path, workers: int = 2, *extra: str, source: Path | None = None) -> Server:
    """qos-guard with ``/noop``; ``source`` runs another checkout's ``webhook`` package (a before/after run)."""
    return start_server(folder, "--enable-noop", *extra, workers=workers, bench=True, source=source)


def serve_reference(folder: Path, workers: int = 2) -> Server:
    return start_reference(folder, workers)


def pin(pids: list[int], cpus: str) -> None:
    """Every thread of ``pids`` onto ``cpus`` (e.g. "1"; "0-1" to share again)."""
    for pid in pids:
        subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], capture_output=True, check=False)


__all__ = ["Served", "memory_mib", "pin", "process_tree", "serve", "serve_reference"]
