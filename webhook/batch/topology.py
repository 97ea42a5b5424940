"""``policy.numa: auto`` for ``check`` and ``audit``: the cluster's NodeResourceTopology objects and node labels,
read once into the run's ``Facts`` (with a memo for the run), handed to the engine beside the configuration.
Without a cluster to read (``check`` with no ``--kubeconfig``), or when the CRD or the objects are missing,
numa-unfit judges no node, and the command says so once on stderr: it is never a reason to fail."""

from __future__ import annotations

from collections.abc import Callable

from webhook.cluster.client import ClusterError
from webhook.cluster.nrt import read_topology
from webhook.cluster.watch import ApiTransport
from webhook.core.config import Config
from webhook.core.facts import NO_FACTS, Facts, Memo
from webhook.core.topology import Topology


def cluster_facts(config: Config, kubeconfig: str | None, say: Callable[[str], None], required: bool) -> Facts:
    """What the cluster says, for a run of ``config``: its topology when the configuration asks for
    ``numa: auto`` (else ``NO_FACTS``: nothing is read). ``required``: read it even without ``kubeconfig``
    (``audit`` always talks to a cluster; ``check`` only when given one)."""
    if not config.numa_auto:
        return NO_FACTS
    if kubeconfig is None and not required:
        say("policy.numa: auto: numa-unfit is not judged; pass --kubeconfig to read the cluster's "
            "NodeResourceTopology objects and node labels")
        return NO_FACTS
    try:
        topology = read_topology(ApiTransport(kubeconfig))
    except ClusterError as exc:
        say(f"policy.numa: auto: numa-unfit is not judged: {exc}")
        return Facts(topology=Topology(problem=str(exc)))
    if topology.problem:
        say(f"policy.numa: auto: {topology.problem}; numa-unfit judges only the nodes it can see")
    return Facts(topology=topology, memo=Memo())
