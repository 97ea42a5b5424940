"""DRA at admission (webhook/core/dra_requests.py, the dra-unaligned and dra-claim-spread rules, the DeviceClass
cache of webhook/cluster/deviceclass_cache.py over a scripted API). tests/e2e/test_dra.py runs them on a real API
server."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests import builders, waiting
from tests.builders import container, nrt, pod, take_claim
from tests.unit.test_topology_cache import Scripted, event
from webhook.cluster import watch
from webhook.cluster.deviceclass_cache import DEVICE_CLASSES_PATH, DeviceClassCache, read_device_classes
from webhook.core.config import Policy, parse_config
from webhook.core.dra_requests import (
    DeviceClasses,
    claim_spread,
    index_device_classes,
    parse_device_classes,
)
from webhook.core.engine import Mode, evaluate
from webhook.core.kubeversion import SUPPORTED, Minor
from webhook.core.podspec import build_pod_spec
from webhook.core.rules import dra_unaligned


def device_class(name: str, resource: str | None = None, created: str = "2026-01-01T00:00:00Z",
                 rv: str = "1") -> dict[str, Any]:
    return builders.device_class(name, "gpu.example.com", resource, creationTimestamp=created,
                                    resourceVersion=rv)


def test_the_index_maps_both_ways_and_the_newer_class_wins_a_clash_with_the_name_as_tie_breaker() -> None:
    classes = parse_device_classes([
        device_class("old", "example.com/gpu", "2026-01-01T00:00:00Z"),
        device_class("new", "example.com/gpu", "2026-02-01T00:00:00Z"),
        device_class("b-tie", "example.com/nic"), device_class("a-tie", "example.com/nic"),
        device_class("plain"),
    ])
    assert classes.extended == {"old": "example.com/gpu", "new": "example.com/gpu", "b-tie": "example.com/nic",
                                "a-tie": "example.com/nic", "plain": ""}
    assert classes.by_resource == {"example.com/gpu": "new", "example.com/nic": "a-tie"}
    assert classes.serves("example.com/gpu") == "new"
    assert classes.serves("deviceclass.resource.kubernetes.io/plain") == "plain"  # the implicit name
    assert classes.serves("deviceclass.resource.kubernetes.io/missing") is None
    assert classes.serves("nvidia.com/gpu") is None
    with pytest.raises(TypeError):  # an index of facts: read-only
        classes.by_resource["example.com/gpu"] = "mine"  # type: ignore[index]


GPU_CLASSES = index_device_classes([("gpu.example.com", "example.com/dra-gpu", "")])
PINNED = {"cpu": "4", "memory": "1Gi"}


@pytest.mark.parametrize(("limits", "claims", "classes", "expected"), [
    (PINNED, True, None, "spec.resourceClaims: gpu"),
    (PINNED | {"example.com/dra-gpu": "1"}, False, GPU_CLASSES, "example.com/dra-gpu (DeviceClass gpu.example.com)"),
    (PINNED | {"deviceclass.resource.kubernetes.io/gpu.example.com": "1"}, False, None,
     "deviceclass.resource.kubernetes.io/gpu.example.com (DeviceClass gpu.example.com)"),
    # Not known to be DRA: a device plugin resource as far as anyone can tell.
    (PINNED | {"example.com/dra-gpu": "1"}, False, None, None),
    (PINNED | {"example.com/dra-gpu": "1"}, False, DeviceClasses(), None),
    # No exclusive CPUs: a fractional cpu, Burstable, or pod-level resources.
    ({"cpu": "1500m", "memory": "1Gi"}, True, None, None),
    ({"cpu": "2"}, True, None, None),
])
def test_dra_unaligned_fires_for_exclusive_cpus_with_dra_devices(
        limits: dict[str, Any], claims: bool, classes: DeviceClasses | None, expected: str | None) -> None:
    obj = pod(container(limits=limits))
    spec = (take_claim(obj, "gpu") if claims else obj)["spec"]
    found = dra_unaligned.findings(build_pod_spec(spec, ("spec",)), Policy(), classes)
    if expected is None:
        assert found == []
        return
    (v,) = found
    assert v.advisory and v.rule == "dra-unaligned"
    assert f"with its DRA devices ({expected}): kubelet's Topology Manager has no DRA hint provider" in v.message
    assert "device plugin on pinned nodes" in v.message and "matchAttribute: resource.kubernetes.io/numaNode" \
        in v.message
    # What it is about survives the 120-character cut of an admission warning.
    assert "are not NUMA-aligned with its DRA devices" in f"dra-unaligned: {v.message}"[:116]


@pytest.mark.parametrize("minor", [34, 35, 36, 37])
def test_extended_resources_are_dras_only_where_dra_extended_resource_is_on(minor: int) -> None:
    """``DRAExtendedResource`` (alpha 1.34, beta and on 1.36, pkg/features/kube_features.go): off, no extended
    resource is served through DRA, whatever its name or a DeviceClass says; the claims still are."""
    kube = SUPPORTED[Minor(1, minor)]
    implicit = pod(container(limits=PINNED | {"deviceclass.resource.kubernetes.io/gpu.example.com": "1"}))["spec"]
    named = pod(container(limits=PINNED | {"example.com/dra-gpu": "1"}))["spec"]
    on = minor >= 36
    for spec, classes in ((implicit, None), (named, GPU_CLASSES)):
        found = dra_unaligned.findings(build_pod_spec(spec, ("spec",), kube=kube), Policy(), classes)
        assert len(found) == on, (minor, found)
    claims = build_pod_spec(take_claim(pod(container(limits=PINNED)), "gpu")["spec"], ("spec",), kube=kube)
    assert [v.rule for v in dra_unaligned.findings(claims, Policy(), None)] == ["dra-unaligned"]


def test_pod_level_resources_give_no_exclusive_cpus() -> None:
    spec = take_claim(pod(container(limits=PINNED), resources={"limits": PINNED}), "gpu")["spec"]
    assert dra_unaligned.findings(build_pod_spec(spec, ("spec",)), Policy(), None) == []


def test_policy_dra_decides_advisory_denial_or_nothing() -> None:
    obj = take_claim(pod(container(limits=PINNED)), "gpu")
    warned = evaluate(obj, parse_config(None), Mode.ENFORCE)
    assert not warned.violations and [v.rule for _, v in warned.advisories] == ["dra-unaligned"]
    denied = evaluate(obj, parse_config({"policy": {"dra": "deny"}}), Mode.ENFORCE)
    assert [v.rule for _, v in denied.violations] == ["dra-unaligned"] and not denied.allowed
    off = evaluate(obj, parse_config({"policy": {"dra": "off"}}), Mode.ENFORCE)
    assert not off.violations and not off.advisories


def claim(devices: dict[str, Any], kind: str = "ResourceClaimTemplate") -> dict[str, Any]:
    return builders.claim("c", devices, kind, namespace="ns")


def exact(name: str, count: int | None = None, mode: str | None = None) -> dict[str, Any]:
    return builders.exactly(name, "gpu.example.com", count, mode)


NUMA = builders.NUMA_NODE


@pytest.mark.parametrize(("devices", "spread"), [
    ({"requests": [exact("gpu")]}, None),
    ({"requests": [exact("gpu", 2)]}, ("2", ("gpu",))),
    ({"requests": [exact("gpu", mode="All")]}, ("all matching", ("gpu",))),
    ({"requests": [exact("gpu"), exact("nic")]}, ("2", ("gpu", "nic"))),
    ({"requests": [exact("gpu"), exact("nic")], "constraints": [{"matchAttribute": NUMA}]}, None),
    ({"requests": [exact("gpu", 4)], "constraints": [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]}, None),
    ({"requests": [exact("gpu", 2)], "constraints": [{"matchAttribute": "dra.net/numaNode"}]}, None),
    # A constraint over some of the requests leaves the others free.
    ({"requests": [exact("gpu"), exact("nic")], "constraints": [{"requests": ["gpu"], "matchAttribute": NUMA}]},
     ("2", ("gpu", "nic"))),
    ({"requests": [exact("gpu"), exact("nic")],
      "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": NUMA}]}, None),
    # Another attribute does not keep them on one NUMA node.
    ({"requests": [exact("gpu", 2)], "constraints": [{"matchAttribute": "gpu.example.com/model"}]},
     ("2", ("gpu",))),
    # firstAvailable: the largest alternative; v1beta1 requests carry the count themselves.
    ({"requests": [{"name": "gpu", "firstAvailable": [{"name": "big", "deviceClassName": "x", "count": 2},
                                                       {"name": "small", "deviceClassName": "x"}]}]},
     ("2", ("gpu",))),
    ({"requests": [{"name": "gpu", "deviceClassName": "x", "count": 3}]}, ("3", ("gpu",))),
    # Shapes the API server refuses are read as far as they go, never a traceback.
    ({"requests": [exact("gpu", 2)], "constraints": 5}, ("2", ("gpu",))),
    ({"requests": "gpu"}, None),
    ({"requests": [exact("gpu", 2)], "constraints": [{"matchAttribute": NUMA, "requests": "gpu"}]}, None),
])
def test_claim_spread(devices: dict[str, Any], spread: tuple[str, tuple[str, ...]] | None) -> None:
    found = claim_spread({"devices": devices})
    assert (None if found is None else (found.devices, found.requests)) == spread


@pytest.mark.parametrize("kind", ["ResourceClaim", "ResourceClaimTemplate"])
def test_claims_are_judged_by_kind_and_policy_dra(kind: str) -> None:
    obj = claim({"requests": [exact("gpu", 2)]}, kind)
    verdict = evaluate(obj, parse_config(None), Mode.ENFORCE)
    (target, v), = verdict.advisories
    where = "spec.devices" if kind == "ResourceClaim" else "spec.spec.devices"
    assert target.kind == kind and v.rule == "dra-claim-spread"
    assert v.message.startswith(f"{kind} devices ({where}): 2 devices (gpu) may be allocated on different NUMA "
                                "nodes")
    denied = evaluate(obj, parse_config({"policy": {"dra": "deny"}}), Mode.ENFORCE)
    assert not denied.allowed and [v.rule for _, v in denied.violations] == ["dra-claim-spread"]
    assert not evaluate(obj, parse_config({"policy": {"dra": "off"}}), Mode.ENFORCE).advisories
    # Another group's kind of that name is not a DRA claim.
    other = dict(obj, apiVersion="example.com/v1")
    assert not evaluate(other, parse_config(None), Mode.ENFORCE).advisories


def test_the_cache_lists_watches_and_publishes_an_index() -> None:
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[DEVICE_CLASSES_PATH] = [(200, {"items": [device_class("gpu", "example.com/gpu")],
                                             "metadata": {"resourceVersion": "5"}})]
    api.watches[DEVICE_CLASSES_PATH] = [(200, [event("ADDED", device_class("nic", "example.com/nic", rv="6"))])]
    cache = DeviceClassCache(api)
    assert cache.snapshot() is None  # not read yet: unknown, not empty
    cache.start()
    try:
        def watched() -> bool:
            snap = cache.snapshot()
            return snap is not None and "example.com/nic" in snap.by_resource

        waiting.eventually("the watched DeviceClass published", watched, 10, every=0.05, seen=cache.snapshot)
        snap = cache.snapshot()
        assert snap is not None and snap.by_resource == {"example.com/gpu": "gpu", "example.com/nic": "nic"}
    finally:
        stop.set()
        cache.stop()


@pytest.mark.parametrize(("status", "said"), [
    (403, "listing deviceclasses is not allowed (HTTP 403 forbidden): grant list and watch on deviceclasses "
          "(the chart does with config.policy.deviceClasses: true)"),
    (404, "DeviceClasses (resource.k8s.io/v1) are not served"),
])
def test_a_refused_list_leaves_the_classes_unknown_and_says_why(status: int, said: str) -> None:
    api = Scripted(threading.Event())
    api.lists[DEVICE_CLASSES_PATH] = [(status, {"message": "forbidden"})]
    classes, problem = read_device_classes(api)
    assert classes is None and problem is not None and problem.startswith(said), problem


# ---- numa: auto with DRA ----

def gpu_nodes() -> Any:
    """Three GPU nodes of two 32-CPU zones under single-numa-node; their GPUs come through DRA, so no zone
    publishes example.com/dra-gpu."""
    from webhook.core.numatopology import Topology, parse_nrt

    zone = {"cpu": "32", "memory": "256Gi"}
    names = [f"gpu-{i}" for i in range(3)]
    return Topology(nodes={n: {"pool": "gpu"} for n in names},
                    topologies={n: parse_nrt(nrt(n, [zone, zone])) for n in names})


def judge_auto(obj: dict[str, Any], classes: DeviceClasses | None) -> tuple[list[str], list[str]]:
    from webhook.core.facts import Facts, Memo

    verdict = evaluate(obj, parse_config({"policy": {"numa": "auto"}}), Mode.ENFORCE,
                       Facts(topology=gpu_nodes(), device_classes=classes, memo=Memo()))
    return ([v.message for _, v in verdict.violations if v.rule == "numa-unfit"],
            [v.message for _, v in verdict.advisories if v.rule == "numa-unfit"])


BIG = {"cpu": "48", "memory": "64Gi"}
REFUSED_FOR_CPUS = ('container "app" (spec.containers[0]): needs 48 CPUs on one NUMA node; the largest zone of any '
                    "matching node has 32 CPUs; single-numa-node refuses it on nodes gpu-0, gpu-1 and 1 more "
                    "(TopologyAffinityError); ask for at most 32 CPUs")


@pytest.mark.parametrize(("limits", "claims", "how"), [
    (BIG | {"example.com/dra-gpu": "1"}, False, "example.com/dra-gpu (DeviceClass gpu.example.com)"),
    (BIG | {"deviceclass.resource.kubernetes.io/gpu.example.com": "1"}, False,
     "deviceclass.resource.kubernetes.io/gpu.example.com (DeviceClass gpu.example.com)"),
    (BIG, True, "spec.resourceClaims: gpu"),
])
def test_numa_auto_refuses_the_48_cpu_pod_whichever_way_it_asks_its_dra_gpu(
        limits: dict[str, Any], claims: bool, how: str) -> None:
    obj = pod(container(limits=limits))
    denied, advised = judge_auto(take_claim(obj, "gpu") if claims else obj, GPU_CLASSES)
    assert denied == [REFUSED_FOR_CPUS]
    assert advised == [f"pod (spec): its DRA devices ({how}) were not fitted: kubelet's Topology Manager does not "
                       "align devices allocated through DRA and NodeResourceTopology does not publish them; numa: "
                       "auto judged its CPUs, memory and device plugin devices only"]


def test_a_dra_device_neither_keeps_a_pod_off_a_node_nor_excuses_it() -> None:
    fits, advised = judge_auto(pod(container(limits={"cpu": "16", "memory": "64Gi", "example.com/dra-gpu": "1"})),
                               GPU_CLASSES)
    assert fits == [] and len(advised) == 1  # fits on the CPUs; the GPU is said not fitted
    # Without the DeviceClasses the resource looks like a device plugin's that no node has: no node to judge (the
    # scheduler would not place a device plugin Pod there), and that is said, not passed over.
    assert judge_auto(pod(container(limits=BIG | {"example.com/dra-gpu": "1"})), None) == ([], [
        "pod (spec): no node's NodeResourceTopology publishes example.com/dra-gpu, so numa: auto judged it on no "
        "node; if DRA serves it (a DeviceClass's extendedResourceName), policy.deviceClasses: true fits its CPUs and "
        "memory"])
    # A node without a topology object might have it: nothing known, nothing said.
    from webhook.core.facts import Facts, Memo

    topology = gpu_nodes()
    unknown = type(topology)(nodes={**topology.nodes, "bare": {"pool": "gpu"}}, topologies=topology.topologies)
    verdict = evaluate(pod(container(limits=BIG | {"example.com/dra-gpu": "1"})),
                       parse_config({"policy": {"numa": "auto"}}),
                       Mode.ENFORCE, Facts(topology=unknown, memo=Memo()))
    assert not verdict.violations and not verdict.advisories


def test_a_node_whose_device_plugin_publishes_the_resource_fits_it_as_a_device() -> None:
    """A DeviceClass maps example.com/dra-gpu, but a node whose NRT zones publish it serves it by device plugin
    (the scheduler prefers the node's allocatable): kubelet aligns it there, and so does the fit."""
    from webhook.core.facts import Facts, Memo
    from webhook.core.numatopology import Topology, parse_nrt

    zone = {"cpu": "32", "memory": "256Gi", "example.com/dra-gpu": "1"}
    topology = Topology(nodes={"plugin-0": {}}, topologies={"plugin-0": parse_nrt(nrt("plugin-0", [zone, zone]))})
    verdict = evaluate(pod(container(limits={"cpu": "16", "memory": "64Gi", "example.com/dra-gpu": "2"})),
                       parse_config({"policy": {"numa": "auto"}}), Mode.ENFORCE,
                       Facts(topology=topology, device_classes=GPU_CLASSES, memo=Memo()))
    assert [v.message for _, v in verdict.violations if v.rule == "numa-unfit"] == [
        'container "app" (spec.containers[0]): needs 2 example.com/dra-gpu on one NUMA node; the largest zone of '
        "any matching node has 1; single-numa-node refuses it on node plugin-0 (TopologyAffinityError); ask for at "
        "most 1 example.com/dra-gpu"]
    assert not [v for _, v in verdict.advisories if v.rule == "numa-unfit"]  # fitted: not said to be left out


def test_qos_guard_policy_refuses_device_classes() -> None:
    from webhook.policies.generate import PolicyError, refuse_unsupported

    refuse_unsupported(parse_config({"policy": {"dra": "deny"}}))  # the claims: in CEL
    with pytest.raises(PolicyError, match=r"^policy.deviceClasses: the cluster's DeviceClasses are not available"):
        refuse_unsupported(parse_config({"policy": {"deviceClasses": True}}))


def test_the_webhook_judges_against_the_device_class_snapshot_of_the_moment() -> None:
    """The app reads the DeviceClass cache once per request: a class added later counts from then on."""
    import json

    from tests.helpers import admission_review
    from webhook.serving.app import create_app

    current: list[DeviceClasses | None] = [None]
    client = create_app(parse_config({"policy": {"deviceClasses": True}}),
                        device_classes=lambda: current[0]).test_client()

    def warnings() -> list[str]:
        review = admission_review(pod(container(limits=PINNED | {"example.com/dra-gpu": "1"})), namespace="ns")
        answer = client.post("/validate", data=json.dumps(review), content_type="application/json")
        response = answer.get_json()["response"]
        assert response["allowed"] is True
        return [w for w in response.get("warnings", []) if w.startswith("dra-unaligned: ")]

    assert warnings() == []  # not known: a device plugin resource as far as anyone can tell
    current[0] = GPU_CLASSES
    assert [w[:100] for w in warnings()] == [
        "dra-unaligned: pod (spec): its exclusive CPUs and memory are not NUMA-aligned with its DRA devices ("]


def test_a_claim_a_pod_controls_is_not_judged_where_refusing_it_would_only_keep_the_pod_from_starting() -> None:
    """The scheduler's claim for `nvidia.com/gpu: 2` (count 2, no constraint) and a claim made from a template:
    judged where they come from, never refused here, even with policy.dra: deny."""
    import json

    from tests.helpers import admission_review
    from webhook.core.workloads import walk
    from webhook.serving.app import create_app

    obj = claim({"requests": [exact("container-0-request-0", 2)]}, "ResourceClaim")
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "app", "uid": "u",
                                           "controller": True, "blockOwnerDeletion": True}]
    deny = parse_config({"policy": {"dra": "deny"}})
    assert list(walk(obj)) == ["ResourceClaim made for a Pod"]
    assert evaluate(obj, deny, Mode.ENFORCE).allowed
    review = admission_review(obj, namespace="ns")
    answer = create_app(deny).test_client().post("/validate", data=json.dumps(review),
                                                 content_type="application/json").get_json()["response"]
    assert answer["allowed"] is True and not answer.get("warnings")
    # Owned but not controlled by a Pod (or by another kind): judged.
    obj["metadata"]["ownerReferences"][0]["controller"] = False
    assert not evaluate(obj, deny, Mode.ENFORCE).allowed


def test_a_refused_watch_cache_says_so_once_stays_unknown_and_keeps_trying(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "RETRY_MISSING", 0.02)  # a refused list is asked again within the test
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[DEVICE_CLASSES_PATH] = [(403, {"message": "forbidden"})]
    said: list[str | None] = []
    cache = DeviceClassCache(api, on_problem=said.append)
    cache.start()
    try:
        waiting.eventually("the refusal said", lambda: said, 10, every=0.05)
        # Said once: not again while the list is retried (three more lists refused, each said to nobody).
        def lists() -> int:
            return sum(call[:2] == ("list", DEVICE_CLASSES_PATH) for call in api.calls)

        before = lists()
        waiting.eventually("three more lists", lambda: lists() >= before + 3, 10, every=0.02)
        assert cache.snapshot() is None  # unknown, not "no DeviceClasses"
        assert len(said) == 1 and said[0] is not None and said[0].startswith("listing deviceclasses is not allowed")
    finally:
        stop.set()
        cache.stop()


def test_remembered_verdicts_name_each_pods_own_claims() -> None:
    from webhook.core.facts import Facts, Memo

    facts = Facts(topology=gpu_nodes(), device_classes=GPU_CLASSES, memo=Memo())
    config = parse_config({"policy": {"numa": "auto"}})
    for name in ("gpu", "accelerator"):
        obj = take_claim(pod(container(limits=BIG)), "gpu", name)
        (advice,) = [v.message for _, v in evaluate(obj, config, Mode.ENFORCE, facts).advisories
                     if v.rule == "numa-unfit"]
        assert f"(spec.resourceClaims: {name})" in advice
