"""Who pins the node's CPUs, published by the agent in its NodeResourceTopology object (``cpuPinner``,
``cpuPinnerSource``: ``webhook.core.cpupinner``, ``webhook.node.pinner_source``) and read back as ``nodes``,
``check --kubeconfig`` and ``audit`` read it: from its kubelet's ``cpuManagerPolicy`` and its node's ResourceSlices
(field selector ``spec.nodeName``), left out while either is not known (never ``none``)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.nodelogic.fakes import serve
from tests.nodelogic.test_topology_report import API, DeviceKubelet, sysfs
from webhook.cluster.client import ClusterError, Reply
from webhook.core.cpupinner import (
    AGENT_SOURCE,
    BOTH,
    CPU_MANAGER,
    DRA_CPU,
    NOBODY,
    PINNER_ATTRIBUTE,
    SOURCE_ATTRIBUTE,
    Pinner,
    decide,
    pinner_attributes,
    read_pinner,
)
from webhook.node.kubelet import PodResourcesClient
from webhook.node.pinner_source import SLICES_PATH, SOON, PinnerSource
from webhook.node.topology_publisher import TopologyPublisher


@pytest.mark.parametrize(("policy", "dra", "value"), [
    ("static", False, CPU_MANAGER), ("static", True, BOTH), ("none", True, DRA_CPU), ("none", False, NOBODY),
    ("Static", False, CPU_MANAGER), (None, True, None), ("static", None, None), (None, None, None)])
def test_the_pinner_is_decided_only_from_both_sources(policy: str | None, dra: bool | None,
                                                      value: str | None) -> None:
    assert decide(policy, dra) == value
    attributes = pinner_attributes(policy, dra)
    assert read_pinner({"attributes": attributes}) == (Pinner(value, AGENT_SOURCE) if value else None)
    assert bool(attributes) is (value is not None)


def test_a_value_not_known_is_not_read() -> None:
    assert read_pinner({"attributes": [{"name": PINNER_ATTRIBUTE, "value": "someone"}]}) is None
    assert read_pinner({"attributes": "x"}) is None and read_pinner({}) is None


def test_two_different_pinners_are_not_known_and_a_repeated_one_is_read() -> None:
    """The NUMA fit drops CPUs where the pinner says none: two values must not resolve to the last one."""
    def pinned(*values: str) -> Pinner | None:
        return read_pinner({"attributes": [*({"name": PINNER_ATTRIBUTE, "value": v} for v in values),
                                           {"name": SOURCE_ATTRIBUTE, "value": AGENT_SOURCE}]})
    assert pinned(NOBODY, CPU_MANAGER) is None and pinned(CPU_MANAGER, NOBODY) is None
    assert pinned(NOBODY, NOBODY) == Pinner(NOBODY, AGENT_SOURCE)
    assert Pinner(BOTH, "x").cpu_manager_policy == "static" and Pinner(DRA_CPU, "x").cpu_manager_policy == "none"


class SlicesAPI(API):
    """The publisher's requests, and the list of this node's ResourceSlices (``slices``: status and items)."""

    def __init__(self, slices: tuple[int, list[dict[str, Any]]]) -> None:
        super().__init__()
        self.slices = slices
        self.selectors: list[str] = []

    def request(self, method: str, path: str, query: list[tuple[str, str]], body: Any,
                content_type: str | None) -> Reply:
        if path == SLICES_PATH:
            self.selectors.append(dict(query)["fieldSelector"])
            if self.slices[0] == 0:
                raise ClusterError("connection refused")
            return Reply(self.slices[0], {"items": self.slices[1]} if self.slices[0] == 200 else {"message": "no"})
        return super().request(method, path, query, body, content_type)


def driver(name: str) -> dict[str, Any]:
    return {"spec": {"driver": name, "nodeName": "n1", "devices": []}}


@pytest.mark.parametrize(("policy", "slices", "published"), [
    ("none", (200, [driver("gpu.example.com"), driver("dra.cpu")]), DRA_CPU),
    ("static", (200, [driver("dra.cpu")]), BOTH),
    ("static", (200, []), CPU_MANAGER),
    ("none", (403, []), None),  # slices not listed: unknown, left out
    ("none", (0, []), None),  # the API server not reached
    (None, (200, [driver("dra.cpu")]), None),  # configz not read
])
def test_the_publisher_adds_the_pinner_it_can_tell(tmp_path: Path, policy: str | None,
                                                   slices: tuple[int, list[dict[str, Any]]],
                                                   published: str | None) -> None:
    root, socket = sysfs(tmp_path / "sys"), tmp_path / "kubelet.sock"
    server = serve(socket, DeviceKubelet())
    api = SlicesAPI(slices)
    logged: list[str] = []
    try:
        pinner = PinnerSource(api, "n1", lambda: policy, logged.append)
        publisher = TopologyPublisher(api, "n1", socket, root, logged.append,
                                      configz=lambda: ("single-numa-node", "container"), pinner=pinner)
        with PodResourcesClient(socket) as kubelet:
            assert publisher.step(kubelet, 100.0)
        obj = json.loads(api.applied[0])
        assert api.selectors == ["spec.nodeName=n1"]
        assert read_pinner(obj) == (Pinner(published, AGENT_SOURCE) if published else None)
        assert {a["name"] for a in obj["attributes"]} >= {"topologyManagerPolicy", "topologyManagerScope"}
        assert any(f"cpuPinner {published or 'unknown (left out)'}" in line for line in logged), logged
    finally:
        server.stop(None)


def test_the_sources_are_read_again_only_every_so_often() -> None:
    api = SlicesAPI((200, [driver("dra.cpu")]))
    reads: list[int] = []

    def policy() -> str:
        reads.append(1)
        return "none"

    source = PinnerSource(api, "n1", policy, lambda line: None, every=60.0)
    assert source.attributes(0.0) == source.attributes(59.0) == pinner_attributes("none", True)
    assert len(reads) == 1 and len(api.selectors) == 1
    api.slices = (200, [])
    assert read_pinner({"attributes": source.attributes(60.0)}) == Pinner(NOBODY, AGENT_SOURCE)


def test_a_kubelet_restart_reads_the_policy_again_at_once() -> None:
    """kubelet restarted under another cpuManagerPolicy: the publisher's ``refresh`` has both sources read at the
    next look, not up to ``every`` seconds later; while the new kubelet's configz does not answer the pinner is left
    out (never the old kubelet's) and asked again every ``SOON`` seconds, no more often."""
    api = SlicesAPI((200, []))
    answers: list[str | None] = ["static"]
    source = PinnerSource(api, "n1", lambda: answers[0], lambda line: None, every=60.0)
    assert read_pinner({"attributes": source.attributes(0.0)}) == Pinner(CPU_MANAGER, AGENT_SOURCE)
    answers[0] = "none"
    assert read_pinner({"attributes": source.attributes(10.0)}) == Pinner(CPU_MANAGER, AGENT_SOURCE)  # not read
    answers[0] = None  # the new kubelet's configz not answering yet
    source.refresh(10.0)
    assert source.attributes(10.0) == [] and len(api.selectors) == 2
    assert source.attributes(10.0 + SOON / 2) == [] and len(api.selectors) == 2
    answers[0] = "none"
    assert read_pinner({"attributes": source.attributes(10.0 + SOON)}) == Pinner(NOBODY, AGENT_SOURCE)
    assert len(api.selectors) == 3
    assert source.attributes(20.0 + SOON) and len(api.selectors) == 3  # known again: every 60 s
    # Without a restart an unanswered configz is asked again at the usual pace.
    answers[0] = None
    assert source.attributes(80.0) == [] and source.attributes(80.0 + SOON) == [] and len(api.selectors) == 4


def test_the_publisher_refreshes_the_pinner_when_kubelet_restarts(tmp_path: Path) -> None:
    root, socket = sysfs(tmp_path / "sys"), tmp_path / "kubelet.sock"
    api = SlicesAPI((200, []))
    answers = ["static"]
    pinner = PinnerSource(api, "n1", lambda: answers[0], lambda line: None)
    publisher = TopologyPublisher(api, "n1", socket, root, lambda line: None,
                                  configz=lambda: ("single-numa-node", "container"), pinner=pinner)
    server = serve(socket, DeviceKubelet())
    kubelet = PodResourcesClient(socket)
    try:
        assert publisher.step(kubelet, 0.0)
        assert read_pinner(json.loads(api.applied[-1])) == Pinner(CPU_MANAGER, AGENT_SOURCE)
        server.stop(None)
        socket.unlink(missing_ok=True)  # the socket is gone a while (kubelet v1.36 leaves it; something removed it)
        # the publisher's held client looks once during the gap (whatever it answers): that is no new kubelet yet
        with contextlib.suppress(Exception):
            publisher.step(kubelet, 2.0)
    finally:
        server.stop(None)
        kubelet.__exit__()
    answers[0] = "none"
    server = serve(socket, DeviceKubelet())  # started again under cpuManagerPolicy none
    try:
        with PodResourcesClient(socket) as kubelet:
            assert publisher.step(kubelet, 5.0)
    finally:
        server.stop(None)
    assert read_pinner(json.loads(api.applied[-1])) == Pinner(NOBODY, AGENT_SOURCE)
