"""``webhook.extender.fleet_verdicts``: a Pod shape judged on many free shapes at once gives each the verdict
``Judge.judged`` gives it alone (kept or refused, the reason, unresolvable, the score).

The fit and the score are one code (``core.numafit.fit_rows``, ``scorer``: their own tests and the Go oracle's hold
them right); what is two here is the layout: the fleet's rows (``fleet_rows``: every resource name of the fleet,
zones padded to its largest machine, machines stacked, empty nodes riding along, refusals shared per machine)
against one node's own row. A row read from another row's zones, a padding zone counted, a machine's flags or a
refusal's key mixed up shows as a verdict that differs. The machines and Pods are the topology differential's
(tests/fidelity/topology_grammar.py: init containers, sidecars, hugepages, devices, both scopes), the free amounts
drawn around the Pod's own levels (``core.numa.Levels``: one under, on, one over).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fidelity import topology_grammar as grammar
from tests.helpers import python_calls
from tests.unit.test_numa_levels import empty_node, free
from webhook.core.demands import Demands
from webhook.core.numa import levels
from webhook.core.numafit import EXACT
from webhook.core.numatopology import NodeTopology, Zone
from webhook.extender import fleet_rows
from webhook.extender.fleet_rows import Columns
from webhook.extender.fleet_verdicts import judge_rows
from webhook.extender.reservations import NodeState, Shape, pod_demands
from webhook.extender.verdicts import Judge, Verdict
from webhook.extender.view import BATCH, View


@dataclass(frozen=True)
class Free:
    """What ``judge_rows`` reads of a ``view.Freed``."""

    state: NodeState
    topo: NodeTopology
    opinion: bool = True


def renamed(topo: NodeTopology, name: str, policy: str | None = None, scope: str | None = None,
            zones: tuple[Zone, ...] | None = None, cpu_policy: str | None = None) -> NodeTopology:
    policy, scope, zones = policy or topo.policy, scope or topo.scope, zones or topo.zones
    cpu_policy = cpu_policy or topo.cpu_policy
    return NodeTopology(name, policy, scope, zones, NodeTopology.signature(policy, scope, zones, None, cpu_policy),
                        cpu_policy=cpu_policy)


POLICIES = ("single-numa-node",) * 3 + ("restricted", "best-effort")


def fleet(seed: int, machines: int = 4, shapes: int = 12, odd: bool = True,
          policies: tuple[str, ...] = POLICIES, cpu_none: float = 0.0) -> tuple[Demands, dict[int, Free]]:
    """A Pod that aligns something and free shapes of a few machines (policies and scopes drawn), keyed as a view
    keys them. Now and then a machine the arrays do not model: two zones of one NUMA number, or an amount past
    2**53 milli-units. ``cpu_none``: the share of machines whose CPU Manager is ``none`` (their NRT says so)."""
    rng = random.Random(seed)
    wants: Demands | None = None
    fleet_: dict[int, Free] = {}
    for m in range(machines):
        spec, empty = empty_node(rng)
        empty = renamed(empty, f"m{m}", rng.choice(policies),
                        rng.choice(["container", "pod"]))
        if cpu_none and rng.random() < cpu_none:
            empty = renamed(empty, empty.name, cpu_policy="none")
        draw = rng.random() if odd else 1.0
        if draw < 0.1 and len(empty.zones) > 1:
            zs = empty.zones
            empty = renamed(empty, empty.name, zones=(zs[0], Zone(zs[0].numa, zs[1].name, zs[1].capacity,
                                                                    zs[1].allocatable), *zs[2:]))
        elif draw < 0.2:
            z = empty.zones[0]
            huge = dict(z.allocatable, memory=EXACT + 5)
            empty = renamed(empty, empty.name, zones=(Zone(z.numa, z.name, dict(z.capacity, memory=EXACT + 5), huge),
                                                      *empty.zones[1:]))
        while wants is None:
            wants = pod_demands(grammar.pod(rng, spec))
        shape = levels(wants)
        for _ in range(shapes):
            topo = free(rng, empty, shape)
            topo = renamed(topo, empty.name, cpu_policy=empty.cpu_policy)
            fleet_[len(fleet_)] = Free(NodeState(empty, topo, shape=Shape((empty.key, topo.key))), topo)
    assert wants is not None
    return wants, fleet_


def alone(wants: Demands, item: Free) -> Verdict:
    return Judge(wants).judged(item.state, item.topo, 0)


def said(v: Verdict) -> tuple[bool, str, bool, int, bool]:
    return v.kept, v.reason, v.unresolvable, v.score, v.known


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32))
def test_each_free_shape_gets_the_verdict_it_gets_alone(seed: int) -> None:
    wants, items = fleet(seed)
    judge = Judge(wants)
    left = judge_rows(judge, list(items), items, Columns())
    for key, item in items.items():
        if key in left:
            assert key not in judge.verdicts
            continue
        assert said(judge.verdicts[key]) == said(alone(wants, item)), (seed, key, item.topo)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32))
def test_machines_whose_cpu_manager_is_none_get_the_verdict_they_get_alone(seed: int) -> None:
    """A fleet where some machines' CPU Manager is ``none`` (``fit_rows`` judges their rows without the Pod's CPUs,
    the others' with them): each row's verdict over arrays is the one it gets alone (``fit_node``)."""
    wants, items = fleet(seed, cpu_none=0.5)
    judge = Judge(wants)
    left = judge_rows(judge, list(items), items, Columns())
    for key, item in items.items():
        if key not in left:
            assert said(judge.verdicts[key]) == said(alone(wants, item)), (seed, key, item.topo)


def test_the_differential_is_not_vacuous() -> None:
    """Over the seeds the property sees: rows kept and refused, placed in both scopes, scored apart, refused for
    each reason, and some rows left to ``Judge.judged``."""
    kept = refused = left_over = 0
    scores: set[int] = set()
    reasons: set[str] = set()
    for seed in range(150):
        wants, items = fleet(seed)
        judge = Judge(wants)
        left_over += len(judge_rows(judge, list(items), items, Columns()))
        for v in judge.verdicts.values():
            kept += v.kept
            refused += not v.kept
            scores.add(v.score)
            reasons.add(v.reason.split(" on one NUMA node")[-1][:20])
    assert kept > 300 and refused > 300 and left_over > 50
    assert len(scores) >= 8 and len(reasons) >= 3, (scores, reasons)


def test_restricted_rows_are_refused_where_kubelet_would() -> None:
    """On restricted and best-effort machines, the rows no NUMA node holds are judged by ``core.numa_across`` in
    the arrays' pass too: each verdict is the one the node gets alone, and among them restricted's
    TopologyAffinityError and allocations kubelet fails, as well as rows kept (admitted across NUMA nodes)."""
    refusals: set[str] = set()
    kept = 0
    for seed in range(60):
        wants, items = fleet(seed, policies=("restricted", "best-effort"), odd=False)
        judge = Judge(wants)
        judge_rows(judge, list(items), items, Columns())
        for key, item in items.items():
            got = judge.verdicts.get(key) or alone(wants, item)
            assert said(got) == said(alone(wants, item)), (seed, key, item.topo)
            if got.kept:
                kept += 1
            elif "TopologyAffinityError" in got.reason or "UnexpectedAdmissionError" in got.reason:
                refusals.add(got.reason.split(": ")[2])
    assert kept > 100 and {"TopologyAffinityError", "UnexpectedAdmissionError"} <= refusals, (kept, refusals)


def test_a_view_judges_a_new_pod_shape_on_thousands_of_free_shapes_over_arrays() -> None:
    """Through ``View.verdicts``: 2,400 free shapes, every one read before, a Pod shape not judged yet: the verdicts
    are each node's own, and the Python calls made do not grow with the free shapes (the arrays do the work). Of
    single-numa-node machines: on restricted and best-effort ones, a row no NUMA node holds goes on in Python
    (``core.numa_across``, about a millisecond a row; ``test_restricted_rows_are_refused_where_kubelet_would``)."""
    wants, items = fleet(7, machines=8, shapes=300, odd=False, policies=("single-numa-node",))
    states = {f"n{k}": item.state for k, item in items.items()}
    view, names, now = View(states, {}), list(states), 1000.0
    view.verdicts(Judge(wants), names, now)
    assert len(view.columns.rows) >= BATCH
    other = next(w for s in range(100) if (w := fleet(s, policies=("single-numa-node",))[0]).key != wants.key)
    got, calls = python_calls(lambda: view.verdicts(Judge(other), names, now))
    assert calls < 2000, calls
    assert [said(v) for v in got] == [said(alone(other, items[k])) for k in items]


def test_past_max_rows_machines_are_numbered_anew_and_no_verdict_is_stale() -> None:
    """Rows and machines are bounded (``fleet_rows.MAX_ROWS``): past it, they are numbered anew, and a Judge that
    judged before (its refusals keyed by a machine's number) still gives each free shape its own verdict. A call
    with more machines than the bound leaves its rows to ``Judge.judged``."""
    columns = Columns()
    batched = 0
    with mock.patch.object(fleet_rows, "MAX_ROWS", 3):
        for seed in range(60):
            # One Pod shape judged on a fleet, then on another's machines (registered past the bound, renumbered).
            # Keys unique across the calls, as a view's are (the rows are kept by key).
            wants, items = fleet(seed, machines=1 + seed % 3, odd=False)
            items = {seed * 1000 + k: v for k, v in items.items()}
            _, others = fleet(seed + 1000, machines=1 + seed % 3, odd=False)
            others = {seed * 1000 + 500 + k: v for k, v in others.items()}
            judge = Judge(wants)
            for fleet_ in (items, others):
                judge.verdicts.clear()
                left = judge_rows(judge, list(fleet_), fleet_, columns)
                batched += len(fleet_) - len(left)
                for key in left:
                    judge.judged(fleet_[key].state, fleet_[key].topo, key)
                for key, item in fleet_.items():
                    assert said(judge.verdicts[key]) == said(alone(wants, item)), (seed, key)
    assert len(columns.machines) <= 3 and len(columns.rows) <= 3
    assert batched > 200, batched
