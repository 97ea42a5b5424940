"""The committed PodResources stubs are what hack/podresources_stubs.py generates from the api.proto of the
k8s.io/kubelet module matching the Kubernetes version the node tests run (and the pinned grpcio-tools)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.binaries import ROOT

pytestmark = pytest.mark.slow  # go mod download k8s.io/kubelet on first use


def test_committed_stubs_are_current() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "hack" / "podresources_stubs.py"), "--check"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr


def test_the_check_can_fail(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stale stub is reported by name."""
    sys.path.insert(0, str(ROOT / "hack"))
    try:
        import podresources_stubs as gen
    finally:
        sys.path.pop(0)
    stub = ROOT / gen.PACKAGE / "api_pb2.pyi"
    original = stub.read_bytes()
    try:
        stub.write_bytes(original + b"# edited by hand\n")
        proc = subprocess.run([sys.executable, str(ROOT / "hack" / "podresources_stubs.py"), "--check"],
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 1 and "api_pb2.pyi not current" in proc.stderr
    finally:
        stub.write_bytes(original)


def test_stubs_name_the_kubelet_module_of_the_node_tests() -> None:
    build = (ROOT / "hack" / "build-tools.sh").read_text()
    kube = build.split('KUBE_VERSION="${KUBE_VERSION:-v1.', 1)[1].split("}", 1)[0]
    header = (ROOT / "webhook" / "node" / "podresources" / "api_pb2.py").read_text().splitlines()[0]
    assert f"k8s.io/kubelet v0.{kube} " in header
