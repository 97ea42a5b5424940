"""``qos-guard nodes`` against the real kubelet: its configz, read through the real API server's node proxy,
says it pins, with the settings this node runs (and the reserved CPU count kubelet itself logged); restarted
with ``cpuManagerPolicy: none``, the same node is reported *cannot pin* (exit 1), and kubelet's own CPU Manager
checkpoint confirms the policy it runs. The kubelet is restarted with its first configuration afterwards, so
the pinning tests still see a pinning node."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest

from tests.binaries import kube_version
from tests.node.conftest import report
from tests.node.node import NODE_NAME, Node

# The first test of the tier also starts the node (and builds what `make test` did not build yet).
pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]


def nodes(node: Node, *args: str) -> subprocess.CompletedProcess[str]:
    return node.cluster.qos_guard("nodes", "--kubeconfig", str(node.cluster.kubeconfig), *args)


def read(node: Node) -> tuple[int, dict[str, Any], str]:
    """Exit code, the json report's one node, and the text report with its summary line (printed: the
    operator's view, as docs/howto/nodes.md shows it)."""
    proc = nodes(node, "--format", "json")
    assert proc.stdout, proc.stderr
    (found,) = json.loads(proc.stdout)["nodes"]
    text = nodes(node)
    assert text.returncode == proc.returncode, text.stderr
    print(f"$ qos-guard nodes\n{text.stdout}{text.stderr}$ echo $?\n{text.returncode}")
    return proc.returncode, found, text.stdout + text.stderr


def test_1_this_kubelet_pins(node: Node) -> None:
    code, found, text = read(node)
    assert code == 0, found
    config = node.kubelet.config
    status = node.cluster.get("node", NODE_NAME)["status"]
    assert found["name"] == NODE_NAME and found["verdict"] == "pins" and found["ready"] is True
    assert found["kubeletVersion"] == status["nodeInfo"]["kubeletVersion"] == kube_version()
    cpu, memory, topology = found["cpuManager"], found["memoryManager"], found["topologyManager"]
    assert cpu["policy"] == config["cpuManagerPolicy"] == "static" and cpu["options"] == {}
    assert cpu["reservedCPUs"]["systemReservedCPU"] == config["systemReserved"]["cpu"] == "100m"
    # The count is the running kubelet's own: its static policy logs how many CPUs it keeps out of exclusive use.
    log = (node.folder / "kubelet.log").read_text(errors="replace")
    logged = re.findall(r"Reserved CPUs not available for exclusive assignment.*?reservedSize=(\d+)", log)
    assert logged and int(logged[-1]) == cpu["reservedCPUs"]["count"] == 1, logged
    assert memory == {"policy": config["memoryManagerPolicy"], "reservedMemory": config["reservedMemory"]}
    assert (topology["policy"], topology["scope"]) == (config["topologyManagerPolicy"], config["topologyManagerScope"])
    assert found["problems"] == [] and found["notes"] == []
    assert text.endswith("\nqos-guard: 1 node: 1 pin, 0 cannot pin, 0 unreadable; 0 pools differ\n"), text
    assert re.search(rf"^{NODE_NAME} +{re.escape(kube_version())} +static +none +1 \(systemReserved 100m\) "
                     r"+Static \(NUMA 0 memory=600Mi\) +single-numa-node, container +static CPU Manager +pins$", text,
                     re.MULTILINE), text
    assert found["pinnedBy"] == "static CPU Manager"  # its ResourceSlices (none of dra.cpu) were read too
    report(f"nodes: {NODE_NAME} pins: kubelet {found['kubeletVersion']}, cpuManagerPolicy static, "
           f"{cpu['reservedCPUs']['count']} reserved CPU (kubelet logged reservedSize={logged[-1]}), "
           f"memoryManagerPolicy {memory['policy']}, topologyManagerPolicy {topology['policy']} "
           f"({topology['scope']} scope); exit 0")


def test_2_without_the_static_cpu_manager_it_cannot_pin(node: Node) -> None:
    with node.kubelet_configured({"cpuManagerPolicy": "none"}):
        # What the kubelet runs, by its own checkpoint (written anew: the static one would refuse to start it).
        assert node.cpu_manager_state()["policyName"] == "none"
        code, found, text = read(node)
        assert code == 1, found
        assert found["verdict"] == "cannot-pin" and found["cpuManager"]["policy"] == "none"
        assert [p["rule"] for p in found["problems"]] == ["cpu-manager-none"]
        assert re.search(rf"^{NODE_NAME} .* none .* nobody +cannot pin$", text, re.MULTILINE), text
        assert f"node/{NODE_NAME}: cpu-manager-none: cpuManagerPolicy is none" in text
        assert text.endswith("\nqos-guard: 1 node: 0 pin, 1 cannot pin, 0 unreadable; 0 pools differ\n"), text
        report(f"nodes: kubelet restarted with cpuManagerPolicy none: {NODE_NAME} cannot pin "
               f"(cpu-manager-none; CPU Manager checkpoint policyName none); exit 1")
    # Restored: the static policy again (its checkpoint anew), and the verdict with it.
    assert node.cpu_manager_state()["policyName"] == "static"
    assert nodes(node).returncode == 0
    report(f"nodes: kubelet restarted with its first configuration: {NODE_NAME} pins again; exit 0")


def test_3_a_kubelet_that_will_not_start_is_restored(node: Node) -> None:
    """The facility other node tests build on: a configuration kubelet refuses fails the block with kubelet's
    own reason, and the node is back to its first configuration afterwards."""
    with pytest.raises(RuntimeError) as refused, node.kubelet_configured({"cpuManagerPolicy": "pinned"}):
        pass
    assert 'unknown policy: \\"pinned\\"' in str(refused.value) or 'unknown policy: "pinned"' in str(refused.value)
    assert node.kubelet.config["cpuManagerPolicy"] == "static" and nodes(node).returncode == 0
    report("nodes: a kubelet refusing cpuManagerPolicy pinned failed the block with its reason; restored, pins")
