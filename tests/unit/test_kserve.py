"""KServe's InferenceService judged as the Pods KServe v0.20.0 builds (``webhook.core.operators.kserve``), on real
samples (tests/fixtures/kserve, SOURCES.md there) and small objects. Each expected verdict is derived from KServe's
code: the model's ``resources`` override the runtime's (``MergeRuntimeContainers``, a strategic merge), the
runtime is chosen as ``reconcileModel``/``GetSupportingRuntimes`` choose it, custom containers get the
``inferenceservice-config`` defaults (1 CPU, 2Gi: Guaranteed), and the Pod gets the storage-initializer (100m/1
CPU), the agent (a logger) and, in Knative mode (the default), Knative's queue-proxy (25m cpu, no limit)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import inprocess
from tests.helpers import admission_review
from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.operators import CLUSTER, Related, collect
from webhook.core.operators.kserve import CLUSTER_SERVING_RUNTIME, RELATED, SERVING_RUNTIME, merge_container
from webhook.core.workloads import find_targets, walk
from webhook.serving.app import create_app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kserve"
RAW = {"serving.kserve.io/deploymentMode": "RawDeployment"}


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((FIXTURES / name).read_text()) if d]


def findings(obj: Any, related: Related | None = None) -> Counter[str]:
    """Each violation as ``rule container field``, counted."""
    facts = Facts(related=related) if related is not None else Facts()
    verdict = evaluate(obj, Config(), Mode.ENFORCE, facts)
    return Counter(f"{v.rule} {v.container} {dotted(v.subject)}" for _, v in verdict.violations)


def isvc(predictor: dict[str, Any], annotations: dict[str, str] | None = None,
         namespace: str = "ml") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "m", "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": meta,
            "spec": {"predictor": predictor}}


def runtime(name: str, fmt: str, cpu_request: str = "2", kind: str = "ServingRuntime", priority: int | None = None,
            **spec: Any) -> dict[str, Any]:
    supported: dict[str, Any] = {"name": fmt, "autoSelect": True}
    if priority is not None:
        supported["priority"] = priority
    meta: dict[str, Any] = {"name": name}
    if kind == "ServingRuntime":
        meta["namespace"] = "ml"
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": kind, "metadata": meta,
            "spec": {"supportedModelFormats": [supported], **spec, "containers": [
                {"name": "kserve-container", "resources": {"requests": {"cpu": cpu_request, "memory": "4Gi"},
                                                           "limits": {"cpu": "2", "memory": "4Gi"}}}]}}


def cluster(*objects: dict[str, Any]) -> Related:
    """What a cluster read gives: every ServingRuntime and ClusterServingRuntime, so an absent one does not
    exist."""
    found = collect(objects, RELATED)
    return Related(found.objects, CLUSTER, frozenset({SERVING_RUNTIME, CLUSTER_SERVING_RUNTIME}))


QUEUE_PROXY = {"limits-missing queue-proxy metadata.annotations.resources.cpu": 1,
               "limits-missing queue-proxy metadata.annotations.resources.memory": 1,
               "cpu-not-integer queue-proxy metadata.annotations.resources.cpu": 1}


def test_the_collocation_samples_model_fails_whatever_its_runtime() -> None:
    """kserve/website collocation.md, first block: no runtime given, but the model's own resources (100m/256Mi
    below 1/1Gi) override any runtime's, so the Pod is Burstable: refused, never skipped."""
    (obj,) = docs("collocation-model.yaml")
    model = "spec.predictor.model.resources"
    transformer = "spec.predictor.containers[0].resources"
    storage = "spec.predictor.model.storageUri.resources"
    assert findings(obj) == Counter({
        f"requests-not-equal-limits kserve-container {model}.cpu": 1,
        f"requests-not-equal-limits kserve-container {model}.memory": 1,
        f"requests-not-equal-limits transformer-container {transformer}.cpu": 1,
        f"requests-not-equal-limits transformer-container {transformer}.memory": 1,
        f"requests-not-equal-limits storage-initializer {storage}.cpu": 1,
        f"requests-not-equal-limits storage-initializer {storage}.memory": 1,
        **QUEUE_PROXY})


def test_the_collocation_runtime_sample_merges_the_transformer_over_the_runtimes() -> None:
    """The same page's ServingRuntime and the InferenceService naming it, in one input: the runtime's
    kserve-container (1 CPU, 2Gi) is Guaranteed, the transformer-container is merged (the InferenceService's
    200m/512Mi over the runtime's 100m/256Mi, limits 1/1Gi): Burstable; the runtime itself fails on its own
    transformer-container."""
    runtime_doc, obj = docs("collocation-runtime.yaml")
    related = collect([runtime_doc, obj], RELATED)
    [target] = find_targets(obj, related=related)
    assert target.template == "spec.predictor (predictor, ServingRuntime pytorch-collocation)"
    pod = target.pod_spec()
    assert [c.name for c in pod.containers] == ["kserve-container", "transformer-container", "queue-proxy"]
    transformer = pod.containers[1].resources
    assert (transformer.requests["cpu"].raw, transformer.limits["cpu"].raw) == ("200m", 1)
    own = "spec.predictor.containers[0].resources"
    assert findings(obj, related) == Counter({
        f"requests-not-equal-limits transformer-container {own}.cpu": 1,
        f"requests-not-equal-limits transformer-container {own}.memory": 1,
        "requests-not-equal-limits storage-initializer spec.predictor.model.storageUri.resources.cpu": 1,
        "requests-not-equal-limits storage-initializer spec.predictor.model.storageUri.resources.memory": 1,
        **QUEUE_PROXY})
    assert findings(runtime_doc) == Counter({
        "requests-not-equal-limits transformer-container spec.containers[1].resources.cpu": 1,
        "requests-not-equal-limits transformer-container spec.containers[1].resources.memory": 1})


def test_the_compliant_twin_with_kserves_own_runtime_passes() -> None:
    """KServe's kserve-sklearnserver (1 CPU, 2Gi, requests == limits), named by the model, a pvc:// model (no
    storage-initializer) and Standard mode (no queue-proxy): every container Guaranteed with whole CPUs."""
    (sklearn,) = docs("kserve-sklearnserver.yaml")
    obj = isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "kserve-sklearnserver",
                          "storageUri": "pvc://models/iris"}}, RAW)
    related = collect([sklearn], RELATED)
    verdict = evaluate(obj, Config(), Mode.ENFORCE, Facts(related=related))
    assert len(verdict.results) == 1 and verdict.violations == [] and verdict.allowed
    # without the runtime nothing is known: no result (never a pass), and the reason names it
    assert evaluate(obj, Config(), Mode.ENFORCE).results == ()
    (reason,) = walk(obj)
    assert "ServingRuntime 'kserve-sklearnserver' is not in the input" in str(reason)
    # in Knative mode (KServe's default) the same object fails on queue-proxy alone
    knative = isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "kserve-sklearnserver",
                              "storageUri": "pvc://models/iris"}})
    assert findings(knative, related) == Counter(QUEUE_PROXY)


def test_the_models_resources_override_the_runtimes_key_by_key() -> None:
    """MergeRuntimeContainers: a model that sets only its cpu request lowers it under the runtime's limit."""
    merged = merge_container({"name": "kserve-container", "args": ["a"],
                              "resources": {"requests": {"cpu": "2", "memory": "4Gi"},
                                            "limits": {"cpu": "2", "memory": "4Gi"}}},
                             {"modelFormat": {"name": "x"}, "args": ["b"], "resources": {"requests": {"cpu": "1"}}})
    assert merged["resources"] == {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}}
    assert merged["args"] == ["a", "b"] and "modelFormat" not in merged
    obj = isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "rt", "storageUri": "pvc://m",
                          "resources": {"requests": {"cpu": "1"}}}}, RAW)
    assert findings(obj, collect([runtime("rt", "sklearn")], RELATED)) == Counter(
        {"requests-not-equal-limits kserve-container spec.predictor.model.resources.cpu": 1})


def test_the_mutation_sets_the_models_resources_and_the_result_is_judged_again() -> None:
    obj = isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "rt",
                          "resources": {"requests": {"cpu": "1"}}}}, RAW)
    facts = Facts(related=collect([runtime("rt", "sklearn")], RELATED))
    verdict = evaluate(obj, Config(), Mode.MUTATE, facts)
    assert verdict.allowed
    assert [(dotted(c.path), c.new) for c in verdict.changes] == [("spec.predictor.model.resources.requests.cpu", "2")]
    # queue-proxy is Knative's: found, and no change is planned on it (the setting is named instead)
    knative = evaluate(isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "rt"}}), Config(),
                       Mode.MUTATE, facts)
    assert not knative.allowed and knative.changes == ()
    assert any("queue-sidecar-cpu-request" in v.message for _, v in knative.violations)


@pytest.mark.parametrize(("runtimes", "chosen"), [
    # the namespace's runtimes before the cluster's
    ([runtime("ns-rt", "sklearn"), runtime("csr", "sklearn", kind="ClusterServingRuntime", priority=9)], "ns-rt"),
    # the higher priority first; one with a priority before one without
    ([runtime("low", "sklearn", priority=1), runtime("high", "sklearn", priority=2)], "high"),
    ([runtime("none", "sklearn"), runtime("some", "sklearn", priority=1)], "some"),
    # not disabled, not multi-model, not multi-node for a single-node predictor
    ([runtime("off", "sklearn", disabled=True), runtime("on", "sklearn", cpu_request="2")], "on"),
    ([runtime("mm", "sklearn", multiModel=True), runtime("sm", "sklearn")], "sm"),
    ([runtime("mn", "sklearn", workerSpec={"containers": []}), runtime("sn", "sklearn")], "sn"),
    # only formats with autoSelect; and the protocol
    ([runtime("other", "xgboost"), runtime("csr", "sklearn", kind="ClusterServingRuntime")], "csr"),
    ([runtime("v2", "sklearn", protocolVersions=["v2"]), runtime("v1", "sklearn", protocolVersions=["v1"])], "v1"),
])
def test_the_runtime_is_chosen_as_kserve_chooses_it(runtimes: list[dict[str, Any]], chosen: str) -> None:
    obj = isvc({"model": {"modelFormat": {"name": "sklearn"}}}, RAW)
    [target] = find_targets(obj, related=cluster(*runtimes))
    assert target.template.endswith(f" {chosen})")


def test_what_the_runtime_choice_cannot_know_is_said() -> None:
    obj = isvc({"model": {"modelFormat": {"name": "sklearn"}}}, RAW)
    (tie,) = walk(obj, related=cluster(runtime("a", "sklearn"), runtime("b", "sklearn")))
    assert "ServingRuntimes a, b rank the same for it (KServe takes the newest)" in str(tie)
    (none,) = walk(obj, related=cluster(runtime("x", "xgboost")))
    assert "supports modelFormat 'sklearn': KServe builds no Pod" in str(none)
    # from the input alone another runtime of the cluster may rank first: unknown, never a pass
    (partial,) = walk(obj, related=collect([runtime("a", "sklearn")], RELATED))
    assert "others may rank first" in str(partial)
    named = isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "gone"}}, RAW)
    (missing,) = walk(named, related=cluster())
    assert "no ServingRuntime or ClusterServingRuntime named 'gone' in the cluster" in str(missing)
    (refused,) = walk(named, related=cluster(runtime("gone", "xgboost")))
    assert "KServe refuses ServingRuntime 'gone'" in str(refused)
    # KServe builds no Pod then: even a model whose own resources fail is not judged (no Pod fails)
    bursty = isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "gone", "resources": {
        "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}}, RAW)
    (no_pod,) = walk(bursty, related=cluster())
    assert isinstance(no_pod, str) and "KServe builds no Pod" in no_pod
    (unknown,) = find_targets(bursty)  # without the cluster: the runtime may exist, and the model fails anyway
    assert unknown.partial
    mesh = isvc({"model": {"modelFormat": {"name": "sklearn"}}}, {"serving.kserve.io/deploymentMode": "ModelMesh"})
    assert list(walk(mesh)) == [
        "InferenceService in ModelMesh mode (its Pods are the ServingRuntime's, built by modelmesh-serving)"]


def test_a_framework_field_is_a_model_of_that_format() -> None:
    """setPredictorModelDefaults: ``sklearn:`` is ``model`` with ``modelFormat: sklearn``, found by auto-select."""
    obj = isvc({"sklearn": {"storageUri": "pvc://m", "resources": {"limits": {"cpu": "2", "memory": "4Gi"}}}}, RAW)
    [target] = find_targets(obj, related=cluster(runtime("rt", "sklearn")))
    assert target.template == "spec.predictor (predictor, ServingRuntime rt)"
    assert dotted(target.pod_spec().containers[0].path) == "spec.predictor.sklearn"
    assert findings(obj, cluster(runtime("rt", "sklearn"))) == Counter()


def test_kserves_defaults_fill_a_custom_container() -> None:
    """A custom predictor that sets no resources gets 1 CPU and 2Gi from inferenceservice-config (not
    limits-missing); with the ConfigMap in the input its values are used instead."""
    custom = isvc({"containers": [{"name": "kserve-container", "image": "x"}]}, RAW)
    assert findings(custom) == Counter()
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inferenceservice-config",
                                                                        "namespace": "kserve"},
                  "data": {"inferenceService": json.dumps({"resource": {"cpuRequest": "500m", "cpuLimit": "1"}})}}
    # the ConfigMap's own values only: memory it leaves out is not defaulted (an empty MemoryRequest sets none)
    assert findings(custom, collect([config_map], RELATED)) == Counter(
        {"requests-not-equal-limits kserve-container spec.predictor.containers[0].resources.cpu": 1,
         "limits-missing kserve-container spec.predictor.containers[0].resources.memory": 1})


def test_knatives_queue_proxy_is_guaranteed_by_its_settings() -> None:
    custom = isvc({"containers": [{"name": "kserve-container", "image": "x"}]})
    assert findings(custom) == Counter(QUEUE_PROXY)
    deployment = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "config-deployment", "namespace": "knative-serving"},
                  "data": {"queue-sidecar-cpu-request": "1", "queue-sidecar-cpu-limit": "1",
                           "queue-sidecar-memory-request": "1Gi", "queue-sidecar-memory-limit": "1Gi"}}
    assert findings(custom, collect([deployment], RELATED)) == Counter()
    annotated = isvc({"containers": [{"name": "kserve-container", "image": "x"}]}, {
        f"queue.sidecar.serving.knative.dev/{r}-resource-{k}": v
        for r, v in (("cpu", "1"), ("memory", "500Mi")) for k in ("request", "limit")})
    assert findings(annotated) == Counter()


def test_a_logger_brings_kserves_agent() -> None:
    obj = isvc({"containers": [{"name": "kserve-container", "image": "x"}], "logger": {"mode": "all"}}, RAW)
    assert findings(obj) == Counter({
        "requests-not-equal-limits agent spec.predictor.logger.resources.cpu": 1,
        "requests-not-equal-limits agent spec.predictor.logger.resources.memory": 1})


def test_check_and_the_webhook_refuse_the_collocation_sample_naming_template_and_container() -> None:
    path = FIXTURES / "collocation-model.yaml"
    out = inprocess.run(("check", str(path)))
    assert out.returncode == 1, out.stdout + out.stderr
    assert ('requests-not-equal-limits: spec.predictor (predictor, its runtime not known): container '
            '"kserve-container" (spec.predictor.model)') in out.stdout
    (obj,) = docs("collocation-model.yaml")
    answer = create_app(Config()).test_client().post(
        "/validate", data=json.dumps(admission_review(obj, namespace="ml")), content_type="application/json")
    response = answer.get_json()["response"]
    assert response["allowed"] is False
    assert 'spec.predictor (predictor, its runtime not known): container "kserve-container"' in \
        response["status"]["message"]
    # the runtime sample: check reads both documents of the file, the runtime from the same input
    both = inprocess.run(("check", str(FIXTURES / "collocation-runtime.yaml")))
    assert both.returncode == 1 and "2 objects checked" in both.stderr, both.stderr
    assert "spec.predictor (predictor, ServingRuntime pytorch-collocation)" in both.stdout


def test_an_injected_container_named_by_a_field_inside_a_container_is_never_changed() -> None:
    """A custom predictor's STORAGE_URI env brings the storage-initializer, named by that env value, which is
    inside the kserve-container the mutation may change: the initializer is still not changed (nor crashes)."""
    obj = isvc({"containers": [{"name": "kserve-container", "image": "x",
                                "env": [{"name": "STORAGE_URI", "value": "gs://bucket/model"}]}]}, RAW)
    verdict = evaluate(obj, Config(), Mode.MUTATE)
    assert verdict.changes == ()
    # the Pods KServe builds are patched at creation (the webhook is re-invoked after KServe's): mutate mode
    # admits it; fix, which edits the object alone, leaves the initializer's findings
    assert verdict.allowed
    [result] = verdict.results
    assert {dotted(v.subject) for v in result.left_by_fix} == {
        "spec.predictor.containers[0].env[0].value.resources.cpu",
        "spec.predictor.containers[0].env[0].value.resources.memory"}
    assert evaluate(obj, Config(), Mode.ENFORCE).allowed is False


@pytest.mark.parametrize("predictor", [
    {"model": ["not", "a", "mapping"]},
    {"model": {"modelFormat": "sklearn"}},
    {"containers": {"name": "x"}},
    {"containers": ["x"]},
    {"sklearn": {"resources": {"requests": []}}},
])
def test_a_malformed_inference_service_is_a_manifest_error_or_a_reason(predictor: dict[str, Any]) -> None:
    """Bad input gets a clear answer naming the field (check's error record, the webhook's 400), never another
    exception."""
    from webhook.core.podspec import ManifestError
    with pytest.raises(ManifestError) as err:
        evaluate(isvc(predictor), Config(), Mode.ENFORCE, Facts(related=cluster(runtime("rt", "sklearn"))))
    assert err.value.path[:2] == ("spec", "predictor"), err.value.path


def test_fix_sets_the_models_resources_from_a_runtime_in_another_file(tmp_path: Path) -> None:
    """``fix`` reads every file first, as check does: the runtime in one file, the InferenceService in another;
    the model's cpu request is set to the runtime's limit it runs under, and check then passes both."""
    (tmp_path / "runtime.yaml").write_text(yaml.safe_dump(runtime("rt", "sklearn")))
    isvc_file = tmp_path / "isvc.yaml"
    isvc_file.write_text(yaml.safe_dump(isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "rt",
                                                        "storageUri": "pvc://m",
                                                        "resources": {"requests": {"cpu": "1"}}}}, RAW)))
    assert inprocess.run(("check", str(tmp_path))).returncode == 1
    fixed = inprocess.run(("fix", str(tmp_path)))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    after = yaml.safe_load(isvc_file.read_text())
    assert after["spec"]["predictor"]["model"]["resources"]["requests"]["cpu"] == "2"
    again = inprocess.run(("check", str(tmp_path)))
    assert again.returncode == 0 and "2 objects checked, 0 violations" in again.stderr, again.stderr


# Pods KServe v0.20.0 builds beyond the model container: each case a failing object and its compliant twin, the
# expectation read from KServe's code (the file named in each test).
SI = "requests-not-equal-limits storage-initializer {}.resources.{}"
AGENT = "requests-not-equal-limits agent {}.resources.{}"
RT = collect([runtime("rt", "sklearn")], RELATED)


def both(template: str, where: str) -> Counter[str]:
    return Counter({template.format(where, r): 1 for r in ("cpu", "memory")})


def config(**sections: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inferenceservice-config",
                                                                    "namespace": "kserve"},
            "data": {k: json.dumps(v) for k, v in sections.items()}}


def model(**fields: Any) -> dict[str, Any]:
    return {"modelFormat": {"name": "sklearn"}, "runtime": "rt", **fields}


def test_a_model_without_storage_gets_kserves_agent() -> None:
    """IsMMSPredictor (controller utils.go): a model with no storageUri, storage nor storageUris (not huggingface)
    is a multi-model predictor, and agent_injector.go adds the agent (100m/1 CPU): named by the missing storageUri,
    the way out; a storageUri, or the agent's resources whole and equal in inferenceservice-config, avoid it."""
    assert findings(isvc({"model": model()}, RAW), RT) == both(AGENT, "spec.predictor.model.storageUri")
    assert findings(isvc({"model": model(storageUri="pvc://models/m")}, RAW), RT) == Counter()
    whole = {"cpuRequest": "1", "cpuLimit": "1", "memoryRequest": "1Gi", "memoryLimit": "1Gi"}
    assert findings(isvc({"model": model()}, RAW), collect([runtime("rt", "sklearn"), config(agent=whole)],
                                                           RELATED)) == Counter()
    # huggingface takes a model id without storage: never multi-model
    hf = isvc({"model": {"modelFormat": {"name": "huggingface"}, "runtime": "hf"}}, RAW)
    assert findings(hf, collect([runtime("hf", "huggingface")], RELATED)) == Counter()
    # a custom predictor is one when its first container says so
    custom = isvc({"containers": [{"name": "kserve-container", "image": "x",
                                   "env": [{"name": "MULTI_MODEL_SERVER", "value": "true"}]}]}, RAW)
    assert findings(custom) == both(AGENT, "spec.predictor.containers[0].env[0].value")


def test_a_models_storage_path_brings_the_storage_initializer() -> None:
    """component.go addStorageSpecAnnotations: storage.path is the storage-initializer's source URI (its scheme
    from the storage secret); with a storageUri as well KServe refuses the predictor (predictor.go)."""
    storage = {"key": "s3-creds", "path": "models/iris"}
    assert findings(isvc({"model": model(storage=storage)}, RAW), RT) == both(SI, "spec.predictor.model.storage.path")
    # storage without a path (credentials for the storageUri): the storageUri decides
    keyed = model(storage={"key": "s3-creds"}, storageUri="pvc://models/iris")
    assert findings(isvc({"model": keyed}, RAW), RT) == Counter()
    (reason,) = walk(isvc({"model": model(storage=storage, storageUri="s3://b/m")}, RAW), related=RT)
    assert isinstance(reason, str) and "must provide only one of storageUri and storage.path" in reason


def test_storage_uris_bring_one_storage_initializer_or_modelcars() -> None:
    """raw_kube_reconciler.go / ksvc_reconciler.go CommonStorageInitialization (IsLegacyURI false): one
    storage-initializer for the URIs neither pvc:// nor OCI, a modelcar and modelcar-init per OCI URI."""
    def with_uris(*uris: str) -> dict[str, Any]:
        return isvc({"model": model(), "storageUris": [{"uri": u, "mountPath": f"/mnt/models/{i}"}
                                                         for i, u in enumerate(uris)]}, RAW)
    assert findings(with_uris("s3://b/m", "gs://b/n"), RT) == both(SI, "spec.predictor.storageUris[0].uri")
    assert findings(with_uris("pvc://models/m"), RT) == Counter()
    [target] = find_targets(with_uris("oci://r/a:1", "oci://r/b:1", "pvc://models/m"), related=RT)
    pod = target.pod_spec()
    assert [c.name for c in pod.containers] == ["kserve-container", "modelcar", "modelcar-1"]
    assert [c.name for c in pod.init_containers] == ["modelcar-init", "modelcar-init-1"]


def test_a_declared_storage_initializer_or_agent_is_not_injected_again() -> None:
    """storage_initializer_injector.go: no injection when an init container of that name is there;
    agent_injector.go InjectAgent: none when a container named agent is."""
    guaranteed = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    own = {"model": model(storageUri="s3://b/m"), "initContainers": [
        {"name": "storage-initializer", "image": "x", "resources": guaranteed}]}
    assert findings(isvc(own, RAW), RT) == Counter()
    assert findings(isvc({"model": model(storageUri="s3://b/m")}, RAW), RT) == \
        both(SI, "spec.predictor.model.storageUri")
    logger = {"model": model(storageUri="pvc://m"), "logger": {"mode": "all"},
              "containers": [{"name": "agent", "image": "x", "resources": guaranteed}]}
    assert findings(isvc(logger, RAW), RT) == Counter()
    del logger["containers"]
    assert findings(isvc(logger, RAW), RT) == both(AGENT, "spec.predictor.logger")


def test_oci_models_get_the_modelcar_by_the_configured_mode() -> None:
    """mutator.go InjectModelcar under ResolveOciModelMode (types/config.go): KServe's shipped ConfigMap has
    enableModelcar true, so oci:// gets modelcar and modelcar-init at 10m/15Mi (utils/storage.go); oci+native://
    mounts an image volume (no container, no storage-initializer); with OCI models off, oci:// is downloaded by
    the storage-initializer."""
    fractional = Counter({"cpu-not-integer modelcar spec.predictor.model.storageUri.resources.cpu": 1,
                          "cpu-not-integer modelcar-init spec.predictor.model.storageUri.resources.cpu": 1})
    oci = isvc({"model": model(storageUri="oci://registry/model:1")}, RAW)
    assert findings(oci, RT) == fractional
    assert findings(isvc({"model": model(storageUri="oci+native://registry/model:1")}, RAW), RT) == Counter()
    off = {"image": "x", "cpuRequest": "100m", "cpuLimit": "1", "memoryRequest": "100Mi", "memoryLimit": "1Gi"}
    assert findings(oci, collect([runtime("rt", "sklearn"), config(storageInitializer=off)], RELATED)) == \
        both(SI, "spec.predictor.model.storageUri")
    native = {**off, "ociModelMode": "native"}
    assert findings(oci, collect([runtime("rt", "sklearn"), config(storageInitializer=native)], RELATED)) == Counter()
    whole = {**off, "enableModelcar": True, "cpuModelcar": "1", "memoryModelcar": "64Mi"}
    assert findings(oci, collect([runtime("rt", "sklearn"), config(storageInitializer=whole)], RELATED)) == Counter()


def test_protocol_v2_is_the_default_for_triton_and_vllm_models_only() -> None:
    """setPredictorModelDefaults: a model of format triton or vLLM gets v2; onnx and huggingface get it only
    from their framework fields (assignONNXRuntime, assignHuggingFaceRuntime). A v1 runtime named for an onnx
    model is used (a Pod is built and judged), refused for the onnx framework field."""
    v1 = collect([runtime("rt", "onnx", protocolVersions=["v1"])], RELATED)
    onnx = isvc({"model": {"modelFormat": {"name": "onnx"}, "runtime": "rt", "storageUri": "pvc://m",
                           "resources": {"requests": {"cpu": "1"}}}}, RAW)
    assert findings(onnx, v1) == Counter(
        {"requests-not-equal-limits kserve-container spec.predictor.model.resources.cpu": 1})
    framework = isvc({"onnx": {"runtime": "rt", "storageUri": "pvc://m"}}, RAW)
    (refused,) = walk(framework, related=v1)
    assert isinstance(refused, str) and "KServe refuses ServingRuntime 'rt'" in refused
    triton = isvc({"model": {"modelFormat": {"name": "triton"}, "runtime": "rt", "storageUri": "pvc://m"}}, RAW)
    (v2,) = walk(triton, related=collect([runtime("rt", "triton", protocolVersions=["v1"])], RELATED))
    assert isinstance(v2, str) and "KServe refuses" in v2


def test_an_unknown_deployment_mode_is_the_default_one() -> None:
    """GetDeploymentMode (controller utils.go): status.deploymentMode first, then an annotation naming a known
    mode, else deploy.defaultDeploymentMode (KServe's: Serverless, so Knative's queue-proxy)."""
    raw = isvc({"model": model(storageUri="pvc://m")}, {"serving.kserve.io/deploymentMode": "Raw"})
    assert findings(raw, RT) == Counter(QUEUE_PROXY)
    standard = collect([runtime("rt", "sklearn"), config(deploy={"defaultDeploymentMode": "Standard"})], RELATED)
    assert findings(raw, standard) == Counter()
    updated = {**isvc({"model": model(storageUri="pvc://m")}, {"serving.kserve.io/deploymentMode": "Serverless"}),
               "status": {"deploymentMode": "RawDeployment"}}
    assert findings(updated, RT) == Counter()


def test_canaries_are_built_over_the_stable_predictor() -> None:
    """predictor.go reconcileCanaryDeployments/buildCanaryPredictor: each canary merged over the stable predictor
    (mergo, the canary's set fields win), a Deployment of its own; validateCanarySpecs refuses canaries outside
    Standard mode (said, never silently nothing)."""
    stable = {"model": model(storageUri="pvc://p/m")}
    canary = {"name": "v2", "model": model(storageUri="pvc://p/m2", resources={"requests": {"cpu": "500m"}})}
    obj = isvc(stable, {"serving.kserve.io/deploymentMode": "Standard"})
    obj["spec"]["canary"] = [{"trafficPercent": 10, "predictor": canary}]
    assert findings(obj, RT) == Counter(
        {"requests-not-equal-limits kserve-container spec.canary[0].predictor.model.resources.cpu": 1})
    targets = find_targets(obj, related=RT)
    assert [t.template for t in targets] == ["spec.predictor (predictor, ServingRuntime rt)",
                                             "spec.canary[0].predictor (canary v2, ServingRuntime rt)"]
    obj["spec"]["canary"][0]["predictor"]["model"]["resources"] = {"requests": {"cpu": "2"}}
    assert findings(obj, RT) == Counter()
    # the canary inherits the stable's logger: the agent, named at the stable's field
    obj["spec"]["predictor"]["logger"] = {"mode": "all"}
    assert findings(obj, RT) == both(AGENT, "spec.predictor.logger") + both(AGENT, "spec.predictor.logger")
    knative = isvc(stable)
    knative["spec"]["canary"] = [{"trafficPercent": 10, "predictor": canary}]
    reasons = [r for r in walk(knative, related=RT) if isinstance(r, str)]
    assert reasons == ["InferenceService spec.canary: KServe refuses a canary unless the "
                       "serving.kserve.io/deploymentMode annotation is Standard (or, without it, "
                       "inferenceservice-config deploy.defaultDeploymentMode is: validateCanarySpecs): no canary "
                       "Pod is built"]


def test_the_predictors_worker_spec_is_merged_over_the_runtimes_worker() -> None:
    """predictor.go multiNodeProcess: the runtime's worker-container with workerSpec.containers[0] merged over
    it, alone in the workers' Pod (Standard mode)."""
    worker_rt = runtime("rt", "huggingface", workerSpec={"containers": [
        {"name": "worker-container", "resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                                                   "limits": {"cpu": "1", "memory": "2Gi"}}}]})
    related = collect([worker_rt], RELATED)
    predictor: dict[str, Any] = {
        "model": {"modelFormat": {"name": "huggingface"}, "runtime": "rt", "storageUri": "pvc://p/m"},
        "workerSpec": {"pipelineParallelSize": 2, "containers": [
            {"name": "worker-container", "resources": {"requests": {"cpu": "500m"}}}]}}
    assert findings(isvc(predictor, RAW), related) == Counter(
        {"requests-not-equal-limits worker-container spec.predictor.workerSpec.containers[0].resources.cpu": 1})
    del predictor["workerSpec"]["containers"]
    obj = isvc(predictor, RAW)
    assert findings(obj, related) == Counter()
    assert [t.template for t in find_targets(obj, related=related)][-1] == \
        "spec.predictor.workerSpec (predictor worker, ServingRuntime rt)"
    # a runtime without a workerSpec: reconcileWorker fails before any Deployment, so no Pod at all
    (no_pod,) = walk(obj, related=collect([runtime("rt", "huggingface")], RELATED))
    assert isinstance(no_pod, str) and "rt has no workerSpec: KServe builds no Pod" in no_pod
    # an OCI model: the modelcar in the workers' Pod too (InjectModelcar falls back to worker-container)
    predictor["model"]["storageUri"] = "oci://r/m:1"
    assert "cpu-not-integer modelcar spec.predictor.model.storageUri.resources.cpu" in findings(isvc(predictor, RAW),
                                                                                                related)


def test_a_custom_predictors_lone_container_is_kserves_container() -> None:
    """predictor_custom.go Default: a lone (or unnamed first) container is renamed kserve-container, so
    GetStorageUri finds its STORAGE_URI and the storage-initializer is injected."""
    lone = isvc({"containers": [{"name": "server", "image": "x", "env": [{"name": "STORAGE_URI",
                                                                          "value": "s3://b/m"}]}]}, RAW)
    assert findings(lone) == both(SI, "spec.predictor.containers[0].env[0].value")
    [target] = find_targets(lone)
    assert target.pod_spec().containers[0].name == "kserve-container"
    lone["spec"]["predictor"]["containers"][0]["env"][0]["value"] = "pvc://models/m"
    assert findings(lone) == Counter()
