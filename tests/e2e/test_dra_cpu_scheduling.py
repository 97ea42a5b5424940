"""Pods whose GPU and CPUs come from one ResourceClaim with ``matchAttribute: dra.net/numaNode`` stay with the
default scheduler: on the real kube-scheduler v1.36.3 (its DynamicResources plugin: the structured allocator,
consumable capacity beta and on), over Nodes without a kubelet whose ResourceSlices are shaped as the two drivers
publish them (dra-driver-cpu v0.2.0 grouped by NUMA node: ``cpudevnuma00N`` with ``dra.cpu/cpu`` capacity,
``allowMultipleAllocations``, ``dra.cpu/numaNodeID`` and ``dra.net/numaNode``; a GPU driver with
``dra.net/numaNode`` and ``resource.kubernetes.io/numaNode`` per GPU), every Pod is placed with its GPU and its
CPUs on one NUMA node and no device double-booked. The NUMA nodes are uneven (3 GPUs and 6 CPUs on NUMA 0, 1 GPU
and 6 CPUs on NUMA 1), so a Pod of 1 GPU and 2 CPUs fits 4 times per node only if each lands on its GPU's NUMA
node. The control: the same claims without the constraint place CPUs on the other NUMA node than the GPU.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import waiting
from tests.binaries import binary
from tests.builders import container, pod, resource_slice
from tests.e2e.conftest import Cluster
from tests.e2e.test_extender import Api, scheduler

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NAMESPACE = "e2e-dra-cpu"
POOL = "e2e.qos-guard.io/dra-cpu-pool"
TAINT = {"key": POOL, "value": "true", "effect": "NoSchedule"}
TOLERATION = {"key": POOL, "operator": "Exists", "effect": "NoSchedule"}
GPU_DRIVER, CPU_DRIVER = "gpu.example.com", "dra.cpu"
PAIRING = "dra.net/numaNode"
NODES, PODS = 67, 200
GPUS = {0: 3, 1: 1}  # NUMA node -> GPUs on it
CPUS = {0: 4, 1: 8}  # NUMA node -> CPUs of its dra.cpu group
POD_CPUS = 2


def add_node(api: Api, name: str) -> None:
    api("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {POOL: "1", "kubernetes.io/hostname": name}}})
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    amounts = {"cpu": str(sum(CPUS.values())), "memory": "64Gi", "pods": "110"}
    api("PATCH", f"/api/v1/nodes/{name}/status", {"status": {
        "capacity": amounts, "allocatable": amounts,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e: no kubelet",
                        "lastHeartbeatTime": now, "lastTransitionTime": now}]}}, patch=True)
    api("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": [TAINT]}}, patch=True)
    cpus = [{"name": f"cpudevnuma{n:03d}", "allowMultipleAllocations": True,
             "attributes": {"dra.cpu/numaNodeID": {"int": n}, "dra.cpu/socketID": {"int": 0},
                            "dra.cpu/smtEnabled": {"bool": False}, "dra.cpu/numCPUs": {"int": CPUS[n]},
                            PAIRING: {"int": n}},
             "capacity": {"dra.cpu/cpu": {"value": str(CPUS[n])}}} for n in GPUS]
    gpus = [{"name": f"gpu-{n}-{i}",
             "attributes": {PAIRING: {"int": n}, "resource.kubernetes.io/numaNode": {"int": n}}}
            for n, count in GPUS.items() for i in range(count)]
    for driver, devices in ((CPU_DRIVER, cpus), (GPU_DRIVER, gpus)):
        api("POST", "/apis/resource.k8s.io/v1/resourceslices",
            resource_slice(f"{name}-{driver}", driver, devices, node=name))


def claim(name: str, constrained: bool) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": GPU_DRIVER}},
        {"name": "cpus", "exactly": {"deviceClassName": CPU_DRIVER,
                                     "capacity": {"requests": {"dra.cpu/cpu": str(POD_CPUS)}}}}]}
    if constrained:
        devices["constraints"] = [{"matchAttribute": PAIRING}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"devices": devices}}


def claimed_pod(name: str) -> dict[str, Any]:
    """A Pod of POD_CPUS whole CPUs on the pool's nodes, taking its ResourceClaim ``name`` (made beforehand)."""
    amounts = {"cpu": str(POD_CPUS), "memory": "1Gi"}
    return pod(container("app", amounts, amounts, image="registry.invalid/app:1", claims=["devices"]), name=name,
               namespace=NAMESPACE, nodeSelector={POOL: "1"}, tolerations=[TOLERATION],
               resourceClaims=[{"name": "devices", "resourceClaimName": name}])


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[Api]:
    cluster.require("resource.k8s.io/v1", "resourceslices", "DRA (resource.k8s.io/v1)")
    cluster.namespace(NAMESPACE)
    binary("kube-scheduler")
    client = Api(cluster)
    for driver in (GPU_DRIVER, CPU_DRIVER):
        client("POST", "/apis/resource.k8s.io/v1/deviceclasses", {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": driver},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]}})
    for i in range(NODES):
        add_node(client, f"dra-cpu-{i:03d}")
    try:
        yield client
    finally:
        clear(client)
        for i in range(NODES):
            for driver in (GPU_DRIVER, CPU_DRIVER):
                client("DELETE", f"/apis/resource.k8s.io/v1/resourceslices/dra-cpu-{i:03d}-{driver}", ok=(200, 404))
        client("DELETE", "/api/v1/nodes", labelSelector=POOL)
        for driver in (GPU_DRIVER, CPU_DRIVER):
            client("DELETE", f"/apis/resource.k8s.io/v1/deviceclasses/{driver}", ok=(200, 404))


def run(api: Api, cluster: Cluster, folder: Path, count: int, constrained: bool) -> dict[str, int]:
    """``count`` Pods with their claims under the default scheduler, until each is bound or unschedulable;
    the counts (placed, aligned, split, double-booked GPUs, over-committed CPU groups)."""
    for i in range(count):
        api("POST", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims",
            claim(f"p{i:03d}", constrained))
        api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", claimed_pod(f"p{i:03d}"))
    with scheduler(cluster, folder, "default-scheduler", None):
        def settled() -> bool:
            items = api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
            return len(items) == count and all(p["spec"].get("nodeName") or any(
                c.get("type") == "PodScheduled" and c.get("status") == "False"
                for c in p.get("status", {}).get("conditions", [])) for p in items)

        waiting.eventually(f"{count} Pods bound or unschedulable", settled, within=600, every=2)
    items = api("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
    claims = {c["metadata"]["name"]: c for c in
              api("GET", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims")["items"]}
    numa = {(f"dra-cpu-{i:03d}", d): n for i in range(NODES)
            for n in GPUS for d in (f"cpudevnuma{n:03d}", *(f"gpu-{n}-{k}" for k in range(GPUS[n])))}
    gpus: Counter[tuple[str, str]] = Counter()
    cpus: Counter[tuple[str, str]] = Counter()
    placed = aligned = split = 0
    for p in items:
        node = p["spec"].get("nodeName")
        if not node:
            continue
        placed += 1
        results = claims[p["metadata"]["name"]]["status"]["allocation"]["devices"]["results"]
        nodes = set()
        for r in results:
            assert r["pool"] == node, (r, node)
            nodes.add(numa[(node, r["device"])])
            if r["driver"] == GPU_DRIVER:
                gpus[(node, r["device"])] += 1
            else:
                cpus[(node, r["device"])] += int(r["consumedCapacity"]["dra.cpu/cpu"])
        aligned += len(nodes) == 1
        split += len(nodes) > 1
    return {"placed": placed, "aligned": aligned, "split": split,
            "double-booked GPUs": sum(1 for n in gpus.values() if n > 1),
            "over-committed CPU groups": sum(1 for (_, device), n in cpus.items() if n > CPUS[int(device[-3:])])}


def clear(api: Api) -> None:
    """The Pods and their claims gone: with no controller manager here, nothing removes a reserved claim's
    delete-protection finalizer (the resourceclaim controller's job), so the test does."""
    api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods", gracePeriodSeconds="0")
    api("DELETE", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims")
    for c in api("GET", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims")["items"]:
        api("PATCH", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims/{c['metadata']['name']}",
            {"metadata": {"finalizers": None}}, patch=True, ok=(200, 404))
    waiting.eventually("the Pods and claims gone", lambda: not api(
        "GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"] and not api(
        "GET", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims")["items"], within=120, every=1)


def test_two_hundred_pods_each_with_gpu_and_cpus_on_one_numa_node(cluster: Cluster, api: Api, tmp_path: Path
                                                                  ) -> None:
    started = time.monotonic()
    counts = run(api, cluster, tmp_path / "constrained", PODS, constrained=True)
    took = time.monotonic() - started
    print(f"\n[dra-cpu scheduling] {PODS} Pods, matchAttribute {PAIRING}, {NODES} nodes: {counts} in {took:.0f} s")
    assert counts == {"placed": PODS, "aligned": PODS, "split": 0, "double-booked GPUs": 0,
                      "over-committed CPU groups": 0}, counts
    clear(api)
    control = run(api, cluster, tmp_path / "unconstrained", PODS, constrained=False)
    print(f"[dra-cpu scheduling] the same claims without the constraint: {control}")
    assert control["split"] > 0 and control["double-booked GPUs"] == control["over-committed CPU groups"] == 0, control
    clear(api)
