"""The cluster's NUMA topology for ``policy.numa: auto``: node labels and taints, and NodeResourceTopology objects
(``topology.node.k8s.io/v1alpha2``), read once (``read_topology``, for ``check`` and ``audit``) or kept current
by watches (``TopologyCache``, for the webhook).

``TopologyCache`` is an informer in client-go's sense, reduced to what the rule needs. Per resource (nodes;
noderesourcetopologies) a ``Reflector`` lists page by page, then watches from the list's resourceVersion with
bookmarks: an ended watch resumes from the last resourceVersion seen, an expired one (410 Gone) lists again, a
failed connection retries with backoff (0.5 s doubling to 30 s). Only what is judged is kept (labels and lasting
taints; parsed zones), the number of objects and the size of one event are bounded, and a change is published as
a new immutable ``Topology`` at most every ``PUBLISH_EVERY`` seconds, so a request judges against one snapshot
from start to end and never waits for the API server.

A missing CRD (404), a refused list (403) or no objects at all leave the nodes unknown: ``numa-unfit`` then
says nothing about them, and the admission goes on. The cache reports such a state once per change
(``on_change``), for the log line and the metric.

Of a node's taints only those that say what it is for are kept (a GPU pool's ``nvidia.com/gpu:NoSchedule``, a
control plane's): those under ``node.kubernetes.io/`` and ``node.cloudprovider.kubernetes.io/`` say how it is now
(not ready, unreachable, under pressure, cordoned, not yet initialised) and come and go, and a verdict on a
workload must not change while a node is briefly NotReady.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import urllib3

from webhook.cluster.client import ClusterError, _api_client
from webhook.core.scheduling import Taint, taints
from webhook.core.topology import NodeTopology, Topology, TopologyError, parse_nrt

NRT_GROUP_VERSION = "topology.node.k8s.io/v1alpha2"
NRT_PATH = f"/apis/{NRT_GROUP_VERSION}/noderesourcetopologies"
NODES_PATH = "/api/v1/nodes"
# Taint keys that describe a node's present state, set by the node lifecycle controller, a cordon or the cloud
# provider; left out (see the module docstring).
TRANSIENT_TAINTS = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")
PAGE = 250
WATCH_SECONDS = 240  # the API server ends a watch after this; it is resumed from the last resourceVersion
MAX_EVENT = 4 << 20  # bytes in one watch event or list page line; a NodeResourceTopology object is kilobytes
MAX_OBJECTS = 100_000  # per resource; beyond it the topology is reported incomplete
PUBLISH_EVERY = 0.2
BACKOFF_FIRST, BACKOFF_MAX = 0.5, 30.0
RETRY_MISSING = 10.0  # seconds between lists while the CRD is missing or the list is refused

LOG = logging.getLogger("qos_guard.topology")


class Gone(Exception):
    """The watch's resourceVersion expired (410): list again."""


class Transport(Protocol):
    """What a reflector needs from the API server: one GET, and a streamed GET (a watch)."""

    def get(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Any]: ...

    def stream(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Iterator[bytes], Any]: ...


class ApiTransport:
    """The API server through the ``kubernetes`` client's connection (kubeconfig or in-cluster)."""

    def __init__(self, kubeconfig: str | None = None) -> None:
        self._api = _api_client(kubeconfig)

    def _call(self, path: str, query: list[tuple[str, str]], accept: str, timeout: tuple[float, float]) -> Any:
        request = self._api.param_serialize("GET", path, query_params=query, header_params={"Accept": accept},
                                            auth_settings=["BearerToken"])
        try:
            return self._api.call_api(*request, _request_timeout=timeout)
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            raise ClusterError(f"cannot reach the API server: {exc}") from None

    def get(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Any]:
        response = self._call(path, query, accept, (10, 60))
        try:
            data = response.response.read(MAX_EVENT * 8 + 1)
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            raise ClusterError(f"reading GET {path}: {exc}") from None
        finally:
            response.response.release_conn()
        if len(data) > MAX_EVENT * 8:
            raise ClusterError(f"GET {path}: the answer is over {MAX_EVENT * 8} bytes")
        try:
            return response.status, json.loads(data)
        except ValueError:
            return response.status, {}

    def stream(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Iterator[bytes], Any]:
        response = self._call(path, query, accept, (10, WATCH_SECONDS + 60))
        return response.status, lines(response.response.stream(64 * 1024)), response.response


def lines(chunks: Iterator[bytes], limit: int = MAX_EVENT) -> Iterator[bytes]:
    """The newline-separated lines of a stream, each at most ``limit`` bytes (a longer one: ``ClusterError``)."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        while True:
            end = pending.find(b"\n")
            if end < 0:
                break
            line, pending = pending[:end], pending[end + 1:]
            if line.strip():
                yield line
        if len(pending) > limit:
            raise ClusterError(f"a watch event over {limit} bytes")
    if pending.strip():
        yield pending


def _status_reason(status: int, body: Any) -> str:
    message = body.get("message", "") if isinstance(body, Mapping) else ""
    return f"HTTP {status}" + (f" {message}" if message else "")


@dataclass
class Store:
    """One resource's objects, by name, as the projection ``keep`` makes of them (``None``: not kept)."""

    keep: Callable[[Mapping[str, Any]], Any]
    items: dict[str, Any] = field(default_factory=dict)
    listed: bool = False  # a list has succeeded at least once
    truncated: bool = False

    def replace(self, objects: list[Mapping[str, Any]]) -> None:
        fresh: dict[str, Any] = {}
        self.truncated = False
        for obj in objects:
            self._put(fresh, obj)
        self.items, self.listed = fresh, True

    def apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        if kind == "DELETED":
            self.items.pop(_name(obj), None)
        elif kind in ("ADDED", "MODIFIED"):
            self._put(self.items, obj)

    def _put(self, into: dict[str, Any], obj: Mapping[str, Any]) -> None:
        name = _name(obj)
        if not name:
            return
        if name not in into and len(into) >= MAX_OBJECTS:
            self.truncated = True
            return
        value = self.keep(obj)
        if value is None:
            into.pop(name, None)
        else:
            into[name] = value


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def _rv(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return rv if isinstance(rv, str) else ""


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the rule reads of a Node: its labels and its lasting taints."""

    labels: Mapping[str, str]
    taints: tuple[Taint, ...]


def node_view(obj: Mapping[str, Any]) -> NodeView:
    spec = obj.get("spec")
    raw = taints(spec.get("taints") if isinstance(spec, Mapping) else None)
    return NodeView(node_labels(obj), tuple(t for t in raw if not t.key.startswith(TRANSIENT_TAINTS)))


def snapshot_nodes(views: Mapping[str, NodeView]) -> tuple[dict[str, Mapping[str, str]],
                                                           dict[str, tuple[Taint, ...]]]:
    """The node part of a ``Topology``: labels by name, and the taints of the tainted nodes."""
    return ({name: v.labels for name, v in views.items()},
            {name: v.taints for name, v in views.items() if v.taints})


def node_labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(labels, Mapping) else {}


def nrt_topology(obj: Mapping[str, Any]) -> NodeTopology | None:
    """The parsed object; one this model cannot read is logged and left out (its node is then unknown)."""
    try:
        return parse_nrt(obj)
    except TopologyError as exc:
        LOG.warning(json.dumps({"topology": "unreadable NodeResourceTopology", "name": _name(obj),
                                "reason": str(exc)}))
        return None


def list_all(transport: Transport, path: str, accept: str) -> tuple[list[Mapping[str, Any]], str]:
    """Every object (page by page, following ``continue``) and the list's resourceVersion."""
    objects: list[Mapping[str, Any]] = []
    token, rv = "", ""
    while True:
        query = [("limit", str(PAGE))] + ([("continue", token)] if token else [])
        status, body = transport.get(path, query, accept)
        if status != 200:
            raise ListRefused(status, _status_reason(status, body))
        if not isinstance(body, Mapping):
            raise ClusterError(f"GET {path}: the answer is not a list object")
        items = body.get("items")
        if isinstance(items, list):
            objects.extend(o for o in items if isinstance(o, Mapping))
        meta = body.get("metadata")
        version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
        following = meta.get("continue") if isinstance(meta, Mapping) else None
        rv = version if isinstance(version, str) and version else rv
        token = following if isinstance(following, str) else ""
        if len(objects) > MAX_OBJECTS:
            return objects[:MAX_OBJECTS], rv
        if not token:
            return objects, rv


class ListRefused(ClusterError):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def refusal(resource: str, path: str, exc: ListRefused) -> str:
    """Why a list was refused, with the way out."""
    if exc.status == 404 and path == NRT_PATH:
        return (f"the NodeResourceTopology CRD ({NRT_GROUP_VERSION}) is not installed: install NFD's "
                "topology-updater or resource-topology-exporter (checked again every 10 s)")
    if exc.status in (401, 403):
        return (f"listing {resource} is not allowed ({exc}): grant list and watch on {resource} "
                "(the chart does with config.policy.numa: auto)")
    return f"listing {resource}: {exc}"


class Reflector:
    """List, then watch, one resource into a ``Store``; see the module docstring."""

    def __init__(self, name: str, transport: Transport, path: str, accept: tuple[str, str], store: Store,
                 changed: Callable[[str, str | None], None], stop: threading.Event) -> None:
        self.name, self.transport, self.path, self.accept, self.store = name, transport, path, accept, store
        self.changed, self.stop = changed, stop
        self.relists = 0

    def run(self) -> None:
        backoff = BACKOFF_FIRST
        rv = ""
        while not self.stop.is_set():
            try:
                if not rv:
                    objects, rv = list_all(self.transport, self.path, self.accept[0])
                    self.store.replace(objects)
                    self.relists += 1
                    self.changed(self.name, None)
                rv = self.watch(rv)
                backoff = BACKOFF_FIRST
            except Gone:
                rv = ""  # expired: list again at once
            except ListRefused as exc:
                rv = ""
                self.changed(self.name, self._refused(exc))
                self.stop.wait(RETRY_MISSING)
            except (ClusterError, OSError, urllib3.exceptions.HTTPError, ValueError) as exc:
                self.changed(self.name, f"{self.name}: {exc}; retrying")
                self.stop.wait(backoff * random.uniform(0.8, 1.2))
                backoff = min(backoff * 2, BACKOFF_MAX)

    def _refused(self, exc: ListRefused) -> str:
        return refusal(self.name, self.path, exc)

    def watch(self, rv: str) -> str:
        """Stream events from ``rv`` until the API server ends the watch; the last resourceVersion seen."""
        query = [("watch", "1"), ("resourceVersion", rv), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", str(WATCH_SECONDS))]
        status, stream, response = self.transport.stream(self.path, query, self.accept[1])
        try:
            if status == 410:
                raise Gone()
            if status != 200:
                raise ClusterError(f"watch {self.name}: HTTP {status}")
            for line in stream:
                if self.stop.is_set():
                    break
                event = json.loads(line)
                if not isinstance(event, Mapping):
                    raise ClusterError(f"watch {self.name}: an event that is not an object")
                kind, obj = event.get("type"), event.get("object")
                if kind == "ERROR":
                    code = obj.get("code") if isinstance(obj, Mapping) else None
                    if code == 410:
                        raise Gone()
                    raise ClusterError(f"watch {self.name}: {_status_reason(code or 0, obj)}")
                if not isinstance(obj, Mapping):
                    continue
                rv = _rv(obj) or rv
                if kind != "BOOKMARK":
                    self.store.apply(str(kind), obj)
                    self.changed(self.name, None)
        finally:
            close = getattr(response, "release_conn", None)
            if close is not None:
                close()
        return rv


class TopologyCache:
    """Node labels and NodeResourceTopology objects, current within ``PUBLISH_EVERY`` of the API server.

    ``on_publish(topology)`` is called (from the cache's publisher thread) with each new snapshot.
    """

    def __init__(self, transport: Transport, on_publish: Callable[[Topology], None] | None = None) -> None:
        self.transport = transport
        self.on_publish = on_publish
        self.nodes = Store(node_view)
        self.nrts = Store(nrt_topology)
        self.problems: dict[str, str] = {}
        self._stop = threading.Event()
        self._dirty = threading.Event()
        self._snapshot = Topology(problem="not read yet")
        self.reflectors = (
            Reflector("nodes", transport, NODES_PATH, ("application/json", "application/json"), self.nodes,
                      self._changed, self._stop),
            Reflector("noderesourcetopologies", transport, NRT_PATH, ("application/json", "application/json"),
                      self.nrts, self._changed, self._stop),
        )
        self._threads: list[threading.Thread] = []

    def snapshot(self) -> Topology:
        return self._snapshot

    def start(self) -> None:
        """One thread per reflector and one publisher (greenlets, in a gevent worker)."""
        for target, name in ((self.reflectors[0].run, "nodes"), (self.reflectors[1].run, "topologies"),
                             (self._publisher, "publisher")):
            thread = threading.Thread(target=target, name=f"qos-guard-topology-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        self._dirty.set()

    def _changed(self, resource: str, problem: str | None) -> None:
        if problem is None:
            self.problems.pop(resource, None)
        else:
            self.problems[resource] = problem
        self._dirty.set()

    def _publisher(self) -> None:
        while not self._stop.is_set():
            self._dirty.wait()
            if self._stop.is_set():
                return
            self._dirty.clear()
            self.publish()
            self._stop.wait(PUBLISH_EVERY)

    def publish(self) -> Topology:
        """Build the snapshot requests judge against from the stores (a copy: the stores go on changing)."""
        problems = list(self.problems.values())
        if self.nrts.listed and not self.nrts.items and "noderesourcetopologies" not in self.problems:
            problems.append("no NodeResourceTopology objects: no node publishes its NUMA zones")
        for store, what in ((self.nodes, "nodes"), (self.nrts, "NodeResourceTopology objects")):
            if store.truncated:
                problems.append(f"over {MAX_OBJECTS} {what}: the rest are unknown")
        nodes, tainted = snapshot_nodes(self.nodes.items) if self.nodes.listed else (None, {})
        snapshot = Topology(nodes=nodes, topologies=dict(self.nrts.items), problem="; ".join(problems) or None,
                            taints=tainted)
        self._snapshot = snapshot
        if self.on_publish is not None:
            self.on_publish(snapshot)
        return snapshot

    def wait_synced(self, timeout: float) -> bool:
        """Whether both resources were listed within ``timeout`` seconds (tests, and start-up logging)."""
        deadline = threading.Event()
        waited = 0.0
        while waited < timeout:
            if self.nodes.listed and self.nrts.listed and self._snapshot.nodes is not None:
                return True
            deadline.wait(0.05)
            waited += 0.05
        return False


def read_topology(transport: Transport) -> Topology:
    """One read of both resources (``check --kubeconfig``, ``audit``): what the cluster publishes now."""
    problems = []
    nodes: dict[str, Any] | None = None
    tainted: dict[str, tuple[Taint, ...]] = {}
    topologies: dict[str, NodeTopology] = {}
    try:
        objects, _ = list_all(transport, NODES_PATH, "application/json")
        nodes, tainted = snapshot_nodes({_name(o): node_view(o) for o in objects if _name(o)})
    except ListRefused as exc:
        problems.append(refusal("nodes", NODES_PATH, exc))
    try:
        objects, _ = list_all(transport, NRT_PATH, "application/json")
        for obj in objects:
            topo = nrt_topology(obj)
            if topo is not None:
                topologies[topo.name] = topo
        if not objects:
            problems.append("no NodeResourceTopology objects: no node publishes its NUMA zones")
    except ListRefused as exc:
        problems.append(refusal("noderesourcetopologies", NRT_PATH, exc))
    return Topology(nodes=nodes, topologies=topologies, problem="; ".join(problems) or None, taints=tainted)
