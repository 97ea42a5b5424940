"""``webhook.core.numa.Levels``: topologies of one empty shape whose amounts fall between the same levels get the
same ``fit_node`` answer (the scheduler extender fits each class of a fleet's free shapes once, not each node).

The Pods and machines are the topology differential's (tests/fidelity/topology_grammar.py), the free amounts
drawn around the Pod's own levels (one under, on, one over, in milli-units), where a wrong or missing level shows.
Init containers (reused by what follows them) and sidecars are half of the grammar's Pods.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fidelity import topology_grammar as grammar
from webhook.core import numa
from webhook.core.demands import Demands
from webhook.core.numa import Levels, fit_node, levels
from webhook.core.numatopology import NodeTopology, Zone, parse_nrt
from webhook.extender.reservations import pod_demands

MIB = 1 << 20
GIB = 1 << 30


def empty_node(rng: random.Random) -> tuple[dict[str, Any], NodeTopology]:
    """A machine of the differential, and its topology as its exporter publishes it (reserved CPUs from NUMA
    node 0)."""
    spec = grammar.machine(rng)
    zones = []
    for i, n in enumerate(spec["numa"]):
        huge2, huge1 = n["hugepages2Mi"] * 2 * MIB, n["hugepages1Gi"] * GIB
        amounts = {"cpu": max(0, n["cpus"] - (spec["reservedCPUs"] if i == 0 else 0)),
                   "memory": n["memory"] - n["reservedMemory"] - huge2 - huge1,
                   "hugepages-2Mi": huge2, "hugepages-1Gi": huge1, **n["devices"]}
        # Now and then a device zone says capacity 0 yet some allocatable (kubelet's own view, as NFD copies it):
        # the device manager's NUMA nodes are those with either, so that amount's level 1 (milli) counts.
        zones.append({"name": f"node-{i}", "type": "Node", "resources": [
            {"name": k, "capacity": "0" if k in n["devices"] and rng.random() < 0.2 else str(v),
             "allocatable": str(v), "available": str(v)}
            for k, v in amounts.items() if v or k in n["devices"]]})
    return spec, parse_nrt({"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
                      "metadata": {"name": "n"}, "zones": zones,
                      "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"},
                                     {"name": "topologyManagerScope", "value": rng.choice(["container", "pod"])}]})


def case(seed: int) -> tuple[random.Random, NodeTopology, Demands, list[Levels]]:
    """A machine, a Pod that aligns something, and its levels: the sums, and the caps alone (past the bound)."""
    rng = random.Random(seed)
    while True:
        spec, empty = empty_node(rng)
        wants = pod_demands(grammar.pod(rng, spec))
        if wants is not None:
            with mock.patch.object(numa, "_MAX_LEVELS", 0):
                capped = levels(wants)
            assert capped.levels is None
            return rng, empty, wants, [levels(wants), capped]


def near(rng: random.Random, have: int, cuts: tuple[int, ...] | None, cap: int | None) -> int:
    """An amount free of ``have``: at, just under or just over one of the Pod's levels, or anything."""
    marks = list(cuts or ()) + ([cap] if cap is not None else [])
    if not marks or rng.random() < 0.2:
        return rng.randint(0, have)
    mark = rng.choice(marks) + rng.choice([-1, 0, 0, 1, 999, 1000])
    return max(0, min(have, mark))


def free(rng: random.Random, empty: NodeTopology, shape: Levels) -> NodeTopology:
    cuts = dict(shape.levels or ())
    caps = dict(shape.caps)
    zones = tuple(Zone(z.numa, z.name, z.capacity, {k: near(rng, v, cuts.get(k), caps.get(k) if not cuts else None)
                                                    for k, v in z.allocatable.items()}) for z in empty.zones)
    return NodeTopology(empty.name, empty.policy, empty.scope, zones,
                        NodeTopology.signature(empty.policy, empty.scope, zones))


def lowest(topo: NodeTopology, shape: Levels) -> NodeTopology:
    """The topology of ``topo``'s class with the least of each amount the Pod asks: its lower level, or its cap."""
    cuts = dict(shape.levels or ())
    caps = dict(shape.caps)

    def least(k: str, v: int) -> int:
        if k in cuts:
            return cuts[k][bisect_right(cuts[k], v) - 1]
        return min(v, caps[k]) if k in caps and not cuts else v

    zones = tuple(Zone(z.numa, z.name, z.capacity, {k: least(k, v) for k, v in z.allocatable.items()})
                  for z in topo.zones)
    return NodeTopology(topo.name, topo.policy, topo.scope, zones,
                        NodeTopology.signature(topo.policy, topo.scope, zones))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_topology_fits_as_the_least_of_its_class(seed: int) -> None:
    rng, empty, wants, shapes = case(seed)
    for shape in shapes:
        for _ in range(6):
            topo = free(rng, empty, shape)
            floor = lowest(topo, shape)
            assert shape.of(floor) == shape.of(topo)
            assert fit_node(wants, floor) == fit_node(wants, topo), (wants, topo, floor)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_topologies_of_one_class_fit_alike(seed: int) -> None:
    rng, empty, wants, shapes = case(seed)
    for shape in shapes:
        seen: dict[tuple[int, ...], Any] = {}
        for _ in range(16):
            topo = free(rng, empty, shape)
            fit = fit_node(wants, topo)
            answer = (fit.failed, fit.alone, dict(fit.placed), fit.reason)
            assert seen.setdefault(shape.of(topo), answer) == answer, (wants, topo)


def test_a_pod_without_init_containers_has_every_sum_of_its_requests_as_levels() -> None:
    spec = {"containers": [{"name": n, "image": "x", "resources": {"limits": {"cpu": c, "memory": "1Gi"}}}
                           for n, c in (("a", "2"), ("b", "3"))]}
    wants = pod_demands({"spec": spec})
    assert wants is not None
    cuts = dict(levels(wants).levels or ())
    assert cuts["cpu"] == (0, 2000, 3000, 5000)  # 2, 3, 2 + 3 (also the Pod's total)
    assert cuts["memory"] == (0, GIB * 1000, 2 * GIB * 1000)


def test_an_init_container_is_compared_with_what_the_app_containers_after_it_take() -> None:
    spec = {"initContainers": [{"name": "i", "image": "x", "resources": {"limits": {"cpu": "4", "memory": "1Gi"}}}],
            "containers": [{"name": "a", "image": "x", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}
    wants = pod_demands({"spec": spec})
    assert wants is not None
    cuts = dict(levels(wants).levels or ())
    assert cuts["cpu"] == (0, 2000, 4000, 6000)  # the app's 2, the init's 4 alone (the Pod's total) and after it


def test_past_the_bound_on_sums_only_the_caps_are_kept() -> None:
    # Nine app containers of distinct CPU counts: 2**9 sums, over the bound of 256.
    spec = {"containers": [{"name": f"c{n}", "image": "x", "resources": {"limits": {"cpu": str(2**n), "memory": "1Gi"}}}
                           for n in range(9)]}
    wants = pod_demands({"spec": spec})
    assert wants is not None
    shape = levels(wants)
    assert shape.levels is None
    assert dict(shape.caps)["cpu"] == 2 * 511 * 1000  # the containers' sum, and the Pod's total again
