"""``policy.numa: auto`` for ``check`` and ``audit``: the cluster's NodeResourceTopology objects and node labels,
read once, handed to the engine with the configuration. Without a cluster to read (``check`` with no
``--kubeconfig``), or when the CRD or the objects are missing, numa-unfit judges no node, and the command says
so once on stderr: it is never a reason to fail."""

from __future__ import annotations

from collections.abc import Callable

from webhook.cluster.client import ClusterError
from webhook.cluster.kubeconfig import explain, preflight
from webhook.cluster.nrt import read_topology
from webhook.cluster.watch import ApiTransport
from webhook.core.config import Config
from webhook.core.topology import Topology


def with_cluster_topology(config: Config, kubeconfig: str | None, say: Callable[[str], None],
                          required: bool) -> Config:
    """``config`` judging against the cluster's topology when it asks for ``numa: auto``. ``required``: read it
    even without ``kubeconfig`` (``audit`` always talks to a cluster; ``check`` only when given one)."""
    if not config.numa_auto:
        return config
    if kubeconfig is None and not required:
        say("policy.numa: auto: numa-unfit is not judged; pass --kubeconfig to read the cluster's "
            "NodeResourceTopology objects and node labels")
        return config
    try:
        preflight(kubeconfig)
        topology = read_topology(ApiTransport(kubeconfig))
    except ClusterError as exc:
        say(f"policy.numa: auto: numa-unfit is not judged: {explain(exc, kubeconfig)}")
        return config.with_topology(Topology(problem=str(exc)))
    if topology.problem:
        say(f"policy.numa: auto: {topology.problem}; numa-unfit judges only the nodes it can see")
    return config.with_topology(topology)
