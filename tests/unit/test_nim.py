"""NVIDIA NIM operator's NIMService as its v3.1.2 controller builds its Pods (``webhook.core.operators.nim``):
``spec.resources`` is the model container's; init and sidecar containers get no resources from the operator."""

from __future__ import annotations

from typing import Any

from tests.builders import rl
from tests.unit.test_dra_cpu import DENY, cpu_template
from tests.unit.test_numa import GPU_TAINT, judge, tainted
from webhook.core.config import Config, parse_config
from webhook.core.dracpu import dra_facts
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.operators.nim_dra import short_hash
from webhook.core.refusal import LINE_CHARS, finding
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
    template = "spec (Deployment)"  # each finding says no field sets them (the way out first)
    # named by the NIMService's fields that make them (nimservice_types.go GetInitContainers, GetSidecarContainers)
    assert {(t, path.split(".resources")[0]) for t, path, _ in rules} == {
        (template, "spec.proxy.certConfigMap"), (template, "spec.sidecarContainers[0]")}
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


def test_init_containers_are_named_by_their_own_entries() -> None:
    # with proxy.certConfigMap the user's initContainers[0] is the Pod's second init container
    obj = nim(proxy={"certConfigMap": "ca"}, initContainers=[{"name": "fetch", "image": {"repository": "b"}}])
    names = {(path.split(".resources")[0], rule) for _, path, rule in found(obj)}
    assert names == {("spec.proxy.certConfigMap", "limits-missing"), ("spec.initContainers[0]", "limits-missing")}


def test_a_container_of_no_resources_field_is_not_told_to_set_them() -> None:
    # NIMContainerSpec (common_types.go:501-514) has no resources: the way out is removing what adds it
    obj = nim(proxy={"certConfigMap": "ca"}, sidecarContainers=[{"name": "log", "image": {"repository": "b"}}],
              expose={"router": {"eppConfig": {"containerSpec": {"name": "epp", "image": {"repository": "e"}}}}})
    messages = {dotted(v.path): v.message for _, v in evaluate(obj, Config(), Mode.ENFORCE).violations}
    for field, remove in (("spec.proxy.certConfigMap", "remove spec.proxy.certConfigMap"),
                          ("spec.sidecarContainers[0]", "remove the entry"),
                          ("spec.expose.router.eppConfig.containerSpec", "remove spec.expose.router.eppConfig")):
        message = messages[f"{field}.resources.limits.cpu"]
        assert "set resources" not in message and f"{remove}, or exempt the namespace" in message, message


def test_multi_node_without_pipeline_parallelism_is_the_deployment() -> None:
    # IsMultiNode (nimservice_types.go:2140-2142) is pipeline > 1; standalone/nimservice.go:463 renders the
    # Deployment otherwise
    for multi in ({"parallelism": {"tensor": 8}}, {"parallelism": {"pipeline": 1, "tensor": 8}}):
        obj = nim(multiNode=multi, resources={"limits": rl("1500m", "8Gi")})
        assert [(t.template, t.pod_spec().containers[0].name) for t in find_targets(obj)] == [
            ("spec (Deployment)", "llama-ctr")]
        frac = parse_config({"policy": {"fractionalCPUContainers": ["llama-ctr"]}})
        assert evaluate(obj, frac, Mode.ENFORCE).violations == []


def test_the_leader_worker_set_renders_no_runtime_class_and_the_worker_no_scheduler() -> None:
    # manifests/lws.yaml (v3.1.2) renders schedulerName in the leader only and runtimeClassName nowhere;
    # deployment.yaml both
    pod = {"runtimeClassName": "kata", "schedulerName": "pinned"}
    [deployment] = find_targets(nim(**pod))
    assert {k: deployment.spec.get(k) for k in pod} == pod
    multi = nim(multiNode={"parallelism": {"pipeline": 2}}, resources={"limits": rl("1500m", "8Gi")}, **pod)
    leader, worker = find_targets(multi)
    assert {k: leader.spec.get(k) for k in pod} == {"runtimeClassName": None, "schedulerName": "pinned"}
    assert {k: worker.spec.get(k) for k in pod} == {"runtimeClassName": None, "schedulerName": None}
    # the LeaderWorkerSet's Pods carry no runtimeClassName: an exemption by it does not cover them
    kata = parse_config({"exemptions": {"runtimeClassNames": ["kata"]}})
    assert {v.rule for _, v in evaluate(multi, kata, Mode.ENFORCE).violations} == {"cpu-not-integer"}


def test_node_selector_tolerations_and_affinity_are_copied_as_the_templates_render_them() -> None:
    # GetDeploymentParams (nimservice_types.go:1283-1285): all three; GetLWSParams (1383-1384): no affinity;
    # both templates render a toleration's key, operator, value and effect only
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}}
    placed = {"nodeSelector": {"pool": "gpu"}, "tolerations": tolerations, "affinity": affinity}
    rendered = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}]
    [deployment] = find_targets(nim(**placed))
    assert {k: deployment.spec.get(k) for k in placed} == {**placed, "tolerations": rendered}
    for target in find_targets(nim(multiNode={"parallelism": {"pipeline": 2}}, **placed)):
        assert {k: target.spec.get(k) for k in placed} == {"nodeSelector": {"pool": "gpu"},
                                                          "tolerations": rendered, "affinity": None}
    # policy.numa: auto judges the nodes the Pod may land on: 16 CPUs fit the tainted GPU node it tolerates
    tolerant = nim(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
                   resources={"limits": rl("16", "64Gi")})
    assert judge(tolerant, tainted(GPU_TAINT)) == ([], [])


def test_dra_resources_become_pod_claims_every_container_takes() -> None:
    # internal/shared/resourceclaims.go GetPodResourceClaims (185-197), UpdateContainerResourceClaims (150-182):
    # every claim in every non-init container; names from generateUniquePodClaimName
    obj = nim(draResources=[{"resourceClaimTemplateName": "gpu-claim-template"},
                            {"resourceClaimName": "shared", "requests": ["a", "b"]}],
              sidecarContainers=[{"name": "logger", "image": {"repository": "b"}}], proxy={"certConfigMap": "ca"})
    [target] = find_targets(obj)
    template_claim, shared = "claim-6649479bc4-1-c98cb897c-0", "claim-6649479bc4-0-6cbcc77fc6-0"
    assert target.spec["resourceClaims"] == [
        {"name": template_claim, "resourceClaimTemplateName": "gpu-claim-template"},
        {"name": shared, "resourceClaimName": "shared"}]
    takes = [{"name": template_claim}, {"name": shared, "request": "a"}, {"name": shared, "request": "b"}]
    assert [c["resources"]["claims"] for c in target.spec["containers"]] == [takes, takes]
    assert "resources" not in target.spec["initContainers"][0]
    dra = parse_config({"policy": {"dra": "deny"}})
    compliant = nim(draResources=[{"resourceClaimTemplateName": "gpu-claim-template"}])
    assert {v.rule for _, v in evaluate(compliant, dra, Mode.ENFORCE).violations} == {"dra-unaligned"}
    # a compute domain (multi-node only) is one more claim, from the template of the ComputeDomain made for it
    multi = nim(multiNode={"parallelism": {"pipeline": 2}, "computeDomain": {"create": True}})
    assert [t.spec["resourceClaims"][0]["resourceClaimTemplateName"] for t in find_targets(multi)] == [
        "cd-claimtemplate-6649479bc4"] * 2


def test_claim_names_hash_as_the_operator_does() -> None:
    # internal/shared/resourceclaims_test.go: "test-service" hashes to 8568b4fb55, "test-claim" to 9f8c8d9fb
    assert (short_hash("test-service"), short_hash("test-claim")) == ("8568b4fb55", "9f8c8d9fb")


def test_the_endpoint_picker_deployment_is_judged() -> None:
    # standalone/nimservice.go:311-316 reconcileEPP before the model workload; GetEPPDeploymentParams
    # (nimservice_types.go:2490-2548): one container epp, no resources
    obj = nim(expose={"router": {"eppConfig": {"containerSpec": {"name": "epp", "image": {"repository": "e"}},
                                               "configMapRef": {"name": "epp", "key": "c.yaml"}}}})
    epp, model = find_targets(obj)
    assert [c.name for c in epp.pod_spec().containers] == ["epp"] and model.template == "spec (Deployment)"
    assert found(obj) == {("spec.expose.router.eppConfig (EPP Deployment; NIM gives it no resources)",
                           f"spec.expose.router.eppConfig.containerSpec.resources.limits.{r}", "limits-missing")
                          for r in ("cpu", "memory")}


def test_a_nim_init_container_is_told_its_way_out_and_a_pods_own_is_not() -> None:
    """spec.initContainers[i] of a NIMService is a NIMContainerSpec (no resources, common_types.go:501-514): the
    builder says so (``Built.sizing``). The same path in a bare Pod is the container itself: "set resources" holds."""
    messages = {dotted(v.path): v.message
                for _, v in evaluate(nim(initContainers=[{"name": "fetch", "image": {"repository": "b"}}]),
                                     Config(), Mode.ENFORCE).violations}
    for resource in ("cpu", "memory"):
        message = messages[f"spec.initContainers[0].resources.limits.{resource}"]
        assert "set resources" not in message and "remove the entry, or exempt the namespace" in message, message
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"initContainers": [{"name": "fetch"}], "containers": [{"name": "c", "resources": {
                "limits": rl("2", "1Gi")}}]}}
    assert {dotted(v.path): v.message for _, v in evaluate(bare, Config(), Mode.ENFORCE).violations} == {
        f"spec.initContainers[0].resources.limits.{r}": f'container "fetch" (spec.initContainers[0]): no {r} limit, '
        f"so the Pod is not Guaranteed; set resources.limits.{r} (the request defaults to it)"
        for r in ("cpu", "memory")}


def test_a_sidecar_taking_a_dra_cpu_claim_is_not_told_to_mirror_it_in_resources() -> None:
    """Every NIM sidecar takes the spec.draResources claims (nim_dra) but has no resources field to state the CPUs
    in: dra-cpu-not-mirrored gives the builder's way out, the model container (spec.resources) still "set both"."""
    obj = nim(draResources=[{"resourceClaimTemplateName": "t"}], sidecarContainers=[{"name": "logger"}],
              resources={"requests": rl("1", "1Gi"), "limits": rl("1", "1Gi")})
    facts = Facts(dra=dra_facts([cpu_template("t", cpus="2")]))
    mirrored = {v.container: v.message for _, v in evaluate(obj, DENY, Mode.ENFORCE, facts).violations
                if v.rule == "dra-cpu-not-mirrored"}
    assert "set both to 2" in mirrored["llama-ctr"], mirrored
    assert "set both" not in mirrored["logger"] and mirrored["logger"].endswith(
        "ignore claims; remove the entry, or exempt the namespace (exemptions.namespaces): no field of the "
        "NIMService sets its resources (a NIMContainerSpec has none)"), mirrored
    # the way out stays whole within a refusal's line
    line = finding("dra-cpu-not-mirrored", mirrored["logger"])
    assert "exempt the namespace (exemptions.namespaces)" in line[:LINE_CHARS], len(line)


def test_dra_findings_name_the_entry_that_makes_each_claim() -> None:
    """A NIMService has no spec.resourceClaims and the pod claims' names are the operator's hashes
    (resourceclaims.go generateUniquePodClaimName): dra-unaligned names spec.draResources[i] (``Built.shown``), at
    that field; a claimCreationSpec (dra_types.go:272-280: generateName and devices only) cannot take
    matchAttribute, so its way out is a ResourceClaimTemplate of one's own, named by resourceClaimTemplateName."""
    obj = nim(draResources=[{"resourceClaimTemplateName": "gpu-claim-template"},
                            {"claimCreationSpec": {"devices": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}}])
    dra = parse_config({"policy": {"dra": "deny"}})
    [(_, finding)] = evaluate(obj, dra, Mode.ENFORCE).violations
    assert finding.rule == "dra-unaligned" and dotted(finding.path) == "spec.draResources", dotted(finding.path)
    assert "resourceClaims" not in finding.message and "claim-" not in finding.message, finding.message
    assert "(spec.draResources[0], spec.draResources[1] (a claimCreationSpec cannot set matchAttribute: name a " \
           "ResourceClaimTemplate of your own with resourceClaimTemplateName instead)" in finding.message, \
        finding.message
    domain = nim(resources=GOOD, multiNode={"parallelism": {"pipeline": 2}, "computeDomain": {"create": True}})
    paths = {dotted(v.path) for _, v in evaluate(domain, dra, Mode.ENFORCE).violations if v.rule == "dra-unaligned"}
    assert paths == {"spec.multiNode.computeDomain"}, paths
