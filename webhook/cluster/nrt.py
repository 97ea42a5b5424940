"""The cluster's NUMA topology for ``policy.numa: auto``: node labels and taints, and NodeResourceTopology objects
(``topology.node.k8s.io/v1alpha2``), read once (``read_topology``, for ``check`` and ``audit``) or kept current
by watches (``TopologyCache``, a ``PublishingCache`` of ``webhook/cluster/cache.py``, for the webhook).

``TopologyCache`` is an informer in client-go's sense, reduced to what the rule needs. Per resource (nodes;
noderesourcetopologies) a ``Reflector`` of ``webhook/cluster/watch.py`` lists, then watches (bookmarks, resume,
relist on 410 Gone, backoff). Only what is judged is kept (labels and lasting taints; parsed zones), the number
of objects and the size of one event are bounded, and a change is published as a new immutable
``Topology`` at most every ``PUBLISH_EVERY`` seconds, so a request judges against one snapshot from start to
end and never waits for the API server.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.cluster import watch
from webhook.cluster.cache import PublishingCache
from webhook.cluster.watch import Listing, ListRefused, Reflector, Store, Transport, name_of, refusal, wait_until
from webhook.core.numatopology import NRT_GROUP_VERSION, NRT_PATH, NodeTopology, Topology, TopologyError, parse_nrt
from webhook.core.scheduling import Taint, taints

NODES_PATH = "/api/v1/nodes"
JSON = ("application/json", "application/json")
# Taint keys that describe a node's present state, set by the node lifecycle controller, a cordon or the cloud
# provider; left out (see the module docstring).
TRANSIENT_TAINTS = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")

LOG = logging.getLogger("qos_guard.topology")


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
        LOG.warning(json.dumps({"topology": "unreadable NodeResourceTopology", "name": name_of(obj),
                                "reason": str(exc)}))
        return None


def topology_refusal(resource: str, path: str, exc: ListRefused) -> str:
    """Why a list was refused, with the way out: a missing CRD is said as such."""
    if exc.status == 404 and path == NRT_PATH:
        return (f"the NodeResourceTopology CRD ({NRT_GROUP_VERSION}) is not installed: install NFD's "
                "topology-updater or resource-topology-exporter (checked again every 10 s)")
    return refusal(resource, exc, "the chart does with config.policy.numa: auto")


class TopologyReflector(Reflector):
    """A reflector of the topology cache: its refusals name the CRD and the chart's setting."""

    def _refused(self, exc: ListRefused) -> str:
        return topology_refusal(self.name, self.path, exc)


class TopologyCache(PublishingCache):
    """Node labels and NodeResourceTopology objects, current within ``PUBLISH_EVERY`` of the API server.

    ``on_publish(topology)`` is called (from the cache's publisher thread) with each new snapshot.
    """

    def __init__(self, transport: Transport, on_publish: Callable[[Topology], None] | None = None) -> None:
        super().__init__("qos-guard-topology")
        self.transport = transport
        self.on_publish = on_publish
        self.nodes = Store(node_view)
        self.nrts = Store(nrt_topology)
        self.problems: dict[str, str] = {}
        self._snapshot = Topology(problem="not read yet")
        self.reflectors = (
            TopologyReflector("nodes", transport, NODES_PATH, JSON, self.nodes, self.changed, self._stop),
            TopologyReflector("noderesourcetopologies", transport, NRT_PATH, JSON, self.nrts, self.changed,
                              self._stop),
        )

    def snapshot(self) -> Topology:
        return self._snapshot

    def note(self, resource: str, problem: str | None) -> None:
        if problem is None:
            self.problems.pop(resource, None)
        else:
            self.problems[resource] = problem

    def publish(self) -> Topology:
        """Build the snapshot requests judge against from the stores (a copy: the stores go on changing)."""
        problems = list(self.problems.values())
        if self.nrts.listed and not self.nrts.items and "noderesourcetopologies" not in self.problems:
            problems.append("no NodeResourceTopology objects: no node publishes its NUMA zones")
        for store, what in ((self.nodes, "nodes"), (self.nrts, "NodeResourceTopology objects")):
            if store.truncated:
                problems.append(f"over {watch.MAX_OBJECTS} {what}: the rest are unknown")
        nodes, tainted = snapshot_nodes(self.nodes.snapshot()) if self.nodes.listed else (None, {})
        snapshot = Topology(nodes=nodes, topologies=self.nrts.snapshot(), problem="; ".join(problems) or None,
                            taints=tainted)
        self._snapshot = snapshot
        if self.on_publish is not None:
            self.on_publish(snapshot)
        return snapshot

    def wait_synced(self, timeout: float) -> bool:
        """Whether both resources were listed, and published, within ``timeout`` seconds (tests, start-up log)."""
        return wait_until(lambda: self.nodes.listed and self.nrts.listed and self._snapshot.nodes is not None,
                          timeout, self._stop)


def read_topology(transport: Transport) -> Topology:
    """One read of both resources (``check --kubeconfig``, ``audit``): what the cluster publishes now."""
    problems = []
    nodes: dict[str, Any] | None = None
    tainted: dict[str, tuple[Taint, ...]] = {}
    topologies: dict[str, NodeTopology] = {}
    try:
        node_store = Store(node_view)
        node_store.rebuild(Listing(transport, NODES_PATH, "application/json"))
        nodes, tainted = snapshot_nodes(node_store.items)
    except ListRefused as exc:
        problems.append(topology_refusal("nodes", NODES_PATH, exc))
    try:
        listing = Listing(transport, NRT_PATH, "application/json")
        nrt_store = Store(nrt_topology)
        nrt_store.rebuild(listing)
        topologies = {topo.name: topo for topo in nrt_store.items.values()}
        if not listing.count:
            problems.append("no NodeResourceTopology objects: no node publishes its NUMA zones")
    except ListRefused as exc:
        problems.append(topology_refusal("noderesourcetopologies", NRT_PATH, exc))
    return Topology(nodes=nodes, topologies=topologies, problem="; ".join(problems) or None, taints=tainted)
