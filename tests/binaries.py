"""The real binaries the tests run (helm, etcd, kube-apiserver), built once by ``hack/build-tools.sh``.

A binary that cannot be built fails the test run loudly: these tests are the proof, so they never skip.

The Kubernetes release of the Kubernetes binaries (kube-apiserver, kubectl, kube-scheduler, kubelet, ... and the
oracle built against k8s.io/kubernetes) is ``$QOS_GUARD_KUBE_VERSION`` (e.g. ``v1.37.2``), by default
build-tools.sh's ``KUBE_VERSION``: one variable picks the minor every tier runs (``make test-versions``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KUBE_VERSION_ENV = "QOS_GUARD_KUBE_VERSION"
# A release, or a minor's pre-release while its v1.MINOR.0 is not served (v1.38.0-beta.0).
_RELEASE = re.compile(r"v1\.(\d+)\.(\d+)(?:-(?:alpha|beta|rc)\.\d+)?")


@functools.cache
def kube_version_or(given: str | None) -> str:
    """``given`` (a release asked for by name), else the one the tiers run (``kube_version``)."""
    return given or kube_version()


def kube_version() -> str:
    """The Kubernetes release the tiers run: ``$QOS_GUARD_KUBE_VERSION`` (or ``$KUBE_VERSION``, which
    build-tools.sh reads), else build-tools.sh's default."""
    chosen, direct = os.environ.get(KUBE_VERSION_ENV, "").strip(), os.environ.get("KUBE_VERSION", "").strip()
    if chosen and direct and chosen != direct:
        raise ValueError(f"{KUBE_VERSION_ENV}={chosen} but KUBE_VERSION={direct}: set one of them")
    chosen = chosen or direct  # KUBE_VERSION is what build-tools.sh reads: the same choice
    if not chosen:
        text = (ROOT / "hack" / "build-tools.sh").read_text()
        match = re.search(r'^KUBE_VERSION="\$\{KUBE_VERSION:-(v[^}]+)\}"', text, re.MULTILINE)
        assert match, "no KUBE_VERSION default in hack/build-tools.sh"
        chosen = match.group(1)
    if not _RELEASE.fullmatch(chosen):
        raise ValueError(f"{KUBE_VERSION_ENV}={chosen!r} is not a Kubernetes release: give one such as v1.37.2")
    return chosen


def kube_minor() -> int:
    """The minor of ``kube_version()`` (37 for v1.37.2)."""
    match = _RELEASE.fullmatch(kube_version())
    assert match
    return int(match.group(1))


@functools.cache
def binary(name: str, release: str | None = None) -> str:
    """Path of ``name``, building it from the Go module proxy on first use (then cached by version);
    ``release`` (v1.37.2): a Kubernetes binary, or the oracle, of that release instead of the chosen one
    (``kube_version()``)."""
    chosen = kube_version_or(release)
    proc = subprocess.run(["bash", str(ROOT / "hack" / "build-tools.sh"), name], capture_output=True, text=True,
                          timeout=3600, env={**os.environ, "KUBE_VERSION": chosen})
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"cannot build {name} (KUBE_VERSION={chosen} hack/build-tools.sh {name}):\n"
                           f"{proc.stderr[-4000:]}")
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
