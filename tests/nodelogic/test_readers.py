"""The sysfs and cgroup readers on fixture trees: 1, 2 and 4 NUMA nodes; cgroup v1 and v2 with kubelet's
cgroupfs and systemd drivers; every malformed file named, never a traceback; and one module that reads them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.nodelogic.trees import cgroup_container, sysfs
from webhook.node import sysfs as sysfs_module
from webhook.node.cgroups import CgroupError, container_cpuset
from webhook.node.cpulist import MAX_ID, format_list, parse_list
from webhook.node.sysfs import SysfsError, read_layout

UID = "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
CID = "a" * 64


@pytest.mark.parametrize(("nodes", "expected"), [
    ({0: "0-1"}, {0: {0, 1}}),
    ({0: "0", 1: "1"}, {0: {0}, 1: {1}}),
    ({0: "0-3,16-19", 1: "4-7,20-23", 2: "8-11,24-27", 3: "12-15,28-31"},
     {0: {*range(0, 4), *range(16, 20)}, 1: {*range(4, 8), *range(20, 24)}, 2: {*range(8, 12), *range(24, 28)},
      3: {*range(12, 16), *range(28, 32)}}),
    ({0: "0-1", 1: ""}, {0: {0, 1}, 1: set()}),  # a memory-only node (CXL, or a node whose CPUs are offline)
])
def test_layout_from_sysfs(tmp_path: Path, nodes: dict[int, str], expected: dict[int, set[int]]) -> None:
    layout = read_layout(sysfs(tmp_path, nodes))
    assert layout.nodes == {n: frozenset(c) for n, c in expected.items()}
    for node, cpus in expected.items():
        for cpu in cpus:
            assert layout.node_of(cpu) == node
    assert layout.node_of(999) is None


def test_kernel_without_numa_is_one_node(tmp_path: Path) -> None:
    cpu = tmp_path / "devices" / "system" / "cpu"
    cpu.mkdir(parents=True)
    (cpu / "online").write_text("0-7\n")
    assert read_layout(tmp_path).nodes == {0: frozenset(range(8))}


@pytest.mark.parametrize(("content", "message"), [
    ("0-x", "'0-x' is not a number"),
    ("3-1", "ends before it starts"),
    ("0-4294967295", f"above {MAX_ID}"),
    ("0,,1", "'' is not a number"),
    ("\u0661", "not ASCII"),  # an Arabic-Indic digit: str.isdigit() says yes, the kernel never writes it
    ("1" * 70_000, "longer than"),
])
def test_malformed_cpulist_is_named(tmp_path: Path, content: str, message: str) -> None:
    sysfs(tmp_path, {0: "0", 1: "1"})
    bad = tmp_path / "devices" / "system" / "node" / "node1" / "cpulist"
    bad.write_text(content)
    with pytest.raises(SysfsError) as err:
        read_layout(tmp_path)
    assert str(bad) in str(err.value) and message in str(err.value)


def test_overlapping_and_missing_nodes_are_named(tmp_path: Path) -> None:
    sysfs(tmp_path, {0: "0-1", 1: "1-2"})
    with pytest.raises(SysfsError, match="CPU 1 is listed by node0 and node1"):
        read_layout(tmp_path)
    (tmp_path / "devices" / "system" / "node" / "node1" / "cpulist").unlink()
    with pytest.raises(SysfsError, match="node1/cpulist: cannot read"):
        read_layout(tmp_path)


def test_binary_cpulist_is_named(tmp_path: Path) -> None:
    sysfs(tmp_path, {0: "0"})
    (tmp_path / "devices" / "system" / "node" / "node0" / "cpulist").write_bytes(b"\xff\xfe0")
    with pytest.raises(SysfsError, match="not ASCII"):
        read_layout(tmp_path)


@given(st.frozensets(st.integers(0, 300), max_size=60))
def test_cpulist_round_trip(ids: frozenset[int]) -> None:
    assert parse_list(format_list(ids)) == ids


def test_non_ascii_digits_are_refused() -> None:
    with pytest.raises(ValueError, match="is not a number"):
        parse_list("\u0661-\u0662")


@given(st.text(max_size=30))
def test_cpulist_never_crashes(text: str) -> None:
    try:
        parsed = parse_list(text)
    except ValueError as exc:
        assert "CPU list" in str(exc)
    else:
        assert all(0 <= i <= MAX_ID for i in parsed)


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("driver", ["cgroupfs", "systemd"])
@pytest.mark.parametrize(("qos", "cpus"), [("Guaranteed", "1"), ("Burstable", "0-1"), ("BestEffort", "0,2-3")])
def test_container_cpuset(tmp_path: Path, version: int, driver: str, qos: str, cpus: str) -> None:
    folder = cgroup_container(tmp_path, version, UID, qos, CID, cpus, "0", driver)
    found = container_cpuset(tmp_path, UID, qos, f"containerd://{CID}")
    assert found is not None
    assert found.cpus == parse_list(cpus) and found.mems == {0}
    assert found.path == folder and found.version == version


def test_v2_reads_the_effective_cpuset(tmp_path: Path) -> None:
    """In cgroup v2 an empty cpuset.cpus means "the parent's": the effective file is what the kernel applies."""
    folder = cgroup_container(tmp_path, 2, UID, "Burstable", CID, "0-3")
    (folder / "cpuset.cpus").write_text("\n")
    found = container_cpuset(tmp_path, UID, "Burstable", f"containerd://{CID}")
    assert found is not None and found.cpus == frozenset(range(4))


def test_missing_container_cgroup_is_none(tmp_path: Path) -> None:
    cgroup_container(tmp_path, 1, UID, "Guaranteed", CID, "1")
    assert container_cpuset(tmp_path, UID, "Guaranteed", "containerd://" + "b" * 64) is None


@pytest.mark.parametrize(("uid", "cid", "message"), [
    (UID, "containerd://../../etc", "is not <runtime>://<hex id>"),
    (UID, "abc", "is not <runtime>://<hex id>"),
    ("../../x", f"containerd://{CID}", "is not a UID"),
])
def test_hostile_ids_never_reach_the_filesystem(tmp_path: Path, uid: str, cid: str, message: str) -> None:
    cgroup_container(tmp_path, 1, UID, "Guaranteed", CID, "1")
    with pytest.raises(CgroupError, match=message):
        container_cpuset(tmp_path, uid, "Guaranteed", cid)


def test_malformed_cgroup_file_is_named(tmp_path: Path) -> None:
    folder = cgroup_container(tmp_path, 1, UID, "Guaranteed", CID, "1")
    (folder / "cpuset.cpus").write_text("one\n")
    with pytest.raises(CgroupError) as err:
        container_cpuset(tmp_path, UID, "Guaranteed", f"containerd://{CID}")
    assert str(folder / "cpuset.cpus") in str(err.value)


def test_no_cgroup_hierarchy(tmp_path: Path) -> None:
    with pytest.raises(CgroupError, match="neither a cgroup v2 hierarchy nor a v1 cpuset controller"):
        container_cpuset(tmp_path, UID, "Guaranteed", f"containerd://{CID}")


def _opens(tree: ast.Module) -> list[int]:
    """The lines of ``tree`` that open or read a file themselves: ``open()``, ``os.open()``, ``Path.open()``,
    ``Path.read_text()``/``read_bytes()``."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Name) and func.id == "open") or (
                isinstance(func, ast.Attribute) and func.attr in {"open", "read_text", "read_bytes", "fdopen"}):
            lines.append(node.lineno)
    return lines


def test_one_module_reads_the_node_files() -> None:
    """Every file the node side reads (sysfs's CPU lists, meminfo, hugepages, distances, PCI numa_node; the
    cgroup files) is read by ``webhook/node/sysfs.py``'s bounded ``read_text``: no other module of the node
    side opens a file, so its bound and its named errors hold for all of them."""
    folder = Path(sysfs_module.__file__).parent
    found = {}
    for path in sorted(folder.glob("*.py")):
        lines = _opens(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[path.name] = lines
    assert set(found) == {"sysfs.py"}, f"files opened outside sysfs.py: {found}"
    assert len(found["sysfs.py"]) == 1  # read_text alone
