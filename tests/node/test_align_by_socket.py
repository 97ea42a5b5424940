"""The CPU Manager's ``align-by-socket`` on the real kubelet under Topology Manager ``restricted``, with qos-guard's
answers beside kubelet's own.

A fake machine of ONE socket with TWO NUMA nodes (tests/node/numa.py: CPU 0 on NUMA 0, CPU 1 on NUMA 1, each CPU
a core of its own, both ``physical_package_id`` 0; kubelet counts the sockets from /proc/cpuinfo, this machine's
one). CPU 0 is reserved (systemReserved), so CPU 1 is the only CPU the static CPU Manager hands out; the Memory
Manager is None (no hints: no preference); a device plugin offers two example.com/gpu, gpu-0 on NUMA 0 and gpu-1 on
NUMA 1. A Guaranteed Pod of 1 CPU and 2 GPUs, kubelet restarted with the alpha-options gate on, without and then
with ``align-by-socket``:

- the device hints: only {0,1}, preferred (2 devices need both NUMA nodes: the fewest that hold them);
- the CPU hints: {1} preferred (1 CPU needs one NUMA node) and {0,1}, preferred only with ``align-by-socket``
  (``isHintSocketAligned``: NUMA nodes per socket 2 / 1 = 2, the fewest sockets ceil(1 / 2) = 1, and {0,1} lies
  on socket 0 alone);
- restricted merges each pair (``mergePermutation``): preferred only where every hint is preferred AND every
  affinity is the same. Without the option {1}P x {0,1}P gives {1} not preferred ({1} != {0,1}) and {0,1} x {0,1}
  gives {0,1} not preferred (the CPU's {0,1} is not): kubelet fails the Pod (TopologyAffinityError). With it,
  {0,1}P x {0,1}P is preferred: admitted, on CPU 1 (``getAlignedCPUs`` widens the hint to the socket's CPUs).

Why two devices and not the issue's one device on NUMA 0: with one device the device hints are {0} preferred
(kubelet 1.36.3 iterates only the NUMA nodes that hold the resource's devices: no {0,1} hint at all), and the
merge of the CPU's {0,1} with the device's {0} is {0} but NOT preferred (the affinities differ), so kubelet
refuses that Pod with the option too (seen: "Best TopologyHint" {0} Preferred false, TopologyAffinityError).

The agent's NRT lists no ``cpu`` in NUMA 0's zone (as NFD: a GPU allocatable there, its one CPU reserved); its zone
attribute ``cpus`` says the CPU is there, so ``numa: auto`` counts it in the CPU hints as kubelet does (without it
the {0,1} CPU hint would not exist for qos-guard, and it would refuse what kubelet admits with the option).

Asserted: kubelet's verdicts, the NRT the agent publishes (policy restricted, the option, the Socket zone and the
Node zones' parents), what ``numa: auto`` reads of it, ``qos-guard nodes`` showing the option, and ``qos-guard check
--kubeconfig`` with ``policy.numa: auto``: a refusal naming TopologyAffinityError without the option, none with."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import waiting
from tests.e2e.conftest import Cluster
from tests.node.conftest import parse_cpus, pod, report
from tests.node.fake_machine import FakeMachine, fake_machine, numa_unfit
from tests.node.node import NODE_NAME, Node
from tests.node.numa import GPU, device_plugin
from webhook.cluster.nrt import read_topology
from webhook.cluster.watch import ApiTransport
from webhook.core.numatopology import CPUManager

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]

FAKE = {0: [0], 1: [1]}  # NUMA node -> CPUs
CORES = {0: [0], 1: [1]}  # CPU -> the CPUs of its core: no SMT
PACKAGES = {0: 0, 1: 0}  # CPU -> socket: one socket
KUBELET = {"memoryManagerPolicy": "None", "reservedMemory": None, "topologyManagerPolicy": "restricted",
           "topologyManagerScope": "container", "featureGates": {"CPUManagerPolicyAlphaOptions": True}}
OPTION = {"align-by-socket": "true"}


@pytest.fixture(scope="module")
def setup(node: Node, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeMachine]:
    with fake_machine(node, "sockets", tmp_path_factory.mktemp("align-by-socket"), KUBELET, FAKE, CORES,
                      PACKAGES) as s:
        yield s


def gpu_pod(name: str) -> dict[str, Any]:
    """Guaranteed: 1 CPU, 64Mi and two example.com/gpu."""
    obj = pod(name, "1")
    for kind in ("limits", "requests"):
        obj["spec"]["containers"][0]["resources"][kind][GPU] = "2"
    return obj


def hints_logged(node: Node, ns: str, name: str) -> str:
    """What kubelet (--v=2) logged of the Pod's hints: each provider's, and the merged best."""
    wanted = ("TopologyHints generated", '"TopologyHints"', "Best TopologyHint")
    lines = [line for line in (node.folder / "kubelet.log").read_text().splitlines()[-5000:]
             if f'pod="{ns}/{name}"' in line and any(w in line for w in wanted)]
    return "; ".join(line.split("] ", 1)[-1][:300] for line in lines[-5:]) or "(not logged)"


def phase(c: Cluster, ns: str, name: str, want: str) -> dict[str, Any] | None:
    obj = c.get("pod", name, "-n", ns)
    assert obj["status"].get("phase") in (None, "Pending", want), obj["status"]  # never the other verdict
    return obj if obj["status"].get("phase") == want else None


@pytest.mark.parametrize(("case", "options"), [("without", {}), ("with", OPTION)])
def test_align_by_socket_decides_restricted(setup: FakeMachine, case: str, options: dict[str, str]) -> None:
    s, c = setup, setup.c
    s.restart(options)
    text = ",".join(f"{k}={v}" for k, v in options.items())
    want = {"topologyManagerPolicy": "restricted", "topologyManagerScope": "container",
            "cpuManagerPolicyOptions": text, "threadsPerCore": "1", "reservedCPUSiblings": "0"}
    with device_plugin(c, s.node.folder, "gpu-0=0,gpu-1=1", count=2):
        def published() -> dict[str, Any] | None:
            obj = s.nrt()
            attrs = {a["name"]: a["value"] for a in obj.get("attributes", [])}
            gpus = {z["name"]: r["allocatable"] for z in obj.get("zones", []) for r in z.get("resources", [])
                    if r["name"] == GPU}
            return obj if {k: attrs.get(k) for k in want} == want and gpus == {"node-0": "1", "node-1": "1"} \
                else None

        obj = waiting.result(f"the agent's NRT saying {want} and a {GPU} on each NUMA node", published, within=90,
                             every=0.2, seen=lambda: f"{s.nrt()}; agent log:\n{s.log.read_text()[-2000:]}")
        # The sockets: one Socket zone, both NUMA nodes' parent.
        assert [(z["name"], z["type"], z.get("parent")) for z in obj["zones"]] == [
            ("node-0", "Node", "socket-0"), ("node-1", "Node", "socket-0"), ("socket-0", "Socket", None)], obj["zones"]
        topo = read_topology(ApiTransport(str(c.kubeconfig))).topologies[NODE_NAME]
        assert (topo.policy, topo.scope, topo.sockets) == ("restricted", "container", (0, 0)), topo
        assert topo.cpu_manager == CPUManager(frozenset(options), 1, 0), topo.cpu_manager
        found, row = s.nodes_row()
        assert found["cpuManager"]["options"] == options, found
        assert row.split()[2:4] == ["static", text or "none"], row
        checked = s.check_numa_auto(gpu_pod("sock"))
        # kubelet's own answer.
        ns = c.namespace(f"align-by-socket-{case}")
        c.kubectl("apply", "-n", ns, "-f", "-", stdin=gpu_pod("sock"), check=True)
        if not options:
            got = waiting.result("kubelet failing the Pod", lambda: phase(c, ns, "sock", "Failed"), within=90,
                                 every=0.5)
            status = got["status"]
            assert status.get("reason") == "TopologyAffinityError", status
            kubelet_said = f"Failed, {status['reason']}: {status.get('message', '')}"
        else:
            got = waiting.result("the Pod running", lambda: phase(c, ns, "sock", "Running"), within=90, every=0.5)
            state = s.node.cpu_manager_state()
            assert parse_cpus(state["entries"][got["metadata"]["uid"]]["app"]) == {1}, state
            kubelet_said = "Running, exclusive CPU 1 (cpu_manager_state)"
        hints = hints_logged(s.node, ns, "sock")
        s.delete_namespace(ns, got["metadata"]["uid"])
    report(f"align-by-socket {case}: kubelet: {kubelet_said}; agent NRT zones "
           f"{[(z['name'], z['type'], z.get('parent')) for z in obj['zones']]}, cpuManagerPolicyOptions "
           f"{text or '(none)'}; nodes: {' '.join(row.split()[:4])}; check numa: auto (exit {checked.returncode}): "
           f"{numa_unfit(checked)[:500]}; kubelet's hints: {hints}")
    # qos-guard's own answer (the restricted model's): refused as kubelet refuses it, admitted as kubelet admits it.
    refusals = [ln for ln in checked.stdout.splitlines() if "numa-unfit" in ln and "notice: numa-unfit" not in ln]
    if not options:
        assert checked.returncode == 1 and refusals, checked.stdout + checked.stderr
        assert "TopologyAffinityError" in refusals[0], checked.stdout
    else:  # admitted (across NUMA nodes, as kubelet: a notice may say so)
        assert checked.returncode == 0 and not refusals, checked.stdout + checked.stderr
