"""``check --kubeconfig`` and ``audit`` read the cluster's ResourceClaims and ResourceClaimTemplates with their
specs (``webhook.cluster.dra_lists.read_dra``), kept as the webhook's cache keeps them (``DraSnapshot``), and judge
an object with its own namespace's claims (``Facts.dra_of``, applied by the batch runner): the same answers the
webhook gives at admission for the same objects. A refused list, or claims past the bound, leave a Pod's claims
"unknown", never "compliant". The Lister here is a fake over the real pager (the API calls are tested against
kube-apiserver in tests/e2e/test_dra_objects.py)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_dra_objects_cache import PATHS, listed, started
from tests.unit.test_topology_cache import Scripted
from webhook.batch.audit import audit
from webhook.batch.runner import in_namespace
from webhook.cluster import dracache
from webhook.cluster.client import Listed, Lister
from webhook.cluster.dra_lists import read_dra
from webhook.cluster.dracache import CLAIMS, TEMPLATES
from webhook.cluster.pager import ListFailed, Page, pages
from webhook.core.config import parse_config
from webhook.core.dracpu import DraFacts
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import NO_FACTS, Facts

DENY = parse_config({"policy": {"dra": "deny"}})
GPU = "gpu.example.com"


class PagedLister(Lister):
    """Lists served by the real pager, ``size`` objects a page with continue tokens; a path whose answer is an
    exception raises it (as the pager does for a refused list)."""

    def __init__(self, lists: dict[str, Any], size: int = 2) -> None:  # no API client
        self.lists, self.size = lists, size
        self.asked: list[str] = []

    def pages(self, path: str, label_selector: str | None = None,
              field_selector: str | None = None) -> Any:
        found = self.lists.get(path, [])

        def get(query: list[tuple[str, str]]) -> tuple[int, Any]:
            self.asked.append(path)
            if isinstance(found, ListFailed):
                return found.status, {"message": found.message}
            at, limit = int(dict(query).get("continue") or 0), int(dict(query)["limit"])
            more = str(at + limit) if at + limit < len(found) else ""
            return 200, {"items": found[at:at + limit], "metadata": {"resourceVersion": "7", "continue": more}}
        return pages(get, path, (), self.size)

    def list_objects(self, path: str, label_selector: str | None = None,
                     field_selector: str | None = None) -> list[dict[str, Any]]:
        return [dict(o) for page in self.pages(path) for o in page.items]


def cpus(name: str, count: str) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "dra.cpu", "capacity": {"requests": {"dra.cpu/cpu": count}}}}


def template(name: str, namespace: str, *requests: dict[str, Any], paired: bool = False) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if paired:
        devices["constraints"] = [{"matchAttribute": "dra.net/numaNode"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
            "spec": {"spec": {"devices": devices}}}


GPU_REQUEST = {"name": "gpu", "exactly": {"deviceClassName": GPU}}
TEMPLATES_LISTED = [
    template("gpu-and-cpus", "ml", GPU_REQUEST, cpus("cpus", "4")),
    template("gpu-and-cpus-paired", "ml", GPU_REQUEST, cpus("cpus", "4"), paired=True),
    template("two-requests", "ml", cpus("a", "2"), cpus("b", "2")),
    template("cpus", "ml", cpus("cpus", "4")),
    template("cpus", "other", cpus("cpus", "2")),  # the same name, another count, elsewhere
]


def pod(name: str, namespace: str | None, cpu: str, template_name: str, request: str | None = None) -> dict[str, Any]:
    """A Pod whose one container states ``cpu`` CPUs and takes the claim made from ``template_name`` (its
    ``request`` only, when given)."""
    claim: dict[str, Any] = {"name": "dev"} | ({"request": request} if request else {})
    meta: dict[str, Any] = {"name": name} | ({"namespace": namespace} if namespace else {})
    amounts = {"cpu": cpu, "memory": "1Gi"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"resourceClaims": [{"name": "dev", "resourceClaimTemplateName": template_name}],
                     "containers": [{"name": "app", "image": "app:1", "resources": {
                         "requests": amounts, "limits": amounts, "claims": [claim]}}]}}


PODS = [
    pod("unpaired", "ml", "4", "gpu-and-cpus"),
    pod("paired", "ml", "4", "gpu-and-cpus-paired"),
    pod("one-request-unmirrored", "ml", "4", "two-requests", request="a"),  # request a holds 2 CPUs
    pod("one-request-mirrored", "ml", "2", "two-requests", request="a"),
    pod("four-of-ml", "ml", "4", "cpus"),
    pod("four-of-other", "other", "4", "cpus"),  # other's template asks 2
    pod("missing", "ml", "4", "nowhere"),
]


def findings(facts: Facts, obj: dict[str, Any]) -> tuple[bool, list[tuple[str, str]], list[tuple[str, str]]]:
    verdict = evaluate(obj, DENY, Mode.ENFORCE, facts)
    return (verdict.allowed, sorted((v.rule, v.message) for _, v in verdict.violations),
            sorted((v.rule, v.message) for _, v in verdict.advisories))


def batch_facts(lister: Lister) -> Facts:
    """What ``cluster_facts`` makes of the read (no configz: no node publishes dra.cpu devices here)."""
    snapshot, _ = read_dra(lister)
    return Facts(dra=snapshot.anywhere(), dra_of=snapshot.for_namespace, stored=True)


def test_each_pod_is_judged_as_the_webhook_judges_it() -> None:
    lister = PagedLister({PATHS[TEMPLATES]: TEMPLATES_LISTED})
    facts = batch_facts(lister)
    assert lister.asked.count(PATHS[TEMPLATES]) == 3  # five templates, two a page: paged
    stop = threading.Event()
    api = Scripted(stop)
    api.lists[PATHS[TEMPLATES]] = listed(*TEMPLATES_LISTED)
    cache = started(api)
    try:
        for obj in PODS:
            namespace = obj["metadata"]["namespace"]
            webhook = findings(Facts(dra=cache.snapshot().for_namespace(namespace)), obj)
            assert findings(in_namespace(facts)(namespace), obj) == webhook, obj["metadata"]["name"]
    finally:
        stop.set()
        cache.stop()
    said = {o["metadata"]["name"]: findings(in_namespace(facts)(o["metadata"]["namespace"]), o) for o in PODS}
    assert not said["unpaired"][0] and [r for r, _ in said["unpaired"][1]] == ["dra-cpu-unpaired"]
    assert said["paired"] == (True, [], [])
    assert [r for r, _ in said["one-request-unmirrored"][1]] == ["dra-cpu-not-mirrored"]
    assert "ask 2 CPUs of dra.cpu" in said["one-request-unmirrored"][1][0][1]
    assert said["one-request-mirrored"] == (True, [], [])
    assert said["four-of-ml"] == (True, [], [])
    assert [r for r, _ in said["four-of-other"][1]] == ["dra-cpu-not-mirrored"]  # its namespace's template
    # not known to be DRA's CPUs: dra-unaligned refuses it (policy.dra: deny), and the claim is said unknown
    assert [r for r, _ in said["missing"][1]] == ["dra-unaligned"]
    assert {r for r, m in said["missing"][2] if "unknown: " in m and "nowhere not found" in m} == {
        "dra-cpu-not-mirrored", "dra-cpu-unpaired"}


def test_before_the_specs_were_read_these_pods_passed_silently() -> None:
    """What ``read_dra`` handed over before (the CPU counts alone, across namespaces): the unpaired template and
    the unmirrored request passed; the webhook refuses both."""
    counts = batch_facts(PagedLister({PATHS[TEMPLATES]: TEMPLATES_LISTED})).dra
    assert counts is not None
    old = Facts(dra=DraFacts(None, counts.cpu_claims))
    assert findings(old, PODS[0])[0] and findings(old, PODS[2])[0]


def test_audit_judges_each_pod_with_its_namespace_s_claims() -> None:
    facts = batch_facts(PagedLister({PATHS[TEMPLATES]: TEMPLATES_LISTED}))
    report = audit([Listed(o["metadata"]["namespace"], "Pod", obj=o) for o in PODS], DENY, Mode.ENFORCE,
                   facts=facts)
    refused = {(r.namespace, r.name, r.rule) for r in report.violations}
    assert refused == {("ml", "unpaired", "dra-cpu-unpaired"), ("ml", "one-request-unmirrored", "dra-cpu-not-mirrored"),
                       ("other", "four-of-other", "dra-cpu-not-mirrored"), ("ml", "missing", "dra-unaligned")}
    assert {(r.name, r.rule) for r in report.notices} == {("missing", "dra-cpu-not-mirrored"),
                                                          ("missing", "dra-cpu-unpaired")}


def test_a_manifest_of_no_namespace_is_judged_with_every_namespace_s_claims() -> None:
    facts = batch_facts(PagedLister({PATHS[TEMPLATES]: TEMPLATES_LISTED}))
    assert in_namespace(facts)(None) is facts
    assert not findings(facts, pod("unpaired", None, "4", "gpu-and-cpus"))[0]  # one namespace holds it
    # two namespaces hold "cpus" with 4 and 2 CPUs: which one it gets is not known, and said so
    _, refusals, advisories = findings(facts, pod("three", None, "3", "cpus"))
    assert [r for r, _ in refusals] == ["dra-unaligned"]  # its CPUs not known to be DRA's (policy.dra: deny)
    assert {r for r, m in advisories if "unknown: " in m and "ResourceClaimTemplate cpus: not known for an object "
            "of no namespace" in m} == {"dra-cpu-not-mirrored", "dra-cpu-unpaired"}
    said = findings(facts, pod("missing", None, "4", "nowhere"))  # in no namespace: unknown too
    assert any("ResourceClaimTemplate nowhere: not known for an object of no namespace" in m for _, m in said[2])
    plain = batch_facts(PagedLister({PATHS[TEMPLATES]: TEMPLATES_LISTED[:4]}))  # no name held twice
    said = findings(plain, pod("missing", None, "4", "nowhere"))  # in no namespace: in none of them
    assert any("ResourceClaimTemplate nowhere not found" in m for _, m in said[2])


def test_a_refused_claims_list_leaves_every_claim_unknown_and_says_why() -> None:
    refused = ListFailed(PATHS[CLAIMS], 403, 'resourceclaims.resource.k8s.io is forbidden: User "x" cannot list')
    snapshot, problems = read_dra(PagedLister({PATHS[CLAIMS]: refused, PATHS[TEMPLATES]: TEMPLATES_LISTED}))
    assert snapshot.claims is None and not snapshot.whole
    assert problems == [f"ResourceClaims cannot be listed (needs list on resourceclaims.resource.k8s.io): GET "
                        f"{PATHS[CLAIMS]}: HTTP 403 {refused.message}"]
    facts = Facts(dra=snapshot.anywhere(), dra_of=snapshot.for_namespace)
    _, refusals, advisories = findings(in_namespace(facts)("ml"), PODS[0])
    assert [r for r, _ in refusals] == ["dra-unaligned"]  # not judged by the claim rules: said unknown
    assert {r for r, m in advisories if "unknown: " in m and "HTTP 403" in m} == {"dra-cpu-not-mirrored",
                                                                                   "dra-cpu-unpaired"}


def test_claims_past_the_bound_are_not_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dracache, "MAX_CLAIMS", 2)
    snapshot, problems = read_dra(PagedLister({PATHS[TEMPLATES]: TEMPLATES_LISTED}))
    assert snapshot.claims is not None and not snapshot.whole
    assert len(problems) == 1 and "more than 2 ResourceClaimTemplates" in problems[0]
    assert sum(len(kept) for kept in snapshot.claims.values()) == 2  # no more kept than the bound
    said = findings(in_namespace(Facts(dra=snapshot.anywhere(), dra_of=snapshot.for_namespace))("ml"),
                    pod("missing", "ml", "4", "nowhere"))
    assert any("unknown: " in m and "more than 2" in m for _, m in said[2])


def test_pages_restarted_after_an_expired_token_keep_only_the_new_list() -> None:
    store = dracache.claim_stores()[TEMPLATES]
    first: list[Mapping[str, Any]] = list(TEMPLATES_LISTED[:2])
    store.rebuild([Page(first, "1"), Page([TEMPLATES_LISTED[3]], "2", restart=True)])
    assert set(store.snapshot()) == {"ml/cpus"}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["ml", "other"]),
                          st.sampled_from(["1", "2", "4", "1500m"]), st.booleans()), max_size=8),
       st.integers(1, 5))
def test_the_read_does_not_depend_on_paging_and_a_name_one_namespace_holds_is_judged_anywhere_as_there(
        listing: list[tuple[str, str, str, bool]], size: int) -> None:
    objects = list({(name, namespace): template(name, namespace, GPU_REQUEST, cpus("cpus", count), paired=paired)
                    for name, namespace, count, paired in listing}.values())
    paged, _ = read_dra(PagedLister({PATHS[TEMPLATES]: objects}, size=size))
    whole, _ = read_dra(PagedLister({PATHS[TEMPLATES]: objects}, size=100))
    assert paged.claims == whole.claims and paged.whole and whole.whole
    facts = Facts(dra=paged.anywhere(), dra_of=paged.for_namespace)
    held: dict[str, set[str]] = {}
    for obj in objects:
        held.setdefault(obj["metadata"]["name"], set()).add(obj["metadata"]["namespace"])
    for name, namespaces in held.items():
        if len(namespaces) == 1:
            (namespace,) = namespaces
            assert findings(facts, pod("p", None, "2", name)) == findings(
                in_namespace(facts)(namespace), pod("p", namespace, "2", name))


def _checked(tmp_path: Path, objects: list[dict[str, Any]], facts: Facts = NO_FACTS) -> dict[str, set[str]]:
    """``check FILE`` (with ``facts``: ``--kubeconfig``'s read) on ``objects``: each Pod's rules, refused or noted
    (a note says which rule it is about: an "unknown" claim is one)."""
    import yaml

    from webhook.batch.runner import check_paths

    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    report = check_paths([str(path)], DENY, Mode.ENFORCE, facts=facts)
    assert not report.errors
    said: dict[str, set[str]] = {}
    for record in (*report.violations, *report.notices):
        if record.kind == "Pod":
            said.setdefault(record.name, set()).add(record.rule + (" (unknown)" if "unknown: " in record.message
                                                                   else ""))
    return said


def test_check_judges_a_pod_with_the_input_s_claims_of_its_namespace_and_of_none(tmp_path: Path) -> None:
    """``check FILE``: a template of namespace a is not what a Pod of namespace b names (the API server would make
    the Pod's claim from b's template, or none); one of no namespace is applied wherever, so every Pod sees it;
    a Pod of no namespace goes to kubectl's context namespace, which the input does not say: a's template is
    unknown to it, said so (it once judged it with a's, a definite answer it could not know)."""
    in_a = template("t", "a", cpus("cpus", "2"))
    # b's Pod states 1 CPU for t: a's t asks 2, but a's t is not b's (t is not in the input for b: not judged)
    said = _checked(tmp_path, [in_a, pod("b-one", "b", "1", "t"), pod("a-one", "a", "1", "t"),
                               pod("a-two", "a", "2", "t"), pod("anywhere-one", None, "1", "t")])
    assert "dra-cpu-not-mirrored" not in said.get("b-one", set()), said
    assert "dra-cpu-not-mirrored" in said["a-one"] and said.get("a-two", set()) == set(), said
    assert "dra-cpu-not-mirrored (unknown)" in said["anywhere-one"], said
    assert "dra-cpu-not-mirrored" not in said["anywhere-one"], said  # never a definite answer
    unplaced = template("t", "a", cpus("cpus", "2"))
    del unplaced["metadata"]["namespace"]
    said = _checked(tmp_path, [unplaced, pod("b-one", "b", "1", "t"), pod("b-two", "b", "2", "t")])
    assert "dra-cpu-not-mirrored" in said["b-one"] and said.get("b-two", set()) == set(), said
    # b's own t and a's of another count: b's Pod is judged with b's alone, never unknown for a's
    said = _checked(tmp_path, [in_a, template("t", "b", cpus("cpus", "4")), pod("b-four", "b", "4", "t"),
                               pod("b-two", "b", "2", "t")])
    assert said.get("b-four", set()) == set() and "dra-cpu-not-mirrored" in said["b-two"], said


def test_check_kubeconfig_judges_a_pod_with_its_namespace_s_claim_whatever_another_namespace_s_input_says(
        tmp_path: Path) -> None:
    """``check --kubeconfig FILE``: the cluster holds b's t (2 CPUs); the input's t of namespace a (4 CPUs) does not
    make b's t unknown for b's Pod, and an input t of b itself is merged with the cluster's as before."""
    snapshot, _ = read_dra(PagedLister({PATHS[TEMPLATES]: [template("t", "b", cpus("cpus", "2"))]}))
    facts = Facts(dra=snapshot.anywhere(), dra_of=snapshot.for_namespace)
    said = _checked(tmp_path, [template("t", "a", cpus("cpus", "4")), pod("b-two", "b", "2", "t"),
                               pod("b-four", "b", "4", "t"), pod("a-four", "a", "4", "t")], facts)
    assert said.get("b-two", set()) == set(), said  # the compliant twin: b's t asks 2
    assert said["b-four"] == {"dra-cpu-not-mirrored"}, said
    assert said.get("a-four", set()) == set(), said  # a's t from the input (a holds none in the cluster)
    said = _checked(tmp_path, [template("t", "b", cpus("cpus", "4")), pod("b-two", "b", "2", "t")], facts)
    assert said["b-two"] != set(), said  # b's t differs in the input and the cluster: not known, never a pass
