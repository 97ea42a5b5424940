"""An empty pod-level ``spec.resources: {}`` beside containers with whole, equal CPU and memory requests and
limits, on the real kubelet of whichever minor the tier runs: qos-guard's verdict (``check`` at that minor, and
the chart's webhook, which reads the minor from the API server) against what that release really did with the
Pod (the API server's ``status.qosClass``, the CPU Manager's checkpoint, the container's cgroup cpuset).

What each release makes of it, per its own code: 1.37 (``PodLevelResourcesFixKubeletQOSClass``, beta and on)
reads an empty block as unset, so the Pod is Guaranteed from its containers and pinned; 1.34 to 1.36 let any
``spec.resources`` decide the class alone (``ComputePodQOS``: no pod-level limits, so not Guaranteed), so it is not
pinned; 1.33 (``PodLevelResources`` alpha, off) drops the block on create, so the Pod is Guaranteed and pinned.
The assertion is the agreement: qos-guard admits exactly what the kubelet pins."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.binaries import kube_minor, kube_version
from tests.e2e.conftest import Cluster
from tests.node.conftest import (
    DENIED,
    Release,
    admits,
    cgroup_cpus,
    delete_and_release,
    exec_cpus,
    parse_cpus,
    pod,
    report,
    wait_running,
)
from tests.node.node import Node

pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]


def empty_block_pod(name: str) -> dict[str, Any]:
    """The Pod of the issue: ``spec.resources: {}``, one container asking 1 CPU and 64Mi, requests = limits."""
    obj = copy.deepcopy(pod(name, "1"))
    obj["spec"]["resources"] = {}
    return obj


def expected_pinned(minor: int) -> bool:
    """Whether kubelet 1.``minor`` pins the Pod, per upstream (the module docstring)."""
    return minor >= 37 or minor <= 33


def test_empty_pod_level_block_verdict_matches_the_kubelet(node: Node, release: Release, tmp_path: Any) -> None:
    c: Cluster = node.cluster
    minor = kube_minor()
    served = c.version()
    assert served == kube_version(), served
    obj = empty_block_pod("empty-block")
    # qos-guard's verdict, twice: the CLI at this minor, and the chart's webhook in an enforce namespace.
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(c.kubectl("create", "--dry-run=client", "-o", "yaml", "-f", "-", stdin=obj,
                                  check=True).stdout)
    checked = c.qos_guard("check", "--kubernetes-version", f"1.{minor}", str(manifest))
    assert checked.returncode in (0, 1) and "Traceback" not in checked.stderr, checked.stderr
    enforce = c.namespace("node-pod-level", "enforce")
    answer = admits(c, enforce, obj)
    webhook_admits = answer.returncode == 0
    assert webhook_admits or DENIED in answer.stderr, answer.stderr
    assert webhook_admits == (checked.returncode == 0), (checked.stdout, answer.stderr)
    if not webhook_admits:  # the refusal names the minor it judged with, and the way out
        assert f"Kubernetes 1.{minor}" in answer.stderr and "limits-missing" in answer.stderr, answer.stderr
    # What the release really does with it: run it where qos-guard only warns, and read the node.
    warn = c.namespace("node-pod-level-warn", "warn")
    created = c.kubectl("apply", "-n", warn, "-f", "-", stdin=obj)
    assert created.returncode == 0, created.stderr
    running = wait_running(c, warn, "empty-block")
    uid, qos = running["metadata"]["uid"], running["status"]["qosClass"]
    stored_block = running["spec"].get("resources")
    entries = node.cpu_manager_state().get("entries", {})
    assigned = parse_cpus(entries[uid]["app"]) if uid in entries and "app" in entries[uid] else set()
    shared = parse_cpus(node.cpu_manager_state()["defaultCpuSet"])
    inside, cgroup = exec_cpus(c, warn, "empty-block"), cgroup_cpus(running)
    pinned = len(assigned) == 1 and inside == cgroup == assigned and not inside & shared
    report(f"pod-level {{}} on {served}: qos-guard check exit {checked.returncode}, webhook "
           f"{'admits' if webhook_admits else 'denies'}; stored spec.resources {stored_block!r}, status.qosClass "
           f"{qos}, CPU Manager {sorted(assigned) or 'no entry'}, cgroup cpuset.cpus {sorted(cgroup)}, shared pool "
           f"{sorted(shared)}: {'pinned' if pinned else 'not pinned'}")
    # The agreement, and this minor's own answer.
    assert pinned == (qos == "Guaranteed"), (qos, assigned, cgroup)
    assert webhook_admits == pinned, (answer.stderr, qos, assigned)
    assert pinned == expected_pinned(minor), (minor, qos, stored_block)
    if minor <= 33:  # PodLevelResources off: the API server dropped the block on create
        assert stored_block is None
    if not pinned:  # on the shared pool, as every container the CPU Manager does not pin
        assert inside == cgroup == shared
    delete_and_release(node, warn, "pod", "empty-block", [uid])
