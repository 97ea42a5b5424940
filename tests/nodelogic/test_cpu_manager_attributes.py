"""The agent's CPU Manager attributes (``webhook/node/cpu_manager.py``): the cores read from sysfs's
``thread_siblings_list``, the three attributes as the NUMA fit reads them back (``parse_cpu_manager``), none when
anything is unknown, and the publisher carrying them from configz into the object it applies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.nodelogic.fakes import Kubelet, serve
from tests.nodelogic.test_topology_report import API, sysfs
from webhook.core.numatopology import CPUManager, parse_cpu_manager
from webhook.node.cpu_manager import CPUManagerConfig, KubeletSettings, cpu_manager_attributes, read_cores
from webhook.node.kubelet import PodResourcesClient
from webhook.node.sysfs import SysfsError
from webhook.node.topology_publisher import TopologyPublisher

STATIC = CPUManagerConfig("static", (("full-pcpus-only", "true"),))


def with_siblings(root: Path, siblings: dict[int, str]) -> Path:
    """``thread_siblings_list`` of each CPU, under the NUMA node that lists it (as a real dir, not the link)."""
    for numa in (0, 1):
        node = root / "devices" / "system" / "node" / f"node{numa}"
        for cpu in (int(c) for c in (node / "cpulist").read_text().split(",") if c.strip()):
            if cpu in siblings:
                d = node / f"cpu{cpu}" / "topology"
                d.mkdir(parents=True, exist_ok=True)
                (d / "thread_siblings_list").write_text(siblings[cpu] + "\n")
    return root


def attrs(found: list[dict[str, str]]) -> dict[str, str]:
    return {a["name"]: a["value"] for a in found}


def test_cores_from_sysfs_and_what_is_not_known(tmp_path: Path) -> None:
    root = sysfs(tmp_path / "a")  # node0: CPU 0, node1: CPU 1, no CPU topology at all
    assert read_cores(root, {0: {0}, 1: {1}}) is None
    with_siblings(root, {0: "0-1", 1: "0-1"})
    assert read_cores(root, {0: {0}, 1: {1}}) == (frozenset({0, 1}),)
    with_siblings(root, {1: "1"})
    assert read_cores(root, {0: {0}, 1: {1}}) == (frozenset({0, 1}), frozenset({1}))
    with_siblings(root, {1: "0"})  # a CPU not among its own siblings: not sysfs
    with pytest.raises(SysfsError, match=r"node1/cpu1/topology/thread_siblings_list: CPU 1 is not among"):
        read_cores(root, {0: {0}, 1: {1}})
    with_siblings(root, {1: "one"})
    with pytest.raises(SysfsError, match=r"node1/cpu1/topology/thread_siblings_list"):
        read_cores(root, {0: {0}, 1: {1}})


def test_the_attributes_as_the_fit_reads_them() -> None:
    cores = (frozenset({0, 4}), frozenset({1, 5}), frozenset({2, 6}), frozenset({3, 7}))
    cpus = frozenset(range(8))
    found = cpu_manager_attributes(STATIC, cores, cpus, cpus - {0})  # CPU 0 reserved: its sibling 4 is lost
    assert attrs(found) == {"cpuManagerPolicyOptions": "full-pcpus-only=true", "threadsPerCore": "2",
                            "reservedCPUSiblings": "1"}
    assert parse_cpu_manager(attrs(found)) == CPUManager(frozenset({"full-pcpus-only"}), 2, 1)
    # Both threads of a core reserved: nothing else lost. No options: an empty value, known to be none.
    found = cpu_manager_attributes(CPUManagerConfig("static"), cores, cpus, cpus - {0, 4})
    assert attrs(found) == {"cpuManagerPolicyOptions": "", "threadsPerCore": "2", "reservedCPUSiblings": "0"}
    assert parse_cpu_manager(attrs(found)) == CPUManager(frozenset(), 2, 0)
    # Not known: configz not read, no CPU topology, a CPU Manager that hands out no exclusive CPUs.
    assert cpu_manager_attributes(None, cores, cpus, cpus) == []
    assert cpu_manager_attributes(STATIC, None, cpus, cpus) == []
    assert cpu_manager_attributes(CPUManagerConfig("none"), cores, cpus, frozenset()) == []


@st.composite
def machines(draw: st.DrawFn) -> tuple[tuple[frozenset[int], ...], frozenset[int]]:
    """A machine of ``cores`` cores of ``threads`` threads each (Linux numbering: thread t of core c is
    ``t * cores + c``) and the reserved CPUs, any subset."""
    cores, threads = draw(st.integers(1, 16)), draw(st.integers(1, 4))
    layout = tuple(frozenset(t * cores + c for t in range(threads)) for c in range(cores))
    reserved = draw(st.frozensets(st.integers(0, cores * threads - 1)))
    return layout, reserved


@given(machines())
def test_reserved_siblings_are_kubelets_reserved_physical_cpus_less_the_reserved(
        machine: tuple[tuple[frozenset[int], ...], frozenset[int]]) -> None:
    """policy_static.go's reservedPhysicalCPUs: every CPU of a core with a reserved one; the attribute counts
    those not reserved themselves, and the fit reads back what was written."""
    cores, reserved = machine
    cpus = frozenset().union(*cores)
    physical = {cpu for core in cores if core & reserved for cpu in core}
    read = parse_cpu_manager(attrs(cpu_manager_attributes(STATIC, cores, cpus, cpus - reserved)))
    assert read is not None and read.full_pcpus_only
    assert read.threads_per_core == len(cpus) // len(cores)
    assert read.reserved_siblings == len(physical - reserved)
    # What full-pcpus-only then counts as free whole cores: the CPUs of cores no reserved CPU touches.
    free = len(cpus - reserved)
    assert free - read.reserved_siblings == len(cpus - physical)


class Settings:
    def __init__(self, answer: KubeletSettings | str) -> None:
        self.answer = answer

    def __call__(self) -> KubeletSettings | str:
        return self.answer


def published(api: API) -> dict[str, str]:
    obj: dict[str, Any] = json.loads(api.applied[-1])
    return {a["name"]: a["value"] for a in obj["attributes"]}


def test_the_publisher_carries_configz_options_and_drops_them_when_configz_fails(tmp_path: Path) -> None:
    root = with_siblings(sysfs(tmp_path / "sys"), {0: "0-1", 1: "0-1"})
    socket = tmp_path / "kubelet.sock"
    server = serve(socket, Kubelet())  # CPU 1 allocatable, CPU 0 reserved: its sibling
    api = API()
    logged: list[str] = []
    settings = Settings(KubeletSettings("single-numa-node", "container", STATIC))
    publisher = TopologyPublisher(api, "n1", socket, root, logged.append, configz=settings)
    try:
        with PodResourcesClient(socket) as kubelet:
            assert publisher.step(kubelet, 0.0)
            got = published(api)
            assert (got["cpuManagerPolicyOptions"], got["threadsPerCore"], got["reservedCPUSiblings"]) == (
                "full-pcpus-only=true", "2", "1")
            assert any("cpuManagerPolicyOptions full-pcpus-only=true (kubelet's configz)" in line for line in logged)
            # configz no longer answers at the next read: the options are not guessed from the last answer.
            settings.answer = "cannot reach kubelet at https://127.0.0.1:10250/configz: refused"
            assert publisher.step(kubelet, 1000.0)
            got = published(api)
            assert got["topologyManagerPolicy"] == "single-numa-node"  # as before: kept as last read
            assert not {"cpuManagerPolicyOptions", "threadsPerCore", "reservedCPUSiblings"} & set(got)
    finally:
        server.stop(None)
    # Given on the command line (configz never read): the options are not known, none published.
    api = API()
    server = serve(socket, Kubelet())
    try:
        given_settings = TopologyPublisher(api, "n1", socket, root, logged.append, policy="single-numa-node",
                                           scope="container")
        with PodResourcesClient(socket) as kubelet:
            assert given_settings.step(kubelet, 0.0)
        assert "cpuManagerPolicyOptions" not in published(api)
    finally:
        server.stop(None)
