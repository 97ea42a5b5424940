"""The chart sends the Pods that need one NUMA node to its scheduler: with ``scheduler.enabled`` the webhook's
configuration gets ``placement.schedulerName: <scheduler.name>`` and the MutatingWebhookConfiguration the
``place.qos-guard.io`` webhook (after ``mutate.qos-guard.io``, every opted-in namespace, Pods on CREATE only,
failing open); ``config.placement.schedulerName`` alone turns on the webhook without the chart's scheduler."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import yaml

from tests.chart.conftest import Render, by_kind, one
from tests.chart.test_chart import KUBE_SCHEMA, NAMESPACE
from webhook.core.config import parse_config


def webhook_config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    configmap = next(c for c in by_kind(objects, "ConfigMap") if c["metadata"]["name"] == "qos-guard")
    loaded: dict[str, Any] = yaml.safe_load(configmap["data"]["config.yaml"])
    return loaded


def mutating(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    hooks: list[dict[str, Any]] = one(objects, "MutatingWebhookConfiguration")["webhooks"]
    return hooks


def test_off_by_default(render: Render) -> None:
    objects = render(namespace=NAMESPACE)
    assert [h["name"] for h in mutating(objects)] == ["mutate.qos-guard.io"]
    assert webhook_config(objects)["placement"] == {"schedulerName": None, "memoryManager": False}
    assert parse_config(webhook_config(objects)).placement.scheduler_name is None


def test_the_charts_scheduler_gets_the_pods_that_need_one_numa_node(render: Render) -> None:
    objects = render("--set", "scheduler.enabled=true", namespace=NAMESPACE)
    config = parse_config(webhook_config(objects))  # what the webhook reads at start-up
    assert config.placement.scheduler_name == "qos-guard-numa"
    hooks = mutating(objects)
    assert [h["name"] for h in hooks] == ["mutate.qos-guard.io", "place.qos-guard.io"]  # after the mutation
    place = hooks[1]
    assert place["clientConfig"]["service"]["path"] == "/place"
    assert place["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                               "resources": ["pods"], "scope": "Namespaced"}]  # never a workload's template
    mode, excluded = place["namespaceSelector"]["matchExpressions"]
    assert mode == {"key": "qos-guard.io/mode", "operator": "In", "values": ["enforce", "mutate", "warn"]}
    assert excluded["operator"] == "NotIn" and set(excluded["values"]) == {"kube-system", NAMESPACE}
    assert place["failurePolicy"] == "Ignore" and place["reinvocationPolicy"] == "IfNeeded"
    assert place["sideEffects"] == "None"
    for obj in objects:
        if obj["kind"] in ("MutatingWebhookConfiguration", "ConfigMap"):
            kubernetes_validate.validate(obj, KUBE_SCHEMA, strict=True)


def test_a_renamed_scheduler_and_a_failure_policy(render: Render) -> None:
    objects = render("--set", "scheduler.enabled=true,scheduler.name=numa-placer",
                     "--set", "webhook.failurePolicy.place=Fail,config.placement.memoryManager=true",
                     namespace=NAMESPACE)
    config = parse_config(webhook_config(objects))
    assert config.placement.scheduler_name == "numa-placer" and config.placement.memory_manager is True
    assert mutating(objects)[1]["failurePolicy"] == "Fail"


def test_the_configuration_alone_turns_it_on_and_wins(render: Render) -> None:
    """Another NUMA-aware scheduler (scheduler-plugins' NodeResourceTopologyMatch): no scheduler of the chart's."""
    objects = render("--set", "config.placement.schedulerName=topo-aware-scheduler", namespace=NAMESPACE)
    assert parse_config(webhook_config(objects)).placement.scheduler_name == "topo-aware-scheduler"
    assert [h["name"] for h in mutating(objects)] == ["mutate.qos-guard.io", "place.qos-guard.io"]
    assert not [o for o in objects if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") ==
                "scheduler"]
    both = render("--set", "scheduler.enabled=true,config.placement.schedulerName=topo-aware-scheduler",
                  namespace=NAMESPACE)
    assert parse_config(webhook_config(both)).placement.scheduler_name == "topo-aware-scheduler"


def test_a_bad_scheduler_name_is_refused_at_install(helm: str) -> None:
    from tests.chart.conftest import CHART, run_helm
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "config.placement.schedulerName=Not_A_Name")
    assert proc.returncode != 0 and "schedulerName" in proc.stderr, proc.stderr


def test_enforcement_policy_refuses_a_scheduler_name_it_cannot_set(helm: str) -> None:
    from tests.chart.conftest import CHART, run_helm
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "enforcement=policy",
                    "--set", "config.placement.schedulerName=qos-guard-numa")
    assert proc.returncode != 0
    assert "config.placement.schedulerName: the admission policies judge the rules and set no" in proc.stderr, \
        proc.stderr
    # the chart's scheduler alone is fine with policies: Pods may name it themselves
    assert run_helm(helm, "template", "qos-guard", str(CHART), "--set", "enforcement=policy",
                    "--set", "scheduler.enabled=true").returncode == 0
