"""``policy.operatorObjects: true``: the webhook's cache of KServe's ServingRuntimes, ClusterServingRuntimes and
LLMInferenceServiceConfigs (``webhook/cluster/relatedcache.py``) on a scripted API (the reflector's own calls are
tested against kube-apiserver in tests/e2e), and its wiring into each request's ``Facts.related``
(``create_app``): an InferenceService whose verdict needs its runtime is judged with the cluster's, a kind not
served or refused stays unread (unknown, never compliant)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests import waiting
from tests.helpers import admission_review
from tests.unit.kserve_cases import config
from tests.unit.test_topology_cache import Scripted, event
from webhook.cluster import watch
from webhook.cluster.relatedcache import WATCHED, RelatedCache
from webhook.core.config import Config, parse_config
from webhook.core.operators import CLUSTER, Related
from webhook.core.operators.kserve_runtimes import CLUSTER_SERVING_RUNTIME, SERVING_RUNTIME
from webhook.core.operators.llmisvc import CONFIG as LLMISVC_CONFIG
from webhook.serving.app import create_app

SR, CSR, LLMC = (WATCHED[k][0] for k in (SERVING_RUNTIME, CLUSTER_SERVING_RUNTIME, LLMISVC_CONFIG))
RAW = {"serving.kserve.io/deploymentMode": "RawDeployment"}


def runtime(name: str, request_cpu: str, rv: str = "1") -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
            "metadata": {"name": name, "namespace": "ml", "resourceVersion": rv,
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"supportedModelFormats": [{"name": "sklearn", "autoSelect": True}],
                     "containers": [{"name": "kserve-container", "image": "kserve/sklearnserver",
                                     "resources": {"requests": {"cpu": request_cpu, "memory": "4Gi"},
                                                   "limits": {"cpu": "2", "memory": "4Gi"}}}]},
            "status": {"big": "x" * 100}}


def isvc() -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "m", "namespace": "ml", "annotations": RAW},
            "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"}, "storageUri": "pvc://models/m"}}}}


KSERVE_CONFIG_MAPS = "/api/v1/namespaces/kserve/configmaps"


def started(api: Scripted) -> RelatedCache:
    """The cache on ``api``, every kind listed or refused; KServe's own inferenceservice-config (its shipped
    values) in its namespace unless the test scripts that list: KServe refuses to work without it."""
    shipped = config()
    shipped["metadata"]["resourceVersion"] = "1"
    api.lists.setdefault(KSERVE_CONFIG_MAPS, [(200, {"items": [shipped], "metadata": {"resourceVersion": "1"}})])
    cache = RelatedCache(api)
    cache.start()
    waiting.eventually("every kind listed or refused", lambda: cache.wait_synced(0.05), 10, every=0.05)
    return cache


def test_listed_kinds_are_read_whole_a_kind_not_served_is_not_and_only_spec_and_name_are_kept() -> None:
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[SR] = [(200, {"items": [runtime("rt", "1")], "metadata": {"resourceVersion": "5"}})]
    api.lists[CSR] = [(404, {"message": "the server could not find the requested resource"})]
    api.watches[SR] = [(200, [event("ADDED", runtime("later", "2", rv="6"))])]
    cache = started(api)
    try:
        waiting.eventually("the watched runtime published",
                           lambda: len(cache.snapshot().of(*SERVING_RUNTIME, "ml")) == 2, 10, every=0.05)
        snap = cache.snapshot()
        assert snap.source == CLUSTER
        assert snap.complete(*SERVING_RUNTIME) and snap.complete(*LLMISVC_CONFIG)
        assert not snap.complete(*CLUSTER_SERVING_RUNTIME)  # not installed: unknown, not "none exist"
        kept = snap.named(*SERVING_RUNTIME, "rt", "ml")
        assert kept is not None and set(kept) == {"apiVersion", "kind", "metadata", "spec"}
        assert kept["metadata"] == {"name": "rt", "namespace": "ml"}
        assert "404" in str(cache.problems["clusterservingruntimes"]) or "not served" in str(
            cache.problems["clusterservingruntimes"])
    finally:
        stop.set()
        cache.stop()


def test_a_refused_list_after_a_good_one_makes_the_kind_unread_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "RETRY_MISSING", 0.02)
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[SR] = [(200, {"items": [runtime("rt", "1")], "metadata": {"resourceVersion": "5"}}),
                     (403, {"message": "forbidden"})]
    api.watches[SR] = [(410, [])]  # expired: listed again, and refused (RBAC taken away)
    cache = started(api)
    try:
        waiting.eventually("the refusal published", lambda: not cache.snapshot().complete(*SERVING_RUNTIME)
                           and "servingruntimes" in cache.refused, 10, every=0.05)
        assert "grant list and watch on servingruntimes" in str(cache.problems["servingruntimes"])
        assert cache.snapshot().of(*SERVING_RUNTIME, "ml") == ()  # what it held is not judged against
    finally:
        stop.set()
        cache.stop()


def _until_runtimes_read(cache: RelatedCache) -> None:
    waiting.eventually("the runtime published", lambda: cache.snapshot().complete(*SERVING_RUNTIME), 10, every=0.05)


def _answer(related: Related | None) -> dict[str, Any]:
    app = create_app(Config(), related=None if related is None else (lambda: related))
    out = app.test_client().post("/validate", data=json.dumps(admission_review(isvc(), namespace="ml")),
                                 content_type="application/json")
    return dict(out.get_json()["response"])


def test_each_request_judges_with_the_cache_s_runtimes() -> None:
    """Without the cache the InferenceService's runtime is unknown: admitted. With a runtime whose container
    sets requests below limits, refused naming the template and container; with a compliant one, admitted."""
    assert _answer(None)["allowed"] is True
    for cpu, allowed in (("1", False), ("2", True)):
        stop = threading.Event()
        api = Scripted(stop)
        api.lists[SR] = [(200, {"items": [runtime("rt", cpu)], "metadata": {"resourceVersion": "5"}})]
        cache = started(api)
        try:
            _until_runtimes_read(cache)
            response = _answer(cache.snapshot())
        finally:
            stop.set()
            cache.stop()
        assert response["allowed"] is allowed, response
        if not allowed:
            assert ('spec.predictor (predictor, ServingRuntime rt): container "kserve-container"'
                    in response["status"]["message"]), response["status"]["message"]
    # a runtime not read (CRD not installed) never makes it compliant: unknown, admitted as before
    unread = Related({}, CLUSTER, frozenset())
    assert _answer(unread)["allowed"] is True


def test_the_setting_is_off_by_default_and_parsed() -> None:
    assert Config().policy.operator_objects is False
    assert parse_config({"policy": {"operatorObjects": True}}).policy.operator_objects is True


def test_an_llminferenceservice_s_base_ref_is_read_from_the_cache() -> None:
    """An LLMInferenceService whose baseRefs' LLMInferenceServiceConfig sets the main container's cpu request
    below its limit: unknown (admitted) without the cache, refused with it naming the template and container."""
    base = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceServiceConfig",
            "metadata": {"name": "mine", "namespace": "ml", "resourceVersion": "3"},
            "spec": {"template": {"containers": [{"name": "main", "resources": {
                "requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}}}]}}}
    obj = {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceService",
           "metadata": {"name": "m", "namespace": "ml"},
           "spec": {"model": {"uri": "pvc://models/m"}, "baseRefs": [{"name": "mine"}],
                    "template": {"containers": [{"name": "main", "image": "vllm"}]}}}

    def answer(related: Related | None) -> dict[str, Any]:
        app = create_app(Config(), related=None if related is None else (lambda: related))
        out = app.test_client().post("/validate", data=json.dumps(admission_review(obj, namespace="ml")),
                                     content_type="application/json")
        return dict(out.get_json()["response"])

    assert answer(None)["allowed"] is True
    stop = threading.Event()
    api = Scripted(stop)
    # KServe installs its presets as LLMInferenceServiceConfigs in its namespace: read whole, one absent means
    # KServe builds no Pods (said, admitted), so the preset this shape selects is listed too
    preset = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceServiceConfig",
              "metadata": {"name": "kserve-config-llm-template", "namespace": "kserve"}, "spec": {}}
    api.lists[LLMC] = [(200, {"items": [base, preset], "metadata": {"resourceVersion": "5"}})]
    cache = started(api)
    try:
        waiting.eventually("the config published", lambda: cache.snapshot().complete(*LLMISVC_CONFIG), 10,
                           every=0.05)
        response = answer(cache.snapshot())
    finally:
        stop.set()
        cache.stop()
    assert response["allowed"] is False, response
    assert ('requests-not-equal-limits: spec.template (main, over mine): container "main"'
            in response["status"]["message"]), response["status"]["message"]
