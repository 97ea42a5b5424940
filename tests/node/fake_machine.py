"""A fake machine for the real kubelet, with the agent publishing its NodeResourceTopology: what the tests of
the CPU Manager's options (tests/node/test_cpu_options.py, tests/node/test_align_by_socket.py) set up alike.

``fake_machine`` installs the NRT CRD, writes a fake sysfs of the given NUMA nodes, SMT siblings and sockets
(tests/node/numa.py ``fake_sysfs``), restarts the kubelet on it under the test's configuration, and runs the agent
as an operator's host process (tests/node/node.py ``start_topology_agent``: the fake sysfs, configz from the
kubelet's port); on exit the agent is stopped, its NRT deleted and the kubelet restarted as it was.
``FakeMachine.restart`` restarts the kubelet with other CPU Manager options, its checkpoint written anew."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import Cluster
from tests.node.conftest import wait_released
from tests.node.node import NODE_NAME, Node, fake_numa_wrapper, start_topology_agent
from tests.node.numa import fake_sysfs
from tests.node.test_topology_source import CRD, NRT
from webhook.cluster.client import Lister


@dataclass
class FakeMachine:
    """The node on its fake machine: the kubelet restarted under ``kubelet`` (overrides of its configuration)."""

    node: Node
    c: Cluster
    sys_root: Path
    log: Path  # the agent's
    api: Lister
    folder: Path  # the test's own files
    kubelet: dict[str, Any]

    def nrt(self) -> dict[str, Any]:
        """The node's NRT as the API server holds it; {} when it has none."""
        status, body = self.api.send("GET", NRT, [], None, None)
        return body if status == 200 else {}

    def attributes(self) -> dict[str, str]:
        """The NRT's attributes by name."""
        return {a["name"]: a["value"] for a in self.nrt().get("attributes", [])}

    def restart(self, options: dict[str, str]) -> None:
        """kubelet on the fake machine with ``options`` (its CPU Manager checkpoint written anew)."""
        self.node.restart_kubelet({**self.kubelet, "cpuManagerPolicyOptions": options or None},
                                  wrapper=fake_numa_wrapper(self.sys_root / "devices" / "system" / "node"),
                                  clean_state=True)

    def check_numa_auto(self, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        """``qos-guard check --kubeconfig`` of the Pod ``obj`` with ``policy.numa: auto``: the NRT the agent
        published."""
        config, manifest = self.folder / "numa-auto.yaml", self.folder / f"{obj['metadata']['name']}.yaml"
        config.write_text(yaml.safe_dump({"policy": {"numa": "auto"}}))
        manifest.write_text(yaml.safe_dump(obj))
        return self.c.qos_guard("check", str(manifest), "--config", str(config), "--kubeconfig",
                                str(self.c.kubeconfig))

    def delete_namespace(self, ns: str, uid: str) -> None:
        """The case's namespace deleted, and the kubelet's CPUs of its Pod ``uid`` released (the next case needs
        them)."""
        self.c.kubectl("delete", "namespace", ns, "--wait=true", "--timeout=90s", check=True)
        wait_released(self.node, [uid])

    def nodes_row(self) -> tuple[dict[str, Any], str]:
        """``qos-guard nodes`` of the node: its JSON object and its row of the table."""
        proc = self.c.qos_guard("nodes", "--kubeconfig", str(self.c.kubeconfig), "--format", "json")
        (found,) = json.loads(proc.stdout)["nodes"]
        text = self.c.qos_guard("nodes", "--kubeconfig", str(self.c.kubeconfig)).stdout
        (row,) = [line for line in text.splitlines() if line.startswith(f"{NODE_NAME} ")]
        return found, row


def numa_unfit(checked: subprocess.CompletedProcess[str]) -> str:
    """The first ``numa-unfit`` line of ``check_numa_auto``'s output, for the report."""
    return next((ln for ln in checked.stdout.splitlines() if "numa-unfit" in ln), "nothing to say")


@contextlib.contextmanager
def fake_machine(node: Node, name: str, folder: Path, kubelet: dict[str, Any], cpus_by_node: dict[int, list[int]],
                 siblings: dict[int, list[int]], packages: dict[int, int] | None = None) -> Iterator[FakeMachine]:
    """The NRT CRD; the fake sysfs ``fake-sys-<name>`` (NUMA node -> CPUs, CPU -> the CPUs of its core, CPU ->
    socket); the kubelet on it under ``kubelet`` and no CPU Manager option; the agent (log ``agent-<name>.log``)
    publishing the NRT. All undone on exit: the NRT deleted, the kubelet restarted as it was."""
    c = node.cluster
    c.kubectl("apply", "-f", str(CRD), check=True)
    c.kubectl("wait", "--for=condition=Established", "crd/noderesourcetopologies.topology.node.k8s.io",
              "--timeout=60s", check=True)
    with contextlib.ExitStack() as stack:
        sys_root = stack.enter_context(fake_sysfs(node.folder / f"fake-sys-{name}", cpus_by_node, siblings,
                                                  packages))
        stack.callback(node.restart_kubelet, clean_state=True)
        m = FakeMachine(node, c, sys_root, node.folder / f"agent-{name}.log", Lister(str(c.kubeconfig)), folder,
                        kubelet)
        m.restart({})
        stack.callback(c.kubectl, "delete", "--raw", NRT)
        start_topology_agent(stack, node, sys_root, m.log)
        yield m
