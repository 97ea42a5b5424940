"""CPUs and a GPU from one ResourceClaim on one NUMA node, on the real kubelet, with the real
``kubernetes-sigs/dra-driver-cpu`` v0.2.0 (``hack/build-tools.sh dracpu``, from the module proxy at that version)
beside the project's test GPU driver (hack/dradriver).

The driver's requirements, met as its README states them: kubelet ``cpuManagerPolicy: none`` (and the Memory
Manager ``None``), containerd 2.x with NRI and CDI on (their defaults: NRI's socket /var/run/nri/nri.sock, CDI
specs in /var/run/cdi). Its kubelet plugin has no flag for kubelet's root folder (``/var/lib/kubelet/plugins``
and ``plugins_registry`` are constants of its ``driver.go``): the test links those two folders to the node's
``--root-dir`` for the driver's lifetime. It reads the CPU topology under ``HOST_ROOT``: a fake root whose
``sys/devices/system/{cpu,node}`` split this machine's two CPUs over two NUMA nodes (CPU 0 on 0, CPU 1 on 1), as
tests/node/numa.py does for kubelet. Grouped mode: one device per NUMA node with one CPU of consumable
``dra.cpu/cpu`` each; its NUMA attributes are ``dra.cpu/numaNodeID`` and ``dra.net/numaNode`` (not the standard
``resource.kubernetes.io/numaNode``), so the GPU publishes ``dra.net/numaNode`` too and the claim matches on it.

1. GPU on NUMA 0, the claim ``{gpu, cpus: 1}`` with ``matchAttribute: dra.net/numaNode``: the container's cgroup
   cpuset is CPU 0 (the GPU's node), the NRI plugin's doing (``DRA_CPUSET_<claim uid>`` in its environment);
   ``verify`` says aligned, exit 0.
2. GPU on NUMA 1: the constrained claim gets CPU 1 (the allocator skips the first CPU group, NUMA 0, for the
   GPU's; aligned, the memory remote on this machine's one real node: NUMARemoteMemory); the same claim without
   the constraint takes the first group, CPU 0, split from the GPU: ``verify`` says MISALIGNED, exit 1, with the
   claim's way out; ``check`` names the claim (dra-cpu-unpaired).
3. The claim's CPUs not mirrored in requests and limits (BestEffort): refused at admission in an enforce
   namespace; where qos-guard only warns it runs, and what it got is shown (its QoS class, cgroup, cpuset).
4. ``qos-guard nodes`` says the node's CPUs are pinned by dra.cpu (cpuManagerPolicy none is no problem there).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders, waiting
from tests.binaries import binary
from tests.e2e.conftest import Cluster, stop_process
from tests.node.conftest import Release, cgroup_cpus, cgroup_file, pod, report, wait_running
from tests.node.dra import DEVICE_CLASS, device_class, dra_driver, wait_claims_gone
from tests.node.node import NODE_NAME, Node
from tests.node.numa import fake_node_tree, fake_sysfs
from tests.node.test_placement import verify
from tests.serving import free_port

pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]

FAKE = {0: [0], 1: [1]}  # NUMA node -> CPUs
CPU_DRIVER = CPU_CLASS = "dra.cpu"
PAIRING = "dra.net/numaNode"  # the NUMA attribute both drivers publish
KUBELET_DIR = Path("/var/lib/kubelet")  # where the driver's kubelet plugin looks, whatever kubelet's --root-dir
CDI_DIR = Path("/var/run/cdi")
CDI_SPECS = "dra.k8s.io-cpu*"  # the driver's transient CDI specs (vendor dra.k8s.io, class cpu: pkg/driver/cdi.go)
GPU_NUMA0 = f"gpu-0,numaNode=0,{PAIRING}=0"
GPU_NUMA1 = f"gpu-0,numaNode=1,{PAIRING}=1"


def host_root(folder: Path) -> Path:
    """A HOST_ROOT for the driver: what its cpuinfo reads under ``sys/devices/system`` (``cpu/online``,
    ``cpu/smt/control``, each ``cpuN/topology/{physical_package_id,core_id}``, a ``cpuN/nodeM`` entry naming its
    NUMA node, ``cpuN/cache``), and ``node/nodeM/cpulist``, with this machine's CPUs split over two nodes."""
    system = folder / "sys" / "devices" / "system"
    cpu = system / "cpu"
    cpu.mkdir(parents=True, exist_ok=True)
    cpus = sorted(c for cs in FAKE.values() for c in cs)
    (cpu / "online").write_text(f"{cpus[0]}-{cpus[-1]}\n")
    (cpu / "smt").mkdir(exist_ok=True)
    (cpu / "smt" / "control").write_text("notsupported\n")
    for numa, ids in FAKE.items():
        for c in ids:
            d = cpu / f"cpu{c}"
            (d / "topology").mkdir(parents=True, exist_ok=True)
            (d / "topology" / "physical_package_id").write_text("0\n")
            (d / "topology" / "core_id").write_text(f"{c}\n")
            (d / "cache").mkdir(exist_ok=True)
            (d / f"node{numa}").mkdir(exist_ok=True)
    fake_node_tree(system / "node", FAKE)
    return folder


def cpu_slices(c: Cluster) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    selector = f"spec.driver={CPU_DRIVER},spec.nodeName={NODE_NAME}"
    for s in c.get("resourceslices", "--field-selector", selector)["items"]:
        for d in s["spec"].get("devices", []):
            found[d["name"]] = d
    return found


@contextlib.contextmanager
def cpu_driver(node: Node) -> Iterator[Path]:
    """dra-driver-cpu v0.2.0 on the node until it publishes its two NUMA groups; yields its log. Stopped, its
    slices, CDI specs and the plugin folder links removed on exit."""
    c = node.cluster
    made_kubelet_dir, made_cdi_dir = not KUBELET_DIR.exists(), not CDI_DIR.exists()
    KUBELET_DIR.mkdir(parents=True, exist_ok=True)
    links = [KUBELET_DIR / "plugins", KUBELET_DIR / "plugins_registry"]
    for link in links:
        assert not link.exists() and not link.is_symlink(), f"{link} exists: another kubelet's?"
        (node.kubelet_root / link.name).mkdir(exist_ok=True)
        link.symlink_to(node.kubelet_root / link.name)
    root = host_root(node.folder / "dracpu-root")
    log = node.folder / f"dracpu-{int(time.time())}.log"
    proc = subprocess.Popen(
        [binary("dracpu"), "--kubeconfig", str(c.kubeconfig), "--hostname-override", NODE_NAME,
         f"--bind-address=127.0.0.1:{free_port()}", "-v", "4"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "HOST_ROOT": str(root)})

    def published() -> bool:
        assert proc.poll() is None, f"dracpu exited {proc.returncode}:\n{log.read_text()[-4000:]}"
        return sorted(cpu_slices(c)) == ["cpudevnuma000", "cpudevnuma001"]

    try:
        waiting.eventually("dracpu registered and publishing a device per NUMA node", published, 120, every=1,
                           seen=lambda: f"slices {cpu_slices(c)}\n{log.read_text()[-3000:]}")
        yield log
    finally:
        stop_process(proc)
        c.kubectl("delete", "resourceslices", "--field-selector", f"spec.driver={CPU_DRIVER}", "--wait=true")
        for link in links:
            link.unlink(missing_ok=True)
        for spec in CDI_DIR.glob(CDI_SPECS):
            spec.unlink(missing_ok=True)
        for made, folder in ((made_kubelet_dir, KUBELET_DIR), (made_cdi_dir, CDI_DIR)):
            if made:
                with contextlib.suppress(OSError):
                    folder.rmdir()


@pytest.fixture(scope="module")
def dra_cpu_node(node: Node, release: Release) -> Iterator[tuple[Path, Path]]:
    """The kubelet with the CPU Manager and the Memory Manager off (the driver's requirement), the driver
    running, its DeviceClass and the GPU's; yields (the fake sysfs verify reads, the driver's log)."""
    c = node.cluster
    c.require("resource.k8s.io/v1", "resourceslices", "DRA on the node")
    started = time.monotonic()
    overrides = {"cpuManagerPolicy": "none", "memoryManagerPolicy": "None", "reservedMemory": None}
    with fake_sysfs(node.folder / "fake-sys-dracpu", FAKE) as sys_root, node.kubelet_configured(overrides), \
            cpu_driver(node) as log:
        for obj in (device_class(), builders.device_class(CPU_CLASS, CPU_DRIVER)):
            proc = c.kubectl("apply", "-f", "-", stdin=obj)
            assert proc.returncode == 0, proc.stderr
        devices = cpu_slices(c)
        report("dra-cpu: kubelet cpuManagerPolicy none; dra-driver-cpu v0.2.0 publishes "
               + "; ".join(f"{n} ({json.dumps(d['attributes'], sort_keys=True)}, capacity "
                           f"{d['capacity']['dra.cpu/cpu']['value']})" for n, d in sorted(devices.items()))
               + f", in {time.monotonic() - started:.0f} s")
        try:
            yield sys_root, log
        finally:
            c.kubectl("delete", "deviceclass", DEVICE_CLASS, CPU_CLASS, "--ignore-not-found")


def gpu_and_cpus(name: str, constrained: bool) -> dict[str, Any]:
    cpus = {"name": "cpus", "exactly": {"deviceClassName": CPU_CLASS,
                                        "capacity": {"requests": {"dra.cpu/cpu": "1"}}}}
    devices: dict[str, Any] = {"requests": [builders.exactly("gpu", DEVICE_CLASS), cpus]}
    if constrained:
        devices["constraints"] = [{"matchAttribute": PAIRING}]
    return builders.claim(name, devices)


def claim_pod(name: str, template: str, cpu: str | None = "1") -> dict[str, Any]:
    obj = builders.take_claim(pod(name, cpu or "1"), template, name="devices")
    if cpu is None:  # BestEffort: nothing but the claim
        del obj["spec"]["containers"][0]["resources"]["limits"], obj["spec"]["containers"][0]["resources"]["requests"]
    return obj


def apply(c: Cluster, ns: str, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return c.kubectl("apply", "-n", ns, "-f", "-", stdin=obj)


def env_of(c: Cluster, ns: str, name: str) -> dict[str, str]:
    proc = c.kubectl("exec", "-n", ns, name, "--", "env")
    assert proc.returncode == 0, proc.stderr
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


def check(*docs: dict[str, Any], folder: Path) -> subprocess.CompletedProcess[str]:
    path = folder / f"check-{int(time.time() * 1000)}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return subprocess.run([sys.executable, "-m", "webhook.cli", "check", str(path)], capture_output=True,
                          text=True, timeout=120)


def claim_of(c: Cluster, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
    name = obj["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    return c.get("resourceclaim", name, "-n", ns)


def gone(node: Node, ns: str, name: str) -> None:
    node.cluster.kubectl("delete", "pod", name, "-n", ns, "--wait=true", "--timeout=90s")
    wait_claims_gone(node.cluster, ns)


def run_and_verify(node: Node, sys_root: Path, ns: str, name: str, template: dict[str, Any], tag: str
                   ) -> tuple[set[int], dict[str, Any], dict[str, Any], subprocess.CompletedProcess[str]]:
    c = node.cluster
    assert apply(c, ns, template).returncode == 0
    obj = claim_pod(name, template["metadata"]["name"])
    proc = apply(c, ns, obj)
    assert proc.returncode == 0, proc.stderr
    running = wait_running(c, ns, name)
    cpus = cgroup_cpus(running)
    claim = claim_of(c, ns, running)
    uid = claim["metadata"]["uid"]
    env = env_of(c, ns, name)
    placed = verify(node, "--sys-root", str(sys_root))[(ns, name, "app")]
    text = verify(node, "--sys-root", str(sys_root), f"{ns}/{name}", fmt="text")
    results = claim["status"]["allocation"]["devices"]["results"]
    report(f"{tag}: claim {claim['metadata']['name']} allocated "
           + ", ".join(f"{r['driver']}/{r['device']}" + (f" ({r['consumedCapacity']})" if r.get('consumedCapacity')
                                                          else "") for r in results)
           + f"; container cgroup cpuset.cpus {sorted(cpus)}, env DRA_CPUSET_{uid.replace('-', '_')}="
           + str(next((v for k, v in env.items() if k.startswith("DRA_CPUSET_")), None)))
    for line in text.stdout.splitlines():
        report(f"{tag}: $ qos-guard verify --sys-root FAKE {ns}/{name} (exit {text.returncode}): {line}")
    return cpus, claim, placed, text


def test_1_the_constrained_claim_puts_the_cpus_on_the_gpus_numa_node(node: Node, dra_cpu_node: tuple[Path, Path]
                                                                    ) -> None:
    sys_root, _ = dra_cpu_node
    c = node.cluster
    ns = c.namespace("node-dra-cpu", "warn")
    with dra_driver(node, [GPU_NUMA0]):
        cpus, claim, placed, text = run_and_verify(node, sys_root, ns, "aligned", gpu_and_cpus("gpu-and-cpus", True),
                                                   "dra-cpu 1 (GPU on NUMA 0, matchAttribute dra.net/numaNode)")
        try:
            devices = {r["driver"]: r["device"] for r in claim["status"]["allocation"]["devices"]["results"]}
            assert devices == {"gpu.qos-guard.test": "gpu-0", CPU_DRIVER: "cpudevnuma000"}, devices
            assert cpus == {0}, cpus  # NUMA 0, the GPU's node: the NRI plugin's cpuset
            # aligned; its memory is not pinned (the driver pins CPUs only, Memory Manager None), no problem
            assert placed["aligned"] is True and placed["state"] == "memory-not-pinned", placed
            assert placed["exclusiveCPUs"] == [0] and placed["problems"] == [], placed
            assert placed["cpuNUMANodes"] == [0] and placed["numaNodes"] == [0], placed
            assert text.returncode == 0, text.stdout + text.stderr
        finally:
            gone(node, ns, "aligned")


def test_2_with_the_gpu_on_numa1_the_constraint_moves_the_cpus_and_without_it_they_land_apart(
        node: Node, dra_cpu_node: tuple[Path, Path]) -> None:
    """The allocator tries the CPU groups in order (NUMA 0 first): the constrained claim must skip it for the GPU's
    NUMA 1; the same claim without the constraint takes NUMA 0, split from the GPU."""
    sys_root, _ = dra_cpu_node
    c = node.cluster
    ns = c.namespace("node-dra-cpu", "warn")
    template = gpu_and_cpus("gpu-and-cpus-free", False)
    said = check(template, folder=node.folder)
    assert said.returncode == 0 and "dra-cpu-unpaired" in said.stdout, said.stdout + said.stderr
    report(f"dra-cpu 2: $ qos-guard check gpu-and-cpus-free.yaml: {said.stdout.strip()}")
    with dra_driver(node, [GPU_NUMA1]):
        cpus, claim, placed, text = run_and_verify(node, sys_root, ns, "moved", gpu_and_cpus("gpu-and-cpus-1", True),
                                                   "dra-cpu 2 (GPU on NUMA 1, matchAttribute dra.net/numaNode)")
        try:
            devices = {r["driver"]: r["device"] for r in claim["status"]["allocation"]["devices"]["results"]}
            assert devices == {"gpu.qos-guard.test": "gpu-0", CPU_DRIVER: "cpudevnuma001"}, devices
            assert cpus == {1}, cpus
            assert placed["aligned"] is True and placed["cpuNUMANodes"] == [1], placed
            # aligned; the memory can only be on this machine's one real node 0: remote, and said so (exit 1)
            assert [p["reason"] for p in placed["problems"]] == ["NUMARemoteMemory"], placed
        finally:
            gone(node, ns, "moved")
        cpus, claim, placed, text = run_and_verify(node, sys_root, ns, "split", template,
                                                   "dra-cpu 2 (GPU on NUMA 1, no constraint)")
        try:
            devices = {r["driver"]: r["device"] for r in claim["status"]["allocation"]["devices"]["results"]}
            assert devices == {"gpu.qos-guard.test": "gpu-0", CPU_DRIVER: "cpudevnuma000"}, devices
            assert cpus == {0}, cpus  # NUMA 0, the GPU on NUMA 1
            assert placed["state"] == "misaligned" and placed["numaNodes"] == [0, 1], placed
            assert [p["reason"] for p in placed["problems"]] == ["NUMAMisaligned"], placed
            assert text.returncode == 1 and "MISALIGNED" in text.stdout, text.stdout
            assert "matchAttribute: dra.net/numaNode" in text.stdout and "dra-cpu-unpaired" in text.stdout
        finally:
            gone(node, ns, "split")


def test_3_claimed_cpus_not_in_requests_and_limits(node: Node, dra_cpu_node: tuple[Path, Path]) -> None:
    c = node.cluster
    template = builders.claim("cpus-1", {"requests": [{"name": "cpus", "exactly": {
        "deviceClassName": CPU_CLASS, "capacity": {"requests": {"dra.cpu/cpu": "1"}}}}]})
    obj = builders.take_claim(pod("besteffort", "1"), "cpus-1", name="cpus")
    del obj["spec"]["containers"][0]["resources"]["limits"], obj["spec"]["containers"][0]["resources"]["requests"]
    said = check(template, obj, folder=node.folder)
    assert said.returncode == 1 and "dra-cpu-not-mirrored" in said.stdout, said.stdout + said.stderr
    report("dra-cpu 3: $ qos-guard check (the template and the Pod): "
           + "; ".join(x for x in said.stdout.splitlines() if "dra-cpu-not-mirrored" in x))
    enforced = c.namespace("node-dra-cpu-enforce", "enforce")
    assert apply(c, enforced, template).returncode == 0
    refused = apply(c, enforced, obj)
    assert refused.returncode != 0 and "denied the request" in refused.stderr, refused.stderr
    report(f"dra-cpu 3: enforce namespace: kubectl apply refused: {refused.stderr.strip()[:300]}")
    plain = c.namespace("node-dra-cpu-plain")  # no qos-guard: what the Pod gets without it
    assert apply(c, plain, template).returncode == 0
    assert apply(c, plain, obj).returncode == 0
    running = wait_running(c, plain, "besteffort")
    try:
        cpus = cgroup_cpus(running)
        shares = cgroup_file(running, "cpuset.cpus")
        qos = running["status"]["qosClass"]
        claim = claim_of(c, plain, running)
        report(f"dra-cpu 3: without qos-guard it runs: qosClass {qos}, cgroup cpuset.cpus {sorted(cpus)} "
               f"({shares.strip()}), claim {claim['metadata']['name']} holds "
               + ", ".join(r["device"] for r in claim["status"]["allocation"]["devices"]["results"])
               + ": kubelet sized nothing for its CPUs")
        assert qos == "BestEffort"
    finally:
        gone(node, plain, "besteffort")


def test_4_nodes_says_the_dra_driver_pins(node: Node, dra_cpu_node: tuple[Path, Path]) -> None:
    proc = node.cluster.qos_guard("nodes", "--kubeconfig", str(node.cluster.kubeconfig), "--format", "json")
    (found,) = json.loads(proc.stdout)["nodes"]
    text = node.cluster.qos_guard("nodes", "--kubeconfig", str(node.cluster.kubeconfig))
    for line in (text.stdout + text.stderr).splitlines():
        report(f"dra-cpu 4: $ qos-guard nodes: {line}")
    assert found["pinnedBy"] == CPU_DRIVER and found["problems"] == [], found
    assert proc.returncode == 0 and found["verdict"] == "pins", found
