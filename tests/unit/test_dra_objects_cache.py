"""``policy.draObjects: true``: the webhook's cache of ResourceClaims, ResourceClaimTemplates and ResourceSlices
(``webhook/cluster/dracache.py``) on a scripted API (the reflector's own calls are tested against kube-apiserver
in tests/e2e/test_dra_objects.py), and its wiring into each request's ``Facts.dra`` (``create_app``): a Pod is
judged with the claims its namespace holds; a claim not found, a cache not synced or a list refused say
"unknown" (a warning), never "compliant"; a store past its bound is not whole."""

from __future__ import annotations

import functools
import json
import threading
from typing import Any

import pytest

from tests import waiting
from tests.helpers import admission_review
from tests.unit.test_topology_cache import Scripted, event
from webhook.cluster import dracache, watch
from webhook.cluster.dracache import CLAIMS, SLICES, TEMPLATES, WATCHED, DraCache, keep_claim
from webhook.core.config import Config, parse_config
from webhook.core.dracpu import DraFacts
from webhook.serving.app import create_app

PATHS = {resource: path for resource, (_, path, _) in WATCHED.items()}
DENY = parse_config({"policy": {"dra": "deny"}})


def template(name: str, namespace: str, cpus: str | None, paired: bool = False, rv: str = "1") -> dict[str, Any]:
    """A ResourceClaimTemplate asking a GPU and, with ``cpus``, that many dra.cpu CPUs (with a NUMA
    matchAttribute when ``paired``)."""
    requests: list[dict[str, Any]] = [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.example.com", "selectors": [{"cel": {"expression": "x" * 2000}}]}}]
    if cpus is not None:
        requests.append({"name": "cpus", "exactly": {"deviceClassName": "dra.cpu",
                                                     "capacity": {"requests": {"dra.cpu/cpu": cpus}}}})
    devices: dict[str, Any] = {"requests": requests}
    if paired:
        devices["constraints"] = [{"matchAttribute": "dra.net/numaNode"}]
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": rv},
            "spec": {"spec": {"devices": devices}}}


def pod(namespace: str = "ml", cpu: str = "4") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
            "spec": {"resourceClaims": [{"name": "dev", "resourceClaimTemplateName": "gpu-cpus"}],
                     "containers": [{"name": "app", "image": "app:1", "resources": {
                         "requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": cpu, "memory": "1Gi"},
                         "claims": [{"name": "dev"}]}}]}}


def listed(*items: dict[str, Any]) -> list[tuple[int, Any]]:
    return [(200, {"items": list(items), "metadata": {"resourceVersion": "5"}})]


def started(api: Scripted) -> DraCache:
    cache = DraCache(api)
    cache.start()
    waiting.eventually("every kind listed or refused", lambda: cache.wait_synced(0.05), 10, every=0.05)
    return cache


def answer(dra: DraFacts | None, obj: dict[str, Any], config: Config = DENY) -> dict[str, Any]:
    app = create_app(config, dra=None if dra is None else (lambda namespace: dra))
    out = app.test_client().post("/validate", data=json.dumps(admission_review(obj, namespace="ml")),
                                 content_type="application/json")
    return dict(out.get_json()["response"])


def test_claims_are_kept_per_namespace_reduced_and_claims_made_for_pods_not_at_all() -> None:
    """With the CPU classes known when projecting (``check --kubeconfig``, ``audit``) a claim asking no CPUs is its
    name alone; the webhook's cache projects before its DeviceClasses are known, so a claim naming a class other
    than ``dra.cpu`` keeps its reduced spec and its CPUs are told in the namespace's view."""
    keep = keep_claim("ResourceClaimTemplate", frozenset())
    kept = keep(template("gpu-cpus", "ml", "4"))
    assert kept is not None and kept.cpus == 4 and kept.spec is not None
    assert "selectors" not in json.dumps(dict(kept.spec))  # CEL selectors are not what the rules read
    plain = keep(template("gpu-only", "ml", None))
    assert plain is not None and plain.cpus == 0 and plain.spec is None  # a name alone
    webhook = keep_claim("ResourceClaimTemplate")
    kept, plain = webhook(template("gpu-cpus", "ml", "4")), webhook(template("gpu-only", "ml", None))
    assert kept is not None and kept.cpus is None and kept.spec is not None
    assert plain is not None and plain.cpus is None and plain.spec is not None
    assert "selectors" not in json.dumps(dict(plain.spec))
    view = dracache.DraSnapshot((), {"ml": {("ResourceClaimTemplate", "gpu-cpus"): kept,
                                            ("ResourceClaimTemplate", "gpu-only"): plain}}, True, None)
    assert dict(view.for_namespace("ml").cpu_claims or {}) == {("ResourceClaimTemplate", "gpu-cpus"): 4,
                                                               ("ResourceClaimTemplate", "gpu-only"): 0}
    owned = template("gpu-cpus-abc", "ml", "4")
    owned["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": "p", "controller": True, "uid": "u"}]
    assert keep_claim("ResourceClaim")(owned) is None


def test_each_namespace_sees_its_own_claims_and_the_same_name_elsewhere_does_not_blur_them() -> None:
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[PATHS[TEMPLATES]] = listed(template("gpu-cpus", "ml", "4"), template("gpu-cpus", "other", "2"))
    api.watches[PATHS[TEMPLATES]] = [(200, [event("ADDED", template("later", "ml", "1", rv="6"))])]
    cache = started(api)
    try:
        waiting.eventually("the watched template published", lambda: ("ResourceClaimTemplate", "later") in (
            cache.snapshot().for_namespace("ml").cpu_claims or {}), 10, every=0.05)
        ml, other = cache.snapshot().for_namespace("ml"), cache.snapshot().for_namespace("other")
        assert ml.claims_whole and ml.claims_unknown is None
        assert (ml.cpu_claims or {})[("ResourceClaimTemplate", "gpu-cpus")] == 4
        assert (other.cpu_claims or {})[("ResourceClaimTemplate", "gpu-cpus")] == 2
        assert cache.snapshot().for_namespace("ml") is ml  # one view per namespace per snapshot
        assert ml.devices == ()  # slices listed (none)
    finally:
        stop.set()
        cache.stop()


def test_a_pod_is_refused_with_its_namespace_s_claim_and_unknown_is_said_never_passed() -> None:
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[PATHS[TEMPLATES]] = listed(template("gpu-cpus", "ml", "4"))
    cache = started(api)
    try:
        view = cache.snapshot().for_namespace("ml")
        refused = answer(view, pod())
        assert refused["allowed"] is False
        assert "dra-cpu-unpaired: " in refused["status"]["message"], refused["status"]["message"]
        assert "claim dev (ResourceClaimTemplate gpu-cpus)" in refused["status"]["message"]
        best_effort = pod()
        del best_effort["spec"]["containers"][0]["resources"]["requests"]
        del best_effort["spec"]["containers"][0]["resources"]["limits"]
        message = answer(view, best_effort)["status"]["message"]
        assert "dra-cpu-not-mirrored: " in message and "ask 4 CPUs of dra.cpu" in message, message
        missing = pod()
        missing["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "nowhere"
        said = answer(view, missing, Config())  # (with policy.dra: deny, dra-unaligned refuses it: CPUs not DRA's)
        assert said["allowed"] is True  # unknown is not a refusal, and is said
        assert any(w.startswith("dra-cpu-not-mirrored: unknown: ") and "nowhere" in w
                   for w in said.get("warnings", [])), said
    finally:
        stop.set()
        cache.stop()
    # the same Pod without the cache: nothing is known, the DRA CPU rules say nothing
    assert "dra-cpu-" not in json.dumps(answer(None, pod()))


def test_not_synced_refused_and_truncated_claims_are_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    assert DraCache(Scripted(threading.Event())).snapshot().for_namespace("ml").claims_unknown == dracache.NOT_SYNCED
    monkeypatch.setattr(watch, "RETRY_MISSING", 0.02)
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[PATHS[CLAIMS]] = [(403, {"message": "forbidden"})]
    cache = started(api)
    try:
        waiting.eventually("the refusal published", lambda: cache.snapshot().claims is None
                           and CLAIMS in cache.refused, 10, every=0.05)
        view = cache.snapshot().for_namespace("ml")
        assert view.cpu_claims is None and "grant list and watch on resourceclaims" in str(view.claims_unknown)
        warnings = answer(view, pod()).get("warnings", [])
        assert any(w.startswith("dra-cpu-unpaired: unknown: ") for w in warnings), warnings
    finally:
        stop.set()
        cache.stop()
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[PATHS[TEMPLATES]] = listed(template("gpu-cpus", "ml", "4"), template("b", "ml", "1"))
    cache = DraCache(api)
    cache.stores[TEMPLATES].limit = 1
    cache.start()
    try:
        waiting.eventually("listed", lambda: cache.wait_synced(0.05), 10, every=0.05)
        view = cache.snapshot().for_namespace("ml")
        assert not view.claims_whole and "at most 1 ResourceClaimTemplates" in str(view.claims_unknown)
    finally:
        stop.set()
        cache.stop()


def test_slices_are_read_and_the_setting_is_off_by_default() -> None:
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[PATHS[SLICES]] = listed({"metadata": {"name": "s"}, "spec": {
        "driver": "dra.cpu", "nodeName": "n1", "devices": [{"name": "cpudevnuma000", "attributes": {
            "dra.net/numaNode": {"int": 0}}}]}})
    cache = started(api)
    try:
        waiting.eventually("published", lambda: cache.snapshot().devices, 10, every=0.05)
        assert cache.snapshot().for_namespace("ml").nodes_of("dra.cpu") == ("n1",)
    finally:
        stop.set()
        cache.stop()
    assert Config().policy.dra_objects is False
    assert parse_config({"policy": {"draObjects": True}}).policy.dra_objects is True


def _retained(texts: list[str], project: Any) -> float:
    """Bytes per object the projections of ``texts`` keep once the parsed objects are dropped (what a store holds:
    parsing is inside the window, so what a projection shares with its object is counted)."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    kept = [project(json.loads(text)) for text in texts]
    gc.collect()
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(kept) == len(texts) and all(k is not None for k in kept)
    return size / len(texts)


def test_what_is_kept_is_bounded_per_object() -> None:
    """The memory the module docstring states: a slice of 128 CPUs in individual mode is kept as one device per
    NUMA node with its locality attributes only, under 2 KiB; a claim with a CPU request keeps under 2.75 KiB (its
    2 KB selector dropped), the webhook's claim of one request of another class under 1.6 KiB (its spec kept: its
    class may select the CPU driver), a claim known to ask no CPUs (classes known when projecting) under 0.25 KiB."""
    devices = [{"name": f"cpudev{j:03d}", "attributes": {"dra.cpu/numaNodeID": {"int": j % 2},
                                                          "dra.cpu/coreID": {"int": j},
                                                          "dra.net/numaNode": {"int": j % 2}}} for j in range(128)]
    slice_ = {"metadata": {"name": "s"}, "spec": {"driver": "dra.cpu", "nodeName": "n", "devices": devices}}
    kept = dracache.keep_slice(slice_)
    assert [d.name for d in kept] == ["cpudev000", "cpudev001"]
    assert set(kept[0].attributes) == {"dra.cpu/numaNodeID", "dra.net/numaNode"}
    assert _retained([json.dumps(slice_)] * 200, dracache.keep_slice) < 2048
    webhook, known = keep_claim("ResourceClaimTemplate"), keep_claim("ResourceClaimTemplate", frozenset())
    for cpus, project, bound in (("4", webhook, 2816), ("4", known, 2816), (None, webhook, 1638),
                                 (None, known, 256)):
        size = _retained([json.dumps(template(f"t{i}", "ml", cpus)) for i in range(500)], project)
        assert size < bound, (cpus, project is webhook, size)


def _managers(cache: DraCache) -> bool:
    return cache.snapshot().cpu_managers is not None


def test_who_pins_comes_from_the_agents_nrt_and_judges_both_pinners_only() -> None:
    """The NRT ``cpuPinner`` of node b says the static CPU Manager pins beside dra.cpu: a Pod taking dra.cpu CPUs
    is refused by dra-cpu-pinner-mismatch (deny). A Pod asking the CPU Manager for exclusive CPUs is not judged
    by it, even where every published node says dra.cpu: nodes without an agent are not named (unknown)."""
    from webhook.core.cpupinner import pinner_attributes

    def nrt(name: str, policy: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "zones": [], "attributes": pinner_attributes(policy, True)}

    def dra_slice(node: str) -> dict[str, Any]:
        return {"metadata": {"name": f"{node}-dra.cpu"}, "spec": {"driver": "dra.cpu", "nodeName": node,
                                                                 "devices": [{"name": "cpudevnuma000"}]}}

    for nodes, refused in (({"a": "none", "b": "static"}, True), ({"a": "none"}, False)):
        stop = threading.Event()
        api = Scripted(stop)
        api.lists[PATHS[dracache.TOPOLOGIES]] = listed(*(nrt(n, p) for n, p in nodes.items()))
        api.lists[PATHS[SLICES]] = listed(*(dra_slice(n) for n in nodes))
        api.lists[PATHS[TEMPLATES]] = listed(template("cpus-4", "ml", "4"))
        cache = started(api)
        try:
            waiting.eventually("published", functools.partial(_managers, cache), 10, every=0.05)
            view = cache.snapshot().for_namespace("ml")
            taking = pod()
            taking["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "cpus-4"
            message = answer(view, taking).get("status", {}).get("message", "")
            assert ("dra-cpu-pinner-mismatch: " in message and "node b also run the static CPU Manager"
                    in message) is refused, message
            plain = pod()
            del plain["spec"]["resourceClaims"]
            del plain["spec"]["containers"][0]["resources"]["claims"]
            assert answer(view, plain)["allowed"] is True  # not judged: not every node is named
        finally:
            stop.set()
            cache.stop()


def test_each_namespace_s_view_keeps_its_facts_and_memo_across_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests alternating between two namespaces judge with one Facts (one memo) per namespace's view, not a
    new one at each switch; a new view (the cache published again) gets new facts."""
    from webhook.serving import app as serving

    seen: list[Any] = []
    decide = getattr(serving, "review_decision")  # noqa: B009 (what the app calls, by its module's name)

    def spy(review: Any, endpoint: Any, config: Config, facts: Any, own: Any = None) -> Any:
        seen.append(facts)
        return decide(review, endpoint, config, facts, own)

    monkeypatch.setattr(serving, "review_decision", spy)
    views = {"a": DraFacts(claims_unknown="x"), "b": DraFacts(claims_unknown="y")}
    client = create_app(Config(), dra=lambda namespace: views[namespace or ""]).test_client()
    for namespace in ("a", "b", "a", "b"):
        review = admission_review(pod(namespace), namespace=namespace)
        assert client.post("/validate", data=json.dumps(review), content_type="application/json").status_code == 200
    assert seen[0] is seen[2] and seen[1] is seen[3] and seen[0] is not seen[1]
    assert seen[0].dra is views["a"] and seen[0].memo is not None
    views["a"] = DraFacts(claims_unknown="z")
    client.post("/validate", data=json.dumps(admission_review(pod("a"), namespace="a")),
                content_type="application/json")
    assert seen[4] is not seen[0] and seen[4].dra is views["a"]


def test_a_malformed_nrt_attribute_is_no_pinner_not_a_crash() -> None:
    """An attribute whose name is a list (or no mapping at all) is passed over: the NRT publishes no pinner."""
    from webhook.core.cpupinner import read_pinner

    assert read_pinner({"attributes": [{"name": ["cpuPinner"], "value": "dra.cpu"}, "x", None]}) is None
    assert read_pinner({"attributes": [{"name": ["x"], "value": "y"},
                                       {"name": "cpuPinner", "value": "dra.cpu"}]}) is not None


def test_a_cpu_request_without_capacity_is_told_by_the_kept_slices() -> None:
    """The cache keeps a grouped device's dra.cpu/cpu capacity, so a request asking none (a whole NUMA group,
    fillEmptyRequest) is 8 CPUs with the slices and unknown without them, never 1."""
    stop = threading.Event()
    api = Scripted(stop)
    no_capacity = {"metadata": {"name": "gpu-cpus", "namespace": "ml", "resourceVersion": "1"}, "spec": {"spec": {
        "devices": {"requests": [{"name": "cpus", "exactly": {"deviceClassName": "dra.cpu"}}]}}}}
    api.lists[PATHS[TEMPLATES]] = listed(no_capacity)
    api.lists[PATHS[SLICES]] = listed({"metadata": {"name": "s"}, "spec": {
        "driver": "dra.cpu", "nodeName": "n1", "devices": [{"name": "cpudevnuma000", "attributes": {
            "dra.net/numaNode": {"int": 0}}, "capacity": {"dra.cpu/cpu": {"value": "8"}}}]}})
    cache = started(api)
    try:
        waiting.eventually("published", lambda: cache.snapshot().devices, 10, every=0.05)
        view = cache.snapshot().for_namespace("ml")
        assert view.cpu_claims is not None and view.cpu_claims[("ResourceClaimTemplate", "gpu-cpus")] == 8
        assert "ask 8 CPUs" in answer(view, pod(cpu="4"))["status"]["message"]
    finally:
        stop.set()
        cache.stop()


def test_a_stored_claim_that_keeps_capacity_shows_consumable_capacity_on_before_1_36() -> None:
    """A 1.35 API server with DRAConsumableCapacity off drops capacity.requests (resourceclaimspec
    DropDisabledFields): a template the cache read that still has it proves the gate on, so the webhook does not
    say the driver pins nothing; one asking no capacity proves nothing and is still said, with a way out it sees."""
    stop = threading.Event()
    api = Scripted(stop)
    no_capacity = {"metadata": {"name": "whole", "namespace": "ml", "resourceVersion": "1"}, "spec": {"spec": {
        "devices": {"requests": [{"name": "cpus", "exactly": {"deviceClassName": "dra.cpu"}}]}}}}
    api.lists[PATHS[TEMPLATES]] = listed(template("gpu-cpus", "ml", "4", paired=True), no_capacity)
    api.lists[PATHS[SLICES]] = listed({"metadata": {"name": "s"}, "spec": {
        "driver": "dra.cpu", "nodeName": "n1", "devices": [{"name": "cpudevnuma000", "attributes": {
            "dra.net/numaNode": {"int": 0}}, "capacity": {"dra.cpu/cpu": {"value": "4"}}}]}})
    config = parse_config({"policy": {"dra": "deny"}, "kubernetesVersion": "1.35"})
    cache = started(api)
    try:
        waiting.eventually("published", lambda: cache.snapshot().devices, 10, every=0.05)
        view = cache.snapshot().for_namespace("ml")
        assert view.specs_stored
        kept = answer(view, pod(cpu="4"), config)
        assert "DRAConsumableCapacity" not in json.dumps(kept), kept
        whole = pod(cpu="4")
        whole["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "whole"
        message = answer(view, whole, config)["status"]["message"]
        assert "DRAConsumableCapacity, alpha and off by default in 1.35" in message
        assert "(kept in the stored claim, it shows the gate on)" in message  # not cut
    finally:
        stop.set()
        cache.stop()


def test_a_name_two_namespaces_hold_alike_in_cpus_is_known_anywhere_and_a_cpu_one_that_differs_is_not() -> None:
    """The anywhere view (an object of no namespace) of the webhook's projection, which keeps the spec of a claim
    naming another class: two namespaces' GPU templates of one name that differ ask no CPUs either way (known, 0);
    CPU templates that differ are not known (``AMBIGUOUS``)."""
    def keep(obj: dict[str, Any]) -> dracache.KeptClaim:
        kept = keep_claim("ResourceClaimTemplate")(obj)
        assert kept is not None
        return kept

    gpu, cpus = ("ResourceClaimTemplate", "gpu"), ("ResourceClaimTemplate", "cpus")
    one, two = template("gpu", "a", None), template("gpu", "b", None)
    two["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    held = {"a": {gpu: keep(one), cpus: keep(template("cpus", "a", "4"))},
            "b": {gpu: keep(two), cpus: keep(template("cpus", "b", "2"))}}
    anywhere = dracache.DraSnapshot((), held, True, None).anywhere()
    assert dict(anywhere.cpu_claims or {}) == {gpu: 0}
    assert not anywhere.claims_whole and anywhere.claims_unknown == dracache.AMBIGUOUS
