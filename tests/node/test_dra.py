"""GPUs allocated through DRA on a real kubelet (issue 29): kubelet v1.36.3's Topology Manager has no hint
provider for DRA devices, so under ``single-numa-node`` it runs a Pod whose only free exclusive CPU is on NUMA 1
beside a DRA GPU on NUMA 0, the Pod the device plugin case refuses with TopologyAffinityError.

The two fake NUMA nodes of tests/node/numa.py (CPU 0 on NUMA 0, CPU 1 on NUMA 1; CPU 0 is reserved, so CPU 1 is
the only exclusive one), the kubelet restarted on them with ``single-numa-node``, and hack/dradriver
(tests/node/dra.py) publishing one GPU with the attributes of each case: on NUMA 0 (beside the device plugin
GPU on NUMA 0, refused); moved to NUMA 1 (the driver restarted with the new attributes); asked as
``example.com/dra-gpu: 1`` through a DeviceClass's ``extendedResourceName`` (the scheduler's own claim,
``status.extendedResourceClaimStatus``); and without any locality attribute. What was seen (phases, cpusets,
device NUMA nodes) is printed in the summary."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Cluster
from tests.node.conftest import cgroup_cpus, delete_and_release, report, wait_running
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

pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]

FAKE = {0: [0], 1: [1]}  # NUMA node -> CPUs of the fake layout
# One GPU as a real driver publishes it, on either NUMA node of the fake layout.
GPU_NUMA0 = "gpu-0,numaNode=0,pciBusID=0000:3b:00.0,pcieRoot=pci0000:3a"
GPU_NUMA1 = "gpu-0,numaNode=1,pciBusID=0000:af:00.0,pcieRoot=pci0000:ae"
GPU_NOWHERE = "gpu-0"  # no locality attribute at all


def apply(c: Cluster, ns: str | None, obj: dict[str, Any]) -> None:
    proc = c.kubectl("apply", *(("-n", ns) if ns else ()), "-f", "-", stdin=obj)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def two_numa(node: Node) -> Iterator[Path]:
    """The kubelet on two fake NUMA nodes with ``single-numa-node``, the Memory Manager off (as in
    test_placement); restored on exit."""
    started = time.monotonic()
    fake = node.folder / "fake-sys"
    with fake_sysfs(fake, FAKE) as sys_root, node.kubelet_configured(
            {"memoryManagerPolicy": "None", "reservedMemory": None},
            wrapper=fake_numa_wrapper(fake / "devices" / "system" / "node")):
        report(f"dra: kubelet restarted on two fake NUMA nodes (CPU 0 on 0, CPU 1 on 1), single-numa-node, "
               f"in {time.monotonic() - started:.0f} s")
        yield sys_root


@pytest.fixture(scope="module")
def ns(node: Node, two_numa: Path) -> Iterator[str]:
    """The namespace, the driver's DeviceClass and a ResourceClaimTemplate with one request."""
    c = node.cluster
    name = c.namespace("node-dra")
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


def gone(node: Node, ns: str, obj: dict[str, Any]) -> None:
    delete_and_release(node, ns, "pod", obj["metadata"]["name"], [obj["metadata"]["uid"]])
    wait_claims_gone(node.cluster, ns)


def test_1_dra_gpu_on_numa0_runs_beside_cpu_on_numa1(node: Node, ns: str) -> None:
    c = node.cluster
    # The control: the same Pod with the same GPU from the device plugin is refused by the Topology Manager.
    with device_plugin(c, node.folder, "gpu-0=0"):
        dp = claim_pod("article-dp")
        del dp["spec"]["resourceClaims"], dp["spec"]["containers"][0]["resources"]["claims"]
        for kind in ("limits", "requests"):
            dp["spec"]["containers"][0]["resources"][kind][GPU] = "1"
        apply(c, ns, dp)
        deadline = time.monotonic() + 90
        while (refused := c.get("pod", "article-dp", "-n", ns)["status"]).get("phase") != "Failed":
            assert refused.get("phase") != "Running", "single-numa-node ran a device plugin Pod it cannot align"
            assert time.monotonic() < deadline, refused
            time.sleep(1)
        assert refused["reason"] == "TopologyAffinityError", refused
        c.kubectl("delete", "pod", "article-dp", "-n", ns, "--wait=true", "--timeout=60s")
    with dra_driver(node, [GPU_NUMA0]) as log:
        devices = slice_devices(c)
        assert devices["gpu-0"][NUMA_ATTR] == {"int": 0}
        obj, cpus = run_claim_pod(node, ns, "article", claim_pod("article"))
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
               f"phase {obj['status']['phase']}, cgroup cpuset.cpus {sorted(cpus)} (NUMA 1): kubelet ran it misaligned")
        report(f"dra 1: kubelet's PodResources for {ns}/article/app: cpu_ids {seen['cpus']}, devices "
               f"{seen['devices']}, dynamic_resources {seen['dra']} (claim, driver, pool, device, CDI devices)")
        gone(node, ns, obj)


def test_2_gpu_moved_to_numa1_runs_aligned(node: Node, ns: str) -> None:
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
        obj, cpus = run_claim_pod(node, ns, "article", claim_pod("article"))
        claim = obj["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        assert allocated_devices(c, ns, claim) == [f"{NODE_NAME}/gpu-0"] and cpus == {1}
        report(f"dra 2: driver restarted with gpu-0 on NUMA 1 (slice {sorted(before)} -> {sorted(after)}): "
               f"phase {obj['status']['phase']}, cgroup cpuset.cpus {sorted(cpus)} (NUMA 1) beside gpu-0 on NUMA 1")
        gone(node, ns, obj)


def test_3_extended_resource_through_a_device_class(node: Node, ns: str) -> None:
    c = node.cluster
    apply(c, None, device_class(EXTENDED_CLASS, extended_resource=EXTENDED))
    try:
        with dra_driver(node, [GPU_NUMA0]):
            obj, cpus = run_claim_pod(node, ns, "article-extended", extended_pod("article-extended"))
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
            gone(node, ns, obj)
    finally:
        c.kubectl("delete", "deviceclass", EXTENDED_CLASS, "--ignore-not-found")


def test_4_device_without_locality(node: Node, ns: str) -> None:
    c = node.cluster
    with dra_driver(node, [GPU_NOWHERE]):
        assert slice_devices(c) == {"gpu-0": {}}
        obj, cpus = run_claim_pod(node, ns, "nowhere", claim_pod("nowhere"))
        claim = obj["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        assert allocated_devices(c, ns, claim) == [f"{NODE_NAME}/gpu-0"] and cpus == {1}
        assert pod_resources(node, ns, "nowhere")["dra"] == [(f"{ns}/{claim}", DRIVER, NODE_NAME, "gpu-0", [])]
        report(f"dra 4: gpu-0 without any locality attribute through claim {claim}: phase "
               f"{obj['status']['phase']}, cgroup cpuset.cpus {sorted(cpus)}")
        gone(node, ns, obj)
