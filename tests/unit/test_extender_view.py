"""The extender's view, kept event by event (``webhook.extender.view``), against the same rules applied from
scratch to the whole history: random sequences of NRT updates, bindings, moves, deletions and the passing of time
(reservations expiring) give the same free zones and the same held Pods both ways, read at every step (so the
per-node caches are read while stale, too)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.helpers import python_calls
from webhook.extender.fingerprint import fingerprint
from webhook.extender.reservations import BoundPod, NodeState, free_now, pod_demands, read_nrt
from webhook.extender.verdicts import Judge
from webhook.extender.view import LISTED_LAG, View

GPU = "example.com/gpu"
TIMEOUT = 60.0
NODES = ("a", "b", "c")
KEYS = [("ns", f"p{i}") for i in range(6)]


def nrt(name: str, zones: int, busy: int, policy: str, fp: str | None, method: str | None) -> dict[str, Any]:
    attrs = [{"name": "topologyManagerPolicy", "value": policy}, {"name": "topologyManagerScope", "value": "pod"}]
    if fp is not None:
        attrs.append({"name": "nodeTopologyPodsFingerprint", "value": fp})
    if method is not None:
        attrs.append({"name": "nodeTopologyPodsFingerprintMethod", "value": method})
    zone = {"cpu": "4", "memory": "16Gi", GPU: "1"}
    return {"metadata": {"name": name}, "attributes": attrs,
            "zones": [{"name": f"node-{i}", "type": "Node",
                       "resources": [{"name": k, "capacity": v, "allocatable": v,
                                      "available": "0" if i < busy and k != "memory" else v}
                                     for k, v in zone.items()]} for i in range(zones)]}


def pod_obj(name: str, cpu: int, gpu: int) -> dict[str, Any]:
    limits = {"cpu": str(cpu), "memory": "1Gi"} | ({GPU: str(gpu)} if gpu else {})
    return {"metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "image": "x",
                                     "resources": {"limits": limits, "requests": dict(limits)}}]}}


WANTS = [None, pod_demands(pod_obj("x", 2, 0)), pod_demands(pod_obj("x", 4, 1))]


@dataclass
class Scratch:
    """The history as plain data; every answer recomputed from all of it."""

    nrts: dict[str, tuple[NodeState, int]] = field(default_factory=dict)
    pods: dict[tuple[str, str], tuple[BoundPod, int]] = field(default_factory=dict)
    seq: int = 0

    def tick(self) -> int:
        self.seq += 1
        return self.seq

    def on(self, node: str) -> list[BoundPod]:
        found = [(seen, p) for p, seen in self.pods.values() if p.node == node]
        return [p for _, p in sorted(found, key=lambda sp: (sp[0], sp[1].scheduled_at, sp[1].key))]

    def held(self, node: str, now: float) -> list[BoundPod]:
        if node not in self.nrts:
            return []
        state, nrt_seen = self.nrts[node]
        pods = self.on(node)
        seen = {p.key: s for p, s in self.pods.values()}
        if state.fingerprint is not None:
            # What kubelet's List held when the exporter signed it: the active Pods (v1.34 on), else every Pod
            # bound there (v1.33: terminal ones too); the active ones are tried first.
            listed = [p for p in pods if state.method != "with-exclusive-resources" or p.wants is not None]
            counted = None
            for shortest, signed in ((0, [p for p in listed if not p.terminal]),
                                     (max(0, len(listed) - LISTED_LAG), listed)):
                counted = next((k for k in range(len(signed), shortest - 1, -1)
                                if fingerprint(p.key for p in signed[:k]) == state.fingerprint), None)
                if counted is not None:
                    break
            if counted == len(signed):
                return []
            pods = signed[counted:] if counted is not None else [p for p in pods if seen[p.key] > nrt_seen]
            if counted is not None:
                pods = [p for p in self.on(node) if p in pods]
        return [p for p in pods if p.wants is not None and not p.terminal and now - p.scheduled_at < TIMEOUT]


ops = st.lists(st.one_of(
    st.tuples(st.just("nrt"), st.sampled_from(NODES), st.integers(1, 3), st.integers(0, 2),
              st.sampled_from(["single-numa-node", "best-effort", "none"]),
              st.sampled_from(["none", "all", "prefix", "garbage", "listed", "listed-prefix"]), st.integers(0, 6),
              st.sampled_from([None, "all", "with-exclusive-resources"])),
    st.tuples(st.just("drop-nrt"), st.sampled_from(NODES)),
    st.tuples(st.just("bind"), st.sampled_from(range(len(KEYS))), st.sampled_from(NODES),
              st.integers(0, len(WANTS) - 1), st.booleans(), st.floats(0, 90)),
    st.tuples(st.just("delete"), st.sampled_from(range(len(KEYS)))),
    st.tuples(st.just("time"), st.floats(0, 40)),
    st.tuples(st.just("time"), st.floats(-30, 0)),  # a clock set back: what had expired is held again
), max_size=40)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
# A binding on a node whose verdict the kept Judge read before; a Pod past its time held again by a clock set back.
@example([("nrt", "a", 1, 0, "single-numa-node", "none", 0, None), ("bind", 0, "a", 2, False, 0.0)])
@example([("nrt", "a", 1, 0, "single-numa-node", "none", 0, None), ("bind", 0, "a", 2, False, 70.0),
          ("time", -30.0)])
# Kubelet 1.33's List: the NRT signs the terminal Pod bound first, not yet the aligned one after it (held).
@example([("bind", 0, "a", 2, True, 0.0), ("bind", 1, "a", 2, False, 0.0),
          ("nrt", "a", 2, 0, "single-numa-node", "listed-prefix", 1, None)])
def test_incremental_view_equals_the_view_from_scratch(history: list[tuple[Any, ...]]) -> None:
    view, scratch, now = View(timeout=TIMEOUT), Scratch(), 1000.0
    pod = pod_obj("probe", 2, 0)
    kept = Judge.of(pod)  # one Judge for the whole history, as the app keeps one per Pod shape
    for op in history:
        if op[0] == "nrt":
            _, node, zones, busy, policy, kind, k, method = op
            signed = [p for p in scratch.on(node) if not p.terminal]
            listed = scratch.on(node)  # kubelet 1.33's List: the terminal Pods still bound there too
            fp = {"none": None, "all": fingerprint(p.key for p in signed),
                  "prefix": fingerprint(p.key for p in signed[:k]), "garbage": "pfp0v001ffffffffffffffff",
                  "listed": fingerprint(p.key for p in listed),
                  "listed-prefix": fingerprint(p.key for p in listed[:k])}[kind]
            state = read_nrt(nrt(node, zones, min(busy, zones), policy, fp, method))
            assert state is not None
            view.set_nrt(node, state)
            scratch.nrts[node] = (state, scratch.tick())
        elif op[0] == "drop-nrt":
            view.set_nrt(op[1], None)
            scratch.nrts.pop(op[1], None)
        elif op[0] == "bind":
            _, i, node, w, terminal, ago = op
            key: tuple[str, str] = KEYS[i]  # i is Any (from op), so KEYS[i] would be Any and *key of unknown length
            bound = BoundPod(*key, node, now - ago, terminal, WANTS[w], uid=f"u{i}")
            view.put_pod(bound)
            old = scratch.pods.get(key)
            seen = old[1] if old is not None and old[0].node == node else scratch.tick()
            scratch.pods[key] = (bound, seen)
        elif op[0] == "delete":
            view.drop_pod(KEYS[op[1]])
            scratch.pods.pop(KEYS[op[1]], None)
        else:
            now += op[1]
        # First, before anything below recomputes a node: the verdicts of the Judge kept across the steps, read
        # through what the view holds as current (the nodes an event or the time made stale must not be read so).
        for node, verdict in zip(NODES, view.verdicts(kept, list(NODES), now), strict=True):
            if node in scratch.nrts and scratch.nrts[node][0].empty.policy == "single-numa-node":
                fresh = Judge.of(pod).node(node, scratch.nrts[node][0], scratch.held(node, now))
                assert (verdict.kept, verdict.score) == (fresh.kept, fresh.score), (node, op, "kept judge")
        for node in NODES:
            held = scratch.held(node, now)
            freed = view.freed(node, now)
            if node not in scratch.nrts:
                assert freed is None
                continue
            assert freed is not None
            state = scratch.nrts[node][0]
            if freed.opinion:
                assert list(freed.held) == [p.key for p in held], (node, op)
                assert freed.topo.zones == free_now(state, held).zones, (node, op)
        judge = Judge.of(pod)
        verdicts = view.verdicts(judge, list(NODES), now)
        for node, verdict in zip(NODES, verdicts, strict=True):
            if node in scratch.nrts and scratch.nrts[node][0].empty.policy == "single-numa-node":
                state = scratch.nrts[node][0]
                fresh = Judge.of(pod).node(node, state, scratch.held(node, now))
                assert (verdict.kept, verdict.score) == (fresh.kept, fresh.score), (node, op)


def test_free_shapes_of_one_class_are_fitted_once_and_each_scored_on_its_own() -> None:
    """Nodes whose NRTs count their own Pods differ in what is free (here memory: 2 to 15Gi of 16Gi a zone): for a
    Pod that every one of them holds (2 CPUs, 1Gi), one fit (``core.numa.Levels``), and each node its own score."""
    states = {}
    for i in range(40):
        obj = nrt(f"n{i}", 2, 0, "single-numa-node", None, None)
        for zone in obj["zones"]:
            for res in zone["resources"]:
                if res["name"] == "memory":
                    res["available"] = f"{2 + i % 14}Gi"
        state = read_nrt(obj)
        assert state is not None
        states[f"n{i}"] = state
    names, now = list(states), 1000.0
    judge = Judge(WANTS[1])
    got = View(states, {}).verdicts(judge, names, now)
    assert len(judge.verdicts) == 14 and len(judge.fitted) == 1
    alone = [Judge(WANTS[1]).node(n, states[n]) for n in names]
    assert [(v.kept, v.score) for v in got] == [(v.kept, v.score) for v in alone]
    assert all(v.kept for v in got) and len({v.score for v in got}) > 2


def test_a_new_pod_shape_costs_python_per_free_shape_not_per_node() -> None:
    """3,000 nodes of three free shapes, every one read before: a Pod shape not judged yet is judged three times,
    and the call runs no Python per node (counted as the calls a profile hook sees made from Python code; ``map``
    calling ``dict.get`` from C is not one). The verdicts are those of each node judged on its own."""
    states = {}
    for i in range(3000):
        state = read_nrt(nrt(f"n{i}", 2, i % 3, "single-numa-node", None, None))
        assert state is not None
        states[f"n{i}"] = state
    view, names, now = View(states, {}), list(states), 1000.0
    view.verdicts(Judge(WANTS[1]), names, now)
    judge = Judge(WANTS[2])
    got, calls = python_calls(lambda: view.verdicts(judge, names, now))
    assert len(judge.verdicts) == 3
    assert calls < 1000, calls
    alone = [Judge(WANTS[2]).node(n, states[n]) for n in names]
    assert [(v.kept, v.reason, v.unresolvable, v.score) for v in got] == \
        [(v.kept, v.reason, v.unresolvable, v.score) for v in alone]
    assert {v.kept for v in got} == {True, False}


def test_an_nrt_signed_over_kubelet_1_33s_list_holds_nothing() -> None:
    """Kubelet before v1.34 (``KubeletPodResourcesListUseActivePods`` not there) lists the terminal Pods still
    bound to the node, and the exporter signs them: that fingerprint counts every active Pod too."""
    failed = BoundPod("ns", "failed", "a", 990.0, True, WANTS[2], seen=1)
    running = BoundPod("ns", "running", "a", 995.0, False, WANTS[1], seen=2)
    late = BoundPod("ns", "late", "a", 999.0, False, WANTS[1], seen=3)
    view = View(timeout=TIMEOUT)
    for p in (failed, running, late):
        view.put_pod(p)
    view.set_nrt("a", read_nrt(nrt("a", 2, 0, "single-numa-node", fingerprint([failed.key, running.key]), None)))
    assert [p.key for p in view.held("a", 1000.0)] == [late.key]  # a prefix of the listed Pods: only later ones
    view.set_nrt("a", read_nrt(nrt("a", 2, 0, "single-numa-node",
                                   fingerprint([failed.key, running.key, late.key]), None)))
    assert view.held("a", 1000.0) == [] and view.unmatched == 0


def test_of_a_list_with_terminal_pods_only_the_latest_may_be_uncounted() -> None:
    """Terminal Pods are not bounded by maxPods (a node keeps every finished Job's), so of the set with them only
    the prefixes leaving out the ``LISTED_LAG`` last Pods are tried; an older NRT matches none (the fallback)."""
    pods = [BoundPod("ns", f"p{i}", "a", 999.0, i < 45, WANTS[1], seen=i) for i in range(50)]

    def held_with(k: int) -> tuple[list[tuple[str, str]], int]:
        view = View(timeout=TIMEOUT)
        for p in pods:
            view.put_pod(p)
        view.set_nrt("a", read_nrt(nrt("a", 2, 0, "single-numa-node", fingerprint(p.key for p in pods[:k]), None)))
        return [p.key for p in view.held("a", 1000.0)], view.unmatched

    assert held_with(50 - LISTED_LAG) == ([p.key for p in pods[45:]], 0)  # counted: the 5 active ones held
    assert held_with(50 - LISTED_LAG - 1) == ([], 1)  # none matched: only Pods seen since the NRT changed


def test_what_reserved_pods_take_is_remembered_by_zones_and_each_node_keeps_its_name() -> None:
    """``free_now`` remembers each step by the zones it starts from: two nodes of one free shape holding the same
    Pods get the same zones, each under its own name, and what each Pod takes is where kubelet puts it (the first
    zone that holds it, then the next; one that fits nowhere takes nothing)."""
    a, b = (read_nrt(nrt(n, 2, 0, "single-numa-node", None, None)) for n in ("a", "b"))
    assert a is not None and b is not None
    big = pod_demands(pod_obj("x", 4, 1))
    pods = [BoundPod("ns", f"p{i}", "a", 0.0, wants=big) for i in range(3)]
    first = free_now(a, pods[:1])
    assert [z.allocatable["cpu"] for z in first.zones] == [0, 4000]
    again = free_now(b, pods[:1])
    assert (again.name, again.zones) == ("b", first.zones) and first.name == "a"
    both = free_now(a, pods[:2])
    assert [z.allocatable["cpu"] for z in both.zones] == [0, 0] and both.name == "a"
    assert [z.allocatable["cpu"] for z in free_now(b, pods).zones] == [0, 0]  # the third fits nowhere: not counted
