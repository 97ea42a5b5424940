"""Two NUMA nodes on a one-socket machine, for the kubelet only, and a device plugin whose devices sit on
either: what the node tests need to reproduce a Topology Manager refusal and a misaligned placement.

``fake_node_tree`` writes a /sys/devices/system/node look-alike splitting this machine's CPUs over two NUMA nodes
(node 0: CPU 0, node 1: CPU 1): what cadvisor reads (``nodeN/cpuM`` links to ``../../cpu/cpuM``, ``cpulist``,
``cpumap``, ``distance``, ``meminfo``, ``hugepages/``) and the ``online``/``possible``/``has_*`` lists.
``Node.restart_kubelet(wrapper=fake_numa_wrapper(...))`` bind-mounts it in the kubelet's own mount namespace;
the agent reads the same tree through a sysfs-shaped folder (``fake_sysfs``) whose ``fs/cgroup`` is the host's
cgroup hierarchy."""

from __future__ import annotations

import contextlib
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests import waiting
from tests.binaries import binary
from tests.e2e.conftest import Cluster, stop_process
from tests.node.node import DEVICE_PLUGINS, NODE_NAME

REAL = Path("/sys/devices/system/node")
GPU = "example.com/gpu"


def fake_node_tree(target: Path, cpus_by_node: dict[int, list[int]],
                   siblings: dict[int, list[int]] | None = None, packages: dict[int, int] | None = None) -> Path:
    """The tree; with ``siblings`` (CPU -> the CPUs of its core) each ``nodeN/cpuM`` is a folder of its own instead
    of the link to the real CPU, holding the ``topology`` files cadvisor reads through it for kubelet (``core_id``,
    the core's lowest CPU; ``physical_package_id``, the CPU's socket: ``packages[cpu]``, else 0) and the agent
    reads (``thread_siblings_list``, ``physical_package_id``): a machine with SMT siblings (or, each CPU its own
    core, none) on this one's CPUs. kubelet's socket count is not read here but from /proc/cpuinfo's ``physical
    id`` lines (cadvisor ``GetSockets``): this machine's one socket, so a fake machine of more sockets would
    disagree with itself."""
    target.mkdir(parents=True, exist_ok=True)
    nodes = sorted(cpus_by_node)
    listed = ",".join(str(n) for n in nodes)
    for name in ("online", "possible", "has_cpu", "has_memory", "has_normal_memory"):
        (target / name).write_text(f"{nodes[0]}-{nodes[-1]}\n" if len(nodes) > 1 else f"{listed}\n")
    (target / "has_generic_initiator").write_text("\n")
    meminfo = (REAL / "node0" / "meminfo").read_text()
    hugepages = sorted(p.name for p in (REAL / "node0" / "hugepages").iterdir())
    for node in nodes:
        d = target / f"node{node}"
        d.mkdir(exist_ok=True)
        cpus = cpus_by_node[node]
        (d / "cpulist").write_text(",".join(str(c) for c in cpus) + "\n")
        (d / "cpumap").write_text(f"{sum(1 << c for c in cpus):08x}\n")
        (d / "distance").write_text(" ".join("10" if other == node else "20" for other in nodes) + "\n")
        (d / "meminfo").write_text(re.sub(r"^Node 0 ", f"Node {node} ", meminfo, flags=re.MULTILINE))
        for size in hugepages:
            h = d / "hugepages" / size
            h.mkdir(parents=True, exist_ok=True)
            for f in ("nr_hugepages", "free_hugepages", "surplus_hugepages"):
                (h / f).write_text("0\n")
        for cpu in cpus:
            link = d / f"cpu{cpu}"
            if siblings is not None:
                core = sorted(siblings[cpu])
                folder = link / "topology"
                folder.mkdir(parents=True, exist_ok=True)
                package = str((packages or {}).get(cpu, 0))
                for name, value in (("core_id", str(core[0])), ("physical_package_id", package), ("die_id", "0"),
                                    ("thread_siblings_list", ",".join(map(str, core))),
                                    ("core_cpus_list", ",".join(map(str, core))),
                                    ("thread_siblings", f"{sum(1 << c for c in core):08x}")):
                    (folder / name).write_text(value + "\n")
            elif not link.is_symlink():
                link.symlink_to(f"../../cpu/cpu{cpu}")
    return target


@contextlib.contextmanager
def fake_sysfs(folder: Path, cpus_by_node: dict[int, list[int]],
               siblings: dict[int, list[int]] | None = None, packages: dict[int, int] | None = None) -> Iterator[Path]:
    """``folder`` shaped as /sys for the agent: ``devices/system/node`` the fake tree, ``fs/cgroup`` the host's
    cgroup hierarchy (recursively bind-mounted: cgroup v1 is one mount per controller). Unmounted on exit."""
    fake_node_tree(folder / "devices" / "system" / "node", cpus_by_node, siblings, packages)
    cgroup = folder / "fs" / "cgroup"
    cgroup.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "--rbind", "/sys/fs/cgroup", str(cgroup)], check=True, timeout=30)
    subprocess.run(["mount", "--make-rslave", str(cgroup)], check=True, timeout=30)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--recursive", "--lazy", str(cgroup)], capture_output=True, timeout=30)


def allocatable_devices(c: Cluster) -> int:
    node = c.get("node", NODE_NAME)
    return int(node["status"].get("allocatable", {}).get(GPU, "0"))


@contextlib.contextmanager
def device_plugin(c: Cluster, folder: Path, devices: str, count: int = 1) -> Iterator[subprocess.Popen[bytes]]:
    """hack/deviceplugin registering ``devices`` (``id=numa,...``) as example.com/gpu, until the Node offers
    them; stopped (its socket removed) on exit."""
    log = folder / f"deviceplugin-{devices.replace(',', '_').replace('=', '-')}.log"
    proc = subprocess.Popen([binary("deviceplugin"), "-resource", GPU, "-devices", devices, "-dir",
                             str(DEVICE_PLUGINS)], stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        def offered() -> bool:
            assert proc.poll() is None, log.read_text()  # the plugin exited: no point waiting
            return allocatable_devices(c) == count and "ListAndWatch: sent" in log.read_text()

        # kubelet has the devices once it read them (ListAndWatch), not when the registration returns.
        waiting.eventually(f"the Node offering {count} {GPU}", offered, within=90, every=0.5,
                           seen=lambda: f"{allocatable_devices(c)} allocatable; {log.read_text()}")
        yield proc
    finally:
        stop_process(proc)
