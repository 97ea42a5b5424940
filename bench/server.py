"""The webhook under test: one real ``qos-guard serve --enable-noop`` process tree, and its memory."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from webhook.serving.certs import write_bundle


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def process_tree(pid: int) -> list[int]:
    """``pid`` and its children: a gunicorn master and its workers."""
    try:  # one small read where the kernel offers it, rather than a scan of /proc (grandchildren too)
        children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        return [pid, *(p for child in children for p in process_tree(child))]
    except OSError:
        pass
    pids = [pid]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                pids.append(int(entry))
    return pids


def memory_mib(pids: list[int], field: str = "VmHWM") -> float:
    """Sum over ``pids`` of ``field`` from /proc (VmHWM: peak resident; VmRSS: now), in MiB."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(field + ":"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    ca: str

    def tree(self) -> list[int]:
        return process_tree(self.proc.pid)

    def memory_mib(self, field: str = "VmHWM") -> float:
        return memory_mib(self.tree(), field)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)


def pin(pids: list[int], cpus: str) -> None:
    """Every thread of ``pids`` onto ``cpus`` (e.g. "1"; "0-1" to share again)."""
    for pid in pids:
        subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], capture_output=True, check=False)


def serve_reference(folder: Path, workers: int = 2) -> Served:
    """bench/reference.py: a bare Flask + gunicorn + TLS no-op app, the floor ``/noop`` is held to."""
    folder.mkdir(parents=True, exist_ok=True)
    pki = write_bundle(folder / "pki", ["localhost", "127.0.0.1"], 2, keep_ca_key=False)
    port = _free_port()
    log = (folder / "server.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "bench.reference", "--bind", f"127.0.0.1:{port}",
                             "--workers", str(workers), "--cert-file", str(pki.cert), "--key-file", str(pki.key)],
                            stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parent.parent)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                time.sleep(1.0)  # the listener is the master's; give the workers a moment to boot
                return Served(proc, port, 0, str(pki.ca))
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError((folder / "server.log").read_text())


def serve(folder: Path, workers: int = 2, *extra: str, source: Path | None = None) -> Served:
    """Start the server; ``source`` runs another checkout's ``webhook`` package (a before/after run)."""
    folder.mkdir(parents=True, exist_ok=True)
    pki = write_bundle(folder / "pki", ["localhost", "127.0.0.1"], 2, keep_ca_key=False)
    port, mport = _free_port(), _free_port()
    log = (folder / "server.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "webhook.cli", "serve", "--enable-noop",
                             "--bind", f"127.0.0.1:{port}", "--metrics-bind", f"127.0.0.1:{mport}",
                             "--workers", str(workers), "--cert-file", str(pki.cert), "--key-file", str(pki.key),
                             *extra],
                            stdout=log, stderr=subprocess.STDOUT, cwd=folder,
                            env=dict(os.environ, PYTHONPATH=str(source)) if source else None)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{mport}/readyz", timeout=1) as r:
                if r.status == 200:
                    return Served(proc, port, mport, str(pki.ca))
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError((folder / "server.log").read_text())
