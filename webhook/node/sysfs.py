"""Every file the node side reads from sysfs (``/sys``, or the agent's hostPath mount, or a test's tree), read
here and nowhere else, each bounded (``read_text``: at most ``limit`` bytes, ASCII) and strict: a missing,
unreadable, oversized or malformed file is a ``SysfsError`` naming the file and saying why.

- the NUMA layout (``read_layout``): ``devices/system/node/node*/cpulist``, which CPUs belong to which NUMA node,
  as cadvisor reads it for kubelet (``devices/system/cpu/online`` on a kernel without NUMA);
- each NUMA node's memory and hugepages totals and its distances (``read_node_facts``): ``node*/meminfo``,
  ``node*/hugepages/hugepages-<size>kB/nr_hugepages``, ``node*/distance``, as NFD reads them;
- each NUMA node's socket (``read_sockets``): ``node*/cpu*/topology/physical_package_id``, the path cadvisor
  reads a CPU's socket by for kubelet (its ``getCoresInfo`` walks each node folder's ``cpuN`` entries);
- the NUMA node of a PCI device or PCIe root (``SysfsLocality``): ``bus/pci/devices/<BDF>/numa_node``,
  ``devices/<root>/numa_node``, for the DRA devices ``webhook/node/dra_locality.py`` resolves.

The cgroup files (``cgroups.py``, ``numastat.py``) are read through ``read_text`` too."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from webhook.node.cpulist import MAX_ID, MAX_TEXT, parse_list

MAX_NODES = 4096  # node directories beyond this are refused (Linux's MAX_NUMNODES is 1024)
_NODE_DIR = re.compile(r"node(\d{1,5})")


_MEMTOTAL = re.compile(r"^Node \d+ MemTotal:\s+(\d+) kB$", re.MULTILINE)
_HUGEPAGES_DIR = re.compile(r"hugepages-(\d+)kB")
# upstream deviceattribute.verifyPCIBDFFormat, and the pcieRoot format it derives from sysfs
BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]")
PCIE_ROOT_NAME = re.compile(r"pci([0-9a-f]{4}):([0-9a-f]{2})")
_TEXT = 64  # longest file content shown in a message


class SysfsError(RuntimeError):
    """A sysfs file is missing, unreadable or malformed (the message names it and says why); ``errno`` is the
    operating system's when the file could not be opened or read (a cgroup gone while read is told apart)."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


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
        raise SysfsError(f"{path}: cannot read ({exc.strerror or exc})", exc.errno) from None
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


# --- each NUMA node's memory, hugepages and distances ---

@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the node itself says, read once: its NUMA nodes' CPUs, memory totals and distances."""

    cpus: Mapping[int, frozenset[int]]  # NUMA node -> its CPUs (sysfs cpulist)
    memory: Mapping[int, Mapping[str, int]] = field(default_factory=dict)  # NUMA node -> memory/hugepages bytes
    distances: Mapping[int, Mapping[int, int]] = field(default_factory=dict)  # NUMA node -> node -> distance
    # NUMA node -> its socket, for every NUMA node or none (``read_sockets``); why not, when empty.
    sockets: Mapping[int, int] = field(default_factory=dict)
    sockets_unknown: str = ""


def hugepages_name(kib: int) -> str:
    """``hugepages-2Mi`` for 2048 kB pages, as kubelet names the resource."""
    if kib % (1 << 20) == 0:
        return f"hugepages-{kib >> 20}Gi"
    if kib % (1 << 10) == 0:
        return f"hugepages-{kib >> 10}Mi"
    return f"hugepages-{kib}Ki"


def read_node_facts(sys_root: Path) -> NodeFacts:
    """The NUMA layout, each NUMA node's memory and hugepages totals and its distances, from sysfs (as NFD reads
    them through ghw and ``GetNumaMemoryResources``). A missing meminfo or distance file leaves that fact out; a
    malformed one is a ``SysfsError`` naming it."""
    layout = read_layout(sys_root)
    base = sys_root / "devices" / "system" / "node"
    memory: dict[int, dict[str, int]] = {}
    distances: dict[int, dict[int, int]] = {}
    ids = sorted(layout.nodes)
    for numa in ids:
        folder = base / f"node{numa}"
        meminfo = folder / "meminfo"
        if meminfo.exists():
            found = _MEMTOTAL.search(read_text(meminfo, 64 * 1024))
            if found is None:
                raise SysfsError(f"{meminfo}: no 'Node {numa} MemTotal: N kB' line")
            memory.setdefault(numa, {})["memory"] = int(found.group(1)) * 1024
        pages = folder / "hugepages"
        for entry in sorted(pages.iterdir()) if pages.is_dir() else []:
            size = _HUGEPAGES_DIR.fullmatch(entry.name)
            if size is None or not (entry / "nr_hugepages").exists():
                continue
            text = read_text(entry / "nr_hugepages").strip()
            if not text.isdigit():
                raise SysfsError(f"{entry / 'nr_hugepages'}: not a number: {text[:40]!r}")
            kib = int(size.group(1))
            memory.setdefault(numa, {})[hugepages_name(kib)] = int(text) * kib * 1024
        distance = folder / "distance"
        if distance.exists():
            values = read_text(distance).split()
            if not all(v.isdigit() for v in values) or len(values) != len(ids):
                raise SysfsError(f"{distance}: not {len(ids)} distances (one per NUMA node): {' '.join(values)[:80]}")
            distances[numa] = {other: int(v) for other, v in zip(ids, values, strict=True)}
    sockets = read_sockets(sys_root, layout.nodes)
    return NodeFacts(layout.nodes, memory, distances, sockets.of, sockets.why)


# --- the socket of each NUMA node ---

MAX_PACKAGE_TEXT = 16  # a physical_package_id is a small integer (the kernel writes "%d\n")
_PACKAGE = re.compile(r"-?\d{1,6}")


@dataclass(frozen=True, slots=True)
class Sockets:
    """NUMA node -> the socket (physical package) its CPUs are on, for every NUMA node, or none and why not."""

    of: Mapping[int, int]
    why: str = ""


def read_sockets(sys_root: Path, cpus_by_node: Mapping[int, Iterable[int]]) -> Sockets:
    """Each NUMA node's socket: the ``physical_package_id`` of its CPUs, read through the node folder's ``cpuN``
    entry as cadvisor reads it (``GetCPUPhysicalPackageID``), kubelet's ``CPUInfo.SocketID``. All or nothing:
    a NUMA node without CPUs, a CPU whose file is missing, unreadable or not a package id (-1: the kernel knows
    none), or CPUs of one NUMA node on two packages leave every socket unknown (``why`` names the file or the
    node), since a partial map would make the nodes it leaves out look like sockets of their own."""
    base = sys_root / "devices" / "system" / "node"
    found: dict[int, int] = {}
    for numa, cpus in sorted(cpus_by_node.items()):
        packages: dict[int, int] = {}  # package -> its lowest CPU on this NUMA node
        for cpu in sorted(cpus):
            path = base / f"node{numa}" / f"cpu{cpu}" / "topology" / "physical_package_id"
            try:
                text = read_text(path, MAX_PACKAGE_TEXT).strip()
            except SysfsError as exc:
                return Sockets({}, str(exc))
            if not _PACKAGE.fullmatch(text) or not 0 <= int(text) <= MAX_ID:
                why = ("is -1: the kernel knows no package" if text == "-1"
                       else f"holds {text[:_TEXT]!r}, not a package id")
                return Sockets({}, f"{path}: {why}")
            packages.setdefault(int(text), cpu)
        if not packages:
            return Sockets({}, f"{base / f'node{numa}'}: no CPU, so no package")
        if len(packages) > 1:
            seen = ", ".join(f"CPU {cpu} on {package}" for package, cpu in sorted(packages.items())[:4])
            return Sockets({}, f"{base / f'node{numa}'}: its CPUs are on more than one package ({seen})")
        (found[numa],) = packages
    return Sockets(found)


# --- the NUMA node of a PCI device or root ---

@dataclass(frozen=True, slots=True)
class Answer:
    """What one source said: the NUMA nodes (empty: no answer), where it was read, and why there is none."""

    numa: frozenset[int]
    where: str
    why: str = ""


def numa_node_file(path: Path) -> Answer:
    """A ``numa_node`` file: its node, or (no node) why not; -1 is the kernel saying it knows none."""
    try:
        text = read_text(path, 64).strip()
    except SysfsError as exc:
        return Answer(frozenset(), str(path), str(exc).removeprefix(f"{path}: "))
    if not re.fullmatch(r"-?\d{1,6}", text):
        return Answer(frozenset(), str(path), f"holds {text[:_TEXT]!r}, not a NUMA node")
    node = int(text)
    if node == -1:
        return Answer(frozenset(), str(path), "is -1: the kernel knows no NUMA node for it")
    if not 0 <= node <= MAX_ID:
        return Answer(frozenset(), str(path), f"holds {node}, not a NUMA node")
    return Answer(frozenset({node}), str(path))


@dataclass(frozen=True, slots=True)
class SysfsLocality:
    """PCI locality from sysfs under ``sys_root`` (the ``Locality`` reader of ``webhook/node/dra_locality.py``)."""

    sys_root: Path

    def pci_device(self, bdf: str) -> Answer:
        """``SYS/bus/pci/devices/<BDF>/numa_node`` (a relative symlink into ``SYS/devices``, as the kernel
        makes it, so it resolves under a mounted root too)."""
        return numa_node_file(self.sys_root / "bus" / "pci" / "devices" / bdf / "numa_node")

    def pcie_root(self, root: str) -> Answer:
        """``SYS/devices/<root>/numa_node``; else the devices on the root bus, when they agree."""
        base = self.sys_root / "devices" / root
        own = base / "numa_node"
        if own.exists():
            return numa_node_file(own)
        match = PCIE_ROOT_NAME.fullmatch(root)
        if not match or not base.is_dir():
            return Answer(frozenset(), str(base), "no such folder")
        prefix = f"{match.group(1)}:{match.group(2)}:"
        try:
            children = sorted(p for p in base.iterdir() if p.name.startswith(prefix) and BDF.fullmatch(p.name))
        except OSError as exc:
            return Answer(frozenset(), str(base), f"cannot list ({exc.strerror or exc})")
        answers = [numa_node_file(c / "numa_node") for c in children[:256]]
        known = [a for a in answers if a.numa]
        if not known:
            why = answers[0].why if answers else f"no numa_node file, and no device {prefix}* under it"
            return Answer(frozenset(), str(answers[0].where if answers else base), why)
        nodes = frozenset().union(*(a.numa for a in known))
        if len(nodes) > 1:
            seen = ", ".join(f"{Path(a.where).parent.name} on {min(a.numa)}" for a in known[:4])
            return Answer(frozenset(), str(base), f"the devices on it disagree ({seen})")
        return Answer(nodes, known[0].where)
