"""A real ``qos-guard serve`` subprocess (gunicorn, TLS) on free loopback ports, shared by server and e2e tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from webhook.serving.certs import write_bundle


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    proc: subprocess.Popen[str]
    url: str
    metrics: str
    ca: str
    folder: Path
    port: int

    def post(self, path: str, body: Any, **kw: Any) -> requests.Response:
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return requests.post(self.url + path, data=data, verify=self.ca, timeout=10,
                             headers={"Content-Type": "application/json"}, **kw)

    def workers(self) -> set[int]:
        """The gunicorn workers' pids (the master's children)."""
        try:
            return {int(pid) for pid in
                    Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()}
        except OSError:
            return set()

    def stop(self) -> None:
        """SIGTERM, as kubelet stops a Pod; when it returns no process of this server is left to answer (a
        master killed after the timeout no longer leaves its workers serving on their connections)."""
        if self.proc.poll() is None:
            workers = self.workers()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            command = "\0".join(str(a) for a in self.proc.args) + "\0"
            for pid in workers:  # still there, and still ours (a pid can be reused)
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{pid}/cmdline").read_text() == command:
                        os.kill(pid, signal.SIGKILL)


def start_server(folder: Path, *extra: str, certs: bool = True, cert_dir: Path | None = None) -> Server:
    """Start and wait for /readyz; ``cert_dir`` serves an existing ``ca.crt``/``tls.crt``/``tls.key`` set."""
    folder.mkdir(parents=True, exist_ok=True)
    port, mport = free_port(), free_port()
    args = [sys.executable, "-m", "webhook.cli", "serve", "--bind", f"127.0.0.1:{port}",
            "--metrics-bind", f"127.0.0.1:{mport}", "--workers", "2", *extra]
    if cert_dir is not None:
        args += ["--cert-file", str(cert_dir / "tls.crt"), "--key-file", str(cert_dir / "tls.key")]
        ca = str(cert_dir / "ca.crt")
    elif certs:
        paths = write_bundle(folder / "pki", ["localhost", "127.0.0.1"], 30, keep_ca_key=True)
        args += ["--cert-file", str(paths.cert), "--key-file", str(paths.key)]
        ca = str(paths.ca)
    else:
        ca = str(folder / "certs" / "ca.crt")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log = open(folder / "server.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(args, cwd=folder, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
    server = Server(proc, f"https://localhost:{port}", f"http://127.0.0.1:{mport}", ca, folder, port)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError((folder / "server.log").read_text())
        try:
            if requests.get(server.metrics + "/readyz", timeout=2).status_code == 200:
                return server
        except requests.RequestException:  # not listening yet, or no worker answers yet
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError("server did not become ready:\n" + (folder / "server.log").read_text())
