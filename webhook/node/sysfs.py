"""The host's NUMA layout from sysfs (``/sys/devices/system/node/node*/cpulist``): which CPUs belong to which
NUMA node, as cadvisor reads it for kubelet. Every malformed file is a ``SysfsError`` naming the file."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from webhook.node.cpulist import MAX_TEXT, parse_list

MAX_NODES = 4096  # node directories beyond this are refused (Linux's MAX_NUMNODES is 1024)
_NODE_DIR = re.compile(r"node(\d{1,5})")


class SysfsError(RuntimeError):
    """A sysfs file is missing, unreadable or malformed (the message names it and says why)."""


@dataclass(frozen=True, slots=True)
class NumaLayout:
    """NUMA node id -> its CPUs."""

    nodes: dict[int, frozenset[int]]

    def node_of(self, cpu: int) -> int | None:
        for node, cpus in self.nodes.items():
            if cpu in cpus:
                return node
        return None

    def nodes_of(self, cpus: frozenset[int]) -> frozenset[int]:
        """The NUMA nodes ``cpus`` sit on (a CPU the layout lacks counts as no node)."""
        return frozenset(n for n, owned in self.nodes.items() if owned & cpus)

    def unknown(self, cpus: frozenset[int]) -> frozenset[int]:
        """The CPUs of ``cpus`` that no NUMA node lists."""
        known = frozenset().union(*self.nodes.values()) if self.nodes else frozenset()
        return cpus - known


def read_text(path: Path, limit: int = MAX_TEXT) -> str:
    """A small kernel file, at most ``limit`` bytes, as text; ``SysfsError`` when it cannot be read."""
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise SysfsError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise SysfsError(f"{path}: longer than {limit} bytes")
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise SysfsError(f"{path}: not ASCII text") from None


def read_layout(sys_root: Path = Path("/sys")) -> NumaLayout:
    """The NUMA layout under ``sys_root`` (``/sys`` on a host, the hostPath mount in the agent's Pod).

    A kernel built without NUMA has no ``devices/system/node``: all online CPUs are then node 0, as cadvisor
    reports it.
    """
    base = sys_root / "devices" / "system" / "node"
    if not base.is_dir():
        online = sys_root / "devices" / "system" / "cpu" / "online"
        return NumaLayout({0: _cpulist(online)})
    nodes: dict[int, frozenset[int]] = {}
    try:
        entries = sorted(p.name for p in base.iterdir())
    except OSError as exc:
        raise SysfsError(f"{base}: cannot list ({exc.strerror or exc})") from None
    for name in entries:
        match = _NODE_DIR.fullmatch(name)
        if not match:
            continue
        if len(nodes) >= MAX_NODES:
            raise SysfsError(f"{base}: more than {MAX_NODES} NUMA node directories")
        nodes[int(match.group(1))] = _cpulist(base / name / "cpulist")
    if not nodes:
        raise SysfsError(f"{base}: no node<N> directory (is this sysfs?)")
    seen: dict[int, int] = {}
    for node, cpus in sorted(nodes.items()):
        for cpu in cpus:
            if cpu in seen:
                raise SysfsError(f"{base}: CPU {cpu} is listed by node{seen[cpu]} and node{node}")
            seen[cpu] = node
    return NumaLayout(nodes)


def _cpulist(path: Path) -> frozenset[int]:
    try:
        return parse_list(read_text(path), "CPU list")
    except ValueError as exc:
        raise SysfsError(f"{path}: {exc}") from None
