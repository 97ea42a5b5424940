"""A container's cpuset as its cgroup shows it (cgroup v1 ``cpuset.cpus``, v2 ``cpuset.cpus.effective``): the
CPUs the kernel actually lets it run on, the cross-check of what kubelet's PodResources API says it assigned.

Paths are built, never searched for: kubelet's cgroupfs and systemd drivers name a Pod's cgroup ``pod<uid>`` or
``kubepods[-<qos>]-pod<uid_with_underscores>.slice`` under ``kubepods[/<qos>]``, and the runtime names the
container's ``<id>`` (cgroupfs) or ``cri-containerd-<id>.scope``/``crio-<id>.scope``/``docker-<id>.scope``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from webhook.node.cpulist import parse_list
from webhook.node.sysfs import SysfsError, read_text

_QOS_DIRS = {"Guaranteed": "", "Burstable": "burstable", "BestEffort": "besteffort"}
_ID = re.compile(r"[0-9a-f]{12,128}")
_UID = re.compile(r"[0-9a-f-]{1,64}")
_RUNTIME_SCOPES = {"containerd": "cri-containerd", "cri-o": "crio", "docker": "docker"}


class CgroupError(SysfsError):
    """A cgroup file is unreadable or malformed, or the cgroup hierarchy is not one kubelet makes."""


@dataclass(frozen=True, slots=True)
class Cpuset:
    """What the container's cgroup allows: CPUs and memory (NUMA) nodes; ``path`` is the cgroup folder."""

    cpus: frozenset[int]
    mems: frozenset[int]
    path: Path
    version: int


def cgroup_version(cgroup_root: Path) -> int | None:
    """2 for the unified hierarchy, 1 when a cpuset controller is mounted on its own, None for neither."""
    if (cgroup_root / "cgroup.controllers").exists():
        return 2
    if (cgroup_root / "cpuset").is_dir():
        return 1
    return None


def split_container_id(container_id: str) -> tuple[str, str]:
    """``containerd://abc…`` -> (``containerd``, ``abc…``); ``CgroupError`` for anything else."""
    runtime, sep, cid = container_id.partition("://")
    if not sep or not _ID.fullmatch(cid):
        raise CgroupError(f"container id {container_id[:100]!r} is not <runtime>://<hex id>")
    return runtime, cid


def candidate_folders(base: Path, qos: str, pod_uid: str, runtime: str, cid: str) -> list[Path]:
    """Where kubelet's cgroupfs and systemd drivers put the container's cgroup under one controller's ``base``."""
    qos_dir = _QOS_DIRS.get(qos, "")
    underscored = pod_uid.replace("-", "_")
    scope = _RUNTIME_SCOPES.get(runtime, runtime)
    cgroupfs = base / "kubepods" / qos_dir / f"pod{pod_uid}" if qos_dir else base / "kubepods" / f"pod{pod_uid}"
    slice_dir = base / "kubepods.slice"
    if qos_dir:
        slice_dir = slice_dir / f"kubepods-{qos_dir}.slice" / f"kubepods-{qos_dir}-pod{underscored}.slice"
    else:
        slice_dir = slice_dir / f"kubepods-pod{underscored}.slice"
    return [cgroupfs / cid, slice_dir / f"{scope}-{cid}.scope", cgroupfs / f"{scope}-{cid}.scope"]


def check_uid(pod_uid: str) -> None:
    """``CgroupError`` for a Pod uid that could reach outside its cgroup folder."""
    if not _UID.fullmatch(pod_uid):
        raise CgroupError(f"pod uid {pod_uid[:100]!r} is not a UID")


def container_folder(cgroup_root: Path, pod_uid: str, qos: str, container_id: str,
                     controller: str) -> tuple[Path, int] | None:
    """The container's cgroup folder and the cgroup version (v2: the unified folder; v1: the same path under
    ``controller``), or None when it is not (or no longer) there, or v1 has no such controller mounted. The cpuset
    and the memory readers find their folder here, so both follow kubelet's drivers alike."""
    check_uid(pod_uid)
    runtime, cid = split_container_id(container_id)
    version = cgroup_version(cgroup_root)
    if version is None:
        raise CgroupError(f"{cgroup_root}: neither a cgroup v2 hierarchy nor a v1 cpuset controller")
    base = cgroup_root if version == 2 else cgroup_root / controller
    if version == 1 and not base.is_dir():
        return None
    for folder in candidate_folders(base, qos, pod_uid, runtime, cid):
        if folder.is_dir():
            return folder, version
    return None


def container_cpuset(cgroup_root: Path, pod_uid: str, qos: str, container_id: str) -> Cpuset | None:
    """The cpuset of one container, or None when its cgroup is not (or no longer) there."""
    found = container_folder(cgroup_root, pod_uid, qos, container_id, "cpuset")
    if found is None:
        return None
    folder, version = found
    if version == 2:
        cpus_file, mems_file = folder / "cpuset.cpus.effective", folder / "cpuset.mems.effective"
    else:
        cpus_file, mems_file = folder / "cpuset.cpus", folder / "cpuset.mems"
    return Cpuset(_list(cpus_file, "CPU list"), _list(mems_file, "memory node list"), folder, version)


def _list(path: Path, what: str) -> frozenset[int]:
    try:
        return parse_list(read_text(path), what)
    except SysfsError as exc:
        raise CgroupError(str(exc)) from None
    except ValueError as exc:
        raise CgroupError(f"{path}: {exc}") from None
