"""Drives ``bench/loadgen`` (Go: it costs the shared 2-core machine far less per request than a Python
client would, so the server gets the CPU) and reads its JSON result."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent / "loadgen"
CACHE = Path(os.environ.get("QOS_GUARD_TOOLS", Path.home() / ".cache" / "qos-guard" / "tools"))


@dataclass
class Result:
    requests: int
    errors: int
    seconds: float
    rate: float
    p50: float
    p99: float
    p999: float


def loadgen() -> str:
    """The load generator, built once per source version into the tools cache (never into the repo)."""
    digest = hashlib.sha256(b"".join((HERE / f).read_bytes() for f in ("go.mod", "main.go"))).hexdigest()[:12]
    exe = CACHE / f"loadgen-{digest}"
    if not exe.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["go", "build", "-o", str(exe) + ".tmp", "."], cwd=HERE, check=True,
                       env=dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0"))
        os.replace(str(exe) + ".tmp", exe)
    return str(exe)


def run(port: int, ca: str, path: str, bodies: Path, seconds: float, connections: int,
        rate: float | None = None, cpus: str | None = None, token: str | None = None, expect: int = 0,
        host: str = "localhost") -> Result:
    """Saturate with ``connections`` (rate None), or offer ``rate`` requests/s over them (open loop);
    ``cpus`` pins the load generator (``taskset -c``); ``token`` and ``expect`` (a status code) drive the API
    server instead of the webhook."""
    pinned = ["taskset", "-c", cpus] if cpus else []
    auth = ["-token", token, "-expect", str(expect)] if token else []
    proc = subprocess.run([*pinned, loadgen(), "-url", f"https://{host}:{port}", "-path", path, "-ca", ca,
                           "-bodies", str(bodies), "-duration", f"{seconds}s", "-connections", str(connections),
                           "-rate", str(rate or 0), *auth], capture_output=True, text=True, timeout=seconds + 120,
                          check=True)
    out = json.loads(proc.stdout)
    return Result(int(out["requests"]), int(out["errors"]), out["seconds"], out["rate"], out["p50"], out["p99"],
                  out["p999"])
