"""A DeviceClass of another name that selects the DRA CPU driver (``device.driver == "dra.cpu"``) asks CPUs as
``dra.cpu`` does, once its object is known (``check``'s input, the cluster's with ``policy.deviceClasses: true``);
a class whose selectors cannot be read exactly stays what any other class is (not CPUs)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests import inprocess
from tests.builders import container, guaranteed, pod
from webhook.core.config import Config, Policy, parse_config
from webhook.core.dra_requests import device_class_entry, index_device_classes, parse_device_classes
from webhook.core.dracpu import DraFacts, claim_cpus, cpu_request, dra_facts
from webhook.core.dracpu_merge import merge
from webhook.core.dracpu_objects import cpu_class
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts, Memo

DENY = Config(policy=Policy(dra="deny"))
CLASS = "cpus.example.com"


def device_class(name: str, *expressions: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]}}


CPU_CLASS_OBJ = device_class(CLASS, 'device.driver == "dra.cpu"')


def template(name: str, cpus: str, device_class_name: str = CLASS, gpu: bool = False,
             constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    requests: list[dict[str, Any]] = [{"name": "cpus", "exactly": {
        "deviceClassName": device_class_name, "capacity": {"requests": {"dra.cpu/cpu": cpus}}}}]
    if gpu:
        requests.insert(0, {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}})
    devices: dict[str, Any] = {"requests": requests}
    if constraints is not None:
        devices["constraints"] = constraints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": devices}}}


def rules(obj: dict[str, Any], facts: Facts, config: Config = DENY) -> list[tuple[str, str]]:
    verdict = evaluate(obj, config, Mode.ENFORCE, facts)
    return [(v.rule, v.message) for _, v in (*verdict.violations, *verdict.advisories)]


@given(before=st.sampled_from(["", " ", "  ", "\t", "\n"]), around=st.sampled_from(["", " ", "   "]),
       quote=st.sampled_from(['"', "'"]), flipped=st.booleans())
def test_the_driver_test_is_read_with_any_spacing_quote_and_side(before: str, around: str, quote: str,
                                                                 flipped: bool) -> None:
    driver, name = "device.driver", f"{quote}dra.cpu{quote}"
    left, right = (name, driver) if flipped else (driver, name)
    assert cpu_class(device_class(CLASS, f"{before}{left}{around}=={around}{right}{before}")) == CLASS


def test_only_a_selector_read_exactly_makes_a_class_cpus() -> None:
    for loose in ('device.driver.startsWith("dra.")', 'device.driver == "dra.cpu" || true',
                  'device.driver == "dra.cpux"', 'device.driver != "dra.cpu"', "device.driver == dra.cpu",
                  'device.driver == "dra.cpu\'', 'device.attributes["dra.cpu"].numaNodeID == 0'):
        assert cpu_class(device_class(CLASS, loose)) is None, loose
    # every selector must hold: one read exactly beside one that is not leaves the class unknown, not CPUs
    assert cpu_class(device_class(CLASS, 'device.driver == "dra.cpu"', "device.attributes.x == 1")) is None
    assert cpu_class(device_class(CLASS)) is None  # no selector: every driver's devices
    assert cpu_class(device_class(CLASS, 'device.driver == "dra.cpu"', "device.driver=='dra.cpu'")) == CLASS
    assert cpu_class({**CPU_CLASS_OBJ, "kind": "ResourceClaim"}) is None


def test_a_request_of_a_known_cpu_class_counts_its_cpus_and_an_unknown_class_none() -> None:
    spec = template("t", "4")["spec"]["spec"]
    assert claim_cpus(spec) == 0  # as before: the class is not known to be CPUs
    assert claim_cpus(spec, classes={CLASS}) == 4
    assert cpu_request(spec["devices"]["requests"][0], {CLASS})
    assert not cpu_request(spec["devices"]["requests"][0], {"other"})
    facts = dra_facts([CPU_CLASS_OBJ, template("t", "4")], slices=False)
    assert facts.cpu_classes == {CLASS} and dict(facts.cpu_claims or {}) == {("ResourceClaimTemplate", "t"): 4}
    # the class named dra.cpu is always CPUs; its object adds nothing
    assert dra_facts([device_class("dra.cpu", 'device.driver == "dra.cpu"')]).cpu_classes == frozenset()


def test_a_class_known_on_one_side_counts_the_claims_of_the_other() -> None:
    """``check --kubeconfig``: the cluster's DeviceClass, the input's template (and the other way round)."""
    claims = dra_facts([template("t", "4")], slices=False)
    classes = dra_facts([CPU_CLASS_OBJ], slices=False)
    for merged in (merge(claims, classes), merge(classes, claims)):
        assert merged is not None and (merged.cpu_claims or {})[("ResourceClaimTemplate", "t")] == 4
        assert merged.cpu_classes == {CLASS}
    alone = merge(claims, DraFacts(devices=()))
    assert alone is not None and (alone.cpu_claims or {})[("ResourceClaimTemplate", "t")] == 0


def test_the_cluster_s_device_classes_index_knows_the_cpu_classes() -> None:
    """``policy.deviceClasses: true``: the DeviceClass cache and one-shot read project each class with whether
    it selects the CPU driver; the index keeps the names (older 3-field entries still index)."""
    classes = parse_device_classes([CPU_CLASS_OBJ, device_class("gpu.example.com", 'device.driver == "gpu"')])
    assert classes.cpu == {CLASS}
    assert device_class_entry(CPU_CLASS_OBJ) == (CLASS, "", "", True)
    assert index_device_classes([("gpu.example.com", "example.com/gpu", "")]).cpu == frozenset()


def test_not_mirrored_judges_a_custom_cpu_class_and_its_mirrored_twin_passes() -> None:
    known = Facts(dra=dra_facts([CPU_CLASS_OBJ, template("t", "2")]))
    short = pod(guaranteed("app", "1", "1Gi", claims=["cpus"]), claims={"cpus": "t"})
    found = [m for r, m in rules(short, known) if r == "dra-cpu-not-mirrored"]
    assert len(found) == 1 and "ask 2 CPUs of dra.cpu" in found[0]
    mirrored = pod(guaranteed("app", "2", "1Gi", claims=["cpus"]), claims={"cpus": "t"})
    assert rules(mirrored, known) == []
    # the class's object not known, or its selector not read exactly: as before, any claim (dra-unaligned)
    for facts in (Facts(dra=dra_facts([template("t", "2")])),
                  Facts(dra=dra_facts([device_class(CLASS, 'device.driver in ["dra.cpu"]'), template("t", "2")]))):
        assert {r for r, _ in rules(short, facts)} == {"dra-unaligned"}


def test_unpaired_sees_cpus_of_a_custom_class_beside_a_gpu_and_names_the_class() -> None:
    facts = Facts(dra=dra_facts([CPU_CLASS_OBJ]))
    found = rules(template("t", "4", gpu=True), facts)
    assert [r for r, _ in found] == ["dra-cpu-unpaired"] and f"DeviceClass {CLASS}" in found[0][1]
    assert rules(template("t", "4", gpu=True, constraints=[{"matchAttribute": "dra.net/numaNode"}]), facts) == []
    # unknown class: a claim of two devices without a NUMA constraint, as before (dra-claim-spread)
    assert [r for r, _ in rules(template("t", "4", gpu=True), Facts())] == ["dra-claim-spread"]


def test_numa_auto_fits_no_cpus_of_a_custom_cpu_class_pod() -> None:
    """As for ``dra.cpu`` (test_dra_cpu): its nodes run the CPU Manager none, whose hint is none."""
    from tests.unit.test_dra import gpu_nodes

    def unfit(objects: list[dict[str, Any]]) -> list[str]:
        obj = pod(container(limits={"cpu": "48", "memory": "1Gi"}))
        obj["spec"]["resourceClaims"] = [{"name": "c", "resourceClaimTemplateName": "cpus-48"}]
        obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": "c"}]
        verdict = evaluate(obj, parse_config({"policy": {"numa": "auto"}}), Mode.ENFORCE,
                           Facts(topology=gpu_nodes(), memo=Memo(), dra=dra_facts(objects, slices=False)))
        return [v.message for _, v in verdict.violations if v.rule == "numa-unfit"]

    assert unfit([CPU_CLASS_OBJ, template("cpus-48", "48")]) == []
    assert any("needs 48 CPUs on one NUMA node" in m for m in unfit([template("cpus-48", "48")]))


def test_check_reads_the_device_class_in_its_input(tmp_path: Any) -> None:
    import yaml

    short = pod(guaranteed("app", "1", "1Gi", claims=["cpus"]), claims={"cpus": "t"})
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump_all([CPU_CLASS_OBJ, template("t", "2"), short]))
    found = inprocess.run(["check", str(path)])
    assert found.returncode == 1 and "dra-cpu-not-mirrored" in found.stdout, found.stdout + found.stderr
    path.write_text(yaml.safe_dump_all([template("t", "2"), short]))
    assert "dra-cpu-not-mirrored" not in inprocess.run(["check", str(path)]).stdout


def test_the_cluster_s_claims_are_counted_with_the_cpu_classes_read_beside_them() -> None:
    """``check --kubeconfig``/``audit``: ``cluster_facts`` hands ``read_dra`` the CPU classes of the DeviceClass
    index (``policy.deviceClasses: true``), and the claim stores are projected with them."""
    from tests.unit.test_cluster_claim_specs import PagedLister
    from webhook.cluster.dra_lists import read_dra

    listed = template("t", "4")
    listed["metadata"]["namespace"] = "ml"
    lister = PagedLister({"/apis/resource.k8s.io/v1/resourceclaimtemplates": [listed]})
    found, problems = read_dra(lister, parse_device_classes([CPU_CLASS_OBJ]).cpu)
    seen = found.for_namespace("ml")
    assert problems == [] and dict(seen.cpu_claims or {}) == {("ResourceClaimTemplate", "t"): 4}
    assert seen.cpu_classes == {CLASS} and seen.claim_specs and ("ResourceClaimTemplate", "t") in seen.claim_specs
    unknown_class = read_dra(lister)[0].for_namespace("ml")
    assert dict(unknown_class.cpu_claims or {}) == {("ResourceClaimTemplate", "t"): 0}


def test_the_webhook_judges_a_claim_of_a_custom_cpu_class_with_its_device_classes() -> None:
    """``policy.deviceClasses: true`` with ``policy.draObjects: true``: a ResourceClaimTemplate created with CPUs
    of a class its DeviceClass cache knows selects the CPU driver, beside a GPU, is dra-cpu-unpaired's."""
    import json

    from tests.helpers import admission_review
    from webhook.serving.app import create_app

    def allowed(classes: list[dict[str, Any]]) -> dict[str, Any]:
        app = create_app(DENY, device_classes=lambda: parse_device_classes(classes),
                         dra=lambda namespace: DraFacts(devices=(), cpu_claims={}))
        review = admission_review(template("t", "4", gpu=True), namespace="ns")
        answer = app.test_client().post("/validate", data=json.dumps(review), content_type="application/json")
        response: dict[str, Any] = answer.get_json()["response"]
        return response

    refused = allowed([CPU_CLASS_OBJ])
    assert refused["allowed"] is False and "dra-cpu-unpaired" in refused["status"]["message"]
    assert "dra-cpu-unpaired" not in json.dumps(allowed([]))  # not known: dra-claim-spread, as before


def _stored(objects: list[dict[str, Any]]) -> Any:
    """The webhook's claim cache (``DraCache``, its stores projected as the watch projects them) holding
    ``objects`` in namespace ns, every kind listed (no slices, no NRT objects): a namespace's view."""
    import threading

    from tests.unit.test_topology_cache import Scripted
    from webhook.cluster.dracache import DraCache

    cache = DraCache(Scripted(threading.Event()))
    for resource, store in cache.stores.items():
        kind = {"resourceclaims": "ResourceClaim", "resourceclaimtemplates": "ResourceClaimTemplate"}.get(resource)
        store.replace([{**o, "metadata": {**o["metadata"], "namespace": "ns"}} for o in objects
                       if o.get("kind") == kind])
    return cache.publish().for_namespace


def _webhook_rules(obj: dict[str, Any], classes: list[dict[str, Any]], stored: list[dict[str, Any]]) -> set[str]:
    """The rules the webhook names for ``obj`` in namespace ns (refused or warned), with the DeviceClasses
    ``classes`` (``policy.deviceClasses``) and the claim cache holding ``stored`` (``policy.draObjects``)."""
    import json
    import re

    from tests.helpers import admission_review
    from webhook.core.rules import RULE_IDS
    from webhook.serving.app import create_app

    app = create_app(DENY, device_classes=lambda: parse_device_classes(classes), dra=_stored(stored))
    obj = {**obj, "metadata": {**obj["metadata"], "namespace": "ns"}}
    answer = app.test_client().post("/validate", data=json.dumps(admission_review(obj, namespace="ns")),
                                    content_type="application/json").get_json()["response"]
    said = "\n".join([(answer.get("status") or {}).get("message", ""), *answer.get("warnings", [])])
    return {r for r in RULE_IDS if re.search(rf"(^|\s){re.escape(r)}: ", said)}


def test_the_webhook_counts_a_stored_claim_of_a_custom_cpu_class_as_check_does() -> None:
    """``policy.draObjects`` with ``policy.deviceClasses``: the claim cache projects before the DeviceClasses are
    known, so a stored template of a CPU class is counted per view with them: the Pod whose cpus do not mirror it
    is dra-cpu-not-mirrored's (not dra-unaligned's, whose way out is wrong for it), its mirrored twin passes."""
    short = pod(guaranteed("app", "1", "1Gi", claims=["cpus"]), claims={"cpus": "t"})
    mirrored = pod(guaranteed("app", "2", "1Gi", claims=["cpus"]), claims={"cpus": "t"})
    assert _webhook_rules(short, [CPU_CLASS_OBJ], [template("t", "2")]) == {"dra-cpu-not-mirrored"}
    assert _webhook_rules(mirrored, [CPU_CLASS_OBJ], [template("t", "2")]) == set()
    # the class not known to select the CPU driver: any claim (dra-unaligned), as check says without its object
    assert _webhook_rules(short, [], [template("t", "2")]) == {"dra-unaligned"}


@given(name=st.sampled_from([CLASS, "dra.cpu", "gpu.example.com"]), known=st.booleans(),
       cpus=st.integers(1, 3), asked=st.integers(1, 3), gpu=st.booleans(), paired=st.booleans())
def test_the_webhook_s_stored_claims_answer_as_check_s_input(name: str, known: bool, cpus: int, asked: int,
                                                             gpu: bool, paired: bool) -> None:
    """The same Pod, judged by the webhook with the template in its claim cache and by ``check`` with it in its
    input (and the DeviceClass where ``known``), names the same rules."""
    claim = template("t", str(cpus), name, gpu=gpu,
                     constraints=[{"matchAttribute": "dra.net/numaNode"}] if paired else None)
    obj = pod(guaranteed("app", str(asked), "1Gi", claims=["cpus"]), claims={"cpus": "t"})
    classes = [CPU_CLASS_OBJ] if known else []
    checked = {r for r, _ in rules(obj, Facts(dra=dra_facts([*classes, claim])))}
    assert _webhook_rules(obj, classes, [claim]) == checked, checked
