"""The CPU Manager's ``full-pcpus-only`` on the real kubelet, with qos-guard's three answers beside kubelet's own.

This machine's two CPUs are made one core of two threads (SMT siblings) in a fake sysfs, bind-mounted for the
kubelet as tests/node/numa.py does for NUMA (``fake_node_tree(siblings=...)``: cadvisor reads each CPU's
``core_id`` through the NUMA node's ``cpuN`` entry, so kubelet sees 2 CPUs per core). Two CPUs cannot be SMT
siblings on two NUMA nodes (kubelet counts a core per NUMA node), so the fake machine has one NUMA node. CPU 0 is
reserved (systemReserved 100m), CPU 1 is what the static CPU Manager hands out, and it shares CPU 0's core.

A Guaranteed Pod of 1 CPU (an odd count), with kubelet restarted without and then with
``cpuManagerPolicyOptions: {full-pcpus-only: "true"}``:

- without: kubelet runs it on CPU 1; the agent's NRT says ``cpuManagerPolicyOptions`` empty, 2 threads per core, 1
  reserved sibling; ``numa: auto`` (``qos-guard check --kubeconfig``) has nothing to say; ``qos-guard nodes`` says
  CPU OPTIONS none;
- with: kubelet fails it (SMTAlignmentError); the NRT says ``full-pcpus-only=true``; ``numa: auto`` refuses it
  with that error's reason and count; ``nodes`` says CPU OPTIONS ``full-pcpus-only=true``.

The fake machine, the kubelet on it and the agent are tests/node/fake_machine.py's (the agent a host process with
the node's kubeconfig, the fake sysfs, configz from the kubelet's port), so the NRT's attributes come from kubelet's
configz and the fake sysfs's siblings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import waiting
from tests.node.conftest import parse_cpus, pod, report
from tests.node.fake_machine import FakeMachine, fake_machine, numa_unfit
from tests.node.node import NODE_NAME, Node
from webhook.cluster.nrt import read_topology
from webhook.cluster.watch import ApiTransport
from webhook.core.numa import fit_node
from webhook.core.numatopology import CPUManager
from webhook.extender.reservations import pod_demands

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]

FAKE = {0: [0, 1]}
SIBLINGS = {0: [0, 1], 1: [0, 1]}
KUBELET = {"memoryManagerPolicy": "None", "reservedMemory": None}
OPTIONS_ATTRIBUTES = ("cpuManagerPolicyOptions", "threadsPerCore", "reservedCPUSiblings")


@pytest.fixture(scope="module")
def setup(node: Node, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeMachine]:
    with fake_machine(node, "smt", tmp_path_factory.mktemp("cpu-options"), KUBELET, FAKE, SIBLINGS) as s:
        yield s


@pytest.mark.parametrize(("case", "options"), [("without", {}), ("with", {"full-pcpus-only": "true"})])
def test_an_odd_cpu_count_under_full_pcpus_only(setup: FakeMachine, case: str, options: dict[str, str]) -> None:
    s, c = setup, setup.c
    s.restart(options)
    text = ",".join(f"{k}={v}" for k, v in options.items())
    want = {"cpuManagerPolicyOptions": text, "threadsPerCore": "2", "reservedCPUSiblings": "1"}

    def published() -> dict[str, str] | None:
        got = s.attributes()
        return got if {k: got.get(k) for k in OPTIONS_ATTRIBUTES} == want else None

    attrs = waiting.result(f"the agent's NRT saying {want}", published, within=60, every=0.2,
                           seen=lambda: f"{s.attributes()}; agent log:\n{s.log.read_text()[-2000:]}")
    # What numa: auto reads of it, and its fit of the Pod.
    topo = read_topology(ApiTransport(str(c.kubeconfig))).topologies[NODE_NAME]
    smt = "full-pcpus-only" in options
    assert topo.cpu_manager == CPUManager(frozenset(options), 2, 1), topo.cpu_manager
    wants = pod_demands(pod("odd", "1"))
    assert wants is not None
    fit = fit_node(wants, topo)
    checked = s.check_numa_auto(pod("odd", "1"))
    found, row = s.nodes_row()
    assert found["cpuManager"]["options"] == options
    assert row.split()[2:4] == ["static", text or "none"], row
    # kubelet's own answer.
    ns = c.namespace(f"cpu-options-{case}")
    c.kubectl("apply", "-n", ns, "-f", "-", stdin=pod("odd", "1"), check=True)
    if smt:
        obj = waiting.result("kubelet failing the Pod", lambda: (lambda o: o if o["status"].get("phase") == "Failed"
                             else None)(c.get("pod", "odd", "-n", ns)), within=90, every=0.5)
        status = obj["status"]
        assert status.get("reason") == "SMTAlignmentError", status
        assert "requested 1 cpus not multiple cpus per core = 2" in status.get("message", ""), status
        assert not fit.fits and fit.reason.startswith("SMTAlignmentError: 1 CPUs is not a multiple of the node's 2 "
                                                      "threads per core"), fit
        assert checked.returncode == 1 and "numa-unfit" in checked.stdout, checked.stdout + checked.stderr
        assert "SMTAlignmentError: 1 CPUs is not a multiple of the node's 2 threads per core" in checked.stdout
        assert f"full-pcpus-only refuses it on node {NODE_NAME} (SMTAlignmentError)" in checked.stdout
        assert any("full-pcpus-only" in note for note in found["notes"]), found["notes"]
        kubelet_said = f"{status['reason']}: {status.get('message', '')}"
    else:
        obj = waiting.result("the Pod running", lambda: (lambda o: o if o["status"].get("phase") == "Running"
                             else None)(c.get("pod", "odd", "-n", ns)), within=90, every=0.5)
        state = s.node.cpu_manager_state()
        assert parse_cpus(state["entries"][obj["metadata"]["uid"]]["app"]) == {1}, state
        assert fit.fits and fit.placed == {"app": 0}, fit
        assert "numa-unfit" not in checked.stdout, checked.stdout + checked.stderr
        kubelet_said = "Running, exclusive CPU 1 (cpu_manager_state)"
    s.delete_namespace(ns, obj["metadata"]["uid"])
    report(f"cpu options {case} full-pcpus-only: kubelet: {kubelet_said}; agent NRT attributes "
           f"{ {k: attrs[k] for k in OPTIONS_ATTRIBUTES} }; fit: fits={fit.fits} {fit.reason}; check numa: auto "
           f"(exit {checked.returncode}): {numa_unfit(checked)[:500]}; nodes: {' '.join(row.split()[:4])}")
