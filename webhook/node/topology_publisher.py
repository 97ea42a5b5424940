"""``qos-guard agent --publish-topology``: the agent keeps its node's NodeResourceTopology object current, where
NFD's topology-updater does not run (run one or the other on a node, never both: each applies the object with
``force`` as its own field manager, so they would overwrite each other's numbers on every change).

A thread of the agent polls kubelet's PodResources API (``GetAllocatableResources`` and ``List``, a local unix
socket) every ``poll`` seconds, builds the object (``topology_report.build_topology``) and applies it
(server-side apply, field manager ``qos-guard-agent``) only when its content changed, so an allocation shows in
the API within ``poll`` plus one request; an unchanged object is applied again every ``RESYNC`` seconds (a no-op
for the API server) in case someone deleted it. The object is owned by the Node (``ownerReferences``): the
garbage collector deletes it with the Node. Nothing is published until the Node's uid is known.

The Topology Manager's policy and scope come from ``--topology-manager-policy/--topology-manager-scope``, else
from the kubelet's configuration through the API server (``/api/v1/nodes/NAME/proxy/configz``; ``get`` on
``nodes/proxy``), asked again every ``RESYNC`` seconds while it cannot be read; until then they are left out of
the object (its node is unknown to ``numa: auto`` and the extender, never guessed)."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from webhook.cluster.client import ClusterError, Lister
from webhook.cluster.configz import NodeInfo, NodeReader
from webhook.core.numatopology import NRT_GROUP_VERSION, NRT_PATH
from webhook.node.kubelet import PodResourcesClient, PodResourcesError
from webhook.node.sysfs import SysfsError, read_layout, read_text
from webhook.node.topology_report import NodeFacts, Owner, build_topology

FIELD_MANAGER = "qos-guard-agent"
POLL = 0.25  # seconds between looks at kubelet's PodResources (two local gRPC calls each)
RESYNC = 60.0  # seconds: an unchanged object applied again; configz and the Node's uid asked again when unknown
_MEMTOTAL = re.compile(r"^Node \d+ MemTotal:\s+(\d+) kB$", re.MULTILINE)
_HUGEPAGES_DIR = re.compile(r"hugepages-(\d+)kB")


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
    return NodeFacts(layout.nodes, memory, distances)


class TopologyPublisher:
    """The thread that keeps ``node``'s NodeResourceTopology object current (see the module docstring)."""

    def __init__(self, api: Lister, node: str, socket: Path, sys_root: Path, log: Callable[[str], None],
                 poll: float = POLL, policy: str | None = None, scope: str | None = None,
                 configz: Callable[[], tuple[str, str] | str] | None = None) -> None:
        self._api, self._node, self._socket, self._sys_root, self._log = api, node, socket, sys_root, log
        self.poll = poll
        self._policy, self._scope = policy, scope
        self._configz = configz
        self._owner: Owner | None = None
        self._facts: NodeFacts | None = None
        self._written = ""  # digest of the last object applied
        self._written_at = 0.0
        self._asked_at = -RESYNC  # when configz and the Node were last asked
        self._last_error = ""
        self.applied = 0  # objects applied (tests, logs)
        self._thread: threading.Thread | None = None

    def start(self, stop: threading.Event) -> None:
        self._thread = threading.Thread(target=self.run, args=(stop,), name="qos-guard-topology", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self, stop: threading.Event) -> None:
        """Look every ``poll`` seconds until ``stop``; one connection to kubelet kept while it answers."""
        kubelet: PodResourcesClient | None = None
        while not stop.is_set():
            started = time.monotonic()
            try:
                if kubelet is None:
                    kubelet = PodResourcesClient(self._socket)
                self.step(kubelet, started)
                if self._last_error:
                    self._log(f"NodeResourceTopology {self._node}: published again")
                self._last_error = ""
            except (PodResourcesError, SysfsError, ClusterError) as exc:
                if isinstance(exc, PodResourcesError) and kubelet is not None:
                    kubelet.__exit__()
                    kubelet = None  # kubelet restarted: its socket is a new one
                if str(exc) != self._last_error:  # a lasting outage is logged once
                    self._log(f"NodeResourceTopology {self._node}: {exc}")
                self._last_error = str(exc)
            stop.wait(max(0.0, self.poll - (time.monotonic() - started)))
        if kubelet is not None:
            kubelet.__exit__()

    def _ask(self, now: float) -> None:
        """The Node's uid and the Topology Manager settings, while unknown, every ``RESYNC`` seconds."""
        if now - self._asked_at < RESYNC:
            return
        self._asked_at = now
        if self._owner is None:
            status, body = self._api.send("GET", f"/api/v1/nodes/{quote(self._node, safe='')}", [], None, None)
            uid = (body.get("metadata") or {}).get("uid") if status == 200 else None
            if not isinstance(uid, str) or not uid:
                raise ClusterError(f"cannot read the Node (HTTP {status} {str(body.get('message', ''))[:200]}); "
                                   "the object is owned by it and needs its uid: grant get on nodes (the chart "
                                   "does with agent.publishTopology)")
            self._owner = Owner(self._node, uid)
        if (self._policy is None or self._scope is None) and self._configz is not None:
            answer = self._configz()
            if isinstance(answer, str):
                self._log(f"NodeResourceTopology {self._node}: Topology Manager policy and scope unknown, left out "
                          f"(the node is unknown to numa: auto and the extender): {answer}; pass "
                          "--topology-manager-policy and --topology-manager-scope (asked again in "
                          f"{RESYNC:g} s)")
            else:
                self._policy, self._scope = answer
                self._log(f"NodeResourceTopology {self._node}: topologyManagerPolicy {self._policy}, "
                          f"topologyManagerScope {self._scope} (kubelet's configz)")

    def step(self, kubelet: PodResourcesClient, now: float) -> bool:
        """One look: apply the object if it changed (or ``RESYNC`` passed); whether it was applied."""
        self._ask(now)
        if self._facts is None:
            self._facts = read_node_facts(self._sys_root)
        allocatable = kubelet.allocatable()
        pods = kubelet.list()
        obj = build_topology(self._node, self._facts, allocatable, pods, self._policy, self._scope, self._owner)
        digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()
        if digest == self._written and now - self._written_at < RESYNC:
            return False
        path = f"{NRT_PATH}/{quote(self._node, safe='')}"
        status, reply = self._api.send("PATCH", path, [("fieldManager", FIELD_MANAGER), ("force", "true")],
                                       json.dumps(obj), "application/apply-patch+yaml")
        if status not in (200, 201):
            message = str(reply.get("message", ""))[:200]
            if status == 404:
                raise ClusterError(f"the NodeResourceTopology CRD ({NRT_GROUP_VERSION}) is not installed (HTTP 404 "
                                   f"{message}): install it (the chart's files/ has it) or run without "
                                   "--publish-topology")
            if status == 403:
                raise ClusterError(f"applying it was refused (HTTP 403 {message}): grant create, get, update, "
                                   "patch and delete on noderesourcetopologies.topology.node.k8s.io (the chart "
                                   "does with agent.publishTopology)")
            raise ClusterError(f"applying it failed: HTTP {status} {message}".rstrip())
        self._written, self._written_at = digest, now
        self.applied += 1
        return True


def configz_reader(kubeconfig: str | None, node: str) -> Callable[[], tuple[str, str] | str]:
    """The Topology Manager policy and scope from kubelet's configz through the API server, or why not."""
    def read() -> tuple[str, str] | str:
        try:
            got = NodeReader(kubeconfig).configz(NodeInfo(node))
        except ClusterError as exc:
            return str(exc)
        if got.pinning is None:
            return got.error or "no configuration"
        return got.pinning.topology_manager_policy, got.pinning.topology_manager_scope
    return read
