"""The real binaries the tests run (helm, etcd, kube-apiserver), built once by ``hack/build-tools.sh``.

A binary that cannot be built fails the test run loudly: these tests are the proof, so they never skip.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def binary(name: str) -> str:
    """Path of ``name``, building it from the Go module proxy on first use (then cached by version)."""
    proc = subprocess.run(["bash", str(ROOT / "hack" / "build-tools.sh"), name],
                          capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"cannot build {name} (hack/build-tools.sh {name}):\n{proc.stderr[-4000:]}")
    return proc.stdout.strip().splitlines()[-1]
