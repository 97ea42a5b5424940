"""What each of the static CPU Manager's policy options does to the answers of ``numa: auto``, the extender and
``qos-guard nodes``, read in kubelet's own code (pkg/kubelet/cm/cpumanager policy_static.go, policy_options.go,
cpu_assignment.go; v1.33.13 to v1.38.0-beta.0), and how an answer says what it does not know. Pure.

The fit judges kubelet's admission: the Topology Manager's merged hint, then the CPU Manager's ``Allocate``.

- ``full-pcpus-only``: ``enforceSMTAlignment`` refuses (SMTAlignmentError) a count not a multiple of the threads
  per core or above the node's free CPUs outside the reserved CPUs' cores (``GetAvailablePhysicalCPUs``, node-wide,
  whatever NUMA node the hint names): modelled for every container kubelet allocates, where the Pod fits one NUMA
  node and where ``restricted`` or ``best-effort`` admits it across NUMA nodes (``numa_across``).
- ``align-by-socket``: ``generateCPUTopologyHints`` marks every hint within the fewest sockets preferred, so
  ``restricted`` admits Pods it would refuse, and ``getAlignedCPUs`` takes CPUs socket-wide; refused with
  ``single-numa-node`` (kubelet does not start). Modelled (``numa_across``) from each NUMA node's socket, the zone's
  ``parent`` in its NodeResourceTopology object; where that is not published, an answer that turns on it is unknown.
- ``distribute-cpus-across-numa``: ``takeByTopologyNUMADistributed`` spreads a container's CPUs evenly over the
  fewest NUMA nodes that hold them (in groups of the threads per core with ``full-pcpus-only``; in 1.38 over at
  least the hint's count), packing only when no split fits: which CPUs, not whether it is admitted (it fails only
  where fewer are free than asked; the topology differential compares it across NUMA nodes too).
- ``distribute-cpus-across-cores``, ``prefer-align-cpus-by-uncorecache``: only the order ``takeByTopologyNUMAPacked``
  takes CPUs in (spread over cores, whole uncore caches first); it fails only when fewer CPUs are free than asked,
  as without them: no answer depends on them.
- ``strict-cpu-reservation``: the reserved CPUs leave the shared pool (``validateState``); exclusive CPUs come from
  the same set as without it (``GetAvailableCPUs`` leaves the reserved CPUs out either way): no answer depends on
  it.
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.core.cpupinner import Pinner
from webhook.core.numatopology import NONE_CPU_POLICY, CPUManager

UNKNOWN = "unknown"
NONE = "none"


def options_text(options: Iterable[tuple[str, str]] | None) -> str:
    """A node's options as kubelet's flag writes them, ``none`` without any, ``unknown`` when not known."""
    if options is None:
        return UNKNOWN
    return ",".join(f"{k}={v}" for k, v in options) or NONE


def spread_caveat(nodes: str, cpu: CPUManager | None) -> str | None:
    """What an answer "admitted across NUMA nodes" on ``nodes`` cannot say of their CPU Manager options: None where
    they are known."""
    if cpu is not None:
        return None
    return (f"cpuManagerPolicyOptions unknown on {nodes} (its NodeResourceTopology does not publish them: "
            "qos-guard agent --publish-topology does): a full-pcpus-only refusal there is not foreseen")


def nodes_note(policy: str, enabled: frozenset[str]) -> str | None:
    """``qos-guard nodes``' note on a static CPU Manager's ``align-by-socket`` (``enabled``: the options set to
    true): the fit reads each NUMA node's socket from the node's NodeResourceTopology object."""
    if policy != "static" or "align-by-socket" not in enabled:
        return None
    return ("cpuManagerPolicyOptions align-by-socket: numa: auto and the extender read each NUMA node's socket from "
            "its NodeResourceTopology zone's parent (qos-guard agent --publish-topology writes it); where it is not "
            "published, an answer that turns on the option is unknown")


def fit_policy_note(configz_policy: str | None, published: Pinner | None, read: bool) -> str | None:
    """``qos-guard nodes``' note where numa: auto and the extender do not judge a node's CPUs under the CPU Manager
    policy its kubelet runs (``configz_policy``, from configz): they read it from the node's NodeResourceTopology
    ``cpuPinner`` (``published``; ``read``: the objects were listed) and, where it is not published, judge as
    ``static`` (``NodeTopology.cpu_hints``). None where they agree, or where either is not known."""
    if configz_policy not in ("static", NONE_CPU_POLICY) or not read:
        return None
    if published is None:
        if configz_policy == "static":
            return None  # judged as static: what it runs
        return ("cpuManagerPolicy none, but its NodeResourceTopology does not publish cpuPinner: numa: auto and "
                "the extender judge it as static and may refuse a Pod for CPUs kubelet never aligns here; "
                "qos-guard agent --publish-topology on this node publishes it")
    if published.cpu_manager_policy == configz_policy:
        return None
    return (f"cpuManagerPolicy {configz_policy}, but its NodeResourceTopology publishes cpuPinner {published.value} "
            f"(CPU Manager {published.cpu_manager_policy}): numa: auto and the extender judge its CPUs as under "
            f"{published.cpu_manager_policy} until the agent (qos-guard agent --publish-topology) publishes it "
            "again from its kubelet's configz")
