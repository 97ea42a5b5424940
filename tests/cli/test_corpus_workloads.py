"""The custom resources of the vendored corpus (tests/corpus: LeaderWorkerSet, JobSet, KubeRay, KServe, Argo
Rollouts, Kubeflow training-operator and mpi-operator examples, their projects' own files, SOURCES.md) judged by
``check`` object by object: which are compliant, which are not and why, and which cannot be known.

Why the examples fail: written to run anywhere, most set no limits (``limits-missing``: not Guaranteed, so no
exclusive CPUs, whatever the node's CPU Manager policy) or requests below their limits
(``requests-not-equal-limits``, KubeRay's and KServe's collocation samples); LWS's nginx samples ask fractional
CPUs (``cpu-not-integer``). A finding names the replica group or template it is in, as the webhook's refusal
does."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from tests.cli.conftest import CORPUS, Run

FOLDERS = ("lws", "lws-v0.10.0", "jobset", "kuberay", "kserve", "argo-rollouts", "training-operator", "mpi-operator")

LLMISVC = "kserve/docs/samples/llmisvc/"
SCHEDULER = "spec.router.scheduler.template (scheduler, over kserve-config-llm-scheduler) "
SINGLE = "spec.template (main, over kserve-config-llm-template) "
DECODE = "spec.template (main, over kserve-config-llm-decode-template) "
PREFILL = "spec.prefill.template (prefill, over kserve-config-llm-prefill-template) "
LEADER = "spec.template (leader, over kserve-config-llm-worker-data-parallel) "
WORKER = "spec.worker (worker, over kserve-config-llm-worker-data-parallel) "
BASE = "over kserve-config-llm-scheduler and llmisvc-intelligent-inference-scheduling) "
# What other objects are built from (an LLMInferenceServiceConfig a sample's baseRefs name): no Pod of their own.
CONFIGS = (LLMISVC + "e2e-gpt-oss/llmisvc_config_default.yaml",)

# "FILE KIND/NAME": each finding as "RULE FIELDS: TEMPLATE \"CONTAINER\"" (the template is named for kinds with more
# than one; FIELDS are the resources of the limits or requests the rule is about).
EXPECTED = {
    "argo-rollouts/examples/rollout-bluegreen.yaml Rollout/rollout-bluegreen": (
        'limits-missing cpu,memory: "rollouts-demo"',
    ),
    "argo-rollouts/examples/rollout-canary.yaml Rollout/rollout-canary": (
        'limits-missing cpu,memory: "rollouts-demo"',
    ),
    "argo-rollouts/examples/rollout-rolling-update.yaml Rollout/rollout-rollingupdate": (
        'limits-missing cpu,memory: "rollouts-demo"',
    ),
    "argo-rollouts/examples/workload-ref/workload-ref.yaml Deployment/rollout-ref-deployment": (
        'limits-missing cpu,memory: "rollouts-demo"',
    ),
    "jobset/site/static/examples/pytorch/resnet-cifar10/resnet.yaml JobSet/pytorch": (
        'limits-missing cpu,memory: spec.replicatedJobs[0] (workers) "pytorch"',
    ),
    "jobset/site/static/examples/simple/coordinator.yaml JobSet/coordinator-example": (
        'limits-missing cpu,memory: spec.replicatedJobs[0] (workers) "sleep"',
        'limits-missing cpu,memory: spec.replicatedJobs[1] (driver) "sleep"',
    ),
    "jobset/site/static/examples/simple/paralleljobs.yaml JobSet/paralleljobs": (
        'limits-missing cpu,memory: spec.replicatedJobs[0] (workers) "sleep"',
        'limits-missing cpu,memory: spec.replicatedJobs[1] (driver) "sleep"',
    ),
    "jobset/site/static/examples/startup-policy/startup-driver-ready.yaml JobSet/startup-driver-ready": (
        'limits-missing cpu,memory: spec.replicatedJobs[0] (driver) "sleep"',
        'limits-missing cpu,memory: spec.replicatedJobs[1] (workers) "sleep"',
    ),
    "jobset/site/static/examples/tensorflow/mnist.yaml JobSet/tensorflow": (
        'limits-missing cpu,memory: spec.replicatedJobs[0] (tensorflow) "tensorflow"',
    ),
    # KServe v0.20.0 (tests/unit/test_kserve_*.py): a custom predictor's first container gets inferenceservice-config's
    # 1 CPU and 2Gi (not limits-missing), and KServe's default Knative mode adds Knative's queue-proxy (25m cpu, no
    # limit); a logger adds KServe's agent (100m/1 CPU), a STORAGE_URI the storage-initializer (the same).
    "kserve/docs/samples/explanation/aif/germancredit/bias.yaml InferenceService/german-credit": (
        'limits-missing cpu,memory: spec.predictor (predictor) "queue-proxy"',
        'cpu-not-integer cpu: spec.predictor (predictor) "queue-proxy"',
        'limits-missing cpu,memory: spec.explainer (explainer) "queue-proxy"',
        'cpu-not-integer cpu: spec.explainer (explainer) "queue-proxy"',
        'requests-not-equal-limits cpu,memory: spec.predictor (predictor) "agent"',
    ),
    "kserve/docs/samples/v1beta1/custom/custom_model/custom.yaml InferenceService/custom-model": (
        'limits-missing cpu,memory: spec.predictor (predictor) "queue-proxy"',
        'cpu-not-integer cpu: spec.predictor (predictor) "queue-proxy"',
    ),
    "kserve/docs/samples/v1beta1/custom/custom_model/custom.yaml InferenceService/custom-model-grpc": (
        'limits-missing cpu,memory: spec.predictor (predictor) "queue-proxy"',
        'cpu-not-integer cpu: spec.predictor (predictor) "queue-proxy"',
    ),
    "kserve/docs/samples/v1beta1/custom/prebuilt-image/custom.yaml InferenceService/custom-prebuilt-image": (
        'limits-missing cpu,memory: spec.predictor (predictor) "queue-proxy"',
        'cpu-not-integer cpu: spec.predictor (predictor) "queue-proxy"',
    ),
    "kserve/docs/samples/v1beta1/transformer/collocation/collocation.yaml "
    "InferenceService/custom-transformer-collocation": (
        'requests-not-equal-limits cpu,memory: spec.predictor (predictor) "kserve-container"',
        'requests-not-equal-limits cpu,memory: spec.predictor (predictor) "transformer-container"',
        'requests-not-equal-limits cpu,memory: spec.predictor (predictor) "storage-initializer"',
        'limits-missing cpu,memory: spec.predictor (predictor) "queue-proxy"',
        'cpu-not-integer cpu: spec.predictor (predictor) "queue-proxy"',
    ),
    "kuberay/ray-operator/config/samples/ray-cluster.complete.yaml RayCluster/raycluster-complete": (
        'requests-not-equal-limits cpu,memory: spec.headGroupSpec (head) "ray-head"',
        'requests-not-equal-limits cpu: spec.workerGroupSpecs[0] (small-group) "ray-worker"',
    ),
    "kuberay/ray-operator/config/samples/ray-service.sample.yaml RayService/rayservice-sample": (
        'requests-not-equal-limits memory: spec.rayClusterConfig.headGroupSpec (head) "ray-head"',
        'requests-not-equal-limits cpu: spec.rayClusterConfig.workerGroupSpecs[0] (small-group) "ray-worker"',
    ),
    "kuberay/ray-operator/config/samples/ray-service.text-ml.yaml RayService/rayservice-sample": (
        'requests-not-equal-limits memory: spec.rayClusterConfig.headGroupSpec (head) "ray-head"',
        'requests-not-equal-limits cpu: spec.rayClusterConfig.workerGroupSpecs[0] (small-group) "ray-worker"',
    ),
    "lws/config/samples/leaderworkerset_v1_leaderworkerset.yaml LeaderWorkerSet/leaderworkerset-sample": (
        'cpu-not-integer cpu: spec.leaderWorkerTemplate.workerTemplate (worker) "nginx"',
        'limits-missing memory: spec.leaderWorkerTemplate.workerTemplate (worker) "nginx"',
        'requests-not-equal-limits cpu: spec.leaderWorkerTemplate.workerTemplate (worker) "nginx"',
    ),
    "lws/docs/examples/llamacpp/k8s/lws.yaml LeaderWorkerSet/llamacpp-llama3-8b-instruct-bartowski-q5km": (
        'limits-missing cpu,memory: spec.leaderWorkerTemplate.leaderTemplate (leader) "llamacpp-leader"',
        'limits-missing cpu,memory: spec.leaderWorkerTemplate.workerTemplate (worker) "llamacpp-worker"',
    ),
    "lws/docs/examples/sample/lws-multi-template.yaml LeaderWorkerSet/leaderworkerset-multi-template": (
        'cpu-not-integer cpu: spec.leaderWorkerTemplate.leaderTemplate (leader) "nginx2"',
        'cpu-not-integer cpu: spec.leaderWorkerTemplate.workerTemplate (worker) "nginx"',
        'limits-missing memory: spec.leaderWorkerTemplate.leaderTemplate (leader) "nginx2"',
        'limits-missing memory: spec.leaderWorkerTemplate.workerTemplate (worker) "nginx"',
        'requests-not-equal-limits cpu: spec.leaderWorkerTemplate.leaderTemplate (leader) "nginx2"',
        'requests-not-equal-limits cpu: spec.leaderWorkerTemplate.workerTemplate (worker) "nginx"',
    ),
    "lws/docs/examples/sglang/lws.yaml LeaderWorkerSet/sglang": (
        'limits-missing cpu,memory: spec.leaderWorkerTemplate.leaderTemplate (leader) "sglang-leader"',
        'limits-missing cpu,memory: spec.leaderWorkerTemplate.workerTemplate (worker) "sglang-worker"',
    ),
    "lws/docs/examples/tensorrt-llm/lws.yaml LeaderWorkerSet/tensorrt": (
        'limits-missing cpu,memory: spec.leaderWorkerTemplate.leaderTemplate (leader) "leader"',
        'limits-missing cpu,memory: spec.leaderWorkerTemplate.workerTemplate (worker) "worker"',
    ),
    "lws/docs/examples/vllm/GPU/lws.yaml LeaderWorkerSet/vllm": (
        'limits-missing cpu: spec.leaderWorkerTemplate.leaderTemplate (leader) "vllm-leader"',
        'limits-missing cpu: spec.leaderWorkerTemplate.workerTemplate (worker) "vllm-worker"',
    ),
    # KServe v0.20.0's LLMInferenceService samples, built as its llmisvc controller builds them
    # (webhook.core.operators.llmisvc): KServe's presets under the object, the storage-initializer hf:// adds
    # (100m of 1 CPU as KServe ships it), the decode preset's routing sidecar (no resources), the scheduler's
    # preset (cpu 1 of 6; its tokenizer, for which the scheduler gets the model too: hf:// adds the
    # storage-initializer there as well, scheduler.go; then dropped, as no sample's config names the
    # precise-prefix-cache-scorer, the storage-initializer staying).
    LLMISVC + "dp-ep/deepseek-r1-gpu-rdma-roce/llm-inference-service-dp-ep-deepseek-r1-gpu-naive.yaml "
    "LLMInferenceService/deepseek-coder-v2": (
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"main"',
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"storage-initializer"',
        'requests-not-equal-limits cpu,memory: ' + LEADER + '"main"',
        'requests-not-equal-limits cpu,memory: ' + LEADER + '"storage-initializer"',
        'requests-not-equal-limits cpu,memory: ' + WORKER + '"main"',
        'requests-not-equal-limits cpu,memory: ' + WORKER + '"storage-initializer"',
    ),
    LLMISVC + "e2e-gpt-oss/inference_default.yaml LLMInferenceService/gpt-oss-20b": (
        'requests-not-equal-limits cpu,memory: spec.router.scheduler.template (scheduler, ' + BASE + '"main"',
        'requests-not-equal-limits cpu,memory: spec.template (main, over kserve-config-llm-template and '
        'llmisvc-intelligent-inference-scheduling) "main"',
    ),
    LLMISVC + "lora-adapters/test-examples/01-lora-hf-cpu.yaml LLMInferenceService/lora-hf-test": (
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"main"',
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"storage-initializer"',
        'requests-not-equal-limits cpu,memory: ' + SINGLE + '"main"',
        'requests-not-equal-limits cpu,memory: ' + SINGLE + '"storage-initializer"',
    ),
    LLMISVC + "lora-adapters/test-examples/04-lora-pvc-cpu.yaml LLMInferenceService/lora-pvc-test": (
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"main"',
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"storage-initializer"',
        'requests-not-equal-limits cpu,memory: ' + SINGLE + '"main"',
        'requests-not-equal-limits cpu,memory: ' + SINGLE + '"storage-initializer"',
    ),
    LLMISVC + "opt-125m-cpu/llm-inference-service-facebook-opt-125m-cpu-no-scheduler.yaml "
    "LLMInferenceService/facebook-opt-125m-single": (
        'requests-not-equal-limits cpu,memory: ' + SINGLE + '"main"',
        'requests-not-equal-limits cpu,memory: ' + SINGLE + '"storage-initializer"',
    ),
    LLMISVC + "opt-125m-cpu/llm-inference-service-facebook-opt-125m-cpu.yaml "
    "LLMInferenceService/facebook-opt-125m-single": (
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"main"',
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"storage-initializer"',
        'requests-not-equal-limits cpu,memory: ' + SINGLE + '"main"',
        'requests-not-equal-limits cpu,memory: ' + SINGLE + '"storage-initializer"',
    ),
    LLMISVC + "opt-125m-cpu/llm-inference-service-pd-facebook-opt-125m-cpu.yaml "
    "LLMInferenceService/facebook-opt-125m-pd": (
        'limits-missing cpu,memory: ' + DECODE + '"llm-d-routing-sidecar"',
        'requests-not-equal-limits cpu,memory: ' + PREFILL + '"main"',
        'requests-not-equal-limits cpu,memory: ' + PREFILL + '"storage-initializer"',
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"main"',
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"storage-initializer"',
        'requests-not-equal-limits cpu,memory: ' + DECODE + '"main"',
        'requests-not-equal-limits cpu,memory: ' + DECODE + '"storage-initializer"',
    ),
    LLMISVC + "single-node-gpu/llm-inference-service-pd-qwen2-7b-gpu.yaml LLMInferenceService/qwen2-7b-instruct-pd": (
        'limits-missing cpu,memory: ' + DECODE + '"llm-d-routing-sidecar"',
        'requests-not-equal-limits cpu,memory: ' + PREFILL + '"main"',
        'requests-not-equal-limits cpu,memory: ' + PREFILL + '"storage-initializer"',
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"main"',
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"storage-initializer"',
        'requests-not-equal-limits cpu,memory: ' + DECODE + '"main"',
        'requests-not-equal-limits cpu,memory: ' + DECODE + '"storage-initializer"',
    ),
    LLMISVC + "single-node-gpu/llm-inference-service-qwen2-7b-gpu-no-scheduler.yaml "
    "LLMInferenceService/qwen2-7b-instruct-single-no-scheduler": (
        'requests-not-equal-limits cpu,memory: ' + SINGLE + '"main"',
        'requests-not-equal-limits cpu,memory: ' + SINGLE + '"storage-initializer"',
    ),
    LLMISVC + "single-node-gpu/llm-inference-service-qwen2-7b-gpu.yaml LLMInferenceService/qwen2-7b-instruct-single": (
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"main"',
        'requests-not-equal-limits cpu,memory: ' + SCHEDULER + '"storage-initializer"',
        'requests-not-equal-limits cpu,memory: ' + SINGLE + '"main"',
        'requests-not-equal-limits cpu,memory: ' + SINGLE + '"storage-initializer"',
    ),
    # LWS v0.10.0's DisaggregatedSet samples: each role's templates become a LeaderWorkerSet's as written
    # (lws_manager.go adds labels, annotations and placement affinities only).
    "lws-v0.10.0/config/samples/disaggregatedset_v1_3role.yaml DisaggregatedSet/disaggregatedset-3role-sample": (
        'cpu-not-integer cpu: spec.roles[0] (prefill) worker "model"',
        'cpu-not-integer cpu: spec.roles[1] (decode) worker "model"',
        'cpu-not-integer cpu: spec.roles[2] (encode) worker "model"',
    ),
    # size 1 with a leader template: no worker StatefulSet (lws pod_controller.go:138), so the leaders only
    "lws-v0.10.0/config/samples/disaggregatedset_v1_disaggregatedset.yaml DisaggregatedSet/disaggregatedset-sample": (
        'limits-missing cpu,memory: spec.roles[0] (prefill) leader "worker"',
        'limits-missing cpu,memory: spec.roles[1] (decode) leader "worker"',
    ),
    "mpi-operator/examples/v2beta1/tensorflow-benchmarks/tensorflow-benchmarks.yaml MPIJob/tensorflow-benchmarks": (
        'limits-missing cpu,memory: spec.mpiReplicaSpecs.Launcher "tensorflow-benchmarks"',
        'limits-missing cpu,memory: spec.mpiReplicaSpecs.Worker "tensorflow-benchmarks"',
    ),
    "training-operator/examples/jax/cpu-demo/demo.yaml JAXJob/jaxjob-simple": (
        'limits-missing cpu,memory: spec.jaxReplicaSpecs.Worker "jax"',
    ),
    "training-operator/examples/paddlepaddle/simple-gpu.yaml PaddleJob/paddle-simple-gpu": (
        'limits-missing cpu,memory: spec.paddleReplicaSpecs.Worker "paddle"',
    ),
    "training-operator/examples/pytorch/deepspeed-demo/pytorch_deepspeed_demo.yaml PyTorchJob/pytorch-deepspeed-demo": (
        'limits-missing cpu,memory: spec.pytorchReplicaSpecs.Master "pytorch"',
        'limits-missing cpu,memory: spec.pytorchReplicaSpecs.Worker "pytorch"',
    ),
    "training-operator/examples/pytorch/simple.yaml PyTorchJob/pytorch-simple": (
        'limits-missing cpu,memory: spec.pytorchReplicaSpecs.Master "pytorch"',
        'limits-missing cpu,memory: spec.pytorchReplicaSpecs.Worker "pytorch"',
    ),
    "training-operator/examples/tensorflow/simple.yaml TFJob/tfjob-simple": (
        'limits-missing cpu,memory: spec.tfReplicaSpecs.Worker "tensorflow"',
    ),
    "training-operator/examples/xgboost/xgboostjob.yaml XGBoostJob/xgboost-dist-iris-test-train": (
        'limits-missing cpu,memory: spec.xgbReplicaSpecs.Master "xgboost"',
        'limits-missing cpu,memory: spec.xgbReplicaSpecs.Worker "xgboost"',
    ),
}

# Guaranteed with whole CPUs in every template: pinned where the node's CPU Manager is static.
COMPLIANT = {
    "kuberay/ray-operator/config/samples/ray-cluster.sample.yaml": 1,
    "kuberay/ray-operator/config/samples/ray-job.batch-inference.yaml": 1,
    "mpi-operator/examples/v2beta1/pi/pi.yaml": 1,
    "training-operator/examples/mpi/tensorflow-mnist.yaml": 1,  # MPIJob at training-operator's kubeflow.org/v1
}

# Not judged, with the reason check gives: what kubelet gets is not in the object.
UNKNOWN = {
    "kserve/docs/samples/accelerators/tensorflow-gpu.yaml":
        "InferenceService spec.predictor: KServe chooses its runtime among the cluster's ServingRuntimes and "
        "ClusterServingRuntimes, and the input does not hold them all: name one in spec.predictor.model.runtime "
        "(and give it), or run with --kubeconfig",
}


def _finding(v: dict[str, str]) -> str:
    # up to where the container is (its template's field, or the object field behind an injected one)
    head = re.split(r" \((?:spec|metadata)[.\[]", v["message"], maxsplit=1)[0]
    head = head.replace(": container ", " ").replace("container ", "")
    return f"{v['rule']} {v['path'].rsplit('.', 1)[1]}: {head}"


def test_each_custom_resource_example_is_judged_as_expected(qos_guard: Run) -> None:
    out = qos_guard("check", *(str(CORPUS / f) for f in FOLDERS), "--format", "json")
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    assert report["errors"] == []
    grouped: dict[str, dict[tuple[str, str], list[str]]] = defaultdict(lambda: defaultdict(list))
    for v in report["violations"]:
        rule, rest = _finding(v).split(" ", 1)
        field, head = rest.split(": ", 1)
        grouped[f"{Path(v['file']).relative_to(CORPUS)} {v['kind']}/{v['name']}"][(rule, head)].append(field)
    found = {key: tuple(sorted(f"{rule} {','.join(sorted(fields))}: {head}" for (rule, head), fields in g.items()))
             for key, g in grouped.items()}
    assert found == {key: tuple(sorted(value)) for key, value in EXPECTED.items()}
    unknown = {k for k, n in report["summary"]["skipped"].items() if k.startswith("InferenceService ")}
    assert unknown == set(UNKNOWN.values())
    judged = {k.split(" ", 1)[0] for k in EXPECTED} | set(COMPLIANT)
    files = {str(p.relative_to(CORPUS)) for f in FOLDERS for p in (CORPUS / f).rglob("*.yaml")}
    assert files == judged | set(UNKNOWN) | set(CONFIGS), "every example is in one of the tables"
    assert report["summary"]["objects"] == len(EXPECTED) + sum(COMPLIANT.values())


def test_the_compliant_ones_pass_and_the_unknown_one_is_not_passed(qos_guard: Run) -> None:
    ok = qos_guard("check", *(str(CORPUS / f) for f in COMPLIANT))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"{sum(COMPLIANT.values())} objects checked, 0 violations" in ok.stderr
    (path, reason), = UNKNOWN.items()
    unknown = qos_guard("check", str(CORPUS / path))
    assert unknown.returncode == 2 and f"skipped: 1 {reason}" in unknown.stderr, unknown.stderr


def test_the_issue_llminferenceservice_fails_and_one_without_its_base_config_is_unknown(qos_guard: Run) -> None:
    """KServe's single-node-gpu sample (cpu request 2, limit 4) is refused naming the template and the container; the
    e2e-gpt-oss sample without the LLMInferenceServiceConfig its baseRefs name is not judged: said, naming it."""
    sample = qos_guard("check", str(CORPUS / LLMISVC / "single-node-gpu/llm-inference-service-qwen2-7b-gpu.yaml"))
    assert sample.returncode == 1
    assert ('requests-not-equal-limits: spec.template (main, over kserve-config-llm-template): container "main" '
            "(spec.template.containers[0]): cpu request 2 differs from its limit 4") \
        in sample.stdout, sample.stdout
    alone = qos_guard("check", str(CORPUS / LLMISVC / "e2e-gpt-oss/inference_default.yaml"))
    assert alone.returncode == 2 and alone.stdout == ""
    assert ('skipped: 1 LLMInferenceService spec.baseRefs[0]: LLMInferenceServiceConfig '
            '"llmisvc-intelligent-inference-scheduling" not in the input') in alone.stderr, alone.stderr


NIM = "k8s-nim-operator/config/samples/nim/serving/"
# NVIDIA NIM operator v3.1.2's samples: spec.resources is the model container's (GPUs only: no cpu or memory
# limit), the leader's and the worker's alike with spec.multiNode; with inferencePlatform: kserve the operator
# writes an InferenceService instead (not judged here: said).
NIM_EXPECTED = {
    NIM + "advanced/multi-node/multi-node-nimservice.yaml NIMService/deepseek-r1": (
        'limits-missing cpu,memory: spec (leader) "nim-leader"',
        'limits-missing cpu,memory: spec (worker) "nim-worker"',
    ),
    NIM + "standalone/basic/llm.yaml NIMService/meta-llama-3-2-1b-instruct": (
        'limits-missing cpu,memory: spec (Deployment) "meta-llama-3-2-1b-instruct-ctr"',
    ),
}


def test_nim_samples_are_judged_as_the_operator_builds_them(qos_guard: Run) -> None:
    out = qos_guard("check", str(CORPUS / "k8s-nim-operator"), "--format", "json")
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    grouped: dict[str, dict[tuple[str, str], list[str]]] = defaultdict(lambda: defaultdict(list))
    for v in report["violations"]:
        # the model container is made of the whole spec: "container "x" (spec): ..."
        rule, rest = _finding({**v, "message": v["message"].replace(" (spec): ", " (spec.): ")}).split(" ", 1)
        field, head = rest.split(": ", 1)
        grouped[f"{Path(v['file']).relative_to(CORPUS)} {v['kind']}/{v['name']}"][(rule, head)].append(field)
    found = {key: tuple(sorted(f"{rule} {','.join(sorted(fields))}: {head}" for (rule, head), fields in g.items()))
             for key, g in grouped.items()}
    assert found == NIM_EXPECTED
    assert report["summary"]["skipped"] == {
        "NIMCache (the NIM operator runs its model-caching Job from it: not judged here; that Job and its Pods are)": 3,
        "NIMService with spec.inferencePlatform: kserve (the operator writes a KServe InferenceService from it: "
        "judged as the InferenceService and Pods KServe creates)": 1}


VLLM = "vllm-production-stack/operator/config/samples/"
VLLM_DEPLOYMENT = "spec.deploymentConfig (Deployment) "


def test_vllmruntime_samples_are_judged_as_the_operator_builds_them(qos_guard: Run) -> None:
    """production-stack's VLLMRuntime samples: the sidecar's cpu 0.5 is fractional; the autoscaling samples give
    the vllm container a GPU and no cpu or memory, so it has no limits."""
    sample = "production-stack_v1alpha1_vllmruntime.yaml"
    scaling = "production-stack_v1alpha1_vllmruntime_autoscaling.yaml"
    out = qos_guard("check", str(CORPUS / VLLM / sample), str(CORPUS / VLLM / scaling), "--format", "json")
    assert out.returncode == 1, out.stderr
    found = sorted((Path(v["file"]).name, v["name"], v["rule"], v["message"].split(" (spec.deploymentConfig.")[0])
                   for v in json.loads(out.stdout)["violations"])
    assert found == sorted([
        (sample, "vllmruntime-sample", "cpu-not-integer", VLLM_DEPLOYMENT.rstrip() + ': container "sidecar"'),
        *((scaling, name, "limits-missing", VLLM_DEPLOYMENT.rstrip() + ': container "vllm"')
          for name in ("vllmruntime-autoscaling-minimal", "vllmruntime-autoscaling-scale-to-zero") for _ in "cm")])
