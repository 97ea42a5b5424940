"""The PodResources client against a real gRPC server on a unix socket (the generated servicer), including
replies kubelet would never send: each is a named error, never a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.nodelogic.fakes import Kubelet, container, serve
from webhook.node.kubelet import PodResourcesClient, PodResourcesError
from webhook.node.podresources import api_pb2


@pytest.fixture
def socket(tmp_path: Path) -> Path:
    return tmp_path / "kubelet.sock"


@pytest.fixture
def kubelet(socket: Path) -> Iterator[Kubelet]:
    k = Kubelet()
    server = serve(socket, k)
    yield k
    server.stop(None)


def test_list_get_and_allocatable(socket: Path, kubelet: Kubelet) -> None:
    kubelet.pods = [api_pb2.PodResources(name="p", namespace="ns", containers=[
        container("app", [1], [("example.com/gpu", ["gpu-1"], [1])], [("memory", 64 * 2**20, [0])])])]
    kubelet.allocatable_cpus = [1, 3]
    with PodResourcesClient(socket) as client:
        (pod,) = client.list()
        got = client.get("ns", "p")
        allocatable = client.allocatable()
    assert got == pod
    (c,) = pod.containers
    assert c.cpus == {1} and c.devices[0].ids == ("gpu-1",) and c.devices[0].numa == {1}
    assert c.memory[0].size == 64 * 2**20 and c.memory[0].numa == {0}
    assert allocatable.cpus == {1, 3}


def test_get_not_served_is_none(socket: Path, kubelet: Kubelet) -> None:
    kubelet.serve_get = False
    with PodResourcesClient(socket) as client:
        assert client.get("ns", "p") is None


def test_missing_socket_says_what_to_mount(tmp_path: Path) -> None:
    with pytest.raises(PodResourcesError, match="no such socket: is kubelet running"):
        PodResourcesClient(tmp_path / "kubelet.sock")
    (tmp_path / "file").write_text("")
    with pytest.raises(PodResourcesError, match="not a unix socket"):
        PodResourcesClient(tmp_path / "file")


def test_dead_socket_is_unavailable(tmp_path: Path) -> None:
    import socket as sockets

    path = tmp_path / "kubelet.sock"
    s = sockets.socket(sockets.AF_UNIX)
    s.bind(str(path))
    s.close()  # the file stays, nobody listens: a kubelet that died
    with PodResourcesClient(path, timeout=2) as client, pytest.raises(PodResourcesError, match="not answering"):
        client.list()


@pytest.mark.parametrize(("reply", "message"), [
    (b"\xff\xff\xff\xff", "is not a PodResources v1 message"),
    (api_pb2.ListPodResourcesResponse(pod_resources=[api_pb2.PodResources(name="p")]).SerializeToString(),
     "without name or namespace"),
    (api_pb2.ListPodResourcesResponse(pod_resources=[api_pb2.PodResources(
        name="p", namespace="n", containers=[container("app", [-1])])]).SerializeToString(), "CPU id -1"),
    (api_pb2.ListPodResourcesResponse(pod_resources=[api_pb2.PodResources(
        name="p", namespace="n", containers=[container("app", [1], [("r", ["d"], [1 << 40])])])]).SerializeToString(),
     "NUMA node 1099511627776 is out of range"),
    (api_pb2.ListPodResourcesResponse(pod_resources=[api_pb2.PodResources(
        name="p", namespace="n", containers=[container("")])]).SerializeToString(), "container without a name"),
    (api_pb2.ListPodResourcesResponse(pod_resources=[api_pb2.PodResources(
        name="p", namespace="n", containers=[api_pb2.ContainerResources(
            name="c", devices=[api_pb2.ContainerDevices(device_ids=["x"])])])]).SerializeToString(),
     "without resource_name"),
])
def test_malformed_replies_are_named(socket: Path, reply: bytes, message: str) -> None:
    server = serve(socket, raw=reply)
    try:
        with PodResourcesClient(socket) as client, pytest.raises(PodResourcesError, match=message):
            client.list()
    finally:
        server.stop(None)


def test_oversized_reply_is_refused(socket: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import webhook.node.kubelet as kubelet_module

    monkeypatch.setattr(kubelet_module, "MAX_REPLY_BYTES", 1024)
    big = api_pb2.ListPodResourcesResponse(pod_resources=[
        api_pb2.PodResources(name=f"p{i}", namespace="n") for i in range(200)]).SerializeToString()
    server = serve(socket, raw=big)
    try:
        with PodResourcesClient(socket) as client, pytest.raises(PodResourcesError, match="too large"):
            client.list()
    finally:
        server.stop(None)


class _GetGateOff(Kubelet):
    """kubelet v1.33's Get while KubeletPodResourcesGet is off: a plain error, so gRPC code UNKNOWN."""

    def Get(self, request: Any, context: Any) -> api_pb2.GetPodResourcesResponse:
        # upstream's text (pkg/kubelet/apis/podresources/server_v1.go, v1.33.13), not the constant under test
        context.abort(grpc.StatusCode.UNKNOWN, "PodResources API Get method disabled")
        raise AssertionError


def test_get_disabled_by_the_gate_is_none(socket: Path) -> None:
    server = serve(socket, _GetGateOff())
    try:
        with PodResourcesClient(socket) as client:
            assert client.get("ns", "p") is None
    finally:
        server.stop(None)


def test_get_of_a_pod_kubelet_does_not_know_is_still_an_error(socket: Path, kubelet: Kubelet) -> None:
    """Only the gate's own words mean "not served": any other UNKNOWN (a Pod not found) stays an error."""
    with PodResourcesClient(socket) as client, pytest.raises(PodResourcesError, match="not found"):
        client.get("ns", "gone")
