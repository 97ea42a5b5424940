"""kubelet's ``cpuManagerPolicy`` on the real kubelet, with qos-guard's answer beside kubelet's own: one Pod that
kubelet refuses under one policy and runs under the other, and qos-guard's answer changing with it.

The fake machine is tests/node/test_topology_source.py's: two NUMA nodes of one CPU each (CPU 0 on NUMA 0, reserved
by systemReserved 100m; CPU 1 on NUMA 1), Topology Manager ``single-numa-node``, Memory Manager ``None``, the test
device plugin's one GPU on NUMA 0, and the agent publishing the node's NodeResourceTopology (its ``cpuPinner`` from
kubelet's configz). The Pod is that file's article Pod: Guaranteed, 1 CPU and the GPU. Its CPU fits NUMA 1 only, its
GPU NUMA 0 only:

- ``static``: the CPU Manager hints NUMA 1 for the CPU, the device manager NUMA 0 for the GPU; kubelet fails the Pod
  (TopologyAffinityError). The agent publishes ``cpuPinner: cpu-manager``; the fit (``numa: auto`` through
  ``qos-guard check --kubeconfig``, and ``fit_node`` on what it reads) refuses it;
- ``none`` (kubelet restarted, its CPU Manager checkpoint deleted as kubelet requires): no CPU hint, no exclusive
  CPU (policy_none.go); the GPU's NUMA 0 is the one hint and kubelet runs the Pod. The agent publishes
  ``cpuPinner: none``; the fit places the Pod on NUMA 0 and ``check`` has nothing to say.

The agent reads ``cpuPinner`` again when kubelet restarts (webhook/node/pinner_source.py ``refresh``), not only
every 60 s (``EVERY``): the NRT must say ``none`` within 20 s of the restart (it took 50 s before that), during
which time numa: auto still judged the node as ``static``."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests import waiting
from tests.e2e.conftest import Cluster
from tests.node.conftest import report
from tests.node.fake_machine import fake_machine, numa_unfit
from tests.node.node import NODE_NAME, Node
from tests.node.numa import GPU, device_plugin
from tests.node.test_placement import gpu_pod
from webhook.cluster.nrt import read_topology
from webhook.cluster.watch import ApiTransport
from webhook.core.cpupinner import CPU_MANAGER, NOBODY, PINNER_ATTRIBUTE
from webhook.core.numa import fit_node
from webhook.extender.reservations import pod_demands

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]

FAKE = {0: [0], 1: [1]}
KUBELET = {"memoryManagerPolicy": "None", "reservedMemory": None}


def available(nrt: dict[str, Any]) -> dict[str, dict[str, str]]:
    """What the NRT says is available, by zone and resource."""
    return {z["name"]: {r["name"]: str(r["available"]) for r in z.get("resources", [])} for z in nrt.get("zones", [])}


def in_phase(c: Cluster, ns: str, phase: str) -> dict[str, Any]:
    """The article Pod of ``ns`` once kubelet put it in ``phase``."""
    def there() -> dict[str, Any] | None:
        obj = c.get("pod", "article", "-n", ns)
        return obj if obj["status"].get("phase") == phase else None
    found: dict[str, Any] = waiting.result(f"the Pod {phase}", there, within=90, every=0.5,
                                           seen=lambda: c.get("pod", "article", "-n", ns)["status"])
    return found


def test_a_pod_kubelet_refuses_under_static_and_runs_under_none(node: Node,
                                                                tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("cpu-policy")
    article = gpu_pod("article")
    wants = pod_demands(article)
    assert wants is not None
    with fake_machine(node, "cpu-policy", folder, KUBELET, FAKE, {0: [0], 1: [1]}) as s:
        c = s.c
        for case, pinner in (("static", CPU_MANAGER), ("none", NOBODY)):
            if case == "none":
                # kubelet refuses to start on a checkpoint of another policy: FakeMachine.restart deletes it.
                s.kubelet = {**KUBELET, "cpuManagerPolicy": "none"}
                s.restart({})
            restarted = time.monotonic()
            with device_plugin(c, s.node.folder, "gpu-0=0"):
                def published(want: str = pinner) -> dict[str, Any] | None:
                    nrt = s.nrt()
                    gpu = available(nrt).get("node-0", {}).get(GPU)
                    return nrt if s.attributes().get(PINNER_ATTRIBUTE) == want and gpu == "1" else None

                nrt = waiting.result(f"the agent's NRT saying cpuPinner {pinner} and the GPU on NUMA 0", published,
                                     within=20, every=0.5,
                                     seen=lambda: f"{s.attributes()}; agent log:\n{s.log.read_text()[-2000:]}")
                took = time.monotonic() - restarted
                # qos-guard's answers on what the agent published.
                topo = read_topology(ApiTransport(str(c.kubeconfig))).topologies[NODE_NAME]
                assert (topo.policy, topo.scope, topo.cpu_policy) == ("single-numa-node", "container", case), topo
                fit = fit_node(wants, topo)
                checked = s.check_numa_auto(article)
                found, row = s.nodes_row()
                assert row.split()[2] == case, row  # nodes' CPU MANAGER column (configz)
                # kubelet's own answer.
                ns = c.namespace(f"cpu-policy-{case}")
                c.kubectl("apply", "-n", ns, "-f", "-", stdin=article, check=True)
                if case == "static":
                    obj = in_phase(s.c, ns, "Failed")
                    status = obj["status"]
                    assert status.get("reason") == "TopologyAffinityError", status
                    assert not fit.fits, fit
                    assert checked.returncode == 1 and "numa-unfit" in checked.stdout, checked.stdout + checked.stderr
                    kubelet_said = f"{status['reason']}: {status.get('message', '')}"
                else:
                    obj = in_phase(s.c, ns, "Running")
                    state = s.node.cpu_manager_state()
                    # No exclusive CPU under none: the checkpoint names the policy and assigns nothing.
                    assert state["policyName"] == "none" and not state.get("entries"), state
                    assert fit.fits and fit.placed == {"app": 0}, fit
                    assert checked.returncode == 0 and "numa-unfit" not in checked.stdout, (
                        checked.stdout + checked.stderr)
                    kubelet_said = "Running (no exclusive CPU: cpu_manager_state policyName none, no entries)"
                c.kubectl("delete", "namespace", ns, "--wait=true", "--timeout=90s", check=True)
            report(f"cpu policy {case}: the agent's NRT said cpuPinner {pinner} {took:.0f} s after the kubelet "
                   f"(re)start; kubelet: {kubelet_said[:300]}; fit: fits={fit.fits} placed {fit.placed}; check "
                   f"numa: auto (exit {checked.returncode}): {numa_unfit(checked)[:400]}; nodes: "
                   f"{' '.join(row.split()[:4])} ({len(found.get('notes', []))} notes); NRT available {available(nrt)}")
