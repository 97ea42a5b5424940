"""``qos-guard verify``: the agent's decision for the node this runs on, once, from a shell: what an operator
would otherwise piece together with ``taskset -cp``, ``numastat -p`` and PCI sysfs. Text (one line per
container) or JSON. ``verify`` is the command's one call: it reads, ``render_*`` show, ``exit_code`` folds."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from webhook.cluster.client import ClusterError, Lister
from webhook.cluster.kubeconfig import explain, preflight
from webhook.core.outcome import ExitCode, Refused, fold
from webhook.node.allocation import DraDevice
from webhook.node.cpulist import format_list
from webhook.node.dra_locality import DEFAULT_DRIVER_ATTRIBUTES
from webhook.node.kubelet import PodResourcesClient, PodResourcesError
from webhook.node.memory_verdict import REMOTE_SHARE
from webhook.node.numapages import NumaPages, table
from webhook.node.observe import ListedView, Snapshot, observe
from webhook.node.sysfs import SysfsError
from webhook.node.verdict import DRA_CPU_DRIVER, ContainerVerdict
from webhook.node.verdict_text import DRA_CPU_REASON, DRA_CPU_WAY_OUT, DRA_REASON, DRA_WAY_OUT


def verify(kubeconfig: str | None, socket: Path, sys_root: Path, cgroup_root: Path, node: str | None = None,
           only: Sequence[tuple[str, str]] = (), fractional_allowed: Iterable[str] = (),
           dra_attributes: Sequence[str] = DEFAULT_DRIVER_ATTRIBUTES, remote_share: float = REMOTE_SHARE) -> Snapshot:
    """``qos-guard verify``: one look at this node (``only``: just these namespace/Pod pairs), the opted-in
    namespaces and Pods listed from the API server, the allocations asked of kubelet at ``socket``. No API server,
    kubelet or sysfs to read is ``Refused``; a container that cannot be judged is an error in the snapshot."""
    try:
        preflight(kubeconfig)
        api = Lister(kubeconfig)
        with PodResourcesClient(socket) as kubelet:
            return observe(kubelet, ListedView(api), sys_root, cgroup_root, node, list(only) or None,
                           fractional_allowed, dra_attributes, remote_share)
    except ClusterError as exc:
        raise Refused(explain(exc, kubeconfig)) from None
    except (PodResourcesError, SysfsError) as exc:
        raise Refused(str(exc)) from None


def exit_code(snap: Snapshot) -> ExitCode:
    """1 when a container has a problem, else 2 when one could not be judged, else 0."""
    return fold(violations=any(p.problems for p in snap.verdicts), errors=bool(snap.errors))


def dra_json(x: DraDevice) -> dict[str, Any]:
    """A DRA device: ``numaNodes`` empty and ``unknown`` saying why when its NUMA node could not be found;
    ``numaSource`` the attribute that answered, ``numaPath`` the sysfs file read for pciBusID and pcieRoot."""
    namespace, _, name = x.claim.partition("/")
    return {"driver": x.driver, "pool": x.pool, "device": x.device, "claim": {"namespace": namespace, "name": name},
            "cdiDevices": list(x.cdi), "numaNodes": sorted(x.numa), "numaSource": x.source or None,
            "numaPath": x.path or None,
            "unknown": None if x.numa or x.admin else (x.looked or "no NUMA node found"),
            "notes": x.looked if x.numa and x.looked else None, "adminAccess": x.admin}


def pages_json(pages: NumaPages | None, local: frozenset[int]) -> dict[str, Any] | None:
    """The container's memory per NUMA node (bytes, keyed by node id), as ``numastat -p`` shows a process's."""
    if pages is None:
        return None
    share = pages.remote_share(local)
    return {"cgroup": pages.path, "cgroupVersion": pages.version,
            "cpusetMems": sorted(pages.mems) if pages.mems is not None else None,
            "anonBytes": {str(n): b for n, b in pages.anon}, "fileBytes": {str(n): b for n, b in pages.file},
            "anonTotalBytes": pages.anon_total, "fileTotalBytes": pages.file_total,
            "anonOffCPUNodesShare": round(share, 6) if share is not None else None}


def verdict_json(p: ContainerVerdict) -> dict[str, Any]:
    return {
        "namespace": p.namespace, "pod": p.pod, "container": p.container, "uid": p.uid,
        "pinned": p.pinned, "exclusiveCPUs": sorted(p.exclusive_cpus), "exclusiveCPUCount": len(p.exclusive_cpus),
        "cpuRequestMilli": p.cpu_request_milli, "matchesRequest": p.matches_request,
        "cpuNUMANodes": sorted(p.cpu_numa),
        "memory": [{"type": m.kind, "size": m.size, "numaNodes": sorted(m.numa)} for m in p.memory],
        "devices": [{"resource": d.resource, "ids": list(d.ids), "numaNodes": sorted(d.numa)} for d in p.devices],
        "draDevices": [dra_json(x) for x in p.dra_devices],
        "numaNodes": sorted(p.numa), "state": p.state, "aligned": p.aligned, "unknown": list(p.unknown),
        "reason": p.reason, "detail": p.detail,
        "cgroupCPUs": sorted(p.cgroup_cpus) if p.cgroup_cpus is not None else None, "notes": list(p.notes),
        "problems": [{"reason": x.reason, "message": x.message} for x in p.problems],
        "memoryPinned": p.memory_pinned, "numaMemory": pages_json(p.pages, p.cpu_numa),
    }


def summary(snap: Snapshot) -> dict[str, int]:
    return {"containers": len(snap.verdicts),
            "pinnedAligned": sum(1 for p in snap.verdicts if p.pinned and p.aligned and p.memory_pinned is not False),
            # CPUs and devices on one NUMA node, memory left to the kernel (Memory Manager None): not "aligned"
            "memoryNotPinned": sum(1 for p in snap.verdicts if p.pinned and p.aligned and p.memory_pinned is False),
            "misaligned": sum(1 for p in snap.verdicts if p.pinned and p.aligned is False),
            "unknown": sum(1 for p in snap.verdicts if p.pinned and p.aligned is None),
            "notPinned": sum(1 for p in snap.verdicts if not p.pinned),
            "problems": sum(1 for p in snap.verdicts if p.problems), "errors": len(snap.errors)}


def render_error(message: str) -> str:
    """``render_json``'s layout when there is no snapshot to show: the error alone."""
    return json.dumps({"node": None, "containers": [], "errors": [message], "summary": None}, indent=2) + "\n"


def render_json(snap: Snapshot) -> str:
    body = {"node": {"name": snap.node, "allocatableCPUs": sorted(snap.allocatable.cpus),
                     "numaNodes": {str(n): format_list(c) for n, c in sorted(snap.layout.nodes.items())},
                     "cgroupVersion": snap.cgroup_version},
            "containers": [verdict_json(p) for p in snap.verdicts], "errors": snap.errors,
            "summary": summary(snap)}
    return json.dumps(body, indent=2) + "\n"


def _line(p: ContainerVerdict) -> str:
    if p.pinned:
        count = len(p.exclusive_cpus)
        verdict = "pinned" if p.aligned else "NUMA UNKNOWN" if p.aligned is None else "MISALIGNED"
        if p.remote_memory:
            verdict += ", REMOTE MEMORY"
        line = f"{p.ref}: {verdict}: {count} exclusive CPU{'s' if count != 1 else ''}, {p.detail}"
    else:
        verdict = "NOT PINNED" if p.problems else "shared pool"
        line = f"{p.ref}: {verdict}: {p.detail}"
    if p.cgroup_cpus is not None:
        line += f" [cgroup cpuset {format_list(p.cgroup_cpus) or 'empty'}]"
    for note in p.notes:
        line += f"; note: {note}"
    if p.pinned:
        for unknown in p.unknown:
            line += f"; unknown: {unknown}"
        off = [x.ref for x in p.dra_devices if x.numa and not x.admin and not x.numa <= p.cpu_numa]
        if p.aligned is False and off:
            if any(x.driver == DRA_CPU_DRIVER for x in p.dra_devices):
                line += f"; {', '.join(off)}: {DRA_CPU_REASON}; {DRA_CPU_WAY_OUT}"
            else:
                line += f"; {', '.join(off)}: {DRA_REASON}; {DRA_WAY_OUT}"
    return line


def render_text(snap: Snapshot) -> str:
    layout = "; ".join(f"NUMA {n}: CPUs {format_list(c) or 'none'}" for n, c in sorted(snap.layout.nodes.items()))
    allocatable = format_list(snap.allocatable.cpus) or "none (no static CPU Manager)"
    lines = [f"node: exclusive CPUs allocatable {allocatable}; {layout}"]
    for p in snap.verdicts:
        lines.append(_line(p))
        if p.pages is not None:
            lines += [f"    {row}" for row in table(p.pages)]
    lines += [f"error: {e}" for e in snap.errors]
    return "\n".join(lines) + "\n"


def summary_line(snap: Snapshot) -> str:
    s = summary(snap)
    unpinned = f"{s['memoryNotPinned']} pinned with memory not pinned, " if s["memoryNotPinned"] else ""
    return (f"{s['containers']} containers: {s['pinnedAligned']} pinned and aligned, {unpinned}"
            f"{s['misaligned']} misaligned, {s['unknown']} with NUMA alignment unknown, "
            f"{s['notPinned']} not pinned ({s['problems']} with a problem); {s['errors']} could not be judged")
