"""``core.numa_handover.hand_over`` against the row-by-row loop it was first written as, kept here as the reference:
every row ``core.numa_across.admit`` judged from the row's whole node. The handover now answers a row whose first
memory hint turns on other Pods' groups (``GROUPED_UNKNOWN``) from arrays, without the node, and remembers the empty
node's verdict per machine: any ``Fits`` that differs (a failed index, alone, a reason, refused, unknown) fails.
The fleets are tests/unit/test_fleet_verdicts.py's (the differential's machines and Pods, restricted and
best-effort, both scopes, free amounts around the Pod's levels)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit import test_fleet_verdicts
from tests.unit.test_fleet_verdicts import fleet
from webhook.core import numa_handover
from webhook.core.demands import Demands
from webhook.core.numa import fit_node
from webhook.core.numa_across import Want, admit
from webhook.core.numa_handover import EMPTY, NOW, START, _Read, _refused_alone, _row_node
from webhook.core.numa_masks import Unknown
from webhook.core.numa_memory import GROUPED_UNKNOWN
from webhook.core.numafit import NOT_PLACED, POD, Ask, Fits, Machines, fit_rows
from webhook.core.numatopology import CPUManager, NodeTopology, Zone
from webhook.extender import fleet_verdicts
from webhook.extender.fleet_rows import Columns
from webhook.extender.fleet_verdicts import judge_rows
from webhook.extender.verdicts import Judge


def reference_hand_over(wants: Demands, asks: Sequence[Ask], node: Any, fits: Fits, machine: Any,
                        across: Sequence[str | None], machines: Machines, column: Mapping[str, int]) -> None:
    """``hand_over`` as it was before (812ce8d's numa_handover.py): each row's node, then ``admit``; alone from
    the empty node of each refused row."""
    start = node.start
    want = [Want(a.kind, a.cpus // 1000, dict(a.memory), {k: v // 1000 for k, v in a.devices.items()})
            for a in asks]
    whole = Ask.of(wants.pod)
    pod = Want("pod", whole.cpus // 1000, dict(whole.memory), {k: v // 1000 for k, v in whole.devices.items()})
    nothing = np.array([p == "none" for p in across], np.bool_)[machine]
    read: _Read | None = None
    for r in np.flatnonzero((fits.failed != NOT_PLACED) | nothing).tolist():
        m = int(machine[r])
        policy = across[m]
        if policy is None or (r in fits.reason and policy != "none"):
            continue
        pod_scope = bool(machines.pod_scope[m]) and policy != "none"
        if policy == "none":
            fits.failed[r], fits.alone[r], fits.placed[r], fits.pod_zone[r] = NOT_PLACED, False, NOT_PLACED, NOT_PLACED
            fits.reason.pop(r, None)
        read = read or _Read(start, node, machines, column)
        try:
            state = _row_node(read, r, m, policy, machines, START if pod_scope or policy == "none" else NOW,
                              column, wants.zero_devices_aligned)
            outcome = admit(state, want, 0 if policy == "none" else int(fits.failed[r]), pod if pod_scope else None)
        except Unknown as exc:
            fits.unknown[r] = str(exc)
            if policy == "none":
                fits.failed[r] = 0
            continue
        if outcome.failed is not None:
            fits.failed[r], fits.reason[r] = outcome.failed, outcome.reason
            fits.refused.add(r)
            fits.alone[r] = outcome.failed == POD or _refused_alone(
                _row_node(read, r, m, policy, machines, EMPTY, column, wants.zero_devices_aligned),
                want[outcome.failed])


def said(fits: Fits) -> tuple[Any, ...]:
    return (fits.failed.tolist(), fits.alone.tolist(), fits.placed.tolist(), fits.pod_zone.tolist(), fits.reason,
            fits.refused, fits.unknown)


class Both:
    """``fleet_verdicts.fit_rows`` run with the handover and with the reference: the answers must be one. Counts
    the rows each way ended as the fast path's (``GROUPED_UNKNOWN``) and the refusals."""

    def __init__(self) -> None:
        self.fit_rows = fit_rows
        self.grouped = self.refused = self.calls = 0

    def __call__(self, *args: Any) -> Fits:
        fits = self.fit_rows(*args)
        with mock.patch.object(numa_handover, "hand_over", reference_hand_over):
            expected = self.fit_rows(*args)
        assert said(fits) == said(expected)
        self.calls += 1
        self.grouped += sum(why == GROUPED_UNKNOWN for why in fits.unknown.values())
        self.refused += len(fits.refused)
        return fits


def judged(seed: int, policies: tuple[str, ...], cpu_manager: CPUManager | None = None) -> Both:
    """A fleet judged both ways; with ``cpu_manager``, every machine's static CPU Manager runs with it."""
    both = Both()
    with mock.patch.object(test_fleet_verdicts, "renamed", with_cpu_manager(cpu_manager)):
        wants, items = fleet(seed, shapes=16, policies=policies)
    with mock.patch.object(fleet_verdicts, "fit_rows", both):
        judge_rows(Judge(wants), list(items), items, Columns())
    return both


def with_cpu_manager(cpu: CPUManager | None) -> Any:
    """test_fleet_verdicts' ``renamed``, the topology published with ``cpu`` (its fleets publish none)."""
    inner = test_fleet_verdicts.renamed

    def renamed(topo: NodeTopology, name: str, policy: str | None = None, scope: str | None = None,
                zones: tuple[Zone, ...] | None = None, cpu_policy: str | None = None) -> NodeTopology:
        out = inner(topo, name, policy, scope, zones, cpu_policy)
        if cpu is None:
            return out
        return NodeTopology(out.name, out.policy, out.scope, out.zones, NodeTopology.signature(
            out.policy, out.scope, out.zones, cpu, out.cpu_policy), cpu, out.cpu_policy)
    return renamed


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32))
def test_the_handover_answers_as_the_row_by_row_loop(seed: int) -> None:
    judged(seed, ("restricted", "best-effort", "single-numa-node"))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32))
def test_the_handover_answers_as_the_row_by_row_loop_with_none(seed: int) -> None:
    """topologyManagerPolicy none beside them: its rows never take the fast path."""
    judged(seed, ("none", "best-effort", "restricted"))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from([1, 2]), st.integers(0, 3))
def test_fit_node_answers_as_the_row_by_row_loop_with_full_pcpus_only(seed: int, threads: int, siblings: int) -> None:
    """full-pcpus-only's SMTAlignmentError turns on the CPUs free on the node, whatever the hint: a best-effort row
    whose first hint is ``GROUPED_UNKNOWN`` may still be refused by it (``_plenty`` leaves such rows to the loop).
    The extender's fleet leaves such machines to ``Judge.judged``; ``numa.fit_node`` (one row) hands them over."""
    fit_nodes(seed, CPUManager(frozenset({"full-pcpus-only"}), threads, siblings))


def fit_nodes(seed: int, cpu: CPUManager) -> list[str]:
    """Every free shape of a best-effort and restricted fleet whose machines run ``cpu``, through ``fit_node`` with
    the handover and with the reference: one answer. The SMTAlignmentErrors among them."""
    with mock.patch.object(test_fleet_verdicts, "renamed", with_cpu_manager(cpu)):
        wants, items = fleet(seed, shapes=8, policies=("best-effort", "best-effort", "restricted"))
    smt = []
    for item in items.values():
        fast = fit_node(wants, item.topo, item.state.empty)
        with mock.patch.object(numa_handover, "hand_over", reference_hand_over):
            assert fit_node(wants, item.topo, item.state.empty) == fast
        smt += [fast.reason] if fast.reason.startswith("SMTAlignmentError") else []
    return smt


def test_the_comparison_is_not_vacuous() -> None:
    """Over fixed seeds: rows the arrays answer (other Pods' memory groups; best-effort's container scope among
    them), rows ``GROUPED_UNKNOWN`` and rows refused."""
    fast: list[int] = []
    plenty: list[int] = []
    smt: list[str] = []
    inner, inner_plenty = numa_handover._grouped, numa_handover._plenty

    def counted(*args: Any) -> Any:
        found = inner(*args)
        fast.append(int(found.sum()))
        return found

    def counted_plenty(rows: Any, *args: Any) -> Any:
        found = inner_plenty(rows, *args)
        plenty.append(int(found.sum()))
        return found

    grouped = refused = 0
    with mock.patch.object(numa_handover, "_grouped", counted), \
            mock.patch.object(numa_handover, "_plenty", counted_plenty):
        for seed in range(40):
            both = judged(seed, ("restricted", "best-effort"))
            grouped += both.grouped
            refused += both.refused
        # full-pcpus-only (one row a call, ``fit_node``): rows SMTAlignmentError refuses after the single-NUMA pass.
        for seed in range(40):
            smt += fit_nodes(seed, CPUManager(frozenset({"full-pcpus-only"}), 2, 2))
    assert sum(fast) > 200 and grouped > 200 and refused > 50, (sum(fast), grouped, refused)
    assert sum(plenty) > 100 and len(smt) > 10, (sum(plenty), len(smt))
