"""One example per divergence from Kubernetes that the differential oracle found, each checked against what
k8s.io/kubernetes does with the same object at the minor named (``V136``: up to 1.36; ``V137``: from 1.37, where
PodLevelResourcesFixKubeletQOSClass, PodLevelResourcesFixDefaulting and PrepareForCreate's reset status change
the answer; the default minor is the newest)."""

from __future__ import annotations

import base64
import json
from typing import Any

import jsonpatch

from tests.builders import container, guaranteed, pod, rl
from tests.helpers import admission_review
from webhook.core.config import Config, parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.podspec import BEST_EFFORT, BURSTABLE, GUARANTEED
from webhook.core.qos import qos_class
from webhook.core.workloads import find_targets
from webhook.serving.app import create_app

V136 = parse_config({"kubernetesVersion": "1.36"})
V137 = parse_config({"kubernetesVersion": "1.37"})
ALLOW = parse_config({"policy": {"podLevelResources": "allow"}, "kubernetesVersion": "1.36"})
ALLOW_137 = parse_config({"policy": {"podLevelResources": "allow"}, "kubernetesVersion": "1.37"})


def found(obj: dict[str, Any], config: Config = V136, mode: Mode = Mode.ENFORCE) -> list[tuple[str, str]]:
    return [(v.rule, dotted(v.path)) for _, v in evaluate(obj, config, mode).violations]


def qos(obj: dict[str, Any], config: Config = V136) -> str:
    (target,) = find_targets(obj)
    assert config.kubernetes_version is not None
    return qos_class(target.pod_spec(config.kubernetes_version))


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
    # IsPodLevelResourcesSet counts hugepages too: kubelet's CPU and Memory Managers skip the Pod.
    assert sorted(found(manifest)) == sorted([*missing, ("pod-level-resources", "spec.resources")])
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
    verdict = evaluate(manifest, V136, Mode.MUTATE)
    assert verdict.allowed and [dotted(c.path) for c in verdict.changes] == ["status.qosClass"]
    answer = create_app(V136).test_client().post(
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
    verdict = evaluate(manifest, V136, Mode.MUTATE)
    assert verdict.allowed
    assert [dotted(c.path) for c in verdict.changes] == ["spec.resources", "spec.containers[0].resources.requests.cpu"]
    # A block holding hugepages is not empty: it is not removed, and the Pod stays refused.
    hugepages = pod(guaranteed(), resources={"limits": {"hugepages-2Mi": "2Mi"}})
    assert not evaluate(hugepages, V136, Mode.MUTATE).allowed
    assert "spec.resources" not in [dotted(c.path) for c in evaluate(hugepages, V136, Mode.MUTATE).changes]


# ------------------------------------------------------------------ from 1.37 (k8s.io/kubernetes v1.37.2)

def test_empty_pod_level_block_no_longer_decides_from_1_37() -> None:
    # ComputePodQOS takes the pod-level branch only when helper.IsPodLevelResourcesSet (a supported resource).
    manifest = pod(guaranteed(), resources={})
    assert qos(manifest, V137) == GUARANTEED
    assert found(manifest, V137) == []
    assert evaluate(manifest, Config(), Mode.ENFORCE).allowed  # the default minor is the newest
    # mutate mode has nothing to remove: the block is harmless there
    assert evaluate(manifest, V137, Mode.MUTATE).changes == ()


def test_pod_level_limits_default_from_container_limits_from_1_37() -> None:
    # DefaultPodLevelResources: a missing pod-level limit is max(request, containers' aggregated limits) when
    # every container sets it, so this Pod is Guaranteed; kubelet still skips it (PodLevelResourceManagers off).
    manifest = pod(guaranteed(), resources={"requests": rl("2", "4Gi")})
    assert qos(manifest, V137) == GUARANTEED
    assert found(manifest, ALLOW_137) == []
    assert found(manifest, V137) == [("pod-level-resources", "spec.resources")]
    # one container without a cpu limit: no pod-level cpu limit is defaulted
    partial = pod(guaranteed(), container("b", rl("1", "1Gi"), rl("", "1Gi")), resources={"requests": rl("3", "5Gi")})
    assert qos(partial, V137) == BURSTABLE


def test_status_qos_class_is_reset_on_create_from_1_37() -> None:
    # PrepareForCreate resets the status before GetPodQOS: a copied qosClass is not stored.
    manifest = pod(guaranteed()) | {"status": {"qosClass": "Burstable", "phase": "Running"}}
    assert found(manifest, V137) == []
    assert evaluate(manifest, V137, Mode.MUTATE).changes == ()


def test_a_stored_pods_class_outlives_an_upgrade_to_1_37() -> None:
    # Created on 1.36 with an empty pod-level block, the Pod was stored BestEffort; after an upgrade to 1.37
    # kubelet reads that class back (GetPodQOS), so audit (which reads stored objects) must not call it pinned.
    running = pod(guaranteed(), resources={}) | {"status": {"qosClass": "BestEffort", "phase": "Running"}}
    assert evaluate(running, V137, Mode.ENFORCE).allowed  # a manifest created now on 1.37: Guaranteed
    stored = evaluate(running, V137, Mode.ENFORCE, Facts(stored=True))
    assert [v.rule for _, v in stored.violations] == ["status-qos-class"]
    assert "stored \"BestEffort\" when it was created" in stored.violations[0][1].message
    assert "re-create it" in stored.violations[0][1].message


def test_hugepages_only_pod_level_block_from_1_37() -> None:
    # The block sets a supported resource: it decides, its cpu/memory default from the containers (requests
    # and, every container limiting them, limits): Guaranteed, yet skipped by the CPU Manager.
    manifest = pod(guaranteed(), resources={"limits": {"hugepages-2Mi": "2Mi"}, "requests": {"hugepages-2Mi": "2Mi"}})
    assert qos(manifest, V137) == GUARANTEED
    assert not evaluate(manifest, V137, Mode.ENFORCE).allowed


def test_pod_level_resources_are_dropped_on_1_33() -> None:
    # PodLevelResources is alpha and off in 1.33: the API server drops spec.resources, the containers decide.
    v133 = parse_config({"kubernetesVersion": "1.33"})
    manifest = pod(guaranteed(), resources={"limits": rl("2", "4Gi")})
    assert qos(manifest, v133) == GUARANTEED
    assert found(manifest, v133) == []
    assert found(manifest, V136) == [("pod-level-resources", "spec.resources")]


def test_a_dropped_pod_level_block_is_still_decoded_on_1_33() -> None:
    # The 1.33 API server decodes spec.resources before dropDisabledPodLevelResources drops it (PrepareForCreate)
    # and validates only what is left: a value that is not a quantity is refused at create, a negative one is
    # dropped unseen (found by the oracle differential at v1.33.13: 84 such objects).
    v133 = parse_config({"kubernetesVersion": "1.33"})
    manifest = pod(guaranteed(), resources={"limits": {"cpu": "E+"}, "requests": {"memory": "-1Gi"}})
    assert found(manifest, v133) == [("invalid-quantity", "spec.resources.limits.cpu")]
    assert found(manifest, V136)[:2] == [("invalid-quantity", "spec.resources.limits.cpu"),
                                         ("invalid-quantity", "spec.resources.requests.memory")]
    assert qos(manifest, v133) == GUARANTEED  # the block decides nothing there
