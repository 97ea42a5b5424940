"""Where a container's memory really is: ``memory.numa_stat`` read from fixture trees (cgroup v1 pages and v2
bytes; cgroupfs and systemd drivers; 1, 2 and 4 NUMA nodes), every malformed file named for that container, and
the verdict it gives with Memory Manager None (not pinned, never a plain "aligned") and Static."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.nodelogic.trees import memory_cgroup, sysfs, v1_numa_stat, v2_numa_stat
from webhook.node.allocation import Allocatable, ContainerAllocation, DeviceGroup, MemoryBlock
from webhook.node.cgroups import CgroupError
from webhook.node.memory_verdict import judge_memory
from webhook.node.numapages import NumaPages, distribution, kib, percent, table
from webhook.node.numastat import container_pages, parse_numa_stat, read_numa_stat
from webhook.node.podinfo import ContainerSpec, PodInfo
from webhook.node.sysfs import NumaLayout, read_layout
from webhook.node.verdict import NUMA_REMOTE_MEMORY, judge_container

UID = "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"
CID = "a" * 64
PAGE = 4096
LAYOUTS = {1: {0: "0-1"}, 2: {0: "0", 1: "1"}, 4: {0: "0-3", 1: "4-7", 2: "8-11", 3: "12-15"}}


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("driver", ["cgroupfs", "systemd"])
@pytest.mark.parametrize("qos", ["Guaranteed", "Burstable"])
@pytest.mark.parametrize("count", [1, 2, 4])
def test_pages_per_numa_node(tmp_path: Path, version: int, driver: str, qos: str, count: int) -> None:
    layout = read_layout(sysfs(tmp_path / "sys", LAYOUTS[count]))
    anon = {n: 21 * (n + 1) for n in range(count)}  # pages; the last node the most
    file = {n: 100 + n for n in range(count)}
    scale = PAGE if version == 2 else 1  # v2 writes bytes, v1 pages
    text = (v2_numa_stat({n: v * scale for n, v in anon.items()}, {n: v * scale for n, v in file.items()})
            if version == 2 else v1_numa_stat(anon, file))
    root = tmp_path / "cgroup"
    folder = memory_cgroup(root, version, UID, qos, CID, text, driver)
    pages = container_pages(root, UID, qos, f"containerd://{CID}", layout, PAGE)
    assert pages is not None and pages.path == str(folder) and pages.version == version
    assert dict(pages.anon) == {n: v * PAGE for n, v in anon.items()}
    assert dict(pages.file) == {n: v * PAGE for n, v in file.items()}
    assert pages.anon_total == sum(anon.values()) * PAGE
    share = pages.remote_share(frozenset({0}))
    assert share == pytest.approx(1 - anon[0] / sum(anon.values()))


def test_v1_reads_the_memory_controller_not_the_cpuset(tmp_path: Path) -> None:
    """v1 mounts one hierarchy per controller: the pages are under memory/, the cpuset under cpuset/."""
    layout = read_layout(sysfs(tmp_path / "sys", LAYOUTS[2]))
    folder = memory_cgroup(tmp_path, 1, UID, "Guaranteed", CID, v1_numa_stat({0: 21}, {0: 5}))
    assert folder.relative_to(tmp_path).parts[0] == "memory"
    pages = container_pages(tmp_path, UID, "Guaranteed", f"containerd://{CID}", layout, PAGE)
    assert pages is not None and dict(pages.anon) == {0: 21 * PAGE, 1: 0}  # N1 absent: nothing there


def test_the_kernels_own_v1_file(tmp_path: Path) -> None:
    """The format as this repository's test machine's kernel wrote it (/sys/fs/cgroup/memory/memory.numa_stat)."""
    text = ("total=5417 N0=5417\nfile=1047 N0=1047\nanon=374 N0=374\nunevictable=3996 N0=3996\n"
            "hierarchical_total=960331 N0=960331\nhierarchical_file=847399 N0=847399\n"
            "hierarchical_anon=108936 N0=108936\nhierarchical_unevictable=3996 N0=3996\n")
    counters = parse_numa_stat(text, 1, [0, 1], PAGE)
    assert counters["anon"] == {0: 374 * PAGE} and counters["file"] == {0: 1047 * PAGE}


def test_no_memory_cgroup_is_none(tmp_path: Path) -> None:
    layout = NumaLayout({0: frozenset({0})})
    memory_cgroup(tmp_path, 1, UID, "Guaranteed", CID, v1_numa_stat({0: 1}, {0: 1}))
    assert container_pages(tmp_path, UID, "Guaranteed", "containerd://" + "b" * 64, layout) is None
    shutil.rmtree(tmp_path / "memory")  # v1 without the memory controller mounted: unknown, not an error
    assert container_pages(tmp_path, UID, "Guaranteed", f"containerd://{CID}", layout) is None


def test_a_v2_file_with_every_counter_of_a_recent_kernel() -> None:
    """cgroup v2 lists some 30 counters (Documentation/admin-guide/cgroup-v2.rst); only anon and file are used,
    the others must not trip the reader."""
    names = ["anon", "file", "kernel_stack", "pagetables", "sec_pagetables", "shmem", "file_mapped", "file_dirty",
             "file_writeback", "swapcached", "anon_thp", "file_thp", "shmem_thp", "inactive_anon", "active_anon",
             "inactive_file", "active_file", "unevictable", "slab_reclaimable", "slab_unreclaimable",
             "workingset_refault_anon", "workingset_refault_file", "workingset_activate_anon",
             "workingset_activate_file", "workingset_restore_anon", "workingset_restore_file",
             "workingset_nodereclaim"]
    text = "".join(f"{name} N0={4096 * (i + 1)} N1={8192 * (i + 1)}\n" for i, name in enumerate(names))
    counters = parse_numa_stat(text, 2, [0, 1], PAGE)
    assert counters["anon"] == {0: 4096, 1: 8192} and counters["file"] == {0: 8192, 1: 16384}
    assert len(counters) == len(names)


@pytest.mark.parametrize(("version", "text", "message"), [
    (1, "total=5 N0=5\nfile=2 N0=2\nanon=3 N0=", "truncated (its last line 'anon=3 N0=' has no end)"),
    (1, "total=5 N0=5\nfile=2 N0=2\n", "no anon line (truncated?)"),
    (1, "total=5 N0=5 N1=0\nfile=2 N0=2\nanon=3 N0=3 N1=0\n", "line 2 (file) lists NUMA nodes 0, the lines "),
    (1, "total=5 N0=5 N2=1\nfile=2 N0=2 N2=0\nanon=3 N0=3 N2=1\n",
     "line 1 (total) counts NUMA node 2, which the node's layout (sysfs: NUMA 0-1) lacks"),
    (1, "anon 3 N0=3\nfile 2 N0=2\n", "line 1 'anon 3 N0=3' is not <counter>=<pages> N<id>=<pages>..."),
    (1, "anon=3\nfile=2\n", "line 1 (anon) lists no NUMA node"),
    (1, "anon=3 N0=1 N0=2\nfile=2 N0=2\n", "lists NUMA node 0 twice"),
    (1, "anon=3 N0=3\nanon=3 N0=3\nfile=2 N0=2\n", "counter anon listed twice"),
    (2, "anon=3 N0=3\nfile=2 N0=2\n", "is not <counter> N<id>=<bytes>..."),
    (2, "anon N0=4096 N7=0\nfile N0=0 N7=0\n", "counts NUMA node 7, which the node's layout"),
    (2, "", "truncated"),
    (2, "anon N0=99999999999999999999999\nfile N0=0\n", "is not <counter> N<id>=<bytes>"),
])
def test_malformed_numa_stat_is_named(tmp_path: Path, version: int, text: str, message: str) -> None:
    layout = read_layout(sysfs(tmp_path / "sys", LAYOUTS[2]))
    folder = memory_cgroup(tmp_path / "cg", version, UID, "Guaranteed", CID, text)
    with pytest.raises(CgroupError) as err:
        read_numa_stat(folder, version, layout, PAGE)
    assert str(folder / "memory.numa_stat") in str(err.value) and message in str(err.value), str(err.value)


def test_binary_and_oversized_files_are_named(tmp_path: Path) -> None:
    layout = NumaLayout({0: frozenset({0})})
    folder = memory_cgroup(tmp_path, 2, UID, "Guaranteed", CID, "")
    (folder / "memory.numa_stat").write_bytes(b"anon N0=\xff\n")
    with pytest.raises(CgroupError, match="not ASCII"):
        read_numa_stat(folder, 2, layout)
    (folder / "memory.numa_stat").write_text("x" * 70_000)
    with pytest.raises(CgroupError, match="longer than 65536 bytes"):
        read_numa_stat(folder, 2, layout)


def test_a_cgroup_gone_mid_read_is_named(tmp_path: Path) -> None:
    """The folder was found, then the container stopped: the read says so, not "cannot read"."""
    layout = NumaLayout({0: frozenset({0})})
    folder = memory_cgroup(tmp_path, 2, UID, "Guaranteed", CID, v2_numa_stat({0: 1}, {0: 1}))
    shutil.rmtree(folder)
    with pytest.raises(CgroupError, match="the cgroup went away while it was read"):
        read_numa_stat(folder, 2, layout)
    folder.mkdir()  # there, without the file: a kernel without CONFIG_NUMA
    with pytest.raises(CgroupError, match=r"missing .*without CONFIG_NUMA"):
        read_numa_stat(folder, 2, layout)


def test_how_people_read_it() -> None:
    assert kib(86016) == "84 KiB" and kib(32 << 20) == "32 MiB" and kib(0) == "0 KiB" and kib(1) == "1 KiB"
    assert kib(3 << 29) == "1.5 GiB"
    assert percent(1.0) == "100 %" and percent(0.0) == "0 %" and percent(0.9996) == "99.96 %"
    assert percent(0.001) == "0.10 %" and percent(0.1) == "10 %"
    pages = NumaPages(((0, 700 << 10), (1, 300 << 10)), ((0, 4096), (1, 0)), "/x", 1)
    assert distribution(pages) == "70 % of 1000 KiB anonymous on NUMA 0, 30 % on NUMA 1"
    assert table(pages) == ["KiB   NUMA 0  NUMA 1  Total",
                            "anon     700     300   1000",
                            "file       4       0      4"]


# --- the verdict ---

TWO = {0: 0, 1: 1}


def info() -> PodInfo:
    return PodInfo("ns", "p", "uid-1", "Guaranteed", False, "2026-01-02T00:00:00Z", "enforce", None,
                   (ContainerSpec("app", 1000, "containerd://" + "a" * 64),))


def on(anon: dict[int, int], mems: set[int] | None = None, nodes: int = 2) -> NumaPages:
    return NumaPages(tuple((n, anon.get(n, 0)) for n in range(nodes)), tuple((n, 0) for n in range(nodes)),
                     "/cg", 1, frozenset(mems) if mems is not None else None)


GPU1 = DeviceGroup("example.com/gpu", ("gpu-1",), frozenset({1}))


def test_memory_manager_none_is_not_pinned_and_says_where() -> None:
    """The article's remote-memory case: CPU 1 and the GPU on NUMA 1, every page on node 0."""
    p = judge_container(info(), ContainerAllocation("app", frozenset({1}), (), (GPU1,)), Allocatable(frozenset({1})),
                        TWO)
    got = judge_memory(p, on({0: 86016}, {0, 1}))
    assert got.memory_pinned is False and got.aligned  # CPUs and device on one node: that part holds
    assert "aligned" not in got.detail  # never a plain "aligned" with the memory left to the kernel
    assert got.detail == ("CPUs 1 on NUMA 1, example.com/gpu gpu-1 on NUMA 1: on NUMA node 1; memory not pinned "
                          "(Memory Manager None, cpuset.mems 0-1): 100 % of 84 KiB anonymous on NUMA 0")
    (problem,) = got.problems
    assert problem.reason == NUMA_REMOTE_MEMORY
    assert "100 % of its anonymous memory is off its CPUs' NUMA node 1 (on NUMA 0; more than 10 %)" in problem.message
    assert "memoryManagerPolicy Static with reservedMemory on each NUMA node" in problem.message
    assert "the node drained and kubelet's memory_manager_state file removed" in problem.message


@pytest.mark.parametrize(("anon", "threshold", "problem"), [
    ({1: 900, 0: 100}, 0.10, False),  # exactly the share: not more than it
    ({1: 899, 0: 101}, 0.10, True),
    ({1: 100}, 0.10, False),  # all local: the kernel's first touch did well (still not pinned)
    ({0: 500, 1: 500}, 0.60, False),  # a configured share
    ({}, 0.10, False),  # no anonymous memory yet
])
def test_remote_share_threshold(anon: dict[int, int], threshold: float, problem: bool) -> None:
    p = judge_container(info(), ContainerAllocation("app", frozenset({1})), Allocatable(frozenset({1})), TWO)
    got = judge_memory(p, on(anon), threshold)
    assert bool(got.problems) is problem
    assert "memory not pinned (Memory Manager None)" in got.detail


def test_four_nodes_remote_share_counts_every_other_node() -> None:
    four = {cpu: cpu // 4 for cpu in range(16)}
    p = judge_container(info(), ContainerAllocation("app", frozenset({4, 5})), Allocatable(frozenset(range(16))), four)
    got = judge_memory(p, on({1: 600, 2: 200, 3: 200}, nodes=4))
    assert got.detail.endswith("60 % of 1 KiB anonymous on NUMA 1, 20 % on NUMA 2, 20 % on NUMA 3")
    (problem,) = got.problems
    assert "40 % of its anonymous memory is off its CPUs' NUMA node 1 (on NUMA 2-3;" in problem.message


def test_static_blocks_cross_checked_with_mems_and_pages() -> None:
    block = (MemoryBlock("memory", 64 << 20, frozenset({1})),)
    p = judge_container(info(), ContainerAllocation("app", frozenset({1}), block), Allocatable(frozenset({1})), TWO)
    good = judge_memory(p, on({1: 4096}, {1}))
    assert good.memory_pinned and good.aligned and not good.problems and not good.notes
    assert good.detail == ("CPUs 1 on NUMA 1, memory 64Mi on NUMA 1: aligned on NUMA node 1; pages: 100 % of 4 KiB "
                           "anonymous on NUMA 1")
    bad = judge_memory(p, on({0: 4096}, {0, 1}))
    assert bad.notes == ("cgroup cpuset.mems 0-1 differs from the Memory Manager's blocks on NUMA 1",)
    (problem,) = bad.problems
    assert problem.reason == NUMA_REMOTE_MEMORY and "Memory Manager Static gave it NUMA 1" in problem.message


def test_unread_pages_are_unknown_and_shared_pool_only_gets_the_figures() -> None:
    p = judge_container(info(), ContainerAllocation("app", frozenset({1})), Allocatable(frozenset({1})), TWO)
    got = judge_memory(p, None)
    assert got.memory_pinned is False and "memory placement unknown" in got.detail and not got.problems
    # A Static node that gave this pinned container no blocks: not pinned, and not called "None"
    odd = judge_memory(p, on({0: 4096}), node_static=True)
    assert "memory not pinned (no Memory Manager blocks)" in odd.detail and "Memory Manager None" not in odd.detail
    assert "memory not pinned (no Memory Manager blocks), the kernel placed it" in odd.problems[0].message
    shared = judge_container(info(), ContainerAllocation("app", frozenset()), Allocatable(frozenset({1})), TWO,
                             frozenset({0}))
    pages = on({1: 4096})
    got = judge_memory(shared, pages)
    assert got.pages == pages and got.memory_pinned is None and got.detail == shared.detail
    assert [x.reason for x in got.problems] == [x.reason for x in shared.problems]
