"""Where DRA facts cannot tell a claim's CPUs, the rules say "unknown" with the reason and the way out, never a
definite answer (``DraFacts.unknown_why``):

- the webhook's DeviceClasses not listed yet (or refused) with ``policy.deviceClasses: true``: a claim naming a
  class other than ``dra.cpu`` may ask CPUs through it (a class selecting the CPU driver under another name);
- ``check --kubeconfig``: the input and the cluster hold one claim differently (as the rules read it: the API
  server's defaults and the cache's dropped selectors aside);
- ``check``: an object of no namespace goes to kubectl's context namespace, which the input does not say, so a
  claim the input holds only in a named namespace is not known to be its."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.builders import guaranteed, pod, resource_slice
from tests.helpers import admission_review
from tests.unit.test_cluster_claim_specs import PagedLister, cpus, template
from tests.unit.test_cluster_claim_specs import pod as claim_pod
from tests.unit.test_dra_cpu_class import CLASS, CPU_CLASS_OBJ, DENY, _stored
from tests.unit.test_dra_cpu_class import template as class_template
from tests.unit.test_dra_objects_cache import PATHS
from webhook.cluster.dra_lists import read_dra
from webhook.cluster.dracache import TEMPLATES
from webhook.core.dra_requests import parse_device_classes
from webhook.core.dracpu import DraFacts, slice_devices
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.serving.app import create_app

NOT_LISTED = "DeviceClasses not listed"


def answer(obj: dict[str, Any], classes: list[dict[str, Any]] | None, dra: Any) -> dict[str, Any]:
    """The webhook's response for ``obj`` in namespace ns, with ``policy.deviceClasses`` (its cache holding
    ``classes``, None: not listed yet) and the claim view ``dra`` (``policy.draObjects``)."""
    app = create_app(DENY, device_classes=lambda: None if classes is None else parse_device_classes(classes), dra=dra)
    obj = {**obj, "metadata": {**obj["metadata"], "namespace": "ns"}}
    response: dict[str, Any] = app.test_client().post(
        "/validate", data=json.dumps(admission_review(obj, namespace="ns")),
        content_type="application/json").get_json()["response"]
    return response


def said(response: dict[str, Any]) -> str:
    return "\n".join([(response.get("status") or {}).get("message", ""), *response.get("warnings", [])])


SHORT = pod(guaranteed("app", "1", "1Gi", claims=["cpus"]), claims={"cpus": "t"})  # its claim asks 2


def test_a_claim_of_a_custom_class_is_unknown_while_the_webhook_s_device_classes_are_not_listed() -> None:
    """Once refused by dra-unaligned (its way out, the device plugin, wrong for CPUs of the CPU driver): the class
    may select it, so not-mirrored says unknown, naming the class and the way out, and the Pod is admitted."""
    stored = _stored([class_template("t", "2")])
    response = answer(SHORT, None, stored)
    assert response["allowed"] is True, said(response)
    assert "dra-unaligned" not in said(response)
    assert ("dra-cpu-not-mirrored: unknown: pod (spec): claim cpus: ResourceClaimTemplate t: DeviceClasses not "
            "listed") in said(response), said(response)
    # listed: as before, the class known to select the CPU driver (refused) or not (dra-unaligned)
    assert "dra-cpu-not-mirrored: container" in said(answer(SHORT, [CPU_CLASS_OBJ], stored))
    assert "dra-unaligned" in said(answer(SHORT, [], stored)) and NOT_LISTED not in said(answer(SHORT, [], stored))


def test_the_unknown_class_is_named_with_the_way_out() -> None:
    """The whole finding (an admission warning keeps its first 120 characters: the log and check keep it all)."""
    from webhook.core.dracpu_classes import classes_unknown

    key = ("ResourceClaimTemplate", "t")
    view = classes_unknown(DraFacts(cpu_claims={key: 0}, claim_specs={key: class_template("t", "2")["spec"]["spec"]},
                                    claims_whole=True))
    messages = [v.message for _, v in evaluate(SHORT, DENY, Mode.ENFORCE, Facts(dra=view)).advisories]
    assert (f"unknown: pod (spec): claim cpus: ResourceClaimTemplate t: DeviceClasses not listed (not synced yet, "
            f"or refused: see the log): {CLASS} may select dra.cpu; grant list, watch on deviceclasses; whether the "
            "CPUs it takes from dra.cpu are mirrored in requests and limits is not known") in messages, messages


def test_a_claim_of_dra_cpu_alone_is_judged_while_the_device_classes_are_not_listed() -> None:
    response = answer(SHORT, None, _stored([class_template("t", "2", "dra.cpu")]))
    assert response["allowed"] is False and "dra-cpu-not-mirrored: container" in said(response), said(response)
    assert "unknown" not in said(response)


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from([CLASS, "dra.cpu", "gpu.example.com"]), gpu=st.booleans(), cpus_=st.integers(1, 3),
       asked=st.integers(1, 3), paired=st.booleans())
def test_not_listed_the_webhook_never_answers_definitely_for_a_claim_naming_another_class(
        name: str, gpu: bool, cpus_: int, asked: int, paired: bool) -> None:
    """Whatever the claim: one naming a class other than dra.cpu is only ever unknown (no refusal, no definite
    DRA CPU finding); one of dra.cpu alone answers as with the classes listed and none selecting the driver."""
    claim = class_template("t", str(cpus_), name, gpu=gpu,
                           constraints=[{"matchAttribute": "dra.net/numaNode"}] if paired else None)
    obj = pod(guaranteed("app", str(asked), "1Gi", claims=["cpus"]), claims={"cpus": "t"})
    stored = _stored([claim])
    response = answer(obj, None, stored)
    if name != "dra.cpu" or gpu:
        assert response["allowed"] is True, said(response)
        lines = [w for w in response.get("warnings", []) if w.startswith("dra-")]
        assert lines and all(": unknown: " in w and NOT_LISTED in w for w in lines), lines
    else:
        assert response == answer(obj, [], stored)


def test_a_pod_asking_the_cpu_manager_is_not_told_to_claim_cpus_it_may_already_claim() -> None:
    """dra-cpu-pinner-mismatch's "claim them (DeviceClass dra.cpu)" for a Pod whose claim's class is not known:
    the claim may be its CPUs already; not judged (dra-cpu-not-mirrored says unknown)."""
    devices = slice_devices(resource_slice("s", "dra.cpu", {"cpudevnuma000": {"dra.cpu/numaNodeID": {"int": 0}}}))
    spec = class_template("t", "2")["spec"]["spec"]
    key = ("ResourceClaimTemplate", "t")
    view = DraFacts(devices=tuple(devices), cpu_claims={key: 0}, claim_specs={key: spec}, claims_whole=True,
                    cpu_managers={"node-1": "none"}, cpu_managers_whole=True)
    mirrored = pod(guaranteed("app", "2", "1Gi", claims=["cpus"]), claims={"cpus": "t"})
    response = answer(mirrored, None, lambda _namespace: view)
    assert "dra-cpu-pinner-mismatch" not in said(response) and NOT_LISTED in said(response), said(response)
    assert "dra-cpu-pinner-mismatch" in said(answer(mirrored, [], lambda _namespace: view))  # known: not CPUs


# ---- check --kubeconfig: the input and the cluster hold one claim differently ----

def cluster_holding(*objects: dict[str, Any]) -> Facts:
    snapshot, _ = read_dra(PagedLister({PATHS[TEMPLATES]: list(objects)}))
    return Facts(dra=snapshot.anywhere(), dra_of=snapshot.for_namespace)


def notices(tmp_path: Path, objects: list[dict[str, Any]], facts: Facts) -> dict[str, list[str]]:
    """``check`` (with ``facts``) on ``objects``: each Pod's findings and notices, as rule: message."""
    import yaml

    from webhook.batch.runner import check_paths

    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    report = check_paths([str(path)], DENY, Mode.ENFORCE, facts=facts)
    found: dict[str, list[str]] = {}
    for record in (*report.violations, *report.notices):
        if record.kind == "Pod":
            found.setdefault(record.name, []).append(f"{record.rule}: {record.message}")
    return found


def test_a_claim_the_input_and_the_cluster_hold_differently_is_said_unknown(tmp_path: Path) -> None:
    facts = cluster_holding(template("t", "b", cpus("cpus", "2")))
    found = notices(tmp_path, [template("t", "b", cpus("cpus", "4")), claim_pod("b-two", "b", "2", "t")], facts)
    why = ("claim dev: ResourceClaimTemplate t: the input and the cluster hold it differently in namespace b; apply "
           "the input, or check without --kubeconfig")
    assert any(m.startswith("dra-cpu-not-mirrored: unknown: ") and why in m for m in found["b-two"]), found
    assert not any(m.startswith("dra-unaligned") for m in found["b-two"]), found
    # an object of no namespace, the input's t of no namespace against the cluster's (of b)
    unplaced = template("t", "b", cpus("cpus", "4"))
    del unplaced["metadata"]["namespace"]
    found = notices(tmp_path, [unplaced, claim_pod("anywhere", None, "2", "t")], facts)
    assert any("the input and the cluster hold it differently (the object names no namespace)" in m
               for m in found["anywhere"]), found


TOLERATION = {"key": "k", "effect": "NoSchedule"}
TOLERATIONS: dict[str | None, list[dict[str, Any]] | None] = {  # as written; all but None/[] stored with Equal
    None: None, "[]": [], "no operator": [TOLERATION], "operator ''": [{**TOLERATION, "operator": "", "value": ""}],
    "Equal": [{**TOLERATION, "operator": "Equal"}], "Exists": [{**TOLERATION, "operator": "Exists"}]}


def _written(count: str, allocation: str | None, number: int | None, selectors: bool, constraints: bool,
             v1beta1: bool, tolerate: str | None = None, every: bool = False) -> dict[str, Any]:
    """A template as written, with the optional fields the API server defaults or drops, or the cache drops
    (``every``: allocationMode All, with ``number`` 0 or none)."""
    exact: dict[str, Any] = {"deviceClassName": "dra.cpu", "capacity": {"requests": {"dra.cpu/cpu": count}}}
    if every:
        exact["allocationMode"] = "All"
    elif allocation is not None:
        exact["allocationMode"] = allocation
    if number is not None:
        exact["count"] = 0 if every else number
    if selectors:
        exact["selectors"] = [{"cel": {"expression": 'device.driver == "dra.cpu"'}}]
    if TOLERATIONS[tolerate] is not None:
        exact["tolerations"] = TOLERATIONS[tolerate]
    request = {"name": "cpus", **exact} if v1beta1 else {"name": "cpus", "exactly": exact}
    obj = template("t", "b", request)
    if v1beta1:
        obj["apiVersion"] = "resource.k8s.io/v1beta1"
    if constraints:
        obj["spec"]["spec"]["devices"]["constraints"] = []
    return obj


def _stored_form(count: str, tolerate: bool = False, every: bool = False) -> dict[str, Any]:
    """The same template as the API server stores it (resource.k8s.io/v1, defaulted: pkg/apis/resource/v1/
    defaults.go SetDefaults_ExactDeviceRequest, zz_generated.defaults.go:51-55 a toleration's operator Equal;
    ``omitempty`` fields dropped when empty: k8s.io/api resource/v1/types.go count, tolerations)."""
    exact: dict[str, Any] = {"deviceClassName": "dra.cpu", "allocationMode": "All"} if every else {
        "deviceClassName": "dra.cpu", "allocationMode": "ExactCount", "count": 1}
    exact |= {"selectors": [{"cel": {"expression": 'device.driver == "dra.cpu"'}}],
              "capacity": {"requests": {"dra.cpu/cpu": count}}}
    if tolerate:
        exact["tolerations"] = [{**TOLERATION, "operator": "Equal"}]
    return template("t", "b", {"name": "cpus", "exactly": exact})


def _each_f1_case(test: Any) -> Any:
    """``test`` run on each written form the API server stores otherwise (review s70 F1), drawn or not."""
    for tolerate, every, v1beta1 in [("no operator", False, False), ("operator ''", False, True), ("[]", False, False),
                                     (None, True, False), ("Exists", False, False), ("Exists", True, False)]:
        test = example(allocation=None, number=0 if every else None, selectors=False, constraints=False,
                       v1beta1=v1beta1, cpu="2", tolerate=tolerate, every=every)(test)
    return test


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(allocation=st.sampled_from([None, "ExactCount"]), number=st.sampled_from([None, 1]), selectors=st.booleans(),
       constraints=st.booleans(), v1beta1=st.booleans(), cpu=st.sampled_from(["2", "2000m", "4"]),
       tolerate=st.sampled_from(list(TOLERATIONS)), every=st.booleans())
@_each_f1_case
@example(allocation=None, number=None, selectors=False, constraints=False, v1beta1=False, cpu="2000m", tolerate=None,
         every=False)  # stored in canonical form, "2"
def test_the_same_claim_applied_is_not_said_to_differ_and_another_count_always_is(
        tmp_path: Path, allocation: str | None, number: int | None, selectors: bool, constraints: bool,
        v1beta1: bool, cpu: str, tolerate: str | None, every: bool) -> None:
    facts = cluster_holding(_stored_form("2", tolerate not in (None, "[]"), every))
    found = notices(tmp_path, [_written(cpu, allocation, number, selectors, constraints, v1beta1, tolerate, every),
                               claim_pod("b-two", "b", "2", "t"), claim_pod("b-one", "b", "1", "t")], facts)
    differ = [m for m in found.get("b-one", []) if "hold it differently" in m]
    if cpu in ("2", "2000m") and tolerate != "Exists":  # Exists is not the Equal stored: really another claim
        assert not differ, found
        if not every:  # All: the count is the slices', not known here
            assert found.get("b-two", []) == [], found  # judged: b-one refused, b-two passes
            assert any(m.startswith("dra-cpu-not-mirrored: container") for m in found["b-one"]), found
    else:
        assert differ and not any(": unknown: " not in m for m in found["b-one"] if "dra-cpu" in m), found


# ---- check: an object of no namespace ----

def test_an_object_of_no_namespace_is_told_a_claim_held_only_in_a_named_namespace_is_unknown(tmp_path: Path) -> None:
    found = notices(tmp_path, [template("t", "a", cpus("cpus", "2")), template("t", "c", cpus("cpus", "2")),
                               claim_pod("anywhere", None, "1", "t")], Facts())
    assert found["anywhere"] and all(": unknown: " in m for m in found["anywhere"]), found
    assert any("claim dev: ResourceClaimTemplate t: the object names no namespace and the input holds it only in "
               "namespaces a, c; set metadata.namespace" in m for m in found["anywhere"]), found


@pytest.mark.parametrize("named", [False, True])
def test_a_claim_the_input_holds_with_no_namespace_stays_definite_for_it(tmp_path: Path, named: bool) -> None:
    """Applied to the same context namespace as the Pod: its answer, whatever a named namespace holds beside."""
    unplaced = copy.deepcopy(template("t", "a", cpus("cpus", "2")))
    del unplaced["metadata"]["namespace"]
    beside = [template("t", "a", cpus("cpus", "4"))] if named else []
    found = notices(tmp_path, [unplaced, *beside, claim_pod("one", None, "1", "t"), claim_pod("two", None, "2", "t")],
                    Facts())
    assert [m.split(":")[0] for m in found["one"]] == ["dra-cpu-not-mirrored"], found
    assert ": unknown: " not in found["one"][0] and "two" not in found, found


def test_check_kubeconfig_with_the_device_classes_refused_says_a_custom_class_claim_is_unknown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``check --kubeconfig``/``audit`` with ``policy.deviceClasses: true`` whose list is refused: the claims are
    projected without the classes (not as knowing none select the CPU driver), and one of a class other than
    dra.cpu is unknown, said so; the classes read, it is judged as before."""
    from webhook.batch import clusterfacts
    from webhook.batch.runner import in_namespace
    from webhook.core.config import parse_config

    config = parse_config({"policy": {"dra": "deny", "deviceClasses": True}})
    stored = class_template("t", "2")
    stored["metadata"]["namespace"] = "ns"
    seen: list[Any] = []

    def read(_kubeconfig: Any, _say: Any, _context: Any = None, cpu_classes: Any = frozenset()) -> Any:
        seen.append(cpu_classes)
        return read_dra(PagedLister({PATHS[TEMPLATES]: [stored]}), cpu_classes)[0]

    monkeypatch.setattr(clusterfacts, "cluster_dra", read)
    for classes, unknown in ((None, True), (parse_device_classes([]), False)):
        monkeypatch.setattr(clusterfacts, "_cluster_facts", lambda *_a, c=classes, **_k: Facts(device_classes=c))
        facts = clusterfacts.cluster_facts(config, "kubeconfig", lambda _line: None, required=True)
        verdict = evaluate(pod(guaranteed("app", "1", "1Gi", claims=["cpus"]), claims={"cpus": "t"}), config,
                           Mode.ENFORCE, in_namespace(facts)("ns"))
        said = [f"{v.rule}: {v.message}" for _, v in (*verdict.violations, *verdict.advisories)]
        if unknown:
            assert seen[-1] is None and verdict.allowed, said
            assert any(f"ResourceClaimTemplate t: DeviceClasses not read (said on stderr): {CLASS} may select "
                       "dra.cpu; grant list on deviceclasses" in m for m in said), said
            assert not any(m.startswith("dra-unaligned") for m in said), said
        else:
            assert seen[-1] == frozenset() and [m.split(":")[0] for m in said] == ["dra-unaligned"], said
