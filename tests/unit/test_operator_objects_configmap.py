"""``policy.operatorObjects: true``: the webhook's cache watches KServe's ``inferenceservice-config`` in the
namespace KServe runs in (``policy.kserveNamespace``), by name (``webhook/cluster/relatedcache.py``), on a scripted
API (its calls against kube-apiserver and the chart's RBAC: tests/e2e/test_operator_objects.py). Until it is
listed, and while its list is refused, an InferenceService or LLMInferenceService is not judged, said with the
ConfigMap, its namespace and the way out (as the DeviceClass cache's unsynced state is); listed, its values judge
the Pods (an injected agent), and listed absent, KServe's shipped ones do, as ``check --kubeconfig`` does."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

import pytest

from tests import waiting
from tests.helpers import admission_review
from tests.unit.kserve_cases import config
from tests.unit.test_operator_objects_cache import SR, runtime
from tests.unit.test_topology_cache import Scripted
from webhook.cluster import watch
from webhook.cluster.relatedcache import RelatedCache
from webhook.core.config import parse_config
from webhook.core.operators import Related
from webhook.core.operators.kserve_config import (
    CONFIG_ABSENT,
    CONFIG_MAP,
    CONFIG_NO_CACHE,
    CONFIG_NOT_READ,
    ISVC_CONFIG,
)
from webhook.core.refusal import WARNING_CHARS
from webhook.serving.app import create_app

NS = "opendatahub"
CM_PATH = f"/api/v1/namespaces/{NS}/configmaps"
WHOLE = {"cpuRequest": "1", "cpuLimit": "1", "memoryRequest": "1Gi", "memoryLimit": "1Gi"}
SETTINGS = parse_config({"policy": {"operatorObjects": True, "kserveNamespace": NS}})
# a multi-model predictor (no storage): KServe's pod webhook injects its agent, resources from the ConfigMap
MMS = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
       "metadata": {"name": "m", "namespace": "ml", "annotations": {
           "serving.kserve.io/deploymentMode": "RawDeployment"}},
       "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"}}}}}
LLM = {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService",
       "metadata": {"name": "m", "namespace": "ml"},
       "spec": {"model": {"uri": "pvc://models/m"}, "template": {"containers": [{"name": "main", "image": "vllm"}]}}}
UNREAD = CONFIG_NOT_READ.format(namespace=NS)


def agent_config(**agent: str) -> dict[str, Any]:
    cm = config(agent={**WHOLE, **agent})
    cm["metadata"] = {"name": ISVC_CONFIG, "namespace": NS, "resourceVersion": "4"}
    return cm


def api_with(stop: threading.Event, config_maps: list[tuple[int, Any]]) -> Scripted:
    api = Scripted(stop)
    api.lists[SR] = [(200, {"items": [runtime("rt", "2")], "metadata": {"resourceVersion": "5"}})]
    api.lists[CM_PATH] = config_maps
    return api


def answer(related: Related, obj: dict[str, Any] = MMS) -> dict[str, Any]:
    app = create_app(SETTINGS, related=lambda: related)
    out = app.test_client().post("/validate", data=json.dumps(admission_review(copy.deepcopy(obj), namespace="ml")),
                                 content_type="application/json")
    return dict(out.get_json()["response"])


def synced(api: Scripted) -> RelatedCache:
    cache = RelatedCache(api, kserve_namespace=NS)
    cache.start()
    waiting.eventually("every kind and the ConfigMap listed or refused", lambda: cache.wait_synced(0.05), 10,
                       every=0.05)
    return cache


def test_the_config_map_is_listed_and_watched_by_name_in_kserve_s_namespace_only() -> None:
    stop = threading.Event()
    api = api_with(stop, [(200, {"items": [agent_config()], "metadata": {"resourceVersion": "5"}})])
    cache = synced(api)
    try:
        waiting.eventually("the ConfigMap published", lambda: cache.snapshot().named(*CONFIG_MAP, ISVC_CONFIG, NS)
                           is not None, 10, every=0.05)
        waiting.eventually("its watch opened", lambda: any(c[:2] == ("watch", CM_PATH) for c in api.calls), 10,
                           every=0.05)
        snap = cache.snapshot()
        assert snap.config_unknown == "" and snap.kserve_namespace == NS
        kept = snap.named(*CONFIG_MAP, ISVC_CONFIG, NS)
        assert kept is not None and set(kept) == {"apiVersion", "kind", "metadata", "data"}
        calls = [(verb, query) for verb, path, query in api.calls if path.endswith("/configmaps")]
        assert calls and all(query["fieldSelector"] == f"metadata.name={ISVC_CONFIG}" for _, query in calls)
        assert {path for _, path, _ in api.calls if path.endswith("/configmaps")} == {CM_PATH}  # never all of them
    finally:
        stop.set()
        cache.stop()


def test_until_the_config_map_is_listed_an_inference_service_is_not_judged_with_the_way_out() -> None:
    """Before the first list (a cache just made: the webhook's first requests), admitted with a warning naming the
    ConfigMap, its namespace and the grant; never judged on KServe's shipped values (which refuse it here)."""
    cache = RelatedCache(api_with(threading.Event(), []), kserve_namespace=NS)
    for obj in (MMS, LLM):
        response = answer(cache.snapshot(), obj)
        assert response["allowed"] is True, response
        said = " ".join(response.get("warnings", []))
        assert f"qos-guard: not judged: {UNREAD}" in said, response


def test_a_refused_list_leaves_it_not_judged_and_says_the_grant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "RETRY_MISSING", 0.02)
    stop = threading.Event()
    cache = synced(api_with(stop, [(403, {"message": "configmaps is forbidden"})]))
    name = f"configmaps {NS}/{ISVC_CONFIG}"
    try:
        waiting.eventually("the refusal published", lambda: name in cache.refused, 10, every=0.05)
        assert f"grant list and watch on {name}" in str(cache.problems[name])
        response = answer(cache.snapshot())
    finally:
        stop.set()
        cache.stop()
    assert response["allowed"] is True and UNREAD in " ".join(response.get("warnings", [])), response


@pytest.mark.parametrize(("items", "allowed"), [([agent_config()], True),
                                                ([agent_config(cpuRequest="100m")], False)])
def test_listed_its_agent_resources_judge_the_pod(items: list[dict[str, Any]], allowed: bool) -> None:
    """A ConfigMap making the agent whole: admitted; one keeping it Burstable: refused naming the agent."""
    stop = threading.Event()
    cache = synced(api_with(stop, [(200, {"items": items, "metadata": {"resourceVersion": "5"}})]))
    try:
        waiting.eventually("the runtime published", lambda: cache.snapshot().read, 10, every=0.05)
        response = answer(cache.snapshot())
    finally:
        stop.set()
        cache.stop()
    assert response["allowed"] is allowed, response
    assert UNREAD not in " ".join(response.get("warnings", []))
    if not allowed:
        assert 'container "agent"' in response["status"]["message"], response["status"]["message"]


@pytest.mark.parametrize("namespace", [NS, "redhat-ods-applications"])
def test_listed_absent_it_is_not_judged_and_the_setting_is_named(namespace: str) -> None:
    """KServe refuses to work without its ConfigMap (its defaulters answer the error, failurePolicy Fail;
    inference_service_defaults.go, llminferenceservice/defaulter.go): a namespace that holds none is not KServe's,
    so the InferenceService is not judged, the warning naming the setting first, whole for the longest namespace
    KServe is installed in. It had been refused on KServe's shipped agent (100m/1 CPU), which KServe never uses."""
    stop = threading.Event()
    api = api_with(stop, [])
    api.lists[f"/api/v1/namespaces/{namespace}/configmaps"] = [(200, {"items": [],
                                                                      "metadata": {"resourceVersion": "5"}})]
    cache = RelatedCache(api, kserve_namespace=namespace)
    cache.start()
    try:
        waiting.eventually("every kind and the ConfigMap listed", lambda: cache.wait_synced(0.05), 10, every=0.05)
        responses = [answer(cache.snapshot(), obj) for obj in (MMS, LLM)]
    finally:
        stop.set()
        cache.stop()
    for response in responses:
        (said,) = response["warnings"]
        assert response["allowed"] is True, response
        assert said == f"qos-guard: not judged: {CONFIG_ABSENT.format(namespace=namespace)}", said
        assert said.startswith("qos-guard: not judged: set policy.kserveNamespace: no ") and len(said) < WARNING_CHARS


def test_the_way_out_survives_the_warning_cut_for_every_namespace_kserve_is_installed_in() -> None:
    """The unsynced warning put the grant last: for redhat-ods-applications the cut took it."""
    for namespace in ("kserve", NS, "redhat-ods-applications"):
        for text in (CONFIG_NOT_READ, CONFIG_ABSENT, CONFIG_NO_CACHE):
            assert len(f"qos-guard: not judged: {text.format(namespace=namespace)}") < WARNING_CHARS, namespace


def test_a_kubeconfig_the_webhook_cannot_use_is_not_told_as_a_missing_grant(tmp_path: Any) -> None:
    """The cache cannot be made (no usable kubeconfig): what KServe builds is not judged, and the reason points at
    the log, not at RBAC (it had said "grant list, watch", which would not help)."""
    from webhook.serving.operatorobjects import start_related_cache

    snapshot = start_related_cache(str(tmp_path / "nope"), NS)()
    assert snapshot.config_unknown == CONFIG_NO_CACHE.format(namespace=NS), snapshot.config_unknown
    assert snapshot.config_unknown.startswith("see the webhook's log")
