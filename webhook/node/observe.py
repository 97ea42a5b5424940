"""One look at a node: kubelet's allocations (PodResources), the NUMA layout (sysfs), the Pods of opted-in
namespaces (API server) and each container's cgroup cpuset, turned into one ``ContainerVerdict`` per container. Shared
by ``qos-guard agent`` (every cycle) and ``qos-guard verify`` (once, from a shell).

The API server is read through a ``ClusterView``: ``ListedView`` lists the opted-in namespaces and the node's
Pods on each look (``verify``, which looks once); the agent's ``WatchedView`` (``webhook/node/watched.py``)
answers from the caches its watches keep, so a cycle costs the API server nothing. The node's ResourceSlices
are read the same way (listed by ``verify`` only when a container has DRA devices), and each DRA device's NUMA
node is found from them (``webhook/node/dra_locality.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from webhook.cluster.client import ClusterError
from webhook.core.engine import MODE_LABEL
from webhook.core.engine import MODE_SELECTOR as MODE_SELECTOR  # watched.py reads it here
from webhook.core.resourceblock import ManifestError
from webhook.node.allocation import Allocatable, PodAllocation
from webhook.node.cgroups import CgroupError, cgroup_version, container_cpuset
from webhook.node.dra_locality import (
    DEFAULT_DRIVER_ATTRIBUTES,
    SLICES_PATH,
    SliceIndex,
    admin_devices,
    claim_path,
    device_requests,
    mark_admin,
    mark_requests,
    resolve_all,
    slice_kept,
)
from webhook.node.memory_verdict import REMOTE_SHARE, judge_memory
from webhook.node.numapages import NumaPages
from webhook.node.numastat import container_pages
from webhook.node.podinfo import opted_in_at, pod_info
from webhook.node.sysfs import NumaLayout, SysfsLocality, read_layout
from webhook.node.verdict import ContainerVerdict, judge_container

MAX_NAMESPACES = 10_000
# The namespaces that opted in: those whose mode label holds a mode (the list's and the watch's selector).


class PodSource(Protocol):
    """The API server, as ``cluster.Lister`` reads it (a protocol, so the unit tests can hand in lists)."""

    def list_objects(self, path: str, label_selector: str | None = None,
                     field_selector: str | None = None) -> list[dict[str, Any]]: ...

    def send(self, method: str, path: str, query: list[tuple[str, str]], body: str | dict[str, Any] | None,
             content_type: str | None) -> tuple[int, dict[str, Any]]: ...


class Allocations(Protocol):
    def list(self) -> list[PodAllocation]: ...

    def get(self, namespace: str, name: str) -> PodAllocation | None: ...

    def allocatable(self) -> Allocatable: ...


@dataclass(frozen=True, slots=True)
class OptedIn:
    mode: str
    since: str | None


class ClusterView(Protocol):
    """What ``observe`` reads from the API server: the opted-in namespaces, and the Pods to judge."""

    def opted_in(self) -> dict[str, OptedIn]: ...

    def pods(self, node: str | None, namespaces: Iterable[str]) -> dict[tuple[str, str], dict[str, Any]]: ...

    def slices(self, node: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """The ResourceSlices of ``node`` (any node's, None), as ``dra.slice_kept`` keeps them, and why they
        could not be read (None: read)."""
        ...

    def admin_devices(self, claim: str) -> frozenset[tuple[str, str, str]]:
        """The devices claim ``namespace/name`` was given with adminAccess (``dra.admin_devices``); none when
        it cannot be read (its devices are then judged as the workload's, except by a container naming requests
        of the claim, which is unknown)."""
        ...

    def device_requests(self, claim: str) -> Mapping[tuple[str, str, str], str]:
        """The request each device of claim ``namespace/name`` answers (``dra.device_requests``); none when it
        cannot be read (a container that names requests is then unknown, not judged)."""
        ...


SLICES_GRANT = ("grant list on resourceslices (apiGroup resource.k8s.io) to whoever runs this (the chart's agent "
                "ClusterRole grants list and watch)")


@dataclass(slots=True)
class Snapshot:
    """What one look found: the node's exclusive CPUs and NUMA layout, a verdict per container, and what
    could not be judged (each named; the rest is still judged)."""

    node: str | None
    allocatable: Allocatable
    layout: NumaLayout
    cgroup_version: int | None
    verdicts: list[ContainerVerdict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pods: dict[str, str] = field(default_factory=dict)  # uid -> namespace/name of every judged Pod


def opted_in(namespace: Mapping[str, Any]) -> OptedIn | None:
    """A namespace object's mode and when it opted in; ``None`` when it has not opted in."""
    meta = namespace.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    mode = labels.get(MODE_LABEL) if isinstance(labels, Mapping) else None
    return OptedIn(mode, opted_in_at(namespace, MODE_LABEL)) if isinstance(mode, str) else None


def opted_in_namespaces(api: PodSource) -> dict[str, OptedIn]:
    found: dict[str, OptedIn] = {}
    for ns in api.list_objects("/api/v1/namespaces", MODE_SELECTOR):
        name, opted = (ns.get("metadata") or {}).get("name"), opted_in(ns)
        if isinstance(name, str) and opted is not None:
            found[name] = opted
        if len(found) > MAX_NAMESPACES:
            break
    return found


def _pods(api: PodSource, node: str | None, namespaces: Iterable[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """The Pod objects to judge: those bound to ``node``, or (no node name) those of ``namespaces``."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    sources: list[tuple[str, str | None]]
    if node:
        sources = [("/api/v1/pods", f"spec.nodeName={node}")]
    else:
        sources = [(f"/api/v1/namespaces/{ns}/pods", None) for ns in sorted(set(namespaces))]
    for path, selector in sources:
        for obj in api.list_objects(path, None, selector):
            meta = obj.get("metadata") or {}
            found[(str(meta.get("namespace", "")), str(meta.get("name", "")))] = obj
    return found


class ListedView:
    """The API server listed on each call: what ``verify`` needs for its one look."""

    def __init__(self, api: PodSource) -> None:
        self._api = api
        self._read: dict[str, Any] = {}

    def opted_in(self) -> dict[str, OptedIn]:
        return opted_in_namespaces(self._api)

    def pods(self, node: str | None, namespaces: Iterable[str]) -> dict[tuple[str, str], dict[str, Any]]:
        return _pods(self._api, node, namespaces)

    def slices(self, node: str | None) -> tuple[list[dict[str, Any]], str | None]:
        # This node's slices, and those that name no node (perDeviceNodeSelection: each device names its own).
        selectors = [f"spec.nodeName={node}", "spec.nodeName="] if node else [None]
        try:
            kept = [k for selector in selectors for obj in self._api.list_objects(SLICES_PATH, None, selector)
                    if (k := slice_kept(obj)) is not None]
        except ClusterError as exc:
            return [], f"listing ResourceSlices: {exc}; {SLICES_GRANT}"
        return kept, None

    def _claim(self, claim: str) -> Any:
        """The claim object (None: not read), read once per ``verify``."""
        if claim not in self._read:
            try:
                status, body = self._api.send("GET", claim_path(claim), [], None, None)
            except ClusterError:
                status, body = 0, None
            self._read[claim] = body if status == 200 else None
        return self._read[claim]

    def admin_devices(self, claim: str) -> frozenset[tuple[str, str, str]]:
        return admin_devices(self._claim(claim))

    def device_requests(self, claim: str) -> Mapping[tuple[str, str, str], str]:
        return device_requests(self._claim(claim))


def observe(kubelet: Allocations, cluster: ClusterView, sys_root: Path, cgroup_root: Path, node: str | None = None,
            only: list[tuple[str, str]] | None = None, fractional_allowed: Iterable[str] = (),
            dra_attributes: Sequence[str] = DEFAULT_DRIVER_ATTRIBUTES, remote_share: float = REMOTE_SHARE) -> Snapshot:
    """Judge every container of every running Pod of an opted-in namespace on this node (``only``: just these
    namespace/name pairs, read with PodResources ``Get`` where kubelet serves it). ``dra_attributes``: the
    drivers' numaNode attribute names read after ``resource.kubernetes.io/numaNode``; ``remote_share``: the share
    of a pinned container's anonymous memory off its CPUs' NUMA node above which it is a problem."""
    allocatable = kubelet.allocatable()
    allocs: list[PodAllocation]
    if only:
        allocs = []
        listed: list[PodAllocation] | None = None
        for ns, name in only:
            got = kubelet.get(ns, name)
            if got is None:  # Get not served by this kubelet: List once and pick
                listed = listed if listed is not None else kubelet.list()
                got = next((p for p in listed if (p.namespace, p.name) == (ns, name)), None)
            if got is not None:
                allocs.append(got)
    else:
        allocs = kubelet.list()
    layout = read_layout(sys_root)
    cpu_numa = {cpu: n for n, cpus in layout.nodes.items() for cpu in cpus}
    namespaces = cluster.opted_in()
    wanted = [a for a in allocs if a.namespace in namespaces]
    objects = cluster.pods(node, (a.namespace for a in wanted))
    version = cgroup_version(cgroup_root)
    snap = Snapshot(node, allocatable, layout, version)
    allowed = list(fractional_allowed)
    index: SliceIndex | None = None
    locality = SysfsLocality(sys_root)
    for alloc in wanted:
        obj = objects.get((alloc.namespace, alloc.name))
        if obj is None:
            continue  # gone between the two reads, or bound elsewhere under the same name: next cycle
        status = obj.get("status") or {}
        meta = obj.get("metadata") or {}
        if status.get("phase") in ("Succeeded", "Failed", "Pending") or meta.get("deletionTimestamp"):
            continue
        opted = namespaces[alloc.namespace]
        try:
            info = pod_info(obj, opted.mode, opted.since, allowed)
        except ManifestError as exc:
            snap.errors.append(f"{alloc.namespace}/{alloc.name}: its spec cannot be read: {exc.message}")
            continue
        snap.pods[info.uid] = f"{info.namespace}/{info.name}"
        for c in alloc.containers:
            if c.dynamic:
                if index is None:  # read once, and only when a container has DRA devices
                    kept, problem = cluster.slices(node)
                    index = SliceIndex.build(kept, node, problem)
                c = replace(c, dynamic=mark_requests(mark_admin(resolve_all(c.dynamic, index, locality,
                                                                            dra_attributes), cluster.admin_devices),
                                                     cluster.device_requests))
            spec = next((s for s in info.containers if s.name == c.name), None)
            cgroup = None
            pages: NumaPages | None = None
            if spec is not None and spec.container_id and version is not None:
                mems = None
                try:
                    found = container_cpuset(cgroup_root, info.uid, info.qos, spec.container_id)
                    cgroup, mems = (found.cpus, found.mems) if found is not None else (None, None)
                except CgroupError as exc:
                    snap.errors.append(f"{alloc.namespace}/{alloc.name}/{c.name}: {exc}")
                try:
                    read = container_pages(cgroup_root, info.uid, info.qos, spec.container_id, layout)
                    pages = read.with_mems(mems) if read is not None else None
                except CgroupError as exc:
                    snap.errors.append(f"{alloc.namespace}/{alloc.name}/{c.name}: memory: {exc}")
            judged = judge_container(info, c, allocatable, cpu_numa, cgroup)
            snap.verdicts.append(judge_memory(judged, pages, remote_share, bool(allocatable.memory)))
    return snap
