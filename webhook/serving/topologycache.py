"""``policy.numa: auto`` in a worker: the topology cache started, its state said in the log once per change
and in the metrics, and the snapshot each request judges against."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from webhook.cluster.client import ClusterError
from webhook.cluster.nrt import TopologyCache
from webhook.cluster.watch import ApiTransport
from webhook.core.numatopology import Topology
from webhook.serving.metrics import TopologyMetrics

LOG = logging.getLogger("qos_guard.topology")


class TopologyReport:
    """Each published snapshot into the metrics; a log line only when the problem (or its absence) changes."""

    def __init__(self, metrics: TopologyMetrics | None) -> None:
        self.metrics = metrics
        self.said: str | None = "not read yet"

    def __call__(self, topology: Topology) -> None:
        usable = topology.nodes is not None and bool(topology.topologies)
        if self.metrics is not None:
            self.metrics.available.set(1 if usable and topology.problem is None else 0)
            self.metrics.nodes.set(len(topology.nodes or {}))
            self.metrics.topologies.set(len(topology.topologies))
        if topology.problem != self.said:
            self.said = topology.problem
            if topology.problem is None:
                LOG.warning(json.dumps({"topology": "current", "nodes": len(topology.nodes or {}),
                                        "noderesourcetopologies": len(topology.topologies)}))
            else:
                LOG.warning(json.dumps({"topology": "incomplete: numa-unfit judges no node it cannot see, and "
                                                    "never refuses a Pod for this", "problem": topology.problem}))


def start_topology_cache(kubeconfig: str | None, metrics: TopologyMetrics | None) -> Callable[[], Topology]:
    """The worker's cache, started; what to call for the current snapshot. A kubeconfig that cannot be used
    is said once and leaves every node unknown: admission goes on."""
    report = TopologyReport(metrics)
    try:
        cache = TopologyCache(ApiTransport(kubeconfig), on_publish=report)
    except ClusterError as exc:
        broken = Topology(problem=f"policy.numa: auto cannot reach the API server: {exc}")
        report(broken)
        return lambda: broken
    cache.start()
    return cache.snapshot
