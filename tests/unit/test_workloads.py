"""Where the Pod spec lives in every workload kind; other kinds are ignored."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import container, rl
from webhook.core.fieldpath import dotted, pointer
from webhook.core.operators.kserve import MODEL_FIELDS as KSERVE_MODEL_FIELDS
from webhook.core.operators.vllmruntime import LABEL as VLLMRUNTIME_LABEL
from webhook.core.resourceblock import ManifestError
from webhook.core.workloads import BUILTIN, KINDS, find_targets, walk

SPEC = {"containers": [container("a", rl("1", "1Gi"), rl("1", "1Gi"))]}
TEMPLATE = {"template": {"spec": SPEC}}


API = {k.kind: k.api_version for k in BUILTIN}


def obj(kind: str, **body: Any) -> dict[str, Any]:
    return {"apiVersion": API.get(kind, "v1"), "kind": kind, "metadata": {"name": kind.lower(), "namespace": "ns"},
            **body}


WORKLOADS = [
    (obj("Pod", spec=SPEC), "spec"),
    (obj("Deployment", spec=TEMPLATE), "spec.template.spec"),
    (obj("ReplicaSet", spec=TEMPLATE), "spec.template.spec"),
    (obj("StatefulSet", spec=TEMPLATE), "spec.template.spec"),
    (obj("DaemonSet", spec=TEMPLATE), "spec.template.spec"),
    (obj("Job", spec=TEMPLATE), "spec.template.spec"),
    (obj("ReplicationController", spec=TEMPLATE), "spec.template.spec"),
    (obj("CronJob", spec={"schedule": "* * * * *", "jobTemplate": {"spec": TEMPLATE}}),
     "spec.jobTemplate.spec.template.spec"),
    (obj("PodTemplate", template={"spec": SPEC}), "template.spec"),
]


@pytest.mark.parametrize(("manifest", "path"), WORKLOADS, ids=[w[0]["kind"] for w in WORKLOADS])
def test_every_workload_kind(manifest: dict[str, Any], path: str) -> None:
    (target,) = find_targets(manifest)
    assert dotted(target.path) == path and target.spec is not None
    assert target.kind == manifest["kind"] and target.name == manifest["kind"].lower()
    assert target.namespace == "ns"


def test_list_items() -> None:
    lst = {"apiVersion": "v1", "kind": "List", "items": [w[0] for w in WORKLOADS] + [obj("Service")]}
    targets = list(find_targets(lst))
    assert [dotted(t.path) for t in targets][:2] == ["items[0].spec", "items[1].spec.template.spec"]
    assert len(targets) == len(WORKLOADS)


@pytest.mark.parametrize("manifest", [obj("Service", spec={}), obj("ConfigMap"), {"kind": 3}, "text", None,
                                      obj("Deployment", spec={"replicas": 2})])
def test_ignored(manifest: Any) -> None:
    assert list(find_targets(manifest)) == []


def test_wrong_shape_is_named() -> None:
    with pytest.raises(ManifestError) as err:
        list(find_targets(obj("Deployment", spec={"template": "nope"})))
    assert err.value.path == ("spec", "template")


def test_every_core_kind_in_the_table_is_found() -> None:
    assert {w[0]["kind"] for w in WORKLOADS} == {k.kind for k in KINDS.values() if k.core}
    assert {(k.group, k.kind) for k in KINDS.values()} == set(KINDS)


def test_a_kind_is_its_group_and_name() -> None:
    """``example.com/v1 Deployment`` is not a Deployment (skipped, with why); a Pod without apiVersion is an error
    (kubectl refuses it: "apiVersion not set")."""
    other = {**obj("Deployment", spec=TEMPLATE), "apiVersion": "example.com/v1"}
    assert list(walk(other)) == ["Deployment of example.com/v1"]
    bare = obj("Pod", spec=SPEC)
    del bare["apiVersion"]
    with pytest.raises(ManifestError) as err:
        list(walk(bare))
    assert err.value.path == ("apiVersion",) and "kubectl apply refuses the Pod; add apiVersion: v1" in str(err.value)
    core_pod = {**obj("Pod", spec=SPEC), "apiVersion": "apps/v1"}
    assert list(walk(core_pod)) == ["Pod of apps/v1"]
    assert list(walk({**obj("Service"), "apiVersion": "v1"})) == ["Service"]


def test_printed_forms() -> None:
    path = ("items", 3, "spec", "containers", 0, "resources", "a/b~c")
    assert dotted(path) == "items[3].spec.containers[0].resources.a/b~c"
    assert pointer(path) == "/items/3/spec/containers/0/resources/a~1b~0c"


def _named(name: str, key: str = "name", **body: Any) -> dict[str, Any]:
    return {key: name, **body}


# Each custom resource kind, with every template path filled: (object, [(path, template label)]).
POD_T = {"spec": SPEC}
RAY = {"headGroupSpec": {"template": POD_T},
       "workerGroupSpecs": [_named("cpu", "groupName", template=POD_T), _named("gpu", "groupName", template=POD_T)]}
CUSTOM = [
    # size 2: with size 1 (the default) and a leader template the worker template makes no Pods (below)
    (obj("LeaderWorkerSet", spec={"leaderWorkerTemplate": {"size": 2, "leaderTemplate": POD_T,
                                                           "workerTemplate": POD_T}}),
     [("spec.leaderWorkerTemplate.leaderTemplate.spec", "spec.leaderWorkerTemplate.leaderTemplate (leader)"),
      ("spec.leaderWorkerTemplate.workerTemplate.spec", "spec.leaderWorkerTemplate.workerTemplate (worker)")]),
    # each role's leader and worker sit in the same list item: the template's role follows the item's name
    (obj("DisaggregatedSet", spec={"roles": [
        _named(r, spec={"leaderWorkerTemplate": {"size": 2, "leaderTemplate": POD_T, "workerTemplate": POD_T}})
        for r in ("prefill", "decode")]}),
     [("spec.roles[0].spec.leaderWorkerTemplate.leaderTemplate.spec", "spec.roles[0] (prefill) leader"),
      ("spec.roles[1].spec.leaderWorkerTemplate.leaderTemplate.spec", "spec.roles[1] (decode) leader"),
      ("spec.roles[0].spec.leaderWorkerTemplate.workerTemplate.spec", "spec.roles[0] (prefill) worker"),
      ("spec.roles[1].spec.leaderWorkerTemplate.workerTemplate.spec", "spec.roles[1] (decode) worker")]),
    (obj("JobSet", spec={"replicatedJobs": [_named("driver", template={"spec": TEMPLATE}),
                                            _named("workers", template={"spec": TEMPLATE})]}),
     [("spec.replicatedJobs[0].template.spec.template.spec", "spec.replicatedJobs[0] (driver)"),
      ("spec.replicatedJobs[1].template.spec.template.spec", "spec.replicatedJobs[1] (workers)")]),
    (obj("RayCluster", spec=RAY),
     [("spec.headGroupSpec.template.spec", "spec.headGroupSpec (head)"),
      ("spec.workerGroupSpecs[0].template.spec", "spec.workerGroupSpecs[0] (cpu)"),
      ("spec.workerGroupSpecs[1].template.spec", "spec.workerGroupSpecs[1] (gpu)")]),
    (obj("RayService", spec={"rayClusterConfig": RAY}),
     [("spec.rayClusterConfig.headGroupSpec.template.spec", "spec.rayClusterConfig.headGroupSpec (head)"),
      ("spec.rayClusterConfig.workerGroupSpecs[0].template.spec", "spec.rayClusterConfig.workerGroupSpecs[0] (cpu)"),
      ("spec.rayClusterConfig.workerGroupSpecs[1].template.spec", "spec.rayClusterConfig.workerGroupSpecs[1] (gpu)")]),
    (obj("RayJob", spec={"entrypoint": "python x.py", "rayClusterSpec": RAY}),
     [("spec.rayClusterSpec.headGroupSpec.template.spec", "spec.rayClusterSpec.headGroupSpec (head)"),
      ("spec.rayClusterSpec.workerGroupSpecs[0].template.spec", "spec.rayClusterSpec.workerGroupSpecs[0] (cpu)"),
      ("spec.rayClusterSpec.workerGroupSpecs[1].template.spec", "spec.rayClusterSpec.workerGroupSpecs[1] (gpu)")]),
    (obj("InferenceService", spec={"predictor": SPEC}), [("spec.predictor", "spec.predictor (predictor)")]),
    (obj("InferenceService", spec={"predictor": SPEC, "transformer": SPEC, "explainer": SPEC}),
     [("spec.predictor", "spec.predictor (predictor)"), ("spec.transformer", "spec.transformer (transformer)"),
      ("spec.explainer", "spec.explainer (explainer)")]),
    (obj("InferenceService", spec={"predictor": SPEC, "explainer": {**SPEC, "art": {"type": "SquareAttack"}}}),
     [("spec.predictor", "spec.predictor (predictor)")]),
    (obj("ServingRuntime", spec={**SPEC, "workerSpec": SPEC}),
     [("spec", "spec (runtime)"), ("spec.workerSpec", "spec.workerSpec (worker)")]),
    ({**obj("ClusterServingRuntime", spec=SPEC), "metadata": {"name": "csr"}}, [("spec", "spec (runtime)")]),
    # KServe builds each of its five pod specs over its presets (webhook.core.operators.llmisvc); data parallelism
    # takes dataLocal with it (KServe's validator refuses one without the other: no Pods)
    (obj("LLMInferenceService", spec={"model": {"uri": "pvc://m/x"}, "template": SPEC, "worker": SPEC,
                                      "parallelism": {"data": 2, "dataLocal": 1}, "router": {"scheduler": {}},
                                      "prefill": {"template": SPEC, "worker": SPEC,
                                                  "parallelism": {"data": 2, "dataLocal": 1}}}),
     [("spec.template", "spec.template (leader, over kserve-config-llm-decode-worker-data-parallel)"),
      ("spec.worker", "spec.worker (worker, over kserve-config-llm-decode-worker-data-parallel)"),
      ("spec.prefill.template", "spec.prefill.template (prefill leader, over "
                                "kserve-config-llm-prefill-worker-data-parallel)"),
      ("spec.prefill.worker", "spec.prefill.worker (prefill worker, over "
                              "kserve-config-llm-prefill-worker-data-parallel)"),
      ("spec.router.scheduler.template", "spec.router.scheduler.template (scheduler, over "
                                         "kserve-config-llm-scheduler)")]),
    (obj("NIMService", spec={"resources": {}}), [("spec", "spec (Deployment)")]),
    (obj("VLLMRuntime", spec={"deploymentConfig": {}}),
     [("spec.deploymentConfig", VLLMRUNTIME_LABEL)]),
    (obj("Rollout", spec=TEMPLATE), [("spec.template.spec", "")]),
    *[(obj(kind, spec={f"{replicas}ReplicaSpecs": {"Master": {"replicas": 1, "template": POD_T},
                                                    "Worker": {"replicas": 2, "template": POD_T}}}),
       [(f"spec.{replicas}ReplicaSpecs.Master.template.spec", f"spec.{replicas}ReplicaSpecs.Master"),
        (f"spec.{replicas}ReplicaSpecs.Worker.template.spec", f"spec.{replicas}ReplicaSpecs.Worker")])
      for kind, replicas in (("PyTorchJob", "pytorch"), ("TFJob", "tf"), ("MPIJob", "mpi"), ("XGBoostJob", "xgb"),
                             ("PaddleJob", "paddle"), ("JAXJob", "jax"))],
]


@pytest.mark.parametrize(("manifest", "expected"), CUSTOM, ids=[c[0]["kind"] for c in CUSTOM])
def test_every_custom_resource_kind(manifest: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    """Every template path of every built-in custom resource kind, each named as findings name it."""
    assert [(dotted(t.path), t.template) for t in find_targets(manifest)] == expected


def test_every_builtin_kind_is_tested() -> None:
    assert {c[0]["kind"] for c in CUSTOM} | {w[0]["kind"] for w in WORKLOADS} == {k.kind for k in BUILTIN}


def test_optional_templates_and_wrong_shapes() -> None:
    """LeaderWorkerSet's leader template is optional; a list where a mapping belongs is named."""
    lws = obj("LeaderWorkerSet", spec={"leaderWorkerTemplate": {"workerTemplate": POD_T}})
    assert [t.template for t in find_targets(lws)] == ["spec.leaderWorkerTemplate.workerTemplate (worker)"]
    assert list(walk(obj("JobSet", spec={"replicatedJobs": []}))) == ["JobSet without a pod template"]
    with pytest.raises(ManifestError) as err:
        list(find_targets(obj("JobSet", spec={"replicatedJobs": {"a": 1}})))
    assert err.value.path == ("spec", "replicatedJobs")
    with pytest.raises(ManifestError) as err:
        list(find_targets(obj("JobSet", spec={"replicatedJobs": [3]})))
    assert err.value.path == ("spec", "replicatedJobs", 0)


def lws(**template: Any) -> dict[str, Any]:
    return obj("LeaderWorkerSet", spec={"leaderWorkerTemplate": template})


def test_with_size_one_and_a_leader_template_the_worker_template_makes_no_pods() -> None:
    """lws's pod controller returns before it makes the worker StatefulSet when size is 1 (the CRD's default;
    pkg/controllers/pod_controller.go:137 at v0.7.0, :138 at v0.10.0): the worker template is not judged. Without
    a leader template it is the leader's (constructLeaderStatefulSetApplyConfiguration), judged whatever the
    size; a null leader template is none (the API server prunes it)."""
    leader, worker = "spec.leaderWorkerTemplate.leaderTemplate.spec", "spec.leaderWorkerTemplate.workerTemplate.spec"
    for template, paths in (({"leaderTemplate": POD_T, "workerTemplate": POD_T}, [leader]),
                            ({"size": 1, "leaderTemplate": POD_T, "workerTemplate": POD_T}, [leader]),
                            ({"size": None, "leaderTemplate": POD_T, "workerTemplate": POD_T}, [leader]),
                            ({"size": 3, "leaderTemplate": POD_T, "workerTemplate": POD_T}, [leader, worker]),
                            ({"size": 1, "workerTemplate": POD_T}, [worker]),
                            ({"leaderTemplate": None, "workerTemplate": POD_T}, [worker])):
        assert [dotted(t.path) for t in find_targets(lws(**template))] == paths, template
    roles = [_named("prefill", spec={"leaderWorkerTemplate": {"leaderTemplate": POD_T, "workerTemplate": POD_T}}),
             _named("decode", spec={"leaderWorkerTemplate": {"size": 2, "leaderTemplate": POD_T,
                                                             "workerTemplate": POD_T}})]
    assert [t.template for t in find_targets(obj("DisaggregatedSet", spec={"roles": roles}))] == [
        "spec.roles[0] (prefill) leader", "spec.roles[1] (decode) leader", "spec.roles[1] (decode) worker"]


def test_an_unjudged_worker_template_is_neither_refused_nor_mended() -> None:
    """The engine, the mutation (``fix``, mutate mode) and the webhook read the templates through one walk: a
    fractional worker that makes no Pods is left as written, and the LeaderWorkerSet is admitted."""
    from webhook.core.config import parse_config
    from webhook.core.engine import Mode, evaluate

    fractional = {"spec": {"containers": [container("w", rl("500m", "1Gi"), rl("500m", "1Gi"))]}}
    single = lws(leaderTemplate=POD_T, workerTemplate=fractional)
    config = parse_config({"mutation": {"cpuRounding": "up"}})
    for mode in (Mode.ENFORCE, Mode.MUTATE):
        verdict = evaluate(single, config, mode)
        assert verdict.violations == [] and verdict.changes == () and verdict.allowed, mode
    assert evaluate(lws(size=2, leaderTemplate=POD_T, workerTemplate=fractional), config, Mode.MUTATE).changes


def test_kserve_model_predictor_is_unknown_not_passed() -> None:
    """With ``spec.predictor.model`` KServe merges the model container over its ServingRuntime's
    (MergeServingRuntimeAndInferenceServiceSpecs): without the runtime and with resources a runtime could change,
    nothing is judged (never passed), and check says why; the policies leave the kind to the webhook."""
    isvc = obj("InferenceService", spec={"predictor": {"model": {"modelFormat": {"name": "huggingface"},
                                                                "resources": {"limits": {"cpu": "1500m"}}}}})
    (reason,) = walk(isvc)
    assert isinstance(reason, str) and reason.startswith("InferenceService spec.predictor: KServe chooses its runtime")
    from webhook.policies.expressions import cel_kinds, pod_rules, spec_variables
    # the policies cannot merge a ServingRuntime: they leave InferenceService to the webhook
    assert "InferenceService" not in dict(spec_variables())["templates0"]
    assert not any("inferenceservices" in r["resources"] for r in pod_rules(False, cel_kinds()))
    assert any("inferenceservices" in r["resources"] for r in pod_rules(False))  # the webhook's rules


@pytest.mark.parametrize("framework", [f for f in KSERVE_MODEL_FIELDS if f != "model"])
def test_kserve_framework_predictor_is_unknown_not_passed(framework: str) -> None:
    """``spec.predictor.tensorflow`` (and each framework field) is turned into ``spec.predictor.model`` by
    KServe's defaulting (setPredictorModelDefaults), so it is unknown as the model is without its runtime: a
    predictor with only a framework field has no containers of its own, and judging that as compliant would pass
    a Pod nobody saw."""
    isvc = obj("InferenceService", spec={"predictor": {framework: {
        "storageUri": "gs://kfserving-examples/models/tensorflow/flowers",
        "resources": {"limits": {"cpu": "1500m", "nvidia.com/gpu": 1}}}}})
    (reason,) = walk(isvc)
    assert isinstance(reason, str) and "name one in spec.predictor.model.runtime" in reason
