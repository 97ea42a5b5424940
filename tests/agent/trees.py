"""Fixture trees for the node readers: sysfs NUMA layouts and cgroup v1/v2 hierarchies as kubelet and the
kernel lay them out, written into a temporary folder."""

from __future__ import annotations

from pathlib import Path


def sysfs(root: Path, nodes: dict[int, str], online: str | None = None) -> Path:
    """``root``/devices/system/node/node<N>/cpulist for each node (plus the files beside them that the kernel
    has and the reader must skip)."""
    base = root / "devices" / "system" / "node"
    base.mkdir(parents=True, exist_ok=True)
    for name in ("online", "possible", "has_cpu", "has_memory", "has_normal_memory"):
        (base / name).write_text(",".join(str(n) for n in sorted(nodes)) + "\n")
    (base / "power").mkdir(exist_ok=True)
    for node, cpus in nodes.items():
        (base / f"node{node}").mkdir(exist_ok=True)
        (base / f"node{node}" / "cpulist").write_text(cpus + "\n")
        (base / f"node{node}" / "distance").write_text("10\n")
    cpu = root / "devices" / "system" / "cpu"
    cpu.mkdir(parents=True, exist_ok=True)
    (cpu / "online").write_text((online or ",".join(c for c in nodes.values() if c)) + "\n")
    return root


def cgroup_container(root: Path, version: int, pod_uid: str, qos: str, cid: str, cpus: str, mems: str = "0",
                     driver: str = "cgroupfs") -> Path:
    """A container's cgroup folder with its cpuset files; returns the folder."""
    qos_dir = {"Guaranteed": "", "Burstable": "burstable", "BestEffort": "besteffort"}[qos]
    base = root if version == 2 else root / "cpuset"
    if version == 2:
        root.mkdir(parents=True, exist_ok=True)
        (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    if driver == "cgroupfs":
        folder = base / "kubepods" / qos_dir / f"pod{pod_uid}" / cid if qos_dir else \
            base / "kubepods" / f"pod{pod_uid}" / cid
    else:
        u = pod_uid.replace("-", "_")
        pod = (base / "kubepods.slice" / f"kubepods-{qos_dir}.slice" / f"kubepods-{qos_dir}-pod{u}.slice"
               if qos_dir else base / "kubepods.slice" / f"kubepods-pod{u}.slice")
        folder = pod / f"cri-containerd-{cid}.scope"
    folder.mkdir(parents=True, exist_ok=True)
    if version == 2:
        (folder / "cpuset.cpus").write_text(cpus + "\n")
        (folder / "cpuset.cpus.effective").write_text(cpus + "\n")
        (folder / "cpuset.mems.effective").write_text(mems + "\n")
    else:
        (folder / "cpuset.cpus").write_text(cpus + "\n")
        (folder / "cpuset.mems").write_text(mems + "\n")
    return folder
