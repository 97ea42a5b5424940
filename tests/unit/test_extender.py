"""``qos-guard extender`` through Flask's test client: kube-scheduler's ExtenderArgs in, ExtenderFilterResult and
HostPriorityList out, over NRTs and bound Pods handed in (the real scheduler and API server: tests/e2e)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.waiting import eventually, parked_in
from webhook.extender.fingerprint import fingerprint, xxh64
from webhook.extender.reservations import BoundPod, NodeState, bound_pod, pod_demands, read_nrt
from webhook.extender.view import BATCH, View
from webhook.serving.extender_app import create_extender_app

GPU = "example.com/gpu"
NOW = 1_800_000_000.0


def nrt(name: str, zones: list[dict[str, str]], policy: str = "single-numa-node", scope: str = "container",
        available: list[dict[str, str]] | None = None, **attrs: str) -> dict[str, Any]:
    free = available or zones
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": name},
            "attributes": [{"name": "topologyManagerPolicy", "value": policy},
                           {"name": "topologyManagerScope", "value": scope},
                           *({"name": k, "value": v} for k, v in attrs.items())],
            "zones": [{"name": f"node-{i}", "type": "Node",
                       "resources": [{"name": k, "capacity": v, "allocatable": v, "available": free[i].get(k, v)}
                                     for k, v in z.items()]} for i, z in enumerate(zones)]}


def pod(name: str = "p", cpu: str = "4", gpu: int = 1, memory: str = "1Gi") -> dict[str, Any]:
    limits = {"cpu": cpu, "memory": memory} | ({GPU: str(gpu)} if gpu else {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [{"name": "app", "image": "x", "resources": {"limits": limits,
                                                                              "requests": dict(limits)}}]}}


ZONE = {"cpu": "4", "memory": "16Gi", GPU: "1"}
NO_GPU = {"cpu": "4", "memory": "16Gi"}
SMALL = {"cpu": "2", "memory": "16Gi", GPU: "1"}


def states(*objs: dict[str, Any]) -> dict[str, NodeState]:
    out = {}
    for o in objs:
        s = read_nrt(o)
        assert s is not None
        out[o["metadata"]["name"]] = s
    return out


def client(view: View) -> Any:
    return create_extender_app(lambda: view, clock=lambda: NOW).test_client()


def call(view: View, verb: str, body: Any) -> Any:
    return client(view).post(f"/{verb}", data=body if isinstance(body, bytes) else json.dumps(body),
                             content_type="application/json")


CLUSTER = states(
    nrt("fits", [ZONE, NO_GPU]),
    nrt("busy", [ZONE, NO_GPU], available=[{"cpu": "2"}, {}]),  # the GPU's zone has 2 CPUs free now
    nrt("small", [SMALL, SMALL]),  # no NUMA node has 4 CPUs at all
    nrt("spread", [SMALL, SMALL], policy="best-effort"),
)


def test_filter_keeps_where_it_fits_and_says_why_per_node() -> None:
    answer = call(View(CLUSTER), "filter", {"Pod": pod(), "NodeNames": ["fits", "busy", "small", "spread",
                                                                        "no-nrt"]})
    assert answer.status_code == 200, answer.json
    out = answer.json
    assert out["NodeNames"] == ["fits", "spread", "no-nrt"]  # unknown never refused; best-effort admits across
    assert set(out["FailedNodes"]) == {"busy"}
    assert "none has that free now" in out["FailedNodes"]["busy"]
    assert "4 CPUs and 1Gi memory and 1 example.com/gpu" in out["FailedNodes"]["busy"]
    assert set(out["FailedAndUnresolvableNodes"]) == {"small"}  # preemption cannot make room that is not there
    assert "more than any NUMA node of this node has" in out["FailedAndUnresolvableNodes"]["small"]
    assert "TopologyAffinityError" in out["FailedAndUnresolvableNodes"]["small"]
    assert out["Error"] == ""


def test_a_node_that_publishes_no_memory_is_not_said_to_lack_it() -> None:
    """Memory Manager None: the node's NRT has no memory in any zone and memory is no constraint there, so the
    reason names the CPUs and the GPU it cannot put together, not the Pod's memory."""
    view = View(states(nrt("mm-none", [{"cpu": "4", GPU: "1"}, {"cpu": "4"}], available=[{"cpu": "2"}, {}])))
    out = call(view, "filter", {"Pod": pod(), "NodeNames": ["mm-none"]}).json
    assert "needs 4 CPUs and 1 example.com/gpu on one NUMA node; none has that free now" in out["FailedNodes"][
        "mm-none"], out


def test_a_gpu_and_cpus_on_different_numa_nodes_are_said_to_be_apart() -> None:
    """The real node's case: the GPU on NUMA 0, the only allocatable CPU on NUMA 1. Neither part is too large for
    a NUMA node; they are on different ones, and the reason says that, not 'more than any NUMA node has'."""
    view = View(states(nrt("split", [{GPU: "1"}, {"cpu": "1"}])))
    out = call(view, "filter", {"Pod": pod(cpu="1"), "NodeNames": ["split"]}).json
    assert out["FailedAndUnresolvableNodes"]["split"].startswith(
        'qos-guard: container "app" (spec.containers[0]) needs 1 CPU and 1 example.com/gpu on one NUMA node; this '
        "node has each on some NUMA node, never all on one"), out


def test_field_names_are_read_as_go_reads_them() -> None:
    out = call(View(CLUSTER), "filter", {"pod": pod(), "nodenames": ["busy"]}).json  # encoding/json ignores case
    assert out["NodeNames"] == [] and "busy" in out["FailedNodes"]


def test_whole_nodes_when_not_node_cache_capable() -> None:
    nodes = {"items": [{"metadata": {"name": "fits"}}, {"metadata": {"name": "small"}}]}
    out = call(View(CLUSTER), "filter", {"Pod": pod(), "Nodes": nodes}).json
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["fits"]
    assert "NodeNames" not in out


def test_a_pod_that_aligns_nothing_is_kept_everywhere() -> None:
    burstable = pod(cpu="500m", gpu=0)
    burstable["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "100m"}
    out = call(View(CLUSTER), "filter", {"Pod": burstable, "NodeNames": ["busy", "small"]}).json
    assert out["NodeNames"] == ["busy", "small"] and not out["FailedAndUnresolvableNodes"]
    scores = call(View(CLUSTER), "prioritize", {"Pod": burstable, "NodeNames": ["busy", "small"]}).json
    assert scores == [{"Host": "busy", "Score": 0}, {"Host": "small", "Score": 0}]


def test_prioritize_prefers_the_zone_it_fills() -> None:
    cluster = states(nrt("roomy", [{"cpu": "16", "memory": "64Gi", GPU: "2"}]),
                     nrt("snug", [{"cpu": "4", "memory": "1Gi", GPU: "1"}]),
                     nrt("half", [{"cpu": "8", "memory": "2Gi", GPU: "2"}]))
    out = call(View(cluster), "prioritize", {"Pod": pod(), "NodeNames": ["roomy", "snug", "half", "no-nrt",
                                                                         "busy"]}).json
    score = {h["Host"]: h["Score"] for h in out}
    assert score["snug"] == 10  # nothing of what it takes left over in its zone
    assert score["roomy"] < score["half"] < score["snug"]
    assert score["no-nrt"] == 0 and all(0 <= s <= 10 for s in score.values())


def bound(name: str, node: str, at: float, **kw: Any) -> BoundPod:
    return BoundPod("ns", name, node, at, wants=pod_demands(pod(name)), **kw)


def test_a_pod_bound_since_the_nrt_changed_is_held_against_its_node() -> None:
    cluster = states(nrt("a", [ZONE, ZONE]))
    first = View(cluster, {"a": [bound("first", "a", NOW - 5)]})
    out = call(first, "filter", {"Pod": pod("second"), "NodeNames": ["a"]}).json
    assert out["NodeNames"] == ["a"]  # the second zone is still free
    both = View(cluster, {"a": [bound("first", "a", NOW - 5), bound("second", "a", NOW - 4)]})
    out = call(both, "filter", {"Pod": pod("third"), "NodeNames": ["a"]}).json
    assert out["NodeNames"] == [] and "none has that free now" in out["FailedNodes"]["a"]
    # A node of the same shape without those reservations is judged on its own.
    twins = View(states(nrt("a", [ZONE, ZONE]), nrt("b", [ZONE, ZONE])),
                 {"a": [bound("first", "a", NOW - 5), bound("second", "a", NOW - 4)]})
    out = call(twins, "filter", {"Pod": pod("third"), "NodeNames": ["a", "b"]}).json
    assert out["NodeNames"] == ["b"] and list(out["FailedNodes"]) == ["a"]
    # Held no longer than the timeout, and never once terminal.
    late = View(cluster, {"a": [bound("first", "a", NOW - 500), bound("second", "a", NOW - 4, terminal=True)]})
    assert call(late, "filter", {"Pod": pod("third"), "NodeNames": ["a"]}).json["NodeNames"] == ["a"]


def test_the_fingerprint_lets_reservations_go_once_the_nrt_counts_them() -> None:
    on_node = [bound("first", "a", NOW - 5), bound("second", "a", NOW - 4)]
    # The exporter counted the first (its zone shows it taken) and not the second yet: the second is held.
    stale = states(nrt("a", [ZONE, ZONE], available=[{"cpu": "0", GPU: "0"}, {}],
                       nodeTopologyPodsFingerprint=fingerprint([("ns", "first")])))
    assert call(View(stale, {"a": on_node}), "filter", {"Pod": pod("third"), "NodeNames": ["a"]}).json[
        "NodeNames"] == []
    # The exporter counted both (and published the zones' availability with them): its numbers say it all.
    counted = states(nrt("a", [ZONE, ZONE], available=[{"cpu": "4"}, {"cpu": "4"}],
                         nodeTopologyPodsFingerprint=fingerprint([("ns", "first"), ("ns", "second")])))
    assert call(View(counted, {"a": on_node}), "filter", {"Pod": pod("third"), "NodeNames": ["a"]}).json[
        "NodeNames"] == ["a"]


def test_a_stale_fingerprint_does_not_subtract_the_pods_the_nrt_counts() -> None:
    # The NRT counts the first (zone 0 taken) and not the second: only the second is held, the third zone free.
    on_node = [bound("first", "a", NOW - 5), bound("second", "a", NOW - 4)]
    stale = states(nrt("a", [ZONE, ZONE, ZONE], available=[{"cpu": "0", GPU: "0"}, {}, {}],
                       nodeTopologyPodsFingerprint=fingerprint([("ns", "first")])))
    view = View(stale, {"a": on_node})
    assert [p.key for p in view.held("a", NOW)] == [("ns", "second")]
    assert call(view, "filter", {"Pod": pod("third"), "NodeNames": ["a"]}).json["NodeNames"] == ["a"]
    # A fingerprint of Pods this view never saw matches nothing: only the Pods seen bound since the NRT changed
    # are held (none here), never the ones it already counts.
    view = View(pods={"a": [bound("first", "a", NOW - 5)]})
    view.set_nrt("a", states(nrt("a", [ZONE, ZONE], available=[{"cpu": "0", GPU: "0"}, {}],
                                 nodeTopologyPodsFingerprint=fingerprint([("ns", "first"), ("kube-system", "x")])))[
        "a"])
    assert view.held("a", NOW) == []
    assert call(view, "filter", {"Pod": pod("third"), "NodeNames": ["a"]}).json["NodeNames"] == ["a"]
    assert view.unmatched >= 1


def test_fingerprint_matches_the_upstream_package() -> None:
    assert xxh64(b"") == 0xEF46DB3751D8E999
    assert xxh64(b"abc") == 0x44BC2CF5AD770999
    # k8stopologyawareschedwg/podfingerprint testdata/compat-tiny-3pods-1ns.{txt,sign}
    pods = [("production", "jaeger-dpgjk"), ("production", "nginx-rt684"), ("production", "envoy-g9m22")]
    assert fingerprint(pods) == "pfp0v001607b76a0e9d3aeb4"
    assert fingerprint(reversed(pods)) == "pfp0v001607b76a0e9d3aeb4"


def test_long_names_take_the_striped_path() -> None:
    # 39 bytes: the 32-byte stripes, then a lane, a word and bytes (the Python xxhash binding's own test vector).
    assert xxh64(b"Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1


@pytest.mark.parametrize(("body", "reason"), [
    (b"{not json", "the body is not JSON"),
    ([], "ExtenderArgs must be a JSON object, not list"),
    ({"NodeNames": ["a"]}, "Pod: missing or not an object"),
    ({"Pod": {"metadata": {}}, "NodeNames": ["a"]}, "Pod.spec: missing"),
    ({"Pod": pod(), "NodeNames": "a"}, "NodeNames: must be a list of node names"),
    ({"Pod": pod()}, "NodeNames (nodeCacheCapable: true) or Nodes: one is required"),
    ({"Pod": pod(), "Nodes": {"items": [{}]}}, "Nodes.items[0].metadata.name: missing"),
    ({"Pod": {"spec": {"containers": "x"}}, "NodeNames": ["a"]}, "Pod.spec.containers"),
])
def test_bad_input_is_a_400_with_the_reason(body: Any, reason: str) -> None:
    for verb in ("filter", "prioritize"):
        answer = call(View(CLUSTER), verb, body)
        assert answer.status_code == 400, answer.data
        assert reason in answer.json["reason"], answer.json


@pytest.mark.parametrize(("raw", "reason"), [
    (b"{not json", "the body is not JSON"),
    (b"[]", "ExtenderBindingArgs must be a JSON object, not list"),
    (b'"x"', "ExtenderBindingArgs must be a JSON object, not str"),
])
def test_a_binding_body_that_is_no_json_object_is_refused_with_the_reason(raw: bytes, reason: str) -> None:
    """``/bind`` reads its body as ``/filter`` does (one decoding), naming its own type."""
    from webhook.extender.protocol import BadArgs, parse_binding

    with pytest.raises(BadArgs, match=reason):
        parse_binding(raw)


def test_a_bound_pod_is_read_from_the_api_object() -> None:
    obj = pod("x") | {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2027-01-15T08:00:00Z"}]}}
    obj["spec"]["nodeName"] = "n1"
    got = bound_pod(obj)
    assert got is not None and got.node == "n1" and got.key == ("ns", "x") and got.wants is not None
    assert time.gmtime(got.scheduled_at)[:4] == (2027, 1, 15, 8)
    del obj["spec"]["nodeName"]
    assert bound_pod(obj) is None


def test_a_filter_waits_for_the_pod_kept_before_it_to_be_seen_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from webhook.serving import extender_cache as extender

    cache = extender.ExtenderCache(transport=None)
    monkeypatch.setattr(extender, "SETTLE", 0.3)
    wants = pod_demands(pod("first"))
    cache.kept("first", ("ns", "first"), wants)
    started = time.monotonic()
    assert cache.settle("first")  # its own retry never waits for itself
    assert time.monotonic() - started < 0.1
    cache.kept("first", ("ns", "first"), wants)
    started = time.monotonic()
    assert not cache.settle("second")  # never seen bound: waited for, up to SETTLE, and counted
    assert 0.25 < time.monotonic() - started < 1.0
    assert cache.counters["unsettled"] == 1
    cache.kept("first", ("ns", "first"), wants)
    obj = pod("first") | {"status": {}}
    obj["metadata"]["uid"] = "first"
    obj["spec"]["nodeName"] = "a"
    cache.pods.apply("ADDED", obj)
    cache._changed("pods", None)
    started = time.monotonic()
    cache.settle("second")  # seen bound: no wait, and held against its node
    assert time.monotonic() - started < 0.1
    assert [p.key for p in cache.view().pods["a"]] == [("ns", "first")]


def listed(cache: Any, nrts: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
    cache.nrts.replace(nrts)
    cache.pods.replace(pods)
    for name in ("noderesourcetopologies", "pods"):
        cache._changed(name, None)


def with_uid(obj: dict[str, Any], uid: str, node: str | None = None) -> dict[str, Any]:
    obj["metadata"]["uid"] = uid
    if node:
        obj["spec"]["nodeName"] = node
    return obj


def test_bind_reserves_at_the_moment_of_decision_and_wakes_the_next_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    """kube-scheduler's assume, through bindVerb: the Pod is held on its node before the Binding is POSTed, and a
    filter waiting for it goes on at once (the last free zone is not handed out twice)."""
    import threading

    from webhook.serving import extender_cache as extender

    posted: list[tuple[str, ...]] = []

    def binder(namespace: str, name: str, uid: str, node: str) -> str:
        # The reservation is already in the view when the POST goes out.
        assert cache.view().pod((namespace, name)) is not None
        posted.append((namespace, name, uid, node))
        return ""

    cache = extender.ExtenderCache(transport=None, binder=binder)
    listed(cache, [nrt("a", [ZONE, ZONE]), nrt("b", [ZONE])], [])
    app = create_extender_app(cache.view, clock=time.time, cache=cache).test_client()

    def filtered(name: str) -> Any:
        body = {"Pod": with_uid(pod(name), name), "NodeNames": ["a", "b"]}
        return app.post("/filter", data=json.dumps(body), content_type="application/json")

    first = filtered("first")
    assert first.json["NodeNames"] == ["a", "b"] and first.headers["X-Qos-Guard-View"] == "complete"
    monkeypatch.setattr(extender, "SETTLE", 5.0)
    later = threading.Timer(0.2, lambda: app.post("/bind", data=json.dumps(
        {"PodName": "first", "PodNamespace": "ns", "PodUID": "first", "Node": "b"}),
        content_type="application/json"))
    later.start()
    started = time.monotonic()
    second = filtered("second")  # waits for first's bind, not for SETTLE
    assert 0.15 < time.monotonic() - started < 2.0
    later.join()
    assert posted == [("ns", "first", "first", "b")]
    assert second.json["NodeNames"] == ["a"] and "b" in second.json["FailedNodes"]
    assert cache.counters["unsettled"] == 0 and cache.counters["bind_ok"] == 1
    assert 'qos_guard_extender_binds_total{result="ok"} 1' in app.get("/metrics").text


def test_a_refused_binding_is_forgotten() -> None:
    from webhook.serving import extender_cache as extender

    cache = extender.ExtenderCache(transport=None, binder=lambda *_: "HTTP 409 pods \"first\" already bound")
    listed(cache, [nrt("b", [ZONE])], [])
    app = create_extender_app(cache.view, clock=time.time, cache=cache).test_client()
    app.post("/filter", data=json.dumps({"Pod": with_uid(pod("first"), "u1"), "NodeNames": ["b"]}),
             content_type="application/json")
    out = app.post("/bind", data=json.dumps({"podName": "first", "podNamespace": "ns", "podUID": "u1", "node": "b"}),
                   content_type="application/json")
    assert out.status_code == 200 and "already bound" in out.get_json()["Error"]
    assert cache.view().pod(("ns", "first")) is None and cache.counters["bind_error"] == 1
    bad = app.post("/bind", data=json.dumps({"PodName": "x"}), content_type="application/json")
    assert bad.status_code == 400 and "PodNamespace: missing" in bad.get_json()["reason"]


def test_the_e2e_fingerprint_sequence_frees_the_zone_unless_a_pod_took_it() -> None:
    """The end-to-end fingerprint scenario replayed event by event through bind and the watches: three zones,
    f-0, f-1, f-2 bound through ``/bind``, the NRT counting f-0; f-2 deleted and the NRT then counting f-0 and f-1:
    the third zone is free again (no reservation left behind). What the real kube-scheduler did there (the Pod
    refused for want of that zone, f-3, retried at f-2's deletion and bound before the probe looked) takes it."""
    from webhook.serving import extender_cache as extender

    zones = [ZONE, ZONE, ZONE]

    def published(counted: list[str]) -> dict[str, Any]:
        busy = [{"cpu": "0", GPU: "0"} if i < len(counted) else {} for i in range(3)]
        return nrt("f", zones, available=busy, nodeTopologyPodsFingerprint=fingerprint(("ns", n) for n in counted))

    def score(app: Any) -> int:
        body = {"Pod": pod("probe"), "NodeNames": ["f"]}
        return int(app.post("/prioritize", data=json.dumps(body), content_type="application/json").json[0]["Score"])

    def bind(cache: Any, app: Any, name: str) -> None:
        body = {"Pod": with_uid(pod(name), name), "NodeNames": ["f"]}
        assert app.post("/filter", data=json.dumps(body), content_type="application/json").json["NodeNames"] == ["f"]
        out = app.post("/bind", data=json.dumps({"PodName": name, "PodNamespace": "ns", "PodUID": name, "Node": "f"}),
                       content_type="application/json")
        assert out.json["Error"] == ""
        cache.pods.apply("ADDED", with_uid(pod(name), name, node="f"))  # the watch shows the binding

    for retried in (False, True):
        cache = extender.ExtenderCache(transport=None, binder=lambda *_: "")
        listed(cache, [published([])], [])
        app = create_extender_app(cache.view, clock=time.time, cache=cache).test_client()
        bind(cache, app, "f-0")
        bind(cache, app, "f-1")
        cache.nrts.apply("MODIFIED", published(["f-0"]))
        assert score(app) > 0  # f-0 counted by the NRT, f-1 held: the third zone free
        bind(cache, app, "f-2")
        assert score(app) == 0
        cache.pods.apply("DELETED", with_uid(pod("f-2"), "f-2", node="f"))
        if retried:
            bind(cache, app, "f-3")
        cache.nrts.apply("MODIFIED", published(["f-0", "f-1"]))
        assert [p.key for p in cache.view().held("f", time.time())] == ([("ns", "f-3")] if retried else [])
        assert (score(app) == 0) is retried, retried
        assert cache.view().unmatched == 0


def test_an_incomplete_view_is_never_silent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not listed yet: the filter answers an error (kube-scheduler retries the Pod); listed but a watch broken:
    judged on what was last seen (it holds this extender's own bindings); not listed long after the start, or
    truncated: every node kept. Each time a readiness failure, a metric, and the answer's header."""
    from webhook.serving import extender_cache as extender

    cache = extender.ExtenderCache(transport=None)
    app = create_extender_app(cache.view, clock=time.time, cache=cache).test_client()
    assert app.get("/readyz").status_code == 503 and "not listed yet" in app.get("/readyz").text
    cache.nrts.replace([nrt("small", [SMALL, SMALL])])
    cache._changed("noderesourcetopologies", None)
    body = json.dumps({"Pod": pod(), "NodeNames": ["small"]})
    out = app.post("/filter", data=body, content_type="application/json")
    assert "starting, its view is not listed yet (pods: not listed yet)" in out.get_json()["Error"]
    assert out.headers["X-Qos-Guard-View"].startswith("starting")
    assert 'qos_guard_extender_view_incomplete{store="pods"} 1' in app.get("/metrics").text
    monkeypatch.setattr(extender, "STARTING", 0.0)
    out = app.post("/filter", data=body, content_type="application/json")
    assert out.get_json()["NodeNames"] == ["small"] and out.get_json()["Error"] == ""  # long unlisted: unknown, kept
    assert "partial (every node kept): pods: not listed yet" in out.headers["X-Qos-Guard-View"]
    cache.pods.replace([])
    cache._changed("pods", None)
    assert app.get("/readyz").status_code == 200
    out = app.post("/filter", data=body, content_type="application/json")
    assert out.get_json()["NodeNames"] == [] and out.headers["X-Qos-Guard-View"] == "complete"
    cache._changed("pods", "pods: connection refused; retrying")
    out = app.post("/filter", data=body, content_type="application/json")
    assert out.get_json()["NodeNames"] == [] and "stale (judged on what was last seen): pods: not watching" in \
        out.headers["X-Qos-Guard-View"]
    assert app.get("/readyz").status_code == 503
    cache.pods.truncated = True
    cache._changed("pods", None)
    assert app.post("/filter", data=body, content_type="application/json").get_json()["NodeNames"] == ["small"]


def test_a_truncated_store_is_said_and_a_relist_replaces_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    from webhook.serving import extender_cache as extender

    cache = extender.ExtenderCache(transport=None)
    cache.pods.limit = 2
    objs = [with_uid(pod(f"p{i}"), f"u{i}", "a") for i in range(3)]
    listed(cache, [nrt("a", [ZONE, ZONE])], objs)
    assert cache.pods.truncated and len(cache.view()) == 2
    assert any("pods: truncated at 2 objects" in r for r in cache.incomplete())
    # A relist keeps what it lists, drops what it does not, and keeps each Pod's first-seen order.
    before = {p.key: p.seen for p in cache.view().pods["a"]}
    cache.pods.replace([objs[1]])
    assert not cache.pods.truncated and [p.key for p in cache.view().pods["a"]] == [("ns", "p1")]
    assert cache.view().pods["a"][0].seen == before[("ns", "p1")]
    assert cache.incomplete() == []


def test_a_sink_is_rebuilt_from_the_last_whole_list_only() -> None:
    """The one pager (``Listing``) hands reflectors pages through ``rebuild``; a page that restarts the list (an
    expired continue token) voids what came before it, so an object deleted meanwhile is not kept."""
    from webhook.cluster.pager import Page
    from webhook.serving.extender_cache import Sink

    class Keys(Sink):
        def __init__(self) -> None:
            super().__init__(limit=100)
            self.items: dict[str, object] = {}

        def keys(self) -> list[str]:
            return list(self.items)

        def count(self) -> int:
            return len(self.items)

        def put(self, key: str, obj: object) -> None:
            self.items[key] = obj

        def drop(self, key: str) -> None:
            del self.items[key]

        def has(self, key: str) -> bool:
            return key in self.items

    def obj(name: str) -> dict[str, object]:
        return {"metadata": {"name": name, "namespace": "ns"}}

    sink = Keys()
    sink.rebuild([Page([obj("a"), obj("b")], "1"), Page([obj("b"), obj("c")], "2", restart=True)])
    assert sorted(sink.items) == ["ns/b", "ns/c"] and sink.listed
    sink.replace([obj("c")])
    assert sorted(sink.items) == ["ns/c"]


def test_a_stored_pods_qos_class_is_the_one_kubelet_reads() -> None:
    """A Pod created on 1.36 with an empty pod-level block was stored BestEffort; kubelet reads that class back
    (``GetPodQOS``), so the extender reserves nothing for it even though 1.37 would compute Guaranteed."""
    stored = pod(gpu=0)
    stored["spec"]["resources"] = {}
    assert pod_demands(stored) is not None  # created now on 1.37: Guaranteed, its 4 CPUs pinned
    stored["status"] = {"qosClass": "BestEffort"}
    assert pod_demands(stored) is None
    stored["status"] = {"qosClass": "Guaranteed"}
    assert pod_demands(stored) is not None


def test_the_clusters_minor_judges_a_pod_without_a_class() -> None:
    """A Pod sent without ``status.qosClass`` (an API server sets it on create; a client of the extender may
    not) with an empty pod-level block: BestEffort up to 1.36 (the block decides alone), Guaranteed from 1.37;
    the extender judges with the minor the API server says, in the verbs and in the watch of bound Pods."""
    from webhook.core.kubeversion import resolve
    from webhook.extender.verdicts import Judge
    from webhook.serving.extender_cache import PodSink

    empty = pod(gpu=0)
    empty["spec"]["resources"] = {}
    assert pod_demands(empty, resolve("1.36")) is None
    assert pod_demands(empty, resolve("1.37")) is not None
    assert Judge.of(empty, resolve("1.36")).wants is None
    bound = empty | {"spec": empty["spec"] | {"nodeName": "fits"}}
    for minor, aligned in (("1.36", False), ("1.37", True)):
        sink = PodSink(View(CLUSTER), 100, lambda uid, key: None, {}, resolve(minor))
        sink.put("ns/p", bound)
        kept = sink.view.pod(("ns", "p"))
        assert kept is not None and (kept.wants is not None) == aligned, minor


def test_the_app_judges_with_its_caches_minor() -> None:
    """The verbs take the minor the cache was started with (the API server's): an empty pod-level block sent
    without a status keeps every node on 1.36 (BestEffort: nothing to align) and is fitted on 1.37."""
    from webhook.core.kubeversion import resolve
    from webhook.serving import extender_cache as extender

    empty = with_uid(pod("e", cpu="4", gpu=0), "e")
    empty["spec"]["resources"] = {}
    answers = {}
    for minor in ("1.36", "1.37"):
        cache = extender.ExtenderCache(transport=None, kube=resolve(minor))
        listed(cache, [nrt("roomy", [NO_GPU]), nrt("tight", [{"cpu": "2", "memory": "16Gi"}])], [])
        app = create_extender_app(cache.view, clock=time.time, cache=cache).test_client()
        out = app.post("/filter", data=json.dumps({"Pod": empty, "NodeNames": ["roomy", "tight"]}),
                       content_type="application/json").get_json()
        answers[minor] = out["NodeNames"]
    assert answers == {"1.36": ["roomy", "tight"], "1.37": ["roomy"]}


def test_binds_to_one_node_reach_the_api_server_in_the_order_reserved() -> None:
    """kubelet admits Pods in the order the API server has them: the second Binding to a node goes out only
    once the first is answered, while a Binding to another node does not wait."""
    import threading

    from webhook.serving import extender_cache as extender

    release = threading.Event()
    posted: list[str] = []

    def binder(namespace: str, name: str, uid: str, node: str) -> str:
        posted.append(name)
        if name == "first":
            assert release.wait(5.0)
        return ""

    cache = extender.ExtenderCache(transport=None, binder=binder)
    listed(cache, [nrt("a", [ZONE, ZONE])], [])
    other = next(n for n in (f"n{i}" for i in range(1000)) if extender.stripe(n) != extender.stripe("a"))
    threads = [threading.Thread(target=cache.bind, args=("ns", "first", "u1", "a"))]
    threads[0].start()
    eventually("first's Binding POSTed", lambda: posted == ["first"], 5.0, every=0.01)
    threads.append(threading.Thread(target=cache.bind, args=("ns", "second", "u2", "a")))
    threads[1].start()
    # reserved: its POST would come next
    eventually("second reserved", lambda: cache.view().pod(("ns", "second")) is not None, 5.0, every=0.01)
    assert cache.bind("ns", "elsewhere", "u3", other) == ""  # not held up by node a's queue
    # second is reserved at once (the view holds it), but its Binding waits for first's answer: its thread is
    # parked in node a's queue, the one place between its reservation and its POST.
    eventually("second waiting its turn", lambda: parked_in(threads[1], extender.BindQueue.wait), 5.0, every=0.01)
    assert posted == ["first", "elsewhere"] and cache.view().pod(("ns", "second")) is not None
    release.set()
    for thread in threads:
        thread.join(5.0)
    assert posted == ["first", "elsewhere", "second"] and cache.counters["bind_ok"] == 3


@pytest.mark.parametrize("field, value, said", [
    ("PodName", "a/../../nodes/x", "is not a Pod name (a DNS-1123 subdomain"),
    ("PodName", "p" * 254, "(254 characters) is not a Pod name"),
    ("PodName", "P", "is not a Pod name"),
    ("PodNamespace", "ns.with.dots", "is not a namespace name (a DNS-1123 label"),
    ("PodNamespace", "n" * 64, "is not a namespace name"),
    ("Node", "node?x=1", "is not a Node name"),
    ("PodUID", "u" * 2_000_000, "(2000000 characters) is not a UID"),
])
def test_bind_refuses_what_is_not_a_kubernetes_name(field: str, value: str, said: str) -> None:
    """The names go into the Binding's URL and the log line; what the API server would refuse
    as a name is a 400 naming the field, never a path of our making nor a megabyte log line."""
    from webhook.serving import extender_cache as extender

    called: list[tuple[str, ...]] = []

    def binder(*args: str) -> str:
        called.append(args)
        return ""

    cache = extender.ExtenderCache(transport=None, binder=binder)
    app = create_extender_app(cache.view, clock=time.time, cache=cache).test_client()
    body = {"PodName": "p", "PodNamespace": "ns", "PodUID": "u1", "Node": "n-1.example"} | {field: value}
    out = app.post("/bind", data=json.dumps(body), content_type="application/json")
    assert out.status_code == 400, out.get_data()[:300]
    reason = out.get_json()["reason"]
    assert reason.startswith(f"{field}: ") and said in reason and len(reason) < 400, reason[:400]
    assert called == []
    valid = {"PodName": "p-1.x", "PodNamespace": "ns-1", "PodUID": "u1", "Node": "n-1.example"}
    assert app.post("/bind", data=json.dumps(valid), content_type="application/json").status_code == 200
    assert called == [("ns-1", "p-1.x", "u1", "n-1.example")]


def test_the_binding_url_is_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever reaches the binder (parse_binding lets only names through), each part of the URL is escaped:
    no '/', '..', '?' or '#' can make another path."""
    from webhook.cluster import client
    from webhook.serving import extender_binder

    paths: list[str] = []

    class Refused:
        status = 404
        response = type("R", (), {"read": lambda self, n: b'{"message": "' + b"m" * 5000 + b'"}',
                                  "release_conn": lambda self: None})()

    monkeypatch.setattr(client, "_api_client", lambda kubeconfig: object())
    def call(api: object, method: str, path: str, *rest: object) -> Refused:
        paths.append(path)
        return Refused()

    monkeypatch.setattr(client, "call", call)
    error = extender_binder.ApiBinder(None)("ns/../x", "p?dryRun=All#", "u", "n")
    assert paths == ["/api/v1/namespaces/ns%2F..%2Fx/pods/p%3FdryRun%3DAll%23/binding"]
    assert error.startswith("binding ns/../x/p?dryRun=All# to n: HTTP 404 mmm") and len(error) < 1200, error[-80:]


def pinned(pinner: str) -> dict[str, str]:
    """The agent's ``cpuPinner`` attributes (``webhook.core.cpupinner``)."""
    return {"cpuPinner": pinner, "cpuPinnerSource": "configz+resourceslices"}


# The GPU and memory on NUMA 0, every allocatable CPU on NUMA 1: kubelet's static CPU Manager cannot put the Pod's
# 4 CPUs with its GPU; its none policy gives no CPU hint and takes its CPUs from no NUMA node, so only the GPU and
# the memory are aligned, and they fit NUMA 0.
APART = [{GPU: "1", "memory": "16Gi"}, {"cpu": "8", "memory": "16Gi"}]


@pytest.mark.parametrize("nodes", [1, BATCH + 8])  # one by one (verdicts.Judge), and over arrays (fleet_verdicts)
def test_a_node_whose_cpu_manager_is_none_aligns_no_cpus(nodes: int) -> None:
    objs = []
    for i in range(nodes):  # free shapes of their own (15 per kind): as many as the arrays need
        free = [{"memory": f"{1 + i % 15}Gi"}, {}]
        objs += [nrt(f"none-{i}", APART, available=free, **pinned("none")),
                 nrt(f"dra-{i}", APART, available=free, **pinned("dra.cpu")),
                 nrt(f"static-{i}", APART, available=free, **pinned("cpu-manager")),
                 nrt(f"unknown-{i}", APART, available=free)]
    names = [o["metadata"]["name"] for o in objs]
    out = call(View(states(*objs)), "filter", {"Pod": pod(), "NodeNames": names}).json
    kept = set(out["NodeNames"])
    assert kept == {n for n in names if n.startswith(("none-", "dra-"))}, out
    # Static, or not known (judged as static, as the NUMA fit always has): the CPUs and the GPU are apart.
    refused = set(out["FailedNodes"]) | set(out["FailedAndUnresolvableNodes"])
    assert refused == {n for n in names if n.startswith(("static-", "unknown-"))}, out
