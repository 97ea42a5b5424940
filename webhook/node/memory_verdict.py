"""Where a container's memory really is (``memory.numa_stat``), beside what kubelet's Memory Manager says:
pinned or not, and ``NUMARemoteMemory`` when too much of it is off the CPUs' NUMA node."""

from __future__ import annotations

from dataclasses import replace

from webhook.node.cpulist import format_list
from webhook.node.numapages import NumaPages, distribution, percent
from webhook.node.verdict import NUMA_REMOTE_MEMORY, ContainerVerdict, Problem
from webhook.node.verdict_text import nodes_text, where_text

REMOTE_SHARE = 0.10  # default: more anonymous memory than this share off the CPUs' NUMA node is a problem
_MEMORY_FIX = ("the fix: memoryManagerPolicy Static with reservedMemory on each NUMA node (then Guaranteed Pods get "
               "memory blocks on their CPUs' node); the cost: the node drained and kubelet's memory_manager_state "
               "file removed before kubelet restarts with it")


def _head(p: ContainerVerdict, where: str) -> str:
    """What judge_container said of the CPUs and devices: unknown (a device's NUMA node), aligned or not on one node."""
    if p.aligned is None:
        return f"{where}: NUMA alignment unknown"
    return f"{where}: aligned on NUMA node {nodes_text(p.numa)}" if p.aligned else f"{where}: not on one NUMA node"


def judge_memory(p: ContainerVerdict, pages: NumaPages | None, threshold: float = REMOTE_SHARE,
                 node_static: bool = False) -> ContainerVerdict:
    """``p`` with where its memory is: for a pinned container, whether the Memory Manager pinned it (Static: its
    blocks, cross-checked with ``cpuset.mems`` and the pages; None: not pinned, and the answer says where the
    kernel put it, never a plain "aligned"), and ``NUMARemoteMemory`` when more than ``threshold`` of its
    anonymous memory is off the CPUs' NUMA node. ``node_static``: kubelet reports allocatable memory (its Memory
    Manager is Static) although this container got no blocks. A container in the shared pool only gets the
    figures."""
    if not p.pinned:
        return replace(p, pages=pages)
    blocks = frozenset().union(*(m.numa for m in p.memory)) if p.memory else frozenset()
    pinned = bool(p.memory)
    where = where_text(p.exclusive_cpus, p.cpu_numa, p.memory, p.devices, p.dra_devices)
    placed = p.numa
    one = len(placed) == 1
    policy = "no Memory Manager blocks" if node_static else "Memory Manager None"
    notes = list(p.notes)
    problems = list(p.problems)
    if pages is None:
        memory = "memory placement unknown (no memory cgroup read)"
    else:
        memory = distribution(pages)
        if pinned and pages.mems is not None and pages.mems != blocks:
            notes.append(f"cgroup cpuset.mems {format_list(pages.mems) or 'empty'} differs from the Memory "
                         f"Manager's blocks on NUMA {nodes_text(blocks)}")
    if pinned:
        head = _head(p, where)
        detail = f"{head}; pages: {memory}"
    else:
        mems = f", cpuset.mems {format_list(pages.mems)}" if pages is not None and pages.mems is not None else ""
        head = (f"{where}: NUMA alignment unknown" if p.aligned is None else f"{where}: on NUMA node "
                f"{nodes_text(placed)}" if one else f"{where}: not on one NUMA node")
        detail = f"{head}; memory not pinned ({policy}{mems}): {memory}"
    share = pages.remote_share(p.cpu_numa) if pages is not None else None
    if pages is not None and share is not None and share > threshold:
        off = frozenset(pages.anon_nodes() - p.cpu_numa)
        why = (f"Memory Manager Static gave it NUMA {nodes_text(blocks)}, yet the kernel placed the pages elsewhere"
               if pinned else f"memory not pinned ({policy}), the kernel placed it; {_MEMORY_FIX}")
        problems.append(Problem(NUMA_REMOTE_MEMORY, (
            f"container {p.container}: {percent(share)} of its anonymous memory is off its CPUs' NUMA node "
            f"{nodes_text(p.cpu_numa)} (on NUMA {nodes_text(off)}; more than {percent(threshold)}): {memory}; {why}")))
    return replace(p, pages=pages, memory_pinned=pinned, detail=detail, notes=tuple(notes),
                   problems=tuple(problems))

