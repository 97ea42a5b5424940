"""GPUs allocated through DRA on a real kubelet: kubelet v1.36.3's Topology Manager has no hint
provider for DRA devices, so under ``single-numa-node`` it runs a Pod whose only free exclusive CPU is on NUMA 1
beside a DRA GPU on NUMA 0, the Pod the device plugin case refuses with TopologyAffinityError; the agent (the
chart's DaemonSet) and ``qos-guard verify`` find the device's NUMA node in its ResourceSlice and say so.

The two fake NUMA nodes of tests/node/numa.py (CPU 0 on NUMA 0, CPU 1 on NUMA 1; CPU 0 is reserved, so CPU 1 is
the only exclusive one), the kubelet restarted on them with ``single-numa-node``, and hack/dradriver
(tests/node/dra.py) publishing one GPU with the attributes of each case: on NUMA 0 (beside the device plugin
GPU on NUMA 0, refused): NUMAMisaligned, verify exits 1; moved to NUMA 1 (the driver restarted with the new
attributes): CPUs and GPU aligned on NUMA 1, the memory remote (the kernel's one real node 0), verify exits 1;
asked as ``example.com/dra-gpu: 1`` through a DeviceClass's ``extendedResourceName`` (the scheduler's own
claim, ``status.extendedResourceClaimStatus``): NUMAMisaligned;
without any locality attribute: unknown (NUMAUnknown, metric -1); with only ``pciBusID``: its NUMA node read
from the (fake) sysfs. What was seen (phases, cpusets, device NUMA nodes, verdicts) is printed in the summary."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests import waiting
from tests.e2e.conftest import Cluster
from tests.node.conftest import Release, cgroup_cpus, delete_and_release, report, wait_running
from tests.node.dra import (
    DEVICE_CLASS,
    DRIVER,
    EXTENDED,
    EXTENDED_CLASS,
    NUMA_ATTR,
    allocated_devices,
    claim_pod,
    claim_template,
    device_class,
    dra_driver,
    extended_pod,
    pod_resources,
    slice_devices,
    wait_claims_gone,
)
from tests.node.node import NODE_NAME, Node, fake_numa_wrapper
from tests.node.numa import GPU, device_plugin, fake_sysfs
from tests.node.test_placement import agent_pod, events, helm_upgrade, metrics_text, verify, wait_event, wait_series
from tests.serving import free_port
from webhook.node.verdict_text import DRA_REASON

pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]

FAKE = {0: [0], 1: [1]}  # NUMA node -> CPUs of the fake layout
# One GPU as a real driver publishes it, on either NUMA node of the fake layout.
GPU_NUMA0 = "gpu-0,numaNode=0,pciBusID=0000:3b:00.0,pcieRoot=pci0000:3a"
GPU_NUMA1 = "gpu-0,numaNode=1,pciBusID=0000:af:00.0,pcieRoot=pci0000:ae"
GPU_NOWHERE = "gpu-0"  # no locality attribute at all
GPU_PCI_ONLY = "gpu-0,pciBusID=0000:3b:00.0"  # its NUMA node only in sysfs
PCI = {"0000:3b:00.0": ("pci0000:3a", 0), "0000:af:00.0": ("pci0000:ae", 1)}  # the fake sysfs' PCI devices
ALIGNED = "qos_guard_container_numa_aligned"


def apply(c: Cluster, ns: str | None, obj: dict[str, Any]) -> None:
    proc = c.kubectl("apply", *(("-n", ns) if ns else ()), "-f", "-", stdin=obj)
    assert proc.returncode == 0, proc.stderr


def pci_tree(sys_root: Path) -> None:
    """The GPUs' PCI functions in the fake sysfs as the kernel lays them out: ``devices/<root>/<BDF>/numa_node``
    and ``bus/pci/devices/<BDF>`` a relative link to it (what pciBusID and pcieRoot resolve through)."""
    bus = sys_root / "bus" / "pci" / "devices"
    bus.mkdir(parents=True, exist_ok=True)
    for bdf, (root, numa) in PCI.items():
        folder = sys_root / "devices" / root / bdf
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "numa_node").write_text(f"{numa}\n")
        link = bus / bdf
        if not link.is_symlink():
            link.symlink_to(f"../../../devices/{root}/{bdf}")


@pytest.fixture(scope="module")
def two_numa(node: Node, release: Release) -> Iterator[Path]:
    """The kubelet on two fake NUMA nodes with ``single-numa-node``, the Memory Manager off (as in
    test_placement), and the chart's agent every 2 s reading the same fake sysfs; both restored on exit."""
    c = node.cluster
    c.require("resource.k8s.io/v1", "resourceslices", "DRA on the node (a kubelet plugin's ResourceSlice, claims v1)")
    started = time.monotonic()
    fake = node.folder / "fake-sys"
    with fake_sysfs(fake, FAKE) as sys_root, node.kubelet_configured(
            {"memoryManagerPolicy": "None", "reservedMemory": None},
            wrapper=fake_numa_wrapper(fake / "devices" / "system" / "node")):
        pci_tree(sys_root)
        report(f"dra: kubelet restarted on two fake NUMA nodes (CPU 0 on 0, CPU 1 on 1), single-numa-node, "
               f"in {time.monotonic() - started:.0f} s")
        started = time.monotonic()
        # As test_placement's agent: the node's network namespace reaches the API server on 127.0.0.1.
        api = urlsplit(c.url)
        helm_upgrade(c, "agent.enabled=true", f"agent.podResourcesHostPath={node.kubelet_root / 'pod-resources'}",
                     "agent.interval=2", "agent.hostNetwork=true", f"agent.metricsPort={free_port()}",
                     f"agent.sysHostPath={sys_root}",
                     "agent.extraEnv[0].name=KUBERNETES_SERVICE_HOST", f"agent.extraEnv[0].value:={api.hostname}",
                     "agent.extraEnv[1].name=KUBERNETES_SERVICE_PORT", f"agent.extraEnv[1].value:={api.port}")
        report(f"dra: agent DaemonSet on the fake sysfs ready in {time.monotonic() - started:.0f} s "
               f"({agent_pod(c)})")
        try:
            yield sys_root
        finally:
            helm_upgrade(c, "agent.enabled=false", "agent.sysHostPath=/sys")


@pytest.fixture(scope="module")
def ns(node: Node, two_numa: Path) -> Iterator[str]:
    """The namespace (opted in with ``warn``: the agent judges opted-in namespaces only, and the webhook only
    warns), the driver's DeviceClass and a ResourceClaimTemplate with one request."""
    c = node.cluster
    name = c.namespace("node-dra", "warn")
    apply(c, None, device_class())
    apply(c, name, claim_template())
    yield name
    c.kubectl("delete", "deviceclass", DEVICE_CLASS, "--ignore-not-found")


def run_claim_pod(node: Node, ns: str, name: str, obj: dict[str, Any]) -> tuple[dict[str, Any], set[int]]:
    """Apply, wait until it runs; its phase and its container's cpuset, read from the host's cgroup."""
    apply(node.cluster, ns, obj)
    running = wait_running(node.cluster, ns, name)
    assert running["status"]["phase"] == "Running", running["status"]
    return running, cgroup_cpus(running)


def judged(node: Node, sys_root: Path, ns: str, name: str, metric: int, tag: str
           ) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """The agent's metric for the container (1 aligned, 0 misaligned, -1 unknown), then ``verify`` from the
    node's shell on the same fake sysfs: its JSON for the container and its text run for the Pod (printed)."""
    c = node.cluster
    wait_series(c, {("qos_guard_container_pinned", ns, name, "app"): 1, (ALIGNED, ns, name, "app"): metric})
    p = verify(node, "--sys-root", str(sys_root))[(ns, name, "app")]
    text = verify(node, "--sys-root", str(sys_root), f"{ns}/{name}", fmt="text")
    for line in metrics_text(c).splitlines():
        if line.startswith(ALIGNED) and f'pod="{name}"' in line:
            report(f"{tag}: agent /metrics: {line}")
    for line in text.stdout.splitlines():
        report(f"{tag}: $ qos-guard verify --sys-root FAKE {ns}/{name} (exit {text.returncode}): {line}")
    return p, text


def gone(node: Node, ns: str, obj: dict[str, Any]) -> None:
    delete_and_release(node, ns, "pod", obj["metadata"]["name"], [obj["metadata"]["uid"]])
    wait_claims_gone(node.cluster, ns)


def test_1_dra_gpu_on_numa0_runs_beside_cpu_on_numa1(node: Node, ns: str, two_numa: Path) -> None:
    c = node.cluster
    # The control: the same Pod with the same GPU from the device plugin is refused by the Topology Manager.
    with device_plugin(c, node.folder, "gpu-0=0"):
        dp = claim_pod("article-dp")
        del dp["spec"]["resourceClaims"], dp["spec"]["containers"][0]["resources"]["claims"]
        for kind in ("limits", "requests"):
            dp["spec"]["containers"][0]["resources"][kind][GPU] = "1"
        apply(c, ns, dp)

        def failed() -> bool:
            phase = c.get("pod", "article-dp", "-n", ns)["status"].get("phase")
            assert phase != "Running", "single-numa-node ran a device plugin Pod it cannot align"
            return bool(phase == "Failed")

        waiting.eventually("the device plugin Pod failed", failed, 90, every=1,
                           seen=lambda: c.get("pod", "article-dp", "-n", ns)["status"])
        refused = c.get("pod", "article-dp", "-n", ns)["status"]
        assert refused["reason"] == "TopologyAffinityError", refused
        c.kubectl("delete", "pod", "article-dp", "-n", ns, "--wait=true", "--timeout=60s")
    with dra_driver(node, [GPU_NUMA0]) as log:
        devices = slice_devices(c)
        assert devices["gpu-0"][NUMA_ATTR] == {"int": 0}
        obj, cpus = run_claim_pod(node, ns, "article", claim_pod("article"))
        try:
            claim = obj["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
            assert allocated_devices(c, ns, claim) == [f"{NODE_NAME}/gpu-0"]
            assert f"prepare claim {ns}/{claim}" in log.read_text()  # kubelet asked the driver: NodePrepareResources
            assert cpus == {1}, cpus  # NUMA 1, beside a GPU on NUMA 0: kubelet aligned nothing
            # kubelet knows the device is the container's, from the driver, with no NUMA node to align it by.
            seen = pod_resources(node, ns, "article")
            assert seen == {"cpus": [1], "devices": [], "dra": [(f"{ns}/{claim}", DRIVER, NODE_NAME, "gpu-0", [])]}
            report(f"dra 1: single-numa-node, free CPU 1 on NUMA 1, {GPU} gpu-0 on NUMA 0 from the device plugin: "
                   f"phase {refused['phase']} {refused['reason']}: {refused.get('message', '')}")
            report(f"dra 1: the same Pod, its GPU {DRIVER} {NODE_NAME}/gpu-0 ({NUMA_ATTR}=0) through claim {claim}: "
                   f"phase {obj['status']['phase']}, cgroup cpuset.cpus {sorted(cpus)} (NUMA 1): "
                   "kubelet ran it misaligned")
            report(f"dra 1: kubelet's PodResources for {ns}/article/app: cpu_ids {seen['cpus']}, devices "
                   f"{seen['devices']}, dynamic_resources {seen['dra']} (claim, driver, pool, device, CDI devices)")
            # What qos-guard says of it: misaligned, the DRA device named with its NUMA node and why.
            ref = f"{DRIVER}/{NODE_NAME}/gpu-0"
            p, text = judged(node, two_numa, ns, "article", 0, "dra 1")
            assert p["aligned"] is False and p["state"] == "misaligned" and p["cpuNUMANodes"] == [1], p
            assert p["numaNodes"] == [0, 1] and p["exclusiveCPUs"] == [1] and p["devices"] == []
            [d] = p["draDevices"]
            assert (d["driver"], d["pool"], d["device"], d["claim"]) == (
                DRIVER, NODE_NAME, "gpu-0", {"namespace": ns, "name": claim})
            assert d["numaNodes"] == [0] and d["numaSource"] == NUMA_ATTR and d["unknown"] is None
            assert text.returncode == 1 and "MISALIGNED" in text.stdout and DRA_REASON in text.stdout
            event = wait_event(c, ns, "article", "NUMAMisaligned")
            message = event["message"]
            assert f"DRA device {ref} (claim {ns}/{claim}) on NUMA 0" in message and DRA_REASON in message
            assert "CPUs 1 on NUMA 1" in message and event["type"] == "Warning"
            report(f"dra 1: Event NUMAMisaligned on {ns}/article: {message}")
        finally:  # a failed check must not leave CPU 1 taken for the next case
            gone(node, ns, obj)


def test_2_gpu_moved_to_numa1_runs_aligned(node: Node, ns: str, two_numa: Path) -> None:
    c = node.cluster
    with dra_driver(node, [GPU_NUMA0], delete_slices=False):
        before = {s["metadata"]["name"] for s in c.get("resourceslices", "--field-selector",
                                                      f"spec.driver={DRIVER}")["items"]}
    # The driver started again with the GPU's new attributes: its slice is updated, the device keeps its name.
    with dra_driver(node, [GPU_NUMA1]):
        after = {s["metadata"]["name"] for s in c.get("resourceslices", "--field-selector",
                                                     f"spec.driver={DRIVER}")["items"]}
        assert slice_devices(c)["gpu-0"][NUMA_ATTR] == {"int": 1}
        assert after == before, (before, after)  # updated in place, as a real driver's after a restart
        obj, cpus = run_claim_pod(node, ns, "moved", claim_pod("moved"))
        try:
            claim = obj["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
            assert allocated_devices(c, ns, claim) == [f"{NODE_NAME}/gpu-0"] and cpus == {1}
            report(f"dra 2: driver restarted with gpu-0 on NUMA 1 (slice {sorted(before)} -> {sorted(after)}): "
                   f"phase {obj['status']['phase']}, cgroup cpuset.cpus {sorted(cpus)} (NUMA 1) beside gpu-0 on NUMA 1")
            p, text = judged(node, two_numa, ns, "moved", 1, "dra 2")
            # CPUs and GPU share NUMA 1. The memory cannot: Memory Manager None here, and the kernel has one real
            # node, so every page is on node 0. The answer says so (remote memory, verify exits 1), never "aligned".
            assert p["aligned"] is True and p["cpuNUMANodes"] == [1], p
            assert p["state"] in ("memory-not-pinned", "remote-memory"), p
            assert [d["numaNodes"] for d in p["draDevices"]] == [[1]]
            assert {x["reason"] for x in p["problems"]} == {"NUMARemoteMemory"}, p["problems"]
            assert text.returncode == 1 and "REMOTE MEMORY" in text.stdout, text.stdout + text.stderr
            assert "NUMA 1" in text.stdout and "MISALIGNED" not in text.stdout and "NUMA UNKNOWN" not in text.stdout
            assert not events(c, ns, "moved", "NUMAMisaligned") and not events(c, ns, "moved", "NUMAUnknown")
        finally:  # a failed check must not leave CPU 1 taken for the next case
            gone(node, ns, obj)


def test_3_extended_resource_through_a_device_class(node: Node, ns: str, two_numa: Path) -> None:
    c = node.cluster
    apply(c, None, device_class(EXTENDED_CLASS, extended_resource=EXTENDED))
    try:
        with dra_driver(node, [GPU_NUMA0]):
            obj, cpus = run_claim_pod(node, ns, "article-extended", extended_pod("article-extended"))
            try:
                status = obj["status"]["extendedResourceClaimStatus"]
                claim = status["resourceClaimName"]
                mapping = status["requestMappings"]
                assert [(m["containerName"], m["resourceName"]) for m in mapping] == [("app", EXTENDED)], status
                assert allocated_devices(c, ns, claim) == [f"{NODE_NAME}/gpu-0"] and cpus == {1}
                assert EXTENDED not in c.get("node", NODE_NAME)["status"].get("allocatable", {})
                seen = pod_resources(node, ns, "article-extended")
                assert seen == {"cpus": [1], "devices": [], "dra": [(f"{ns}/{claim}", DRIVER, NODE_NAME, "gpu-0", [])]}
                report(f"dra 3: {ns}/article-extended asks {EXTENDED}: 1 in plain resources; the scheduler's claim "
                       f"{claim} (status.extendedResourceClaimStatus, request {mapping[0]['requestName']}) holds "
                       f"{NODE_NAME}/gpu-0 on NUMA 0; phase {obj['status']['phase']}, cgroup cpuset.cpus "
                       f"{sorted(cpus)} (NUMA 1)")
                p, text = judged(node, two_numa, ns, "article-extended", 0, "dra 3")
                assert p["aligned"] is False and p["state"] == "misaligned", p
                assert [(d["claim"]["name"], d["numaNodes"]) for d in p["draDevices"]] == [(claim, [0])]
                assert text.returncode == 1 and "MISALIGNED" in text.stdout
                event = wait_event(c, ns, "article-extended", "NUMAMisaligned")
                assert f"DRA device {DRIVER}/{NODE_NAME}/gpu-0 (claim {ns}/{claim}) on NUMA 0" in event["message"]
                report(f"dra 3: Event NUMAMisaligned on {ns}/article-extended: {event['message']}")
            finally:  # a failed check must not leave CPU 1 taken for the next case
                gone(node, ns, obj)
    finally:
        c.kubectl("delete", "deviceclass", EXTENDED_CLASS, "--ignore-not-found")


def test_4_device_without_locality(node: Node, ns: str, two_numa: Path) -> None:
    c = node.cluster
    with dra_driver(node, [GPU_NOWHERE]):
        assert slice_devices(c) == {"gpu-0": {}}
        obj, cpus = run_claim_pod(node, ns, "nowhere", claim_pod("nowhere"))
        try:
            claim = obj["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
            assert allocated_devices(c, ns, claim) == [f"{NODE_NAME}/gpu-0"] and cpus == {1}
            assert pod_resources(node, ns, "nowhere")["dra"] == [(f"{ns}/{claim}", DRIVER, NODE_NAME, "gpu-0", [])]
            report(f"dra 4: gpu-0 without any locality attribute through claim {claim}: phase "
                   f"{obj['status']['phase']}, cgroup cpuset.cpus {sorted(cpus)}")
            p, text = judged(node, two_numa, ns, "nowhere", -1, "dra 4")
            assert p["aligned"] is None and p["state"] == "unknown", p  # never "aligned" on the CPUs alone
            [d] = p["draDevices"]
            assert d["numaNodes"] == [] and NUMA_ATTR in d["unknown"] and "pciBusID" in d["unknown"], d
            assert text.returncode == 1 and "NUMA UNKNOWN" in text.stdout
            event = wait_event(c, ns, "nowhere", "NUMAUnknown")
            assert f"DRA device {DRIVER}/{NODE_NAME}/gpu-0 (claim {ns}/{claim})" in event["message"]
            assert not events(c, ns, "nowhere", "NUMAMisaligned")
            report(f"dra 4: Event NUMAUnknown on {ns}/nowhere: {event['message']}")
        finally:  # a failed check must not leave CPU 1 taken for the next case
            gone(node, ns, obj)


def test_5_numa_node_from_sysfs_by_pci_bus_id(node: Node, ns: str, two_numa: Path) -> None:
    with dra_driver(node, [GPU_PCI_ONLY]):
        obj, cpus = run_claim_pod(node, ns, "by-pci", claim_pod("by-pci"))
        try:
            assert cpus == {1}
            p, text = judged(node, two_numa, ns, "by-pci", 0, "dra 5")
            [d] = p["draDevices"]
            assert d["numaNodes"] == [0] and d["numaSource"] == "resource.kubernetes.io/pciBusID", d
            assert d["numaPath"].endswith("numa_node") and p["state"] == "misaligned" and text.returncode == 1
            report(f"dra 5: gpu-0 with only pciBusID 0000:3b:00.0: NUMA {d['numaNodes']} from {d['numaPath']}; "
                   f"cgroup cpuset.cpus {sorted(cpus)}: {p['state']}")
        finally:  # a failed check must not leave CPU 1 taken for the next case
            gone(node, ns, obj)
