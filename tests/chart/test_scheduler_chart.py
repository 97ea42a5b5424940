"""The chart's optional second scheduler: off by default; when on, kube-scheduler at the cluster's version with one
profile whose extender is ``qos-guard extender`` beside it on loopback, leader election on its own Lease, and RBAC
as kube-scheduler's own plus what the extender reads."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.chart.conftest import Render, by_kind, one
from tests.chart.test_chart import KUBE_SCHEMA, NAMESPACE

IMAGE = "--set=scheduler.image.repository=example.invalid/kube-scheduler"


def scheduler_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "scheduler"]


def test_off_by_default(render: Render) -> None:
    assert not scheduler_objects(render(namespace=NAMESPACE))


def test_the_image_is_kube_scheduler_at_the_clusters_version(render: Render) -> None:
    objects = scheduler_objects(render("--set", "scheduler.enabled=true,scheduler.image.registry=registry.invalid",
                                       "--kube-version", "1.35.2", namespace=NAMESPACE))
    spec = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert spec["containers"][0]["image"] == "registry.invalid/kube-scheduler:v1.35.2"


@pytest.fixture(scope="module")
def on(render: Render) -> list[dict[str, Any]]:
    return scheduler_objects(render("--set", "scheduler.enabled=true", IMAGE, "--kube-version", "1.36.3",
                                    namespace=NAMESPACE))


def config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(one(objects, "ConfigMap")["data"]["config.yaml"])
    return loaded


def test_the_profile_and_its_extender(on: list[dict[str, Any]]) -> None:
    c = config(on)
    assert c["apiVersion"] == "kubescheduler.config.k8s.io/v1" and c["kind"] == "KubeSchedulerConfiguration"
    assert c["profiles"] == [{"schedulerName": "qos-guard-numa"}]
    (ext,) = c["extenders"]
    assert ext == {"urlPrefix": "http://127.0.0.1:8444", "filterVerb": "filter", "prioritizeVerb": "prioritize",
                   "bindVerb": "bind", "weight": 5, "nodeCacheCapable": True, "enableHTTPS": False, "httpTimeout": "5s",
                   "ignorable": False}
    assert c["leaderElection"] == {"leaderElect": False, "resourceName": "qos-guard-numa",
                                   "resourceNamespace": NAMESPACE}
    spec = one(on, "Deployment")["spec"]["template"]["spec"]
    scheduler, extender = spec["containers"]
    assert scheduler["image"] == "example.invalid/kube-scheduler:v1.36.3"  # the cluster's version
    assert scheduler["command"] == ["kube-scheduler"]
    assert "--config=/etc/qos-guard-scheduler/config.yaml" in scheduler["args"]
    assert extender["args"][:3] == ["extender", "--plain", "--bind=127.0.0.1:8444"]  # loopback, same Pod
    assert spec["serviceAccountName"] == "qos-guard-scheduler"
    for c in spec["containers"]:
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_two_replicas_elect_a_leader(render: Render) -> None:
    objects = scheduler_objects(render("--set", "scheduler.enabled=true,scheduler.replicas=2", IMAGE,
                                       "--set", "scheduler.extender.ignorable=true", namespace=NAMESPACE))
    c = config(objects)
    assert c["leaderElection"]["leaderElect"] is True
    assert c["extenders"][0]["ignorable"] is True
    assert one(objects, "Deployment")["spec"]["replicas"] == 2


def test_rbac_is_kube_schedulers_own_plus_what_the_extender_reads(on: list[dict[str, Any]]) -> None:
    bound = {b["roleRef"]["name"]: b for b in by_kind(on, "ClusterRoleBinding")}
    assert set(bound) == {"system:kube-scheduler", "system:volume-scheduler", "qos-guard-scheduler"}
    for b in bound.values():
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "qos-guard-scheduler", "namespace": NAMESPACE}]
    (role,) = by_kind(on, "ClusterRole")
    assert role["rules"] == [
        {"apiGroups": ["topology.node.k8s.io"], "resources": ["noderesourcetopologies"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    ]
    roles = {r["metadata"]["name"]: r for r in by_kind(on, "Role")}
    lease = roles["qos-guard-scheduler-leader-election"]
    assert lease["metadata"]["namespace"] == NAMESPACE
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["qos-guard-numa"],
            "verbs": ["get", "update"]} in lease["rules"]
    reader = next(b for b in by_kind(on, "RoleBinding") if b["roleRef"]["name"] ==
                  "extension-apiserver-authentication-reader")
    assert reader["metadata"]["namespace"] == "kube-system"


def test_objects_valid_against_kubernetes_openapi(on: list[dict[str, Any]]) -> None:
    for obj in on:
        kubernetes_validate.validate(obj, KUBE_SCHEMA, strict=True)
    assert len(on) == 10
