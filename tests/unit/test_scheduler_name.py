"""``placement.schedulerName`` (docs/contract.md#placement-the-scheduler-a-new-pod-gets-placementschedulername): the
fixtures in tests/fixtures/placement/{set,kept} through the pure core and through the webhook's ``/place`` (Flask's
test client, the patch applied as the API server applies it), the skips, and the configuration's errors."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from tests.builders import container, guaranteed, pod
from tests.helpers import admission_review
from webhook.core.config import ConfigError, parse_config
from webhook.core.scheduler_name import DEFAULT_SCHEDULER, SchedulerChoice, alignment_need, choose_for
from webhook.core.workloads import find_targets
from webhook.manifests.configfile import load_config
from webhook.serving.app import create_app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "placement"
CONFIG = load_config(FIXTURES / "config.yaml")
SCHEDULER = "qos-guard-numa"


def fixtures(outcome: str) -> list[Any]:
    return [pytest.param(p, id=p.stem) for p in sorted((FIXTURES / outcome).glob("*.yaml"))]


def expected_warning(path: Path) -> str | None:
    first = path.read_text().splitlines()[0]
    return first.removeprefix("# warning: ") if first.startswith("# warning: ") else None


def place(obj: dict[str, Any], config: Any = CONFIG, **request: Any) -> dict[str, Any]:
    client = create_app(config, own_namespace="qos-guard").test_client()
    review = admission_review(obj, **({"namespace": "inference"} | request))
    answer = client.post("/place", data=json.dumps(review), content_type="application/json")
    assert answer.status_code == 200, answer.get_data(as_text=True)
    response: dict[str, Any] = answer.get_json()["response"]
    assert response["allowed"] is True  # /place never refuses
    return response


def patched(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    result: dict[str, Any] = jsonpatch.apply_patch(obj, ops)
    return result


def test_there_are_fixtures_of_both_kinds() -> None:
    assert len(fixtures("set")) >= 3 and len(fixtures("kept")) >= 5


@pytest.mark.parametrize("path", fixtures("set"))
def test_set_fixtures_get_the_scheduler(path: Path) -> None:
    obj = yaml.safe_load(path.read_text())
    choice = choose_for(obj, CONFIG)
    assert [c.path for c in choice.changes] == [("spec", "schedulerName")] and choice.changes[0].new == SCHEDULER
    assert choice.need.startswith("exclusive CPUs with ")
    response = place(obj)
    after = patched(obj, response)
    assert after["spec"]["schedulerName"] == SCHEDULER
    assert {k: v for k, v in after["spec"].items() if k != "schedulerName"} == {
        k: v for k, v in obj["spec"].items() if k != "schedulerName"}  # nothing else changed
    (warning,) = response["warnings"]
    assert warning.startswith(f"qos-guard: set spec.schedulerName to {SCHEDULER}: exclusive CPUs with "), warning
    assert "patch" not in place(after)  # idempotent: a reinvocation changes nothing


@pytest.mark.parametrize("path", fixtures("kept"))
def test_kept_fixtures_keep_their_scheduler(path: Path) -> None:
    obj = yaml.safe_load(path.read_text())
    assert not choose_for(obj, CONFIG).changes
    response = place(obj)
    assert "patch" not in response
    warning = expected_warning(path)
    if warning is None:
        assert "warnings" not in response, response
    else:
        (said,) = response["warnings"]
        assert said.startswith(warning), said


def test_the_users_own_scheduler_is_named_in_the_warning() -> None:
    obj = yaml.safe_load((FIXTURES / "kept" / "own-scheduler.yaml").read_text())
    (warning,) = choose_for(obj, CONFIG).warnings
    assert warning == ("qos-guard: spec.schedulerName gpu-scheduler left as set (not default-scheduler); exclusive "
                       "CPUs with nvidia.com/gpu must fit one NUMA node, which qos-guard-numa checks")


def test_the_memory_manager_setting_adds_exclusive_cpus_alone() -> None:
    obj = yaml.safe_load((FIXTURES / "kept" / "exclusive-cpus-only.yaml").read_text())
    memory = parse_config({"placement": {"schedulerName": SCHEDULER, "memoryManager": True}})
    assert patched(obj, place(obj, memory))["spec"]["schedulerName"] == SCHEDULER
    # ... but still not a Pod without exclusive CPUs
    shared = pod(guaranteed(cpu="1500m"))
    assert "patch" not in place(shared, memory)


DRA_KEPT = ("qos-guard: default-scheduler kept, not qos-guard-numa: two schedulers can give one DRA device to two "
            "claims, as each keeps its in-flight DRA allocations in its own memory, so the Pod's DRA devices ({what}) "
            "are left to the scheduler that allocates the rest of their pool; qos-guard-numa's extender cannot fit "
            "DRA devices either (NodeResourceTopology does not publish them); to have the Pod placed on one NUMA "
            "node by qos-guard-numa, serve the device with its device plugin")


def test_a_pod_with_dra_devices_stays_with_the_default_scheduler_saying_why() -> None:
    """One scheduler per device: two kube-schedulers allocating from the same ResourceSlices each keep their
    in-flight allocations in memory, so the Pod stays with the one that allocates the rest of the pool. (Until
    this change such a Pod was sent to the second scheduler: tests/fixtures/placement/kept/dra-claim.yaml was a
    ``set`` fixture.)"""
    obj = yaml.safe_load((FIXTURES / "kept" / "dra-claim.yaml").read_text())
    choice = choose_for(obj, CONFIG)
    assert not choice.changes and choice.need == "exclusive CPUs with DRA claims (gpu)"
    assert choice.warnings == (DRA_KEPT.format(what="claim gpu"),)
    assert place(obj)["warnings"] == [DRA_KEPT.format(what="claim gpu")[:116] + "..."]  # cut as every warning is
    both = yaml.safe_load((FIXTURES / "kept" / "dra-claim-and-device-plugin.yaml").read_text())
    assert choose_for(both, CONFIG).warnings == (DRA_KEPT.format(what="claim nic"),)
    unset = copy.deepcopy(obj)
    del unset["spec"]["schedulerName"]
    assert "patch" not in place(unset) and not choose_for(unset, CONFIG).changes


def test_an_extended_resource_a_deviceclass_maps_to_dra_stays_too() -> None:
    """With the cluster's DeviceClasses known, an extended resource a class names is DRA's wherever no device
    plugin serves it: the default scheduler may allocate it from DRA, so the Pod stays there; without them, the
    same name is a device plugin's and the Pod goes to the second scheduler."""
    from webhook.core.dra_requests import parse_device_classes
    from webhook.core.facts import Facts
    amounts = {"cpu": "4", "memory": "1Gi", "example.com/dra-gpu": "1"}
    obj = pod(container("app", amounts, dict(amounts)))
    assert [c.new for c in choose_for(obj, CONFIG).changes] == [SCHEDULER]
    classes = parse_device_classes([{"metadata": {"name": "gpu.example.com"},
                                     "spec": {"extendedResourceName": "example.com/dra-gpu"}}])
    choice = choose_for(obj, CONFIG, Facts(device_classes=classes))
    assert not choice.changes
    assert choice.warnings == (DRA_KEPT.format(what="example.com/dra-gpu"),)


def test_a_pod_with_dra_devices_that_names_a_scheduler_keeps_it() -> None:
    """Never overridden: the second scheduler named by the user is left, with the reason it is unsafe; a scheduler
    of the user's own is theirs to pair with DRA (no claim that it checks anything)."""
    obj = yaml.safe_load((FIXTURES / "kept" / "dra-claim.yaml").read_text())
    obj["spec"]["schedulerName"] = SCHEDULER
    choice = choose_for(obj, CONFIG)
    assert not choice.changes
    (warning,) = choice.warnings
    assert warning.startswith("qos-guard: qos-guard-numa left as set, but two schedulers can give one DRA device "
                              "to two claims, as each keeps "), warning
    assert "DRA devices (claim gpu) are left to the scheduler that allocates the rest of their pool" in warning
    obj["spec"]["schedulerName"] = "gpu-scheduler"
    assert choose_for(obj, CONFIG) == SchedulerChoice(need="exclusive CPUs with DRA claims (gpu)")
    assert "patch" not in place(obj) and "warnings" not in place(obj)


def test_dra_extended_resources_count_as_devices() -> None:
    target = next(find_targets(pod(container("app", {"cpu": "2", "memory": "1Gi"},
                                             {"cpu": "2", "memory": "1Gi",
                                              "deviceclass.resource.kubernetes.io/gpu": "1"}))))
    assert alignment_need(target.pod_spec(), CONFIG) == \
        "exclusive CPUs with deviceclass.resource.kubernetes.io/gpu"


@pytest.mark.parametrize(("change", "why"), [
    ({"operation": "UPDATE"}, "UPDATE of Pod"),
    ({"subresource": "status"}, "CREATE of Pod/status"),
    ({"namespace": "qos-guard"}, "namespace qos-guard is never judged"),
    ({"namespace": "kube-system"}, "namespace kube-system is never judged"),
])
def test_only_new_pods_of_judged_namespaces(change: dict[str, Any], why: str) -> None:
    obj = yaml.safe_load((FIXTURES / "set" / "gpu-inference.yaml").read_text())
    assert "patch" not in place(obj, **change)
    from webhook.admission.review import ENDPOINTS, parse_review, review_decision
    review = parse_review(json.dumps(admission_review(obj, **({"namespace": "inference"} | change))).encode())
    assert review_decision(review, ENDPOINTS["/place"], CONFIG, own_namespace="qos-guard").skipped == why


def test_workload_templates_are_never_changed() -> None:
    """A Deployment's template changed by the webhook would roll out every replica: only its Pods get it."""
    gpu = yaml.safe_load((FIXTURES / "set" / "gpu-inference.yaml").read_text())
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"selector": {"matchLabels": {"a": "b"}},
                           "template": {"metadata": {"labels": {"a": "b"}}, "spec": gpu["spec"]}}}
    assert not choose_for(deployment, CONFIG).changes
    assert "patch" not in place(deployment)


def test_exempt_and_unset_change_nothing() -> None:
    obj = yaml.safe_load((FIXTURES / "set" / "gpu-inference.yaml").read_text())
    assert "patch" not in place(obj, parse_config(None))  # placement.schedulerName unset: off
    exempt = parse_config({"placement": {"schedulerName": SCHEDULER}, "exemptions": {"namespaces": ["inference"]}})
    assert "patch" not in place(obj, exempt)
    users = parse_config({"placement": {"schedulerName": SCHEDULER}, "exemptions": {"usernames": ["alice"]}})
    assert "patch" not in place(obj, users)


def test_default_scheduler_is_replaced_and_an_empty_one_too() -> None:
    obj = yaml.safe_load((FIXTURES / "set" / "gpu-inference.yaml").read_text())
    for current in (DEFAULT_SCHEDULER, ""):
        given = copy.deepcopy(obj)
        given["spec"]["schedulerName"] = current
        response = place(given)
        ops = json.loads(base64.b64decode(response["patch"]))
        assert ops == [{"op": "replace", "path": "/spec/schedulerName", "value": SCHEDULER}]
    ops = json.loads(base64.b64decode(place(obj)["patch"]))
    assert ops == [{"op": "add", "path": "/spec/schedulerName", "value": SCHEDULER}]


def test_a_wrongly_shaped_pod_is_a_400_naming_the_field() -> None:
    client = create_app(CONFIG).test_client()
    review = admission_review({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
                               "spec": {"containers": "nope"}})
    answer = client.post("/place", data=json.dumps(review), content_type="application/json")
    assert answer.status_code == 400 and "spec.containers" in answer.get_data(as_text=True)


@pytest.mark.parametrize(("raw", "said"), [
    ({"placement": {"schedulerName": "Qos_Guard"}}, "placement.schedulerName: 'Qos_Guard' is not a DNS-1123 "
                                                    "subdomain"),
    ({"placement": {"schedulerName": 3}}, "placement.schedulerName: 3 is not a DNS-1123 subdomain"),
    ({"placement": {"schedulerName": "a" * 254}}, "placement.schedulerName: 'aaaa"),
    ({"placement": {"memoryManager": "yes"}}, "placement.memoryManager: expected true or false, got 'yes'"),
    ({"placement": {"scheduler": "x"}}, "placement.scheduler: unknown key (known: memoryManager, schedulerName)"),
])
def test_bad_configuration_names_the_key(raw: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    assert str(exc.value).startswith(said), str(exc.value)


def test_defaults() -> None:
    config = parse_config(None)
    assert config.placement.scheduler_name is None and config.placement.memory_manager is False
    assert parse_config({"placement": {"schedulerName": "my.scheduler-1"}}).placement.scheduler_name == \
        "my.scheduler-1"


def test_qos_guard_policy_refuses_it_naming_the_key() -> None:
    """The generated admission policies set no scheduler: a configuration that asks for one is refused, not
    silently half-done."""
    from webhook.policies.generate import PolicyError, refuse_unsupported
    refuse_unsupported(parse_config({"placement": {"memoryManager": True}}))  # nothing to set: fine
    with pytest.raises(PolicyError, match=r"^placement.schedulerName: the admission policies judge the rules and "
                                          r"set no spec.schedulerName"):
        refuse_unsupported(CONFIG)
