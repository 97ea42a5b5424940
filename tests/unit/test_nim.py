"""NVIDIA NIM operator's NIMService as its v3.1.2 controller builds its Pods (``webhook.core.operators.nim``):
``spec.resources`` is the model container's; init and sidecar containers get no resources from the operator."""

from __future__ import annotations

from typing import Any

from tests.builders import rl
from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate
from webhook.core.fieldpath import dotted
from webhook.core.workloads import find_targets, walk

GOOD = {"requests": {**rl("8", "32Gi"), "nvidia.com/gpu": 1}, "limits": {**rl("8", "32Gi"), "nvidia.com/gpu": 1}}


def nim(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMService",
            "metadata": {"name": "llama", "namespace": "nim"},
            "spec": {"image": {"repository": "nvcr.io/nim/x", "tag": "1"}, "resources": GOOD, **spec}}


def found(obj: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(t.template, dotted(v.path), v.rule) for t, v in evaluate(obj, Config(), Mode.ENFORCE).violations}


def test_spec_resources_are_the_model_containers() -> None:
    [target] = find_targets(nim())
    pod = target.pod_spec()
    assert [c.name for c in pod.containers] == ["llama-ctr"] and dotted(pod.containers[0].path) == "spec"
    assert found(nim()) == set()
    bursty = nim(resources={"requests": rl("4", "32Gi"), "limits": rl("12", "32Gi")})
    assert found(bursty) == {("spec (Deployment)", "spec.resources.requests.cpu", "requests-not-equal-limits")}
    # the mutation sets the field NIM copies (spec.resources), and the rebuilt Pod is judged again
    mutated = evaluate(bursty, Config(), Mode.MUTATE)
    assert mutated.allowed and [dotted(c.path) for c in mutated.changes] == ["spec.resources.requests.cpu"]


def test_init_and_sidecar_containers_have_no_resources_so_the_pod_is_never_guaranteed() -> None:
    side = nim(sidecarContainers=[{"name": "logger", "image": {"repository": "busybox", "tag": "1"}}],
               proxy={"certConfigMap": "ca"})
    rules = found(side)
    template = "spec (Deployment; NIM gives its init and sidecar containers no resources)"
    assert {(t, path.split(".resources")[0]) for t, path, _ in rules} == {
        (template, "spec.initContainers[0]"), (template, "spec.containers[1]")}
    [target] = find_targets(side)
    assert [c.name for c in target.pod_spec().init_containers] == ["update-ca-certificates"]
    # nothing of the object makes them: the mutation cannot help
    assert not evaluate(side, Config(), Mode.MUTATE).allowed


def test_multi_node_is_a_leader_and_a_worker_and_kserve_is_said() -> None:
    multi = nim(multiNode={"backendType": "lws", "parallelism": {"pipeline": 2}})
    assert [(t.template, t.pod_spec().containers[0].name) for t in find_targets(multi)] == [
        ("spec (leader)", "nim-leader"), ("spec (worker)", "nim-worker")]
    assert list(walk(nim(inferencePlatform="kserve"))) == [
        "NIMService with spec.inferencePlatform: kserve (the operator writes a KServe InferenceService from it: "
        "judged as the InferenceService and Pods KServe creates)"]
