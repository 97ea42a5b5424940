"""The real binaries the tests run (helm, etcd, kube-apiserver), built once by ``hack/build-tools.sh``.

A binary that cannot be built fails the test run loudly: these tests are the proof, so they never skip.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def binary(name: str, kube_version: str | None = None) -> str:
    """Path of ``name``, building it from the Go module proxy on first use (then cached by version);
    ``kube_version`` (v1.37.2): a Kubernetes binary, or the oracle, of that release instead of the default."""
    env = dict(os.environ, KUBE_VERSION=kube_version) if kube_version else None
    proc = subprocess.run(["bash", str(ROOT / "hack" / "build-tools.sh"), name],
                          capture_output=True, text=True, timeout=3600, env=env)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"cannot build {name} (hack/build-tools.sh {name}):\n{proc.stderr[-4000:]}")
    return proc.stdout.strip().splitlines()[-1]


# Go modules whose files (not binaries) the tests read: the policy report CRDs.
OPENREPORTS = ("github.com/openreports/reports-api", "v0.2.1")
# wgpolicyk8s.io/v1alpha2 PolicyReport CRD, as Kyverno (Apache-2.0) publishes it: config/crds/policyreport/.
KYVERNO = ("github.com/kyverno/kyverno", "v1.14.4")
# topology.node.k8s.io NodeResourceTopology CRD (manifests/crd.yaml), which `policy.numa: auto` reads.
NRT_API = ("github.com/k8stopologyawareschedwg/noderesourcetopology-api", "v0.1.2")


@functools.cache
def go_module(path: str, version: str) -> Path:
    """The unpacked source of a Go module, downloaded through the module proxy into Go's module cache."""
    proc = subprocess.run(["go", "mod", "download", "-json", f"{path}@{version}"], capture_output=True, text=True,
                          timeout=1800, env={**os.environ, "GOFLAGS": "-mod=mod"})
    if proc.returncode != 0:
        raise RuntimeError(f"go mod download {path}@{version} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return Path(json.loads(proc.stdout)["Dir"])
