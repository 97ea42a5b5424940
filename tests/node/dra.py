"""A DRA driver on the node tests' kubelet: hack/dradriver (k8s.io/dynamic-resource-allocation's kubeletplugin)
registered in the kubelet's plugins_registry under its --root-dir, publishing one ResourceSlice whose devices
carry the locality attributes a test gives it; and the resource.k8s.io objects a Pod takes a device through.

kube-apiserver v1.36.3 serves resource.k8s.io/v1 by default, kube-scheduler's DynamicResources plugin and
kube-controller-manager's resourceclaim controller run by default (DynamicResourceAllocation is GA since 1.34),
and DRAExtendedResource is beta and on by default in 1.36 (pkg/features/kube_features.go): the node tests'
control plane needs no flag for any of it."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc

from tests import builders, waiting
from tests.binaries import binary
from tests.e2e.conftest import Cluster, stop_process
from tests.node.conftest import pod
from tests.node.node import NODE_NAME, Node
from webhook.node.podresources import api_pb2, api_pb2_grpc

DRIVER = "gpu.qos-guard.test"
DEVICE_CLASS = "qos-guard-gpu"
EXTENDED = "example.com/dra-gpu"
EXTENDED_CLASS = "qos-guard-dra-gpu"
NUMA_ATTR = builders.NUMA_NODE


def slice_devices(c: Cluster) -> dict[str, dict[str, Any]]:
    """Device name -> its attributes as the API server has them (``{"resource.kubernetes.io/numaNode":
    {"int": 0}, ...}``), over the driver's ResourceSlices of the node."""
    found: dict[str, dict[str, Any]] = {}
    for s in c.get("resourceslices", "--field-selector", f"spec.driver={DRIVER},spec.nodeName={NODE_NAME}")["items"]:
        for d in s["spec"].get("devices", []):
            found[d["name"]] = d.get("attributes", {})
    return found


def _want(spec: str) -> tuple[str, dict[str, Any]]:
    """What the API server should show for one ``-device`` spec (the driver's parsing, restated)."""
    name, *attrs = spec.split(",")
    want: dict[str, Any] = {}
    for a in attrs:
        key, value = a.split("=", 1)
        key = key if "/" in key else f"resource.kubernetes.io/{key}"
        want[key] = {"int": int(value)} if value.lstrip("-").isdigit() else {"string": value}
    return name, want


@contextlib.contextmanager
def dra_driver(node: Node, devices: Sequence[str], delete_slices: bool = True,
               timeout: float = 90) -> Iterator[Path]:
    """hack/dradriver with ``devices`` (``name,attr=value,...`` each), until kubelet registered it and the API
    server has its ResourceSlice with exactly those devices and attributes; yields its log. On exit it is
    stopped and its slices are deleted, unless ``delete_slices`` is false (a driver restarted: a real driver's
    slices stay across restarts)."""
    c = node.cluster
    log = node.folder / f"dradriver-{int(time.time() * 1000)}.log"
    args = [binary("dradriver"), "-driver", DRIVER, "-node", NODE_NAME, "-kubeconfig", str(c.kubeconfig),
            "-kubelet-root", str(node.kubelet_root)]
    for d in devices:
        args += ["-device", d]
    want = dict(_want(d) for d in devices)
    proc = subprocess.Popen(args, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)

    def published() -> bool:
        assert proc.poll() is None, f"dradriver exited {proc.returncode}:\n{log.read_text()}"
        return "registered with kubelet" in log.read_text() and slice_devices(c) == want

    try:
        # kubelet wipes a driver's slices when it starts and while the driver is away: wait for ours, as given.
        waiting.eventually(f"dradriver registered and publishing {want}", published, timeout, every=0.5,
                           seen=lambda: f"slices {slice_devices(c)}\n{log.read_text()}")
        yield log
    finally:
        stop_process(proc)
        if delete_slices:
            c.kubectl("delete", "resourceslices", "--field-selector", f"spec.driver={DRIVER}", "--wait=true")


def device_class(name: str = DEVICE_CLASS, extended_resource: str | None = None) -> dict[str, Any]:
    """A DeviceClass of every device of the test driver; ``extended_resource`` maps that name to it
    (``spec.extendedResourceName``: a Pod asking it in plain resources gets a claim made by the scheduler)."""
    return builders.device_class(name, DRIVER, extended_resource)


def claim_template(name: str = "gpu") -> dict[str, Any]:
    """One request for one device of the test driver's class."""
    return builders.claim(name, {"requests": [builders.exactly("gpu", DEVICE_CLASS)]})


def claim_pod(name: str, template: str = "gpu") -> dict[str, Any]:
    """A Guaranteed Pod, 1 whole CPU, its device through ``resources.claims`` from ``template``."""
    return builders.take_claim(pod(name, "1"), template)


def extended_pod(name: str) -> dict[str, Any]:
    """The article's Pod, unchanged in shape: 1 whole CPU and ``example.com/dra-gpu: 1`` in plain resources."""
    obj = pod(name, "1")
    for kind in ("limits", "requests"):
        obj["spec"]["containers"][0]["resources"][kind][EXTENDED] = "1"
    return obj


def allocated_devices(c: Cluster, ns: str, claim: str) -> list[str]:
    """``pool/device`` of every result of a claim's allocation."""
    obj = c.get("resourceclaim", claim, "-n", ns)
    results = obj.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
    return [f"{r['pool']}/{r['device']}" for r in results]


def wait_claims_gone(c: Cluster, ns: str, timeout: float = 90) -> None:
    """The namespace's ResourceClaims deleted (their devices free for the next Pod)."""
    def names() -> list[str]:
        return c.kubectl("get", "resourceclaims", "-n", ns, "-o", "name").stdout.split()

    waiting.eventually(f"the ResourceClaims of {ns} deleted", lambda: not names(), timeout, every=1,
                       seen=lambda: f"claims {names()}")


def pod_resources(node: Node, ns: str, name: str, container: str = "app") -> dict[str, Any]:
    """What kubelet itself reports for a container through PodResources ``Get``: its exclusive CPUs, device
    plugin devices (with their NUMA nodes) and DRA devices (``dynamic_resources``: claim, driver, pool, device;
    the API has no topology for them)."""
    with grpc.insecure_channel(f"unix://{node.pod_resources_socket}") as channel:
        reply = api_pb2_grpc.PodResourcesListerStub(channel).Get(
            api_pb2.GetPodResourcesRequest(pod_name=name, pod_namespace=ns), timeout=10)
    c = next(x for x in reply.pod_resources.containers if x.name == container)
    return {"cpus": sorted(c.cpu_ids),
            "devices": [(d.resource_name, list(d.device_ids), [n.ID for n in d.topology.nodes]) for d in c.devices],
            "dra": [(f"{r.claim_namespace}/{r.claim_name}", cr.driver_name, cr.pool_name, cr.device_name,
                     [x.name for x in cr.cdi_devices]) for r in c.dynamic_resources for cr in r.claim_resources]}
