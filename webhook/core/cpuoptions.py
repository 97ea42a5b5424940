"""What each of the static CPU Manager's policy options does to the answers of ``numa: auto``, the extender and
``qos-guard nodes``, read in kubelet's own code (pkg/kubelet/cm/cpumanager policy_static.go, policy_options.go,
cpu_assignment.go; v1.36.3 and v1.38.0-beta.0), and how an answer says it when the fit does not model one. Pure.

The fit judges kubelet's admission: the Topology Manager's merged hint, then the CPU Manager's ``Allocate``.

- ``full-pcpus-only``: ``enforceSMTAlignment`` refuses (SMTAlignmentError) a count not a multiple of the threads
  per core or above the node's free CPUs outside the reserved CPUs' cores (``GetAvailablePhysicalCPUs``, node-wide,
  whatever NUMA node the hint names): modelled for every container kubelet allocates, where the Pod fits one NUMA
  node and where ``restricted`` or ``best-effort`` admits it across NUMA nodes (``numafit._smt_across``).
- ``align-by-socket``: ``generateCPUTopologyHints`` marks every hint within one socket preferred, so ``restricted``
  admits Pods it would refuse, and ``getAlignedCPUs`` takes CPUs socket-wide; refused with ``single-numa-node``
  (kubelet does not start): not modelled where a Pod spans NUMA nodes.
- ``distribute-cpus-across-numa``: ``takeByTopologyNUMADistributed`` spreads a container's CPUs evenly over the
  fewest NUMA nodes that hold them (in groups of the threads per core with ``full-pcpus-only``; in 1.38 over at
  least the hint's count), packing only when no split fits; its remainder is taken a group at a time from NUMA
  nodes with a group left, and an allocation that does not add up is an error ("accounting error"): not modelled
  where a Pod spans NUMA nodes; within the one NUMA node of a single-numa-node hint it takes what the packed
  allocator takes (the topology differential: 0 disagreements).
- ``distribute-cpus-across-cores``, ``prefer-align-cpus-by-uncorecache``: only the order ``takeByTopologyNUMAPacked``
  takes CPUs in (spread over cores, whole uncore caches first); it fails only when fewer CPUs are free than asked,
  as without them: no answer depends on them.
- ``strict-cpu-reservation``: the reserved CPUs leave the shared pool (``validateState``); exclusive CPUs come from
  the same set as without it (``GetAvailableCPUs`` leaves the reserved CPUs out either way): no answer depends on
  it.
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.core.numatopology import CPUManager

# The options whose effect the fit leaves out where a Pod is admitted across NUMA nodes (see the docstring).
NOT_MODELLED_ACROSS_NUMA = ("align-by-socket", "distribute-cpus-across-numa")
UNKNOWN = "unknown"
NONE = "none"


def options_text(options: Iterable[tuple[str, str]] | None) -> str:
    """A node's options as kubelet's flag writes them, ``none`` without any, ``unknown`` when not known."""
    if options is None:
        return UNKNOWN
    return ",".join(f"{k}={v}" for k, v in options) or NONE


def not_modelled_across_numa(cpu: CPUManager | None) -> tuple[str, ...] | None:
    """The node's options the fit does not apply where it admits a Pod across NUMA nodes; None: not known."""
    if cpu is None:
        return None
    return tuple(o for o in NOT_MODELLED_ACROSS_NUMA if o in cpu.options)


def spread_caveat(nodes: str, cpu: CPUManager | None) -> str | None:
    """What an answer "admitted across NUMA nodes" on ``nodes`` cannot say of their CPU Manager options, or None
    when nothing: the options not known (not published), or some the fit does not model there."""
    left = not_modelled_across_numa(cpu)
    if left is None:
        return (f"cpuManagerPolicyOptions unknown on {nodes} (its NodeResourceTopology does not publish them: "
                "qos-guard agent --publish-topology does): a full-pcpus-only refusal there is not foreseen")
    if left:
        return (f"cpuManagerPolicyOptions {', '.join(left)} on {nodes} not modelled across NUMA nodes: kubelet may "
                "still refuse it there (an allocation error, or no preferred hint)")
    return None


def nodes_note(policy: str, topology_policy: str, enabled: frozenset[str]) -> str | None:
    """``qos-guard nodes``' note on a static CPU Manager's options that ``numa: auto`` and the extender do not
    model on this node (``enabled``: the options set to true)."""
    if policy != "static":
        return None
    left = [o for o in NOT_MODELLED_ACROSS_NUMA if o in enabled]
    if not left:
        return None
    return (f"cpuManagerPolicyOptions {', '.join(left)}: not modelled by numa: auto and the extender where a Pod is "
            "admitted across NUMA nodes (here: topologyManagerPolicy " + topology_policy + "); their answers "
            "there name the option instead of a verdict on it")
