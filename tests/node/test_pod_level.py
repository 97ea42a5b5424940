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
import json
from typing import Any

import pytest

from tests.binaries import kube_minor, kube_version
from tests.e2e.conftest import RELEASE_NAMESPACE, Cluster
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
from tests.node.test_placement import verify

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
    # The webhook says which minor it judges with (here config.kubernetesVersion: its Pods cannot reach this
    # API server, see the release fixture).
    logs = c.kubectl("logs", "-n", RELEASE_NAMESPACE, "-l", "app.kubernetes.io/name=qos-guard", "--tail=-1",
                     "--prefix").stdout
    assert f"judging with Kubernetes 1.{minor} semantics" in logs, logs[-3000:]
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


def pod_level_pod(name: str) -> dict[str, Any]:
    """A Guaranteed Pod through its pod-level block (1 CPU, 64Mi, requests = limits), its one container asking
    the same: the container is Guaranteed-equivalent, which kubelet's static policy asks of a container of a
    Pod with pod-level resources before it gives it exclusive CPUs (``guaranteedCPUs``, container scope)."""
    obj = copy.deepcopy(pod(name, "1"))
    obj["spec"]["resources"] = copy.deepcopy(obj["spec"]["containers"][0]["resources"])
    return obj


def run_pod_level(node: Node, ns: str, name: str) -> tuple[dict[str, Any], set[int], bool]:
    """Run the pod-level Pod; (the Pod, the CPU Manager's assignment of its container, pinned)."""
    c = node.cluster
    created = c.kubectl("apply", "-n", ns, "-f", "-", stdin=pod_level_pod(name))
    assert created.returncode == 0, created.stderr
    running = wait_running(c, ns, name)
    assert running["status"]["qosClass"] == "Guaranteed"
    entries = node.cpu_manager_state().get("entries", {})
    uid = running["metadata"]["uid"]
    assigned = parse_cpus(entries[uid]["app"]) if uid in entries and "app" in entries[uid] else set()
    shared = parse_cpus(node.cpu_manager_state()["defaultCpuSet"])
    inside, cgroup = exec_cpus(c, ns, name), cgroup_cpus(running)
    return running, assigned, len(assigned) == 1 and inside == cgroup == assigned and not inside & shared


def test_pod_level_resource_managers_gate_on_the_real_kubelet(node: Node, release: Release) -> None:
    """``PodLevelResourceManagers`` (alpha 1.36, beta and off 1.37): off, kubelet's CPU Manager skips a Pod with
    pod-level resources (``allocateForAdd``) and ``qos-guard verify`` says so (``pod-level-resources``); the
    kubelet restarted with the gate on pins the same Pod, ``qos-guard nodes`` reads the gate from its configz and
    says such Pods are pinned there, and verify (PodResources wins over the spec) reports it pinned."""
    c = node.cluster
    minor = kube_minor()
    if minor < 36:
        pytest.skip(f"kubelet {kube_version()} has no PodLevelResourceManagers feature gate (alpha from 1.36)")
    ns = c.namespace("node-pod-level-warn", "warn")
    off, off_assigned, off_pinned = run_pod_level(node, ns, "gate-off")
    seen = verify(node)[(ns, "gate-off", "app")]
    report(f"PodLevelResourceManagers off on {kube_version()}: CPU Manager {sorted(off_assigned) or 'no entry'}; "
           f"verify pinned={seen['pinned']} reason={seen.get('reason')}")
    assert not off_pinned and not seen["pinned"] and seen["reason"] == "pod-level-resources", seen
    delete_and_release(node, ns, "pod", "gate-off", [off["metadata"]["uid"]])
    with node.kubelet_configured({"featureGates": {"PodLevelResourceManagers": True}}):
        listed = c.qos_guard("nodes", "--kubeconfig", str(c.kubeconfig), "--format", "json")
        (found,) = json.loads(listed.stdout)["nodes"]
        assert any("PodLevelResourceManagers is on" in n for n in found["notes"]), found
        on, on_assigned, on_pinned = run_pod_level(node, ns, "gate-on")
        seen = verify(node)[(ns, "gate-on", "app")]
        report(f"PodLevelResourceManagers on on {kube_version()}: CPU Manager {sorted(on_assigned) or 'no entry'}; "
               f"verify pinned={seen['pinned']}; qos-guard nodes notes the gate")
        assert on_pinned and seen["pinned"] and set(seen["exclusiveCPUs"]) == on_assigned, seen
        delete_and_release(node, ns, "pod", "gate-on", [on["metadata"]["uid"]])
