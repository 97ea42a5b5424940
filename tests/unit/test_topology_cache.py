"""The topology cache's own logic (webhook/cluster/nrt.py) over a scripted API: paging, resuming a watch,
410 Gone, refusals, bounds. tests/e2e/test_numa.py runs it against a real API server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import waiting
from tests.builders import nrt
from webhook.cluster import watch
from webhook.cluster.client import ClusterError
from webhook.cluster.nrt import (
    NODES_PATH,
    TopologyCache,
    TopologyReflector,
    node_view,
    nrt_topology,
    read_topology,
)
from webhook.cluster.watch import Store, lines
from webhook.core.numatopology import NRT_PATH, NodeTopology
from webhook.core.scheduling import Taint


def nrt_obj(name: str, cpus: str = "32", rv: str = "1") -> dict[str, Any]:
    """A watched NodeResourceTopology of one zone of ``cpus`` CPUs, at resourceVersion ``rv``."""
    return nrt(name, [{"cpu": cpus}], scope=None, metadata={"name": name, "resourceVersion": rv})


def node(name: str, rv: str = "1", **labels: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "resourceVersion": rv, "labels": labels}}


def event(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


class Scripted:
    """An API whose answers are scripted per path, in order; the last watch blocks until the test stops."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.lists: dict[str, list[tuple[int, Any]]] = {}
        self.watches: dict[str, list[tuple[int, list[bytes]]]] = {}
        self.calls: list[tuple[str, str, dict[str, str]]] = []

    def get(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Any]:
        self.calls.append(("list", path, dict(query)))
        script = self.lists.get(path) or [(200, {"items": [], "metadata": {"resourceVersion": "1"}})]
        return script.pop(0) if len(script) > 1 else script[0]

    def stream(self, path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Iterator[bytes], Any]:
        self.calls.append(("watch", path, dict(query)))
        script = self.watches.get(path) or []
        if not script:
            self.stop.wait(5)
            return 200, iter([]), None
        status, events = script.pop(0)
        return status, iter(events), None


def run_reflector(api: Scripted, path: str, store: Store, stop: threading.Event, until: Any) -> list[str | None]:
    problems: list[str | None] = []

    def changed(resource: str, problem: str | None) -> None:
        problems.append(problem)
        if until():
            stop.set()

    reflector = TopologyReflector("noderesourcetopologies" if path == NRT_PATH else "nodes", api, path,
                          ("application/json", "application/json"), store, changed, stop)
    thread = threading.Thread(target=reflector.run, daemon=True)
    thread.start()
    thread.join(10)
    stop.set()
    assert not thread.is_alive()
    return problems


def test_list_pages_then_watch_from_its_resource_version_then_resume_from_the_last_seen() -> None:
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[NRT_PATH] = [(200, {"items": [nrt_obj("a")], "metadata": {"continue": "t1", "resourceVersion": "5"}}),
                           (200, {"items": [nrt_obj("b")], "metadata": {"resourceVersion": "10"}})]
    api.watches[NRT_PATH] = [
        (200, [event("MODIFIED", nrt_obj("a", "16", "11")),
               event("BOOKMARK", {"metadata": {"resourceVersion": "14"}})]),
        (200, [event("DELETED", nrt_obj("b", rv="15")), event("ADDED", nrt_obj("c", rv="16"))]),
    ]
    store = Store(nrt_topology)
    run_reflector(api, NRT_PATH, store, stop, lambda: "c" in store.items)
    assert sorted(store.items) == ["a", "c"]
    assert store.items["a"].zones[0].allocatable["cpu"] == 16_000
    lists = [q for kind, _, q in api.calls if kind == "list"]
    assert lists == [{"limit": str(watch.PAGE)}, {"limit": str(watch.PAGE), "continue": "t1"}]
    watches = [q["resourceVersion"] for kind, _, q in api.calls if kind == "watch"]
    assert watches[:2] == ["10", "14"]  # the second resumes from the bookmark, without a new list
    assert all(q["allowWatchBookmarks"] == "true" for kind, _, q in api.calls if kind == "watch")


@pytest.mark.parametrize("gone", ["status", "event"])
def test_an_expired_resource_version_lists_again(gone: str) -> None:
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[NRT_PATH] = [(200, {"items": [nrt_obj("a")], "metadata": {"resourceVersion": "10"}}),
                           (200, {"items": [nrt_obj("z")], "metadata": {"resourceVersion": "99"}})]
    expired = (410, []) if gone == "status" else (200, [event("ERROR", {"kind": "Status", "code": 410})])
    api.watches[NRT_PATH] = [expired]
    store = Store(nrt_topology)
    run_reflector(api, NRT_PATH, store, stop, lambda: "z" in store.items)
    assert list(store.items) == ["z"]  # replaced by the new list, not merged
    assert [kind for kind, _, _ in api.calls][:3] == ["list", "watch", "list"]


@pytest.mark.parametrize(("status", "said"), [
    (404, "the NodeResourceTopology CRD (topology.node.k8s.io/v1alpha2) is not installed"),
    (403, "listing noderesourcetopologies is not allowed (HTTP 403 forbidden): grant list and watch"),
])
def test_a_refused_list_is_said_with_the_way_out(status: int, said: str) -> None:
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[NRT_PATH] = [(status, {"message": "forbidden"})]
    problems = run_reflector(api, NRT_PATH, Store(nrt_topology), stop, lambda: True)
    assert problems and problems[0] is not None and problems[0].startswith(said)


def test_an_unreachable_api_is_retried_with_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "BACKOFF_FIRST", 0.01)
    stop = threading.Event()
    api = Scripted(stop)
    failures = iter([ClusterError("cannot reach the API server: refused")] * 3)

    def get(path: str, query: list[tuple[str, str]], accept: str) -> tuple[int, Any]:
        for failure in failures:
            raise failure
        return 200, {"items": [nrt_obj("a")], "metadata": {"resourceVersion": "3"}}

    api.get = get  # type: ignore[method-assign]
    store = Store(nrt_topology)
    problems = run_reflector(api, NRT_PATH, store, stop, lambda: bool(store.items))
    assert problems[:3] == ["noderesourcetopologies: cannot reach the API server: refused; retrying"] * 3
    assert problems[-1] is None and "a" in store.items


def test_a_watch_event_over_the_bound_is_an_error_not_memory() -> None:
    assert list(lines(iter([b'{"a":1}\n{"b"', b':2}\n\n']))) == [b'{"a":1}', b'{"b":2}']
    with pytest.raises(ClusterError, match="over 16 bytes"):
        list(lines(iter([b"x" * 10, b"y" * 10]), limit=16))


def test_objects_beyond_the_bound_are_left_out_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "MAX_OBJECTS", 2)
    store = Store(node_view)
    store.replace([node("a"), node("b"), node("c")])
    assert sorted(store.items) == ["a", "b"] and store.truncated
    cache = TopologyCache(Scripted(threading.Event()))
    cache.nodes = store
    assert "over 2 nodes" in (cache.publish().problem or "")


def test_an_unreadable_object_leaves_its_node_unknown() -> None:
    store = Store(nrt_topology)
    store.replace([nrt_obj("a"), {**nrt_obj("b"), "zones": [{"name": "node-0", "type": "Node", "resources": [
        {"name": "cpu", "capacity": "many", "allocatable": "1", "available": "1"}]}]}])
    assert list(store.items) == ["a"]


def test_snapshots_say_what_is_missing() -> None:
    cache = TopologyCache(Scripted(threading.Event()))
    assert cache.snapshot().nodes is None
    cache.nodes.replace([node("n1", pool="gpu")])
    cache.nrts.replace([])
    first = cache.publish()
    assert first.nodes == {"n1": {"pool": "gpu"}} and first.problem == \
        "no NodeResourceTopology objects: no node publishes its NUMA zones"
    cache.nrts.apply("ADDED", nrt_obj("n1"))
    second = cache.publish()
    assert second.problem is None and list(second.topologies) == ["n1"]
    assert first.topologies == {}  # a published snapshot never changes under a request


def test_read_once_for_check_and_audit() -> None:
    api = Scripted(threading.Event())
    api.lists[NODES_PATH] = [(200, {"items": [node("n1", zone="a")], "metadata": {"resourceVersion": "1"}})]
    api.lists[NRT_PATH] = [(404, {"message": "the server could not find the requested resource"})]
    topology = read_topology(api)
    assert topology.nodes == {"n1": {"zone": "a"}} and topology.topologies == {}
    assert topology.problem is not None and "CRD" in topology.problem


def test_the_state_is_said_once_per_change(caplog: pytest.LogCaptureFixture) -> None:
    from prometheus_client import CollectorRegistry

    from webhook.core.numatopology import Topology
    from webhook.serving.metrics import TopologyMetrics
    from webhook.serving.topologycache import TopologyReport

    registry = CollectorRegistry()
    report = TopologyReport(TopologyMetrics.create(registry))
    missing = Topology(nodes={"n": {}}, problem="the NodeResourceTopology CRD is not installed")
    with caplog.at_level("WARNING", logger="qos_guard.topology"):
        for _ in range(3):
            report(missing)
        report(Topology(nodes={"n": {}}, topologies={"n": nrt_topology(nrt_obj("n"))}))  # type: ignore[dict-item]
    said = [json.loads(r.message) for r in caplog.records]
    assert [s.get("problem") for s in said] == ["the NodeResourceTopology CRD is not installed", None]
    assert registry.get_sample_value("qos_guard_numa_topology_available") == 1
    assert registry.get_sample_value("qos_guard_numa_topology_objects") == 1


_junk = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
                         ["type", "object", "metadata", "name", "resourceVersion", "code", "items", "zones",
                          "labels", "continue"]), inner, max_size=4), max_leaves=16)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(_junk.map(lambda v: json.dumps(v).encode()), st.binary(max_size=20)), max_size=6),
       _junk)
def test_whatever_the_api_sends_the_reflector_goes_on(events: list[bytes], listed: Any) -> None:
    """Junk events and list answers are errors it retries after, never an exception that ends its thread."""
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[NRT_PATH] = [(200, listed), (200, {"items": [nrt_obj("a")], "metadata": {"resourceVersion": "1"}})]
    api.watches[NRT_PATH] = [(200, events)]
    store = Store(nrt_topology)
    reflector = TopologyReflector("noderesourcetopologies", api, NRT_PATH, ("", ""), store, lambda *_: None, stop)
    thread = threading.Thread(target=reflector.run, daemon=True)
    original = watch.BACKOFF_FIRST
    watch.BACKOFF_FIRST = 0.001
    try:
        thread.start()
        waiting.eventually("a second watch", lambda: len([c for c in api.calls if c[0] == "watch"]) >= 2,
                           within=5, every=0.01)
        assert thread.is_alive()  # still watching (or retrying), not dead of an exception
    finally:
        stop.set()
        thread.join(5)
        watch.BACKOFF_FIRST = original
    assert all(isinstance(v, NodeTopology) for v in store.items.values())


def test_a_nodes_lasting_taints_are_kept_its_passing_state_is_not() -> None:
    """A GPU pool's taint decides where a Pod can land; NotReady, pressure, a cordon or an uninitialised cloud
    node come and go, and must not turn a workload's verdict for as long as they last."""
    obj = {**node("gpu-1", pool="gpu"), "spec": {"taints": [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
        {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"},
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}}
    view = node_view(obj)
    assert view.labels == {"pool": "gpu"}
    assert view.taints == (Taint("nvidia.com/gpu", "present", "NoSchedule"),
                           Taint("node-role.kubernetes.io/control-plane", "", "NoSchedule"))
    store = Store(node_view)
    store.replace([obj, node("cpu-1")])
    cache = TopologyCache(Scripted(threading.Event()))
    cache.nodes = store
    snap = cache.publish()
    assert snap.nodes == {"gpu-1": {"pool": "gpu"}, "cpu-1": {}} and set(snap.taints) == {"gpu-1"}
