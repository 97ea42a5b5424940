"""``webhook.cluster.related``: the ServingRuntimes, ClusterServingRuntimes and the two ConfigMaps the KServe
builder reads, from a cluster (a fake lister: the reading logic only; the API calls are the Lister's, tested
against kube-apiserver elsewhere). A list that succeeds makes its kind known whole; 403/404 leave it unknown
quietly, another failure says so."""

from __future__ import annotations

from typing import Any

from tests.unit.kserve_cases import config
from webhook.cluster.client import ClusterError, Lister, Unreachable
from webhook.cluster.pager import ListFailed
from webhook.cluster.related import read_related
from webhook.core.operators import CLUSTER
from webhook.core.operators.kserve import CLUSTER_SERVING_RUNTIME, SERVING_RUNTIME
from webhook.core.operators.llmisvc import CONFIG as LLMISVC_CONFIG
from webhook.core.workloads import walk

RUNTIME = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
           "metadata": {"name": "rt", "namespace": "ml"},
           "spec": {"supportedModelFormats": [{"name": "sklearn", "autoSelect": True}],
                    "containers": [{"name": "kserve-container",
                                    "resources": {"limits": {"cpu": "2", "memory": "4Gi"}}}]}}


class FakeLister(Lister):
    def __init__(self, lists: dict[str, Any], config_maps: dict[str, Any]) -> None:  # no API client
        self.lists, self.config_maps = lists, config_maps

    def list_objects(self, path: str, label_selector: str | None = None,
                     field_selector: str | None = None) -> list[dict[str, Any]]:
        found = self.lists.get(path, [])
        if isinstance(found, Exception):
            raise found
        return list(found)

    def send(self, method: str, path: str, query: list[tuple[str, str]], body: Any,
             content_type: str | None) -> tuple[int, dict[str, Any]]:
        return (200, self.config_maps[path]) if path in self.config_maps else (404, {})


SR = "/apis/serving.kserve.io/v1alpha1/servingruntimes"
CSR = "/apis/serving.kserve.io/v1alpha1/clusterservingruntimes"


KSERVE_CONFIG = {"/api/v1/namespaces/kserve/configmaps/inferenceservice-config": config()}


def test_runtimes_read_whole_choose_the_runtime_and_absent_ones_do_not_exist() -> None:
    said: list[str] = []
    related = read_related(FakeLister({SR: [RUNTIME], CSR: []}, KSERVE_CONFIG), said.append)
    assert related.source == CLUSTER and related.complete(*SERVING_RUNTIME) and said == []
    isvc: dict[str, Any] = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                            "metadata": {"name": "m", "namespace": "ml",
                                         "annotations": {"serving.kserve.io/deploymentMode": "RawDeployment"}},
                            "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"}}}}}
    (target,) = walk(isvc, related=related)
    assert not isinstance(target, str) and target.template == "spec.predictor (predictor, ServingRuntime rt)"
    isvc["metadata"]["namespace"] = "other"  # no runtime there, and none in the cluster: KServe builds no Pod
    (reason,) = walk(isvc, related=related)
    assert "no ServingRuntime or ClusterServingRuntime in the cluster supports modelFormat 'sklearn'" in str(reason)


def test_a_kind_not_served_is_unknown_quietly_and_a_failure_is_said() -> None:
    said: list[str] = []
    related = read_related(FakeLister({SR: ListFailed(SR, 404, "not found"),
                                       CSR: ListFailed(CSR, 500, "etcd is down")}, {}), said.append)
    assert not related.complete(*SERVING_RUNTIME) and not related.complete(*CLUSTER_SERVING_RUNTIME)
    assert len(said) == 1 and said[0].startswith("ClusterServingRuntimes are not read"), said
    # an API server not reachable is said once, where its version is read: nothing here
    said.clear()
    down = read_related(FakeLister({SR: Unreachable(OSError("down")), CSR: []}, {}), said.append)
    assert said == [] and not down.complete(*CLUSTER_SERVING_RUNTIME) and not down.objects


def test_the_two_config_maps_are_read_by_name() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "config-deployment",
                                                               "namespace": "knative-serving"},
          "data": {"queue-sidecar-cpu-request": "1"}}
    related = read_related(FakeLister({SR: [], CSR: []},
                                      {"/api/v1/namespaces/knative-serving/configmaps/config-deployment": cm}),
                           lambda _: None)
    assert related.of("", "ConfigMap", cluster_scoped=True) == (cm,)


class RefusingLister(FakeLister):
    """The ConfigMap GETs answered ``status`` (403: not granted), or raising (the API server gone mid-run)."""

    def __init__(self, status: int | Exception) -> None:
        super().__init__({SR: [RUNTIME], CSR: []}, {})
        self.status = status

    def send(self, method: str, path: str, query: list[tuple[str, str]], body: Any,
             content_type: str | None) -> tuple[int, dict[str, Any]]:
        if isinstance(self.status, Exception):
            raise self.status
        return self.status, {}


def test_kserve_s_config_map_refused_is_unknown_not_shipped() -> None:
    """A 403 on ``inferenceservice-config`` had been taken as "absent", so KServe's shipped values judged (its
    Burstable storage initializer refusing a Pod the cluster's config makes Guaranteed): now what KServe builds
    from it is not known, with the grant to add; a 404 too (KServe refuses to work without it: the namespace
    named is not KServe's), naming the setting; found, the runtime judges."""
    isvc: dict[str, Any] = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                            "metadata": {"name": "m", "namespace": "ml",
                                         "annotations": {"serving.kserve.io/deploymentMode": "RawDeployment"}},
                            "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"}}}}}
    for failure, shown, out in ((403, "HTTP 403", "grant get on it"),
                                (ClusterError("timed out"), "timed out", "give it in the input")):
        related = read_related(RefusingLister(failure), lambda _: None, "opendatahub")
        (reason,) = walk(isvc, related=related)
        assert isinstance(reason, str), reason
        assert f"ConfigMap opendatahub/inferenceservice-config not read ({shown}" in reason, reason
        assert f"): {out}" in reason, reason
    (reason,) = walk(isvc, related=read_related(RefusingLister(404), lambda _: None))
    assert reason == "InferenceService: set policy.kserveNamespace: no kserve/inferenceservice-config (KServe's own)"
    (target,) = walk(isvc, related=read_related(FakeLister({SR: [RUNTIME], CSR: []}, KSERVE_CONFIG), lambda _: None))
    assert not isinstance(target, str) and target.template == "spec.predictor (predictor, ServingRuntime rt)"


def test_llm_inference_service_configs_are_listed_whole() -> None:
    """``check --kubeconfig`` and ``audit`` list the cluster's LLMInferenceServiceConfigs, as the webhook's cache
    does: a preset overridden in KServe's namespace is the cluster's, and one a baseRef names that the cluster
    does not hold makes KServe build no Pods (ConfigNotFound). They had never been read: a baseRef was judged with
    KServe's shipped preset, or said unknown with "--kubeconfig to read it", which read nothing."""
    llm = "/apis/serving.kserve.io/v1alpha1/llminferenceserviceconfigs"
    preset = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceServiceConfig",
              "metadata": {"name": "mine", "namespace": "kserve"}, "spec": {}}
    related = read_related(FakeLister({SR: [], CSR: [], llm: [preset]}, KSERVE_CONFIG), lambda _: None)
    assert related.complete(*LLMISVC_CONFIG) and related.named(*LLMISVC_CONFIG, "mine", "kserve") == preset
    said: list[str] = []
    refused = read_related(FakeLister({SR: [], CSR: [], llm: ListFailed(llm, 500, "etcd is down")}, KSERVE_CONFIG),
                           said.append)
    assert not refused.complete(*LLMISVC_CONFIG)
    assert said == [f"LLMInferenceServiceConfigs are not read (GET {llm}: HTTP 500 etcd is down): an "
                    "LLMInferenceService whose baseRefs they hold is unknown (a preset: KServe's shipped one)"], said
