"""One example per divergence from Kubernetes that the differential oracle found (issue: fidelity), each
checked against what k8s.io/kubernetes v1.36 does with the same object."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch

from tests.helpers import admission_review, container, guaranteed, pod, rl
from webhook.core.config import Config, parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.fieldpath import dotted
from webhook.core.podspec import BEST_EFFORT, BURSTABLE, GUARANTEED, qos_class
from webhook.core.workloads import find_targets
from webhook.serving.app import create_app

ALLOW = parse_config({"policy": {"podLevelResources": "allow"}})


def found(obj: dict[str, Any], config: Config | None = None, mode: Mode = Mode.ENFORCE) -> list[tuple[str, str]]:
    return [(v.rule, dotted(v.path)) for _, v in evaluate(obj, config or Config(), mode).violations]


def qos(obj: dict[str, Any]) -> str:
    (target,) = find_targets(obj)
    return qos_class(target.pod_spec())


def test_empty_pod_level_block_makes_the_pod_best_effort() -> None:
    # ComputePodQOS takes the pod-level branch whenever spec.resources != nil (pkg/apis/core/helper/qos).
    manifest = pod(guaranteed(), resources={})
    assert qos(manifest) == BEST_EFFORT
    assert found(manifest) == [("limits-missing", "spec.resources")]
    template = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"template": {"spec": pod(guaranteed(), resources={"requests": {}, "limits": {}})["spec"]}}}
    assert found(template) == [("limits-missing", "spec.template.spec.resources")]


def test_hugepages_only_pod_level_block_is_refused() -> None:
    manifest = pod(guaranteed(), resources={"limits": {"hugepages-2Mi": "2Mi"}, "requests": {"hugepages-2Mi": "2Mi"}})
    assert qos(manifest) != GUARANTEED
    # The pod-level requests default to the containers' sum (pod-level limits are set), the limits stay missing.
    missing = [("limits-missing", "spec.resources.limits.cpu"), ("limits-missing", "spec.resources.limits.memory")]
    assert found(manifest) == missing
    assert found(manifest, ALLOW) == missing


def test_pod_level_limits_are_never_invented_from_container_limits() -> None:
    # defaultPodRequests returns early without pod-level limits; nothing defaults pod-level limits.
    manifest = pod(guaranteed(), resources={"requests": rl("2", "4Gi")})
    assert qos(manifest) == BURSTABLE
    assert ("limits-missing", "spec.resources.limits.cpu") in found(manifest, ALLOW)
    assert not evaluate(manifest, ALLOW, Mode.ENFORCE).allowed


def test_status_qos_class_is_kept_on_create() -> None:
    manifest = pod(guaranteed()) | {"status": {"qosClass": "Burstable", "phase": "Running"}}
    assert found(manifest) == [("status-qos-class", "status.qosClass")]
    verdict = evaluate(manifest, Config(), Mode.MUTATE)
    assert verdict.allowed and [dotted(c.path) for c in verdict.changes] == ["status.qosClass"]
    answer = create_app(Config()).test_client().post(
        "/mutate", data=json.dumps(admission_review(manifest)), content_type="application/json").get_json()
    patch = json.loads(base64.b64decode(answer["response"]["patch"]))
    assert patch == [{"op": "remove", "path": "/status/qosClass"}]
    assert jsonpatch.apply_patch(manifest, patch)["status"] == {"phase": "Running"}
    # A spec that is not Guaranteed is reported by the spec's own rules, not twice.
    burstable = pod(container("a", rl("1", "1Gi"), rl("2", "1Gi"))) | {"status": {"qosClass": "Burstable"}}
    assert [rule for rule, _ in found(burstable)] == ["requests-not-equal-limits"]
    assert found(pod(guaranteed()) | {"status": {"qosClass": "Guaranteed"}}) == []


def test_pod_level_pods_are_mutated_only_at_pod_level() -> None:
    # Container cpu limits neither change the class of a pod-level Pod nor leave it pinned: they only throttle.
    manifest = pod(container("a", rl("1", "1Gi"), None), container("b", rl("1", "1Gi"), None),
                   resources={"limits": rl("4", "4Gi")})
    verdict = evaluate(manifest, ALLOW, Mode.MUTATE)
    # The API server defaults the pod-level requests to the containers' sum (2, 2Gi); mutation sets them
    # to the limits, in check (the manifest) exactly as in /mutate (the defaulted object).
    assert [(dotted(c.path), c.new) for c in verdict.changes] == [
        ("spec.resources.requests.cpu", "4"), ("spec.resources.requests.memory", "4Gi")]
    assert verdict.allowed
    defaulted = json.loads(json.dumps(manifest))
    defaulted["spec"]["resources"]["requests"] = rl("2", "2Gi")
    webhook = evaluate(defaulted, ALLOW, Mode.MUTATE)
    assert [(dotted(c.path), c.new) for c in webhook.changes] == [(dotted(c.path), c.new) for c in verdict.changes]


def test_empty_pod_level_block_is_removed_by_mutation_and_the_containers_fixed() -> None:
    manifest = pod(container("a", rl("1", "1Gi"), rl("2", "1Gi")), resources={"requests": {}})
    verdict = evaluate(manifest, Config(), Mode.MUTATE)
    assert verdict.allowed
    assert [dotted(c.path) for c in verdict.changes] == ["spec.resources", "spec.containers[0].resources.requests.cpu"]
    # A block holding hugepages is not empty: it is not removed, and the Pod stays refused.
    hugepages = pod(guaranteed(), resources={"limits": {"hugepages-2Mi": "2Mi"}})
    assert not evaluate(hugepages, Config(), Mode.MUTATE).allowed
    assert "spec.resources" not in [dotted(c.path) for c in evaluate(hugepages, Config(), Mode.MUTATE).changes]
