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


def _folder(root: Path, version: int, pod_uid: str, qos: str, cid: str, driver: str, controller: str) -> Path:
    """The container's folder as kubelet's driver names it (v1: under ``controller``), created."""
    qos_dir = {"Guaranteed": "", "Burstable": "burstable", "BestEffort": "besteffort"}[qos]
    base = root if version == 2 else root / controller
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
    return folder


def cgroup_container(root: Path, version: int, pod_uid: str, qos: str, cid: str, cpus: str, mems: str = "0",
                     driver: str = "cgroupfs") -> Path:
    """A container's cgroup folder with its cpuset files; returns the folder."""
    folder = _folder(root, version, pod_uid, qos, cid, driver, "cpuset")
    if version == 2:
        (folder / "cpuset.cpus").write_text(cpus + "\n")
        (folder / "cpuset.cpus.effective").write_text(cpus + "\n")
        (folder / "cpuset.mems.effective").write_text(mems + "\n")
    else:
        (folder / "cpuset.cpus").write_text(cpus + "\n")
        (folder / "cpuset.mems").write_text(mems + "\n")
    return folder


def v1_numa_stat(anon: dict[int, int], file: dict[int, int]) -> str:
    """A cgroup v1 ``memory.numa_stat`` (pages) as the kernel writes it: total, file, anon, unevictable, then the
    hierarchical_ counters."""
    nodes = sorted(set(anon) | set(file))
    lines = []
    for prefix in ("", "hierarchical_"):
        for name, values in (("total", {n: anon.get(n, 0) + file.get(n, 0) for n in nodes}), ("file", file),
                             ("anon", anon), ("unevictable", {})):
            lines.append(f"{prefix}{name}={sum(values.values())} "
                         + " ".join(f"N{n}={values.get(n, 0)}" for n in nodes))
    return "\n".join(lines) + "\n"


def v2_numa_stat(anon: dict[int, int], file: dict[int, int]) -> str:
    """A cgroup v2 ``memory.numa_stat`` (bytes), with the counters the kernel lists around anon and file."""
    nodes = sorted(set(anon) | set(file))
    rows = [("anon", anon), ("file", file), ("kernel_stack", {}), ("pagetables", {}), ("shmem", {}),
            ("file_mapped", {}), ("active_anon", anon), ("inactive_anon", {}), ("unevictable", {})]
    return "".join(f"{name} " + " ".join(f"N{n}={values.get(n, 0)}" for n in nodes) + "\n" for name, values in rows)


def memory_cgroup(root: Path, version: int, pod_uid: str, qos: str, cid: str, numa_stat: str,
                  driver: str = "cgroupfs") -> Path:
    """The container's memory cgroup folder with ``memory.numa_stat`` (v2: the cpuset's own folder; v1: the same
    path under ``memory``); returns the folder."""
    if version == 1:
        (root / "cpuset").mkdir(parents=True, exist_ok=True)  # how the reader tells v1 (as kubelet's hosts mount it)
    folder = _folder(root, version, pod_uid, qos, cid, driver, "memory")
    (folder / "memory.numa_stat").write_text(numa_stat)
    return folder
