"""The one launcher for every server the tests and the benchmarks start: a real process on free loopback
ports, ready when it answers. ``start_server`` runs ``qos-guard serve`` (or ``bench.serve``, which adds the
benchmark-only flags, or another checkout's server); ``launch`` runs any command (bench/reference.py). Also the
certificate rotation the lifecycle and soak tests do, and the process-tree memory the benchmarks read."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from cryptography import x509

from tests import waiting
from tests.cgroup import MemoryCgroup
from webhook.serving.certs import reissue_serving, write_bundle

ROOT = Path(__file__).resolve().parents[1]
SANS = ("localhost", "127.0.0.1")


def free_port() -> int:
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
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    metrics_port: int  # 0: the server has no plain port (bench/reference.py)
    ca: str
    folder: Path
    cgroup: MemoryCgroup | None = None  # start_server(memory_limit=...): the kernel holds it to that limit

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}"

    @property
    def metrics(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"

    def post(self, path: str, body: Any, **kw: Any) -> requests.Response:
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return requests.post(self.url + path, data=data, verify=self.ca, timeout=10,
                             headers={"Content-Type": "application/json"}, **kw)

    def tree(self) -> list[int]:
        return process_tree(self.proc.pid)

    def memory_mib(self, field: str = "VmHWM") -> float:
        return memory_mib(self.tree(), field)

    def stop(self) -> None:
        """SIGTERM, as kubelet stops a Pod; when it returns no process of this server is left to answer (a
        master killed after the timeout no longer leaves its workers serving on their connections)."""
        if self.proc.poll() is None:
            workers = self.tree()[1:]
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            given: Any = self.proc.args
            args: list[Any] = list(given) if isinstance(given, list) else [given]
            if self.cgroup is not None:  # the processes run the command the cgroup prefix exec'd
                args = args[len(self.cgroup.prefix()):]
            command = "\0".join(str(a) for a in args) + "\0"
            for pid in workers:  # still there, and still ours (a pid can be reused)
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{pid}/cmdline").read_text() == command:
                        os.kill(pid, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.remove()


def _readyz(server: Server) -> bool:
    return requests.get(server.metrics + "/readyz", timeout=2).status_code == 200


def _listening(server: Server) -> bool:
    with socket.create_connection(("127.0.0.1", server.port), timeout=1):
        time.sleep(1.0)  # the listener is the master's; give the workers a moment to boot
    return True


def _log_text(folder: Path) -> str:
    log = folder / "server.log"
    return log.read_text() if log.exists() else "(its output goes elsewhere)"


def launch(folder: Path, command: Sequence[str], port: int, metrics_port: int, ca: str,
           ready: Callable[[Server], bool] = _readyz, env: dict[str, str] | None = None,
           cgroup: MemoryCgroup | None = None, output: int | None = None) -> Server:
    """Run ``command`` in ``folder`` (its output in server.log, or to the descriptor ``output``; inside
    ``cgroup`` when given) and wait until ``ready``: the one start-and-wait loop of every server the tests and
    benchmarks start."""
    log: Any = (folder / "server.log").open("wb") if output is None else output
    proc = subprocess.Popen([*(cgroup.prefix() if cgroup else []), *command], cwd=folder, stdout=log,
                            stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
    server = Server(proc, port, metrics_port, ca, folder, cgroup)

    def up() -> bool:
        if proc.poll() is not None:  # exited: no point waiting
            raise RuntimeError(_log_text(folder))
        try:
            return ready(server)
        except (OSError, requests.RequestException):  # not listening yet, or no worker answers yet
            return False

    try:
        waiting.eventually(f"the server ready ({ready.__name__})", up, within=30,
                           seen=lambda: "server.log:\n" + _log_text(folder))
    except AssertionError:
        server.stop()
        raise
    return server


def start_server(folder: Path, *extra: str, certs: bool = True, cert_dir: Path | None = None, workers: int = 2,
                 bench: bool = False, source: Path | None = None, memory_limit: int | None = None,
                 output: int | None = None) -> Server:
    """``qos-guard serve`` with ``extra`` flags, ready when ``/readyz`` answers. Certificates: a fresh CA kept
    in ``folder/pki`` (``rotate_certificate`` renews from it), the set in ``cert_dir``, or (``certs=False``) the
    server's own local development CA. ``bench``: run ``bench.serve`` (benchmark-only flags); ``source``: the
    ``webhook`` package (and bench/) of another checkout, for a before/after comparison. ``memory_limit``: the
    server runs in a memory cgroup of that many bytes (tests/cgroup.py; root only), as in a Pod at its limit.
    ``output``: a descriptor its stdout and stderr go to instead of ``folder/server.log`` (a pipe the test reads)."""
    folder.mkdir(parents=True, exist_ok=True)
    port, mport = free_port(), free_port()
    program = ["-m", "bench.serve"] if bench else ["-m", "webhook.cli", "serve"]
    if bench and source is not None and not (source / "bench" / "serve.py").exists():
        program = ["-m", "webhook.cli", "serve"]  # a checkout from before bench.serve: its CLI had the flags
    args = [sys.executable, *program, "--bind", f"127.0.0.1:{port}", "--metrics-bind", f"127.0.0.1:{mport}",
            "--workers", str(workers), *extra]
    if cert_dir is not None:
        args += ["--cert-file", str(cert_dir / "tls.crt"), "--key-file", str(cert_dir / "tls.key")]
        ca = str(cert_dir / "ca.crt")
    elif certs:
        paths = write_bundle(folder / "pki", SANS, 30, keep_ca_key=True)
        args += ["--cert-file", str(paths.cert), "--key-file", str(paths.key)]
        ca = str(paths.ca)
    else:
        ca = str(folder / "certs" / "localhost" / "ca.crt")
    path = os.pathsep.join(str(p) for p in (source, ROOT) if p is not None)
    cgroup = MemoryCgroup(f"qos-guard-test-{os.getpid()}-{port}", memory_limit) if memory_limit else None
    try:
        return launch(folder, args, port, mport, ca, env={"PYTHONPATH": path}, cgroup=cgroup, output=output)
    except BaseException:
        if cgroup is not None:
            cgroup.remove()
        raise


def start_reference(folder: Path, workers: int = 2) -> Server:
    """bench/reference.py: a bare Flask + gunicorn + TLS no-op app, the floor ``/noop`` is held to."""
    folder.mkdir(parents=True, exist_ok=True)
    pki = write_bundle(folder / "pki", SANS, 2, keep_ca_key=False)
    port = free_port()
    command = [sys.executable, "-m", "bench.reference", "--bind", f"127.0.0.1:{port}", "--workers", str(workers),
               "--cert-file", str(pki.cert), "--key-file", str(pki.key)]
    return launch(folder, command, port, 0, str(pki.ca), ready=_listening, env={"PYTHONPATH": str(ROOT)})


def rotate_certificate(server: Server, days: int = 30) -> int:
    """A renewed serving certificate from the server's own CA (``start_server``'s ``folder/pki``), written as
    cert-manager or kubelet would update a mounted Secret (the server picks it up from disk): its serial."""
    paths = reissue_serving(server.folder / "pki", SANS, days)
    return int(x509.load_pem_x509_certificate(paths.cert.read_bytes()).serial_number)
