"""Where a container's memory really is: its cgroup's ``memory.numa_stat``, the pages per NUMA node that
``numastat -p`` shows for a process, read for the whole container.

kubelet's Memory Manager ``None`` (its default) pins nothing: the container's ``cpuset.mems`` spans every NUMA
node and the kernel places its pages (first touch, spilling to the remote node under pressure). Only the
cgroup knows where they ended up. Two formats:

- cgroup v1 (``<root>/memory/…``): ``anon=<total> N0=<n> N1=<n>`` in pages, one line per counter
  (``total``, ``file``, ``anon``, ``unevictable``, then ``hierarchical_*``);
- cgroup v2 (the unified folder): ``anon N0=<bytes> N1=<bytes>``, one line per counter.

The folder is found as the cpuset's is (``cgroups.container_folder``: kubelet's cgroupfs and systemd drivers).
The file is read as every node file is (``sysfs.read_text``: bounded, ASCII). It hands the verdict a
``NumaPages`` (``webhook/node/numapages.py``, pure: ``judge_container`` never reads a file). A malformed file
(truncated, a NUMA node the layout lacks) or a cgroup removed while it was read is a ``CgroupError`` naming the
file, for that container only."""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from webhook.node.cgroups import CgroupError, container_folder
from webhook.node.cpulist import format_list
from webhook.node.numapages import NumaPages
from webhook.node.sysfs import NumaLayout, SysfsError, read_text

NUMA_STAT = "memory.numa_stat"
MAX_STAT = 64 * 1024  # a numa_stat longer than this is refused (4096 nodes of v2 counters stay well under it)
REQUIRED = ("anon", "file")  # the counters the answer is made of; a file without them is truncated
_V1_LINE = re.compile(r"([a-z][a-z0-9_]{0,63})=(\d{1,20})((?: N\d{1,5}=\d{1,20})*)")
_V2_LINE = re.compile(r"([a-z][a-z0-9_]{0,63})((?: N\d{1,5}=\d{1,20})*)")
_NODE = re.compile(r"N(\d{1,5})=(\d{1,20})")


def parse_numa_stat(text: str, version: int, layout_nodes: Iterable[int], page_size: int,
                    where: str = NUMA_STAT) -> dict[str, dict[int, int]]:
    """``memory.numa_stat`` -> counter -> NUMA node -> bytes (v1 pages times ``page_size``; v2 bytes).

    Refused, with ``where`` and the line named: a file that does not end its last line (a short read), a line
    that is not the version's form, a counter listed twice, a NUMA node the layout lacks, lines naming different
    node sets, and a file without the ``anon`` and ``file`` counters."""
    known = frozenset(layout_nodes)
    if not text.endswith("\n"):
        raise ValueError(f"{where}: truncated (its last line {_show(text.rsplit(chr(10), 1)[-1])} has no end)")
    counters: dict[str, dict[int, int]] = {}
    node_set: frozenset[int] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        match = (_V1_LINE if version == 1 else _V2_LINE).fullmatch(line)
        if match is None:
            form = "<counter>=<pages> N<id>=<pages>..." if version == 1 else "<counter> N<id>=<bytes>..."
            raise ValueError(f"{where}: line {number} {_show(line)} is not {form}")
        name = match.group(1)
        fields = match.group(3) if version == 1 else match.group(2)
        per_node: dict[int, int] = {}
        for node_text, value in _NODE.findall(fields):
            node = int(node_text)
            if node in per_node:
                raise ValueError(f"{where}: line {number} ({name}) lists NUMA node {node} twice")
            per_node[node] = int(value) * (page_size if version == 1 else 1)
        if not per_node:
            raise ValueError(f"{where}: line {number} ({name}) lists no NUMA node (truncated?)")
        lacking = sorted(set(per_node) - known)
        if lacking:
            raise ValueError(f"{where}: line {number} ({name}) counts NUMA node {format_list(set(lacking))}, "
                             f"which the node's layout (sysfs: NUMA {format_list(known) or 'none'}) lacks")
        nodes = frozenset(per_node)
        if node_set is not None and nodes != node_set:
            raise ValueError(f"{where}: line {number} ({name}) lists NUMA nodes {format_list(nodes)}, the lines "
                             f"before it {format_list(node_set)} (truncated?)")
        node_set = nodes
        if name in counters:
            raise ValueError(f"{where}: line {number}: counter {name} listed twice")
        counters[name] = per_node
    missing = [c for c in REQUIRED if c not in counters]
    if missing:
        raise ValueError(f"{where}: no {' or '.join(missing)} line (truncated?)")
    return counters


def memory_folder(cgroup_root: Path, pod_uid: str, qos: str, container_id: str) -> tuple[Path, int] | None:
    """The container's memory cgroup folder and the cgroup version, or None when it is not (or no longer)
    there: v2 the unified folder the cpuset is read from, v1 the same path under the ``memory`` controller
    (None when that is not mounted: where the memory is stays unknown, and is said so)."""
    return container_folder(cgroup_root, pod_uid, qos, container_id, "memory")


def read_numa_stat(folder: Path, version: int, layout: NumaLayout, page_size: int | None = None) -> NumaPages:
    """The pages of the cgroup at ``folder``; ``CgroupError`` naming the file when it cannot be read or parsed,
    and saying so when the cgroup went away while it was read (the container stopped: next look)."""
    path = folder / NUMA_STAT
    try:
        text = read_text(path, MAX_STAT)
    except SysfsError as exc:
        if exc.errno in (errno.ENOENT, errno.ENODEV) and not folder.is_dir():
            raise CgroupError(f"{folder}: the cgroup went away while it was read (the container stopped or was "
                              "replaced; the next look judges what runs then)") from None
        if exc.errno == errno.ENOENT:
            raise CgroupError(f"{path}: missing (a kernel without CONFIG_NUMA has no numa_stat; memory "
                              "placement unknown)") from None
        raise CgroupError(str(exc)) from None  # unreadable, longer than MAX_STAT, not ASCII: named
    size = page_size or os.sysconf("SC_PAGE_SIZE")
    try:
        counters = parse_numa_stat(text, version, layout.nodes, size, str(path))
    except ValueError as exc:
        raise CgroupError(str(exc)) from None
    return NumaPages(_every_node(counters["anon"], layout.nodes), _every_node(counters["file"], layout.nodes),
                     str(folder), version)


def container_pages(cgroup_root: Path, pod_uid: str, qos: str, container_id: str, layout: NumaLayout,
                    page_size: int | None = None) -> NumaPages | None:
    """One container's pages per NUMA node, or None when its memory cgroup is not there."""
    found = memory_folder(cgroup_root, pod_uid, qos, container_id)
    if found is None:
        return None
    return read_numa_stat(found[0], found[1], layout, page_size)


def _every_node(per_node: Mapping[int, int], nodes: Iterable[int]) -> tuple[tuple[int, int], ...]:
    return tuple((n, per_node.get(n, 0)) for n in sorted(nodes))


def _show(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")
