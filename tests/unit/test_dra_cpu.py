"""CPUs through DRA (webhook/core/dracpu.py and the rules dra-cpu-not-mirrored, dra-cpu-unpaired,
dra-numa-list-match, dra-cpu-pinner-mismatch; who pins in ``qos-guard nodes``): the cases the per-rule fixtures
do not hold, and the facts as the ResourceSlices of dra-driver-cpu v0.2.0 publish them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.builders import container, guaranteed, pod, resource_slice
from tests.unit.test_pinning import configz
from webhook.batch.nodes import CONFLICT_RULE, build, pinned_by
from webhook.cluster.configz import NodeConfig, NodeInfo
from webhook.cluster.dracache import keep_slice
from webhook.core.config import Config, Policy, parse_config
from webhook.core.dracpu import (
    DraFacts,
    claim_cpus,
    dra_facts,
    multi_valued,
    pinners,
    slice_devices,
)
from webhook.core.dracpu_merge import merge
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.kubeletpinning import DEFAULT_POOL_LABELS, read_configz
from webhook.core.rules.dra_cpu_not_mirrored import fractional

DENY = Config(policy=Policy(dra="deny"))


def cpu_template(name: str, cpus: str | None = None, count: int | None = None) -> dict[str, Any]:
    exact: dict[str, Any] = {"deviceClassName": "dra.cpu"}
    if cpus is not None:
        exact["capacity"] = {"requests": {"dra.cpu/cpu": cpus}}
    if count is not None:
        exact["count"] = count
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "cpus", "exactly": exact}]}}}}


def rules(obj: dict[str, Any], facts: Facts, config: Config = DENY) -> list[tuple[str, str]]:
    return [(v.rule, v.message) for _, v in evaluate(obj, config, Mode.ENFORCE, facts).violations]


CPU_DEVICES = [{"name": "cpudevnuma000", "attributes": {"numaNodeID": {"int": 0}, "dra.net/numaNode": {"int": 0}},
                "capacity": {"dra.cpu/cpu": {"value": "8"}}}]
CPU_SLICE = resource_slice("a-dra.cpu", "dra.cpu", CPU_DEVICES, node="a")


def test_a_slice_qualifies_the_drivers_own_names_as_the_allocator_looks_them_up() -> None:
    [device] = slice_devices(CPU_SLICE)
    assert device.attributes == {"dra.cpu/numaNodeID": (0,), "dra.net/numaNode": (0,)}
    assert device.node == "a" and not device.lists


def test_claim_cpus_grouped_individual_and_unknown() -> None:
    assert claim_cpus(cpu_template("t", cpus="4")["spec"]["spec"]) == 4
    # No capacity asked: a whole device each (fillEmptyRequest); what a device holds only the slices say.
    individual = slice_devices(resource_slice("a-dra.cpu", "dra.cpu", [
        {"name": "cpudev000", "attributes": {"dra.net/numaNode": {"int": 0}}}], node="a"))
    assert claim_cpus(cpu_template("t", count=3)["spec"]["spec"]) is None  # never counted as one CPU each
    assert claim_cpus(cpu_template("t", count=3)["spec"]["spec"], individual) == 3
    assert claim_cpus(cpu_template("t")["spec"]["spec"], slice_devices(CPU_SLICE)) == 8  # the whole NUMA group
    assert claim_cpus(cpu_template("t", count=2)["spec"]["spec"], [*individual, *slice_devices(CPU_SLICE)]) is None
    # Not a whole CPU: the driver pins ConsumedCapacity.Value(), rounded up (dra_hooks.go:391-393); once read as
    # not known (None), which let a container stating 1 CPU pass silently.
    assert claim_cpus(cpu_template("t", cpus="1500m")["spec"]["spec"]) == 2
    assert claim_cpus(cpu_template("t", cpus="1500m", count=2)["spec"]["spec"]) == 4  # each device rounded
    gpu_only = {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}
    assert claim_cpus(gpu_only) == 0


def test_one_name_in_two_namespaces_with_two_answers_is_not_known() -> None:
    facts = dra_facts([cpu_template("t", cpus="2"), cpu_template("t", cpus="4"), cpu_template("u", cpus="1"),
                       cpu_template("u", cpus="1")], slices=False)
    assert facts.devices is None
    assert dict(facts.cpu_claims or {}) == {("ResourceClaimTemplate", "t"): None, ("ResourceClaimTemplate", "u"): 1}
    merged = merge(facts, DraFacts(cpu_claims={("ResourceClaimTemplate", "u"): 2}))
    assert merged is not None and (merged.cpu_claims or {})[("ResourceClaimTemplate", "u")] is None


def test_not_mirrored_is_silent_without_the_claims_and_for_a_claim_it_does_not_know() -> None:
    obj = pod(guaranteed("app", "1", "1Gi", claims=["cpus"]), claims={"cpus": "t"})
    assert "dra-cpu-not-mirrored" not in {r for r, _ in rules(obj, Facts())}
    facts = Facts(dra=dra_facts([cpu_template("other", cpus="2")]))
    assert "dra-cpu-not-mirrored" not in {r for r, _ in rules(obj, facts)}


def test_not_mirrored_names_the_claim_and_the_cpus_and_a_besteffort_container_too() -> None:
    facts = Facts(dra=dra_facts([cpu_template("t", cpus="2")]))
    found = rules(pod(container("app", claims=["cpus"]), claims={"cpus": "t"}), facts)
    mirrored = [m for r, m in found if r == "dra-cpu-not-mirrored"]
    assert len(mirrored) == 1 and "ask 2 CPUs of dra.cpu" in mirrored[0]
    assert "requests.cpu unset and limits.cpu unset" in mirrored[0] and "cpus (t)" in mirrored[0]


def test_pod_level_resources_carry_the_claimed_cpus_when_the_container_omits_them() -> None:
    facts = Facts(dra=dra_facts([cpu_template("t", cpus="2")]))
    enough = {"requests": {"cpu": "3", "memory": "2Gi"}, "limits": {"cpu": "3", "memory": "2Gi"}}
    short = {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}
    containers = [container("app", claims=["cpus"]), container("sidecar")]
    enough_pod = pod(*containers, claims={"cpus": "t"}, resources=enough)
    assert "dra-cpu-not-mirrored" not in {r for r, _ in rules(enough_pod, facts)}
    short_pod = pod(*containers, claims={"cpus": "t"}, resources=short)
    found = [m for r, m in rules(short_pod, facts) if r == "dra-cpu-not-mirrored"]
    assert len(found) == 1 and "spec.resources has requests.cpu 1 and limits.cpu 1" in found[0]


@given(claimed=st.integers(1, 64), stated=st.integers(1, 64))
def test_not_mirrored_fires_exactly_when_the_counts_differ(claimed: int, stated: int) -> None:
    facts = Facts(dra=dra_facts([cpu_template("t", cpus=str(claimed))]))
    found = rules(pod(guaranteed("app", str(stated), "1Gi", claims=["cpus"]), claims={"cpus": "t"}), facts)
    assert ("dra-cpu-not-mirrored" in {r for r, _ in found}) == (claimed != stated)


def gpu_and_cpus(constraints: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}},
                                 {"name": "cpus", "exactly": {"deviceClassName": "dra.cpu",
                                                              "capacity": {"requests": {"dra.cpu/cpu": "2"}}}}],
                    "constraints": constraints}}}


def test_unpaired_standard_numa_attribute_is_known_unallocatable_only_with_the_slices() -> None:
    claim = gpu_and_cpus([{"matchAttribute": "resource.kubernetes.io/numaNode"}])
    assert rules(claim, Facts()) == []  # a later driver may publish it: not known
    found = rules(claim, Facts(dra=dra_facts([CPU_SLICE])))
    assert [r for r, _ in found] == ["dra-cpu-unpaired"]
    assert "they carry dra.cpu/numaNodeID, dra.net/numaNode" in found[0][1]
    assert rules(gpu_and_cpus([{"matchAttribute": "dra.net/numaNode"}]), Facts(dra=dra_facts([CPU_SLICE]))) == []


def test_unpaired_replaces_claim_spread_for_cpu_pairings_and_is_advisory_with_warn() -> None:
    verdict = evaluate(gpu_and_cpus([]), Config(), Mode.ENFORCE)
    assert verdict.violations == []
    assert [v.rule for _, v in verdict.advisories] == ["dra-cpu-unpaired"]


def test_list_match_names_the_devices_publishing_several_nodes() -> None:
    gpus = resource_slice("a-gpu", "gpu.example.com", {"gpu-0": {"resource.kubernetes.io/numaNode": {"ints": [0, 1]}},
                                                       "gpu-1": {"resource.kubernetes.io/numaNode": {"ints": [1]}}},
                          node="a")
    dra = dra_facts([gpus])
    facts = Facts(dra=dra)
    assert [d.name for d in multi_valued(dra.devices or (), "resource.kubernetes.io/numaNode")] == ["gpu-0"]
    claim = gpu_and_cpus([{"matchAttribute": "resource.kubernetes.io/numaNode"}])
    found = rules(claim, facts)
    assert ("dra-numa-list-match", found[0][1]) in found
    assert "gpu.example.com device gpu-0 on node a (0, 1)" in found[0][1]
    assert rules(claim, Facts()) == []


def test_pinners_need_every_kubelet_for_the_cpu_manager_case() -> None:
    devices = dra_facts([CPU_SLICE])
    assert pinners(devices) is None
    who = pinners(DraFacts(devices.devices, None, {"a": "none", "b": None}))
    assert who is not None and who.dra == ("a",) and not who.complete
    exclusive = pod(guaranteed("app", "2", "1Gi"))
    facts = Facts(dra=DraFacts(devices.devices, None, {"a": "none", "b": None}))
    assert rules(exclusive, facts) == []  # b could pin through the CPU Manager: not known
    facts = Facts(dra=DraFacts(devices.devices, None, {"a": "none", "b": "none"}))
    assert [r for r, _ in rules(exclusive, facts)] == ["dra-cpu-pinner-mismatch"]


def node(name: str, **settings: Any) -> NodeConfig:
    return NodeConfig(NodeInfo(name, {}, "v1.36.3", True), pinning=read_configz(configz(**settings)))


def test_nodes_says_who_pins_and_flags_both() -> None:
    devices = dra_facts([CPU_SLICE, resource_slice("b-dra.cpu", "dra.cpu", CPU_DEVICES, node="b")]).devices
    report = build([node("a", cpuManagerPolicy="none"), node("b"), node("c"), node("d", cpuManagerPolicy="none")],
                   DEFAULT_POOL_LABELS, devices=devices)
    by = {r.name: r for r in report.results}
    assert [by[n].pinned_by for n in "abcd"] == ["dra.cpu", "static CPU Manager and dra.cpu", "static CPU Manager",
                                                "nobody"]
    assert by["a"].state == "pins" and not by["a"].problems  # cpuManagerPolicy none is what the driver needs
    assert by["b"].state == "cannot pin" and [p.rule for p in by["b"].problems] == [CONFLICT_RULE]
    assert by["c"].state == "pins" and by["d"].state == "cannot pin"
    assert report.exit_code == 1


def test_nodes_without_the_slices_does_not_say_nobody() -> None:
    assert pinned_by(read_configz(configz(cpuManagerPolicy="none")), None) == "?"
    assert pinned_by(read_configz(configz()), None) == "static CPU Manager, ?"
    report = build([node("a", cpuManagerPolicy="none")], DEFAULT_POOL_LABELS)
    assert report.results[0].state == "cannot pin"  # not known to be the driver's: the CPU Manager's verdict


def test_numa_auto_fits_no_cpus_of_a_dra_cpu_pod_its_memory_still() -> None:
    """Its nodes run the CPU Manager none (the driver's requirement), whose Topology Manager hint is none
    (policy_none.go GetTopologyHints): 48 CPUs on 32-CPU zones are no TopologyAffinityError. Memory is: where the
    zones publish it the Memory Manager is Static (GetAllocatableResources lists no memory under None)."""
    from tests.unit.test_dra import gpu_nodes
    from webhook.core.config import parse_config
    from webhook.core.facts import Memo

    def unfit(limits: dict[str, str], templates: list[dict[str, Any]]) -> list[str]:
        obj = pod(container(limits=limits))
        obj["spec"]["resourceClaims"] = [{"name": "c", "resourceClaimTemplateName": "cpus-48"}]
        obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": "c"}]
        verdict = evaluate(obj, parse_config({"policy": {"numa": "auto"}}), Mode.ENFORCE,
                           Facts(topology=gpu_nodes(), memo=Memo(), dra=dra_facts(templates, slices=False)))
        return [v.message for _, v in verdict.violations if v.rule == "numa-unfit"]

    cpus_48 = cpu_template("cpus-48", cpus="48")
    assert unfit({"cpu": "48", "memory": "1Gi"}, [cpus_48]) == []
    # the claim not known: judged as the static CPU Manager's, as before
    assert any("needs 48 CPUs on one NUMA node" in m for m in unfit({"cpu": "48", "memory": "1Gi"}, []))
    assert any("needs 300Gi memory" in m for m in unfit({"cpu": "48", "memory": "300Gi"}, [cpus_48]))


def test_pod_level_resources_are_not_refused_where_the_cpus_come_from_dra_cpu() -> None:
    """The driver's README prefers the pod-level block (Option A); its nodes run the CPU Manager none and the
    Memory Manager None, so nothing skips the Pod. Without the claims known (the policies' view) it is refused."""
    block = {"requests": {"cpu": "3", "memory": "2Gi"}, "limits": {"cpu": "3", "memory": "2Gi"}}
    obj = pod(container("app", claims=["cpus"]), container("sidecar"), claims={"cpus": "t"}, resources=block)
    assert "pod-level-resources" not in {r for r, _ in rules(obj, Facts(dra=dra_facts([cpu_template("t", cpus="2")])))}
    assert "pod-level-resources" in {r for r, _ in rules(obj, Facts())}
    gpu_only = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
                "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}}
    assert "pod-level-resources" in {r for r, _ in rules(obj, Facts(dra=dra_facts([gpu_only])))}


def test_a_pcie_root_match_over_socket_grouped_cpus_is_unknown_never_refused() -> None:
    """--group-by=socket: the CPU device's root list is the union over the socket, its CPUs packed from anywhere
    in it; on a socket of several NUMA nodes the GPU's root matches CPUs elsewhere (not in the slices: unknown)."""
    roots = {"resource.kubernetes.io/pcieRoot": {"strings": ["pci0000:00", "pci0000:40"]}}
    socket = resource_slice("a-dra.cpu", "dra.cpu", [{"name": "cpudevsocket000", "attributes": {
        "dra.cpu/socketID": {"int": 0}, **roots}, "capacity": {"dra.cpu/cpu": {"value": "64"}}}], node="a")
    numa = resource_slice("a-dra.cpu", "dra.cpu", [{"name": "cpudevnuma000", "attributes": {
        "dra.cpu/numaNodeID": {"int": 0}, "dra.net/numaNode": {"int": 0}, **roots},
        "capacity": {"dra.cpu/cpu": {"value": "32"}}}], node="a")
    claim = gpu_and_cpus([{"matchAttribute": "resource.kubernetes.io/pcieRoot"}])
    verdict = evaluate(claim, DENY, Mode.ENFORCE, Facts(dra=dra_facts([socket])))
    assert verdict.violations == []  # whether the socket spans several NUMA nodes is not known: never refused
    [(_, advice)] = verdict.advisories
    assert advice.rule == "dra-cpu-unpaired" and advice.message.startswith("unknown: ")
    assert "--group-by=numanode" in advice.message
    assert evaluate(claim, DENY, Mode.ENFORCE, Facts(dra=dra_facts([numa]))).advisories == []


def shared(obj: dict[str, Any]) -> list[str]:
    facts = Facts(dra=dra_facts([cpu_template("t", cpus="2"),
                                 {**cpu_template("c", cpus="2"), "kind": "ResourceClaim",
                                  "spec": cpu_template("c", cpus="2")["spec"]["spec"]}]))
    return [m for r, m in rules(obj, facts) if r == "dra-cpu-shared"]


def test_an_init_container_then_an_app_container_on_one_cpu_claim_is_not_exclusive_not_create_error() -> None:
    # containerd calls the driver's NRI StopContainer when the init container exits: the claim is freed and its
    # CPUs go back to the shared pool; the app container's CreateContainer pins it there without reserving them
    [found] = shared(pod(guaranteed("b", claims=["cpus"]), init=[guaranteed("a", claims=["cpus"])],
                         claims={"cpus": "t"}))
    assert "init container a, then to b" in found and "runs on CPUs others share" in found
    assert "CreateContainerError" not in found


def test_a_sidecar_runs_beside_what_follows_it_so_sharing_its_cpu_claim_fails() -> None:
    sidecar = {**guaranteed("s", claims=["cpus"]), "restartPolicy": "Always"}
    [found] = shared(pod(guaranteed("b", claims=["cpus"]), init=[sidecar], claims={"cpus": "t"}))
    assert "containers s, b, which run at once" in found and "CreateContainerError" in found
    # a sidecar started after a run-to-completion init container never runs beside it
    [after] = shared(pod(guaranteed("b"), init=[guaranteed("a", claims=["cpus"]), sidecar], claims={"cpus": "t"}))
    assert "init container a, then to s" in after
    # a sidecar started before it does
    [before] = shared(pod(guaranteed("b"), init=[sidecar, guaranteed("a", claims=["cpus"])], claims={"cpus": "t"}))
    assert "containers s, a, which run at once" in before


def test_a_daemonset_sharing_one_cpu_claim_leaves_its_pods_on_other_nodes_pending() -> None:
    template = {"metadata": {"labels": {"app": "x"}},
                "spec": {"resourceClaims": [{"name": "cpus", "resourceClaimName": "c"}],
                         "containers": [guaranteed("app", claims=["cpus"])]}}
    daemonset: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                                 "metadata": {"name": "d", "namespace": "ns"},
                                 "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template}}
    [found] = shared(daemonset)
    assert "stay Pending" in found and "CreateContainerError" not in found
    deployment = {**daemonset, "kind": "Deployment", "spec": {**daemonset["spec"], "replicas": 3}}
    [found] = shared(deployment)
    assert "its 3 replicas" in found and "CreateContainerError" in found


def capacity_slice(*capacities: Any) -> dict[str, Any]:
    """A dra.cpu slice of one device per capacity (``None``: no capacity, individual mode's one CPU)."""
    devices = [{"name": f"cpudevnuma00{i}", "attributes": {"numaNodeID": {"int": i}}}
               | ({} if c is None else {"capacity": c}) for i, c in enumerate(capacities)]
    return resource_slice("a-dra.cpu", "dra.cpu", devices, node="a")


@given(st.sampled_from([{"dra.cpu/cpu": {"value": "abc"}}, {"dra.cpu/cpu": {"value": "1500m"}}, "x",
                        {"dra.cpu/cpu": {"value": [1]}}, {"dra.cpu/cpu": "8"}, {"dra.cpu/cpu": {"value": "0"}}]))
def test_an_unreadable_cpu_capacity_is_a_group_of_unknown_size_never_one_cpu(capacity: Any) -> None:
    # every device unreadable: before, read as individual mode (one CPU a device) and so "mirrored" at cpu 1
    [device, _] = slice_devices(capacity_slice(capacity, capacity))
    assert device.cpu_capacity is None and device.cpu_capacity_unread
    facts = Facts(dra=dra_facts([cpu_template("t"), capacity_slice(capacity, capacity)]))
    assert facts.dra is not None and facts.dra.cpu_claims is not None
    assert facts.dra.cpu_claims[("ResourceClaimTemplate", "t")] is None
    obj = pod(guaranteed("app", "1", "1Gi", claims=["cpus"]), claims={"cpus": "t"})
    found = rules(obj, facts) + [(v.rule, v.message) for _, v in evaluate(obj, DENY, Mode.ENFORCE, facts).advisories]
    [unknown] = [m for r, m in found if r == "dra-cpu-not-mirrored"]
    assert unknown.startswith("unknown: ") and "cpudevnuma000" in unknown and "cannot be read" in unknown
    assert "dra-unaligned" not in {r for r, _ in found}  # its CPUs still come from the driver


def test_an_absent_capacity_is_still_individual_mode_and_a_read_one_a_group() -> None:
    facts = Facts(dra=dra_facts([cpu_template("t"), capacity_slice(None, None)]))
    assert facts.dra is not None and facts.dra.cpu_claims == {("ResourceClaimTemplate", "t"): 1}
    facts = Facts(dra=dra_facts([cpu_template("t"), capacity_slice({"dra.cpu/cpu": {"value": "4"}})]))
    assert facts.dra is not None and facts.dra.cpu_claims == {("ResourceClaimTemplate", "t"): 4}
    assert not [m for r, m in rules(pod(guaranteed("app", "4", "1Gi", claims=["cpus"]), claims={"cpus": "t"}),
                                    facts) if r == "dra-cpu-not-mirrored"]


def test_the_webhooks_cache_keeps_an_unreadable_capacity_apart_from_an_absent_one() -> None:
    kept = keep_slice(capacity_slice(None, {"dra.cpu/cpu": {"value": "abc"}}))
    assert [(d.cpu_capacity, bool(d.cpu_capacity_unread)) for d in kept] == [(None, False), (None, True)]


def test_specs_merged_with_a_files_are_not_the_stored_ones() -> None:
    stored = replace(dra_facts([cpu_template("t", cpus="2")]), specs_stored=True)
    alone = merge(stored, DraFacts(devices=()))
    assert alone is not None and alone.specs_stored
    mixed = merge(stored, dra_facts([cpu_template("u", cpus="2")]))
    assert mixed is not None and not mixed.specs_stored


FRACTIONAL_TEMPLATE = cpu_template("t", cpus="1500m")


def mirror_findings(obj: dict[str, Any], facts: Facts) -> list[str]:
    return [m for r, m in rules(obj, facts) if r == "dra-cpu-not-mirrored"]


@given(stated=st.sampled_from(["1", "1500m", "2", "3"]))
def test_a_fractional_cpu_capacity_is_refused_naming_the_whole_cpus_the_driver_pins(stated: str) -> None:
    # dra-driver-cpu v0.2.0 publishes dra.cpu/cpu without a requestPolicy: the allocator books 1500m as asked
    # (consumable_capacity.go:87-88) and the driver pins ConsumedCapacity.Value() = 2 CPUs (dra_hooks.go:392).
    # Before, the claim's CPUs read as None and every one of these Pods was admitted without a word about it.
    facts = Facts(dra=dra_facts([FRACTIONAL_TEMPLATE]))
    found = mirror_findings(pod(guaranteed("app", stated, "1Gi", claims=["cpus"]), claims={"cpus": "t"}), facts)
    [capacity] = [m for m in found if "request cpus asks dra.cpu/cpu: 1500m" in m]
    assert "dra.cpu pins 2" in capacity and "ask dra.cpu/cpu: 2," in capacity
    assert "requests.cpu and limits.cpu" in capacity and not capacity.startswith("unknown")
    # the container is judged against the 2 CPUs pinned, never the 1500m asked
    mirrored = [m for m in found if m is not capacity]
    assert (len(mirrored) == 1 and "ask 2 CPUs of dra.cpu" in mirrored[0]) == (stated != "2")
    assert len(mirrored) == (stated != "2")


def test_the_whole_twin_of_a_fractional_claim_is_admitted() -> None:
    facts = Facts(dra=dra_facts([cpu_template("t", cpus="2")]))
    assert not mirror_findings(pod(guaranteed("app", "2", "1Gi", claims=["cpus"]), claims={"cpus": "t"}), facts)
    assert not [r for r, _ in rules(pod(guaranteed("app", "2", "1Gi", claims=["cpus"]), claims={"cpus": "t"}),
                                    facts)]


@given(milli=st.integers(1, 64_000), count=st.integers(1, 4))
def test_a_capacity_is_pinned_rounded_up_and_refused_exactly_when_not_whole(milli: int, count: int) -> None:
    spec = cpu_template("t", cpus=f"{milli}m", count=count)["spec"]["spec"]
    assert claim_cpus(spec) == count * -(-milli // 1000)
    assert bool(fractional(spec)) == (milli % 1000 != 0)
    facts = Facts(dra=dra_facts([cpu_template("t", cpus=f"{milli}m")]))
    whole = -(-milli // 1000)
    found = mirror_findings(pod(guaranteed("app", str(whole), "1Gi", claims=["cpus"]), claims={"cpus": "t"}), facts)
    assert len(found) == (milli % 1000 != 0)
    assert all(f"ask dra.cpu/cpu: {whole}," in m for m in found)


def test_a_fractional_capacity_the_gate_drops_is_refused_once_as_unpinned() -> None:
    # 1.35, DRAConsumableCapacity off: the API server drops capacity, the driver pins nothing; not also "pins 2"
    config = parse_config({"policy": {"dra": "deny"}, "kubernetesVersion": "1.35"})
    facts = Facts(dra=dra_facts([FRACTIONAL_TEMPLATE]))
    found = [m for r, m in rules(pod(guaranteed("app", "2", "1Gi", claims=["cpus"]), claims={"cpus": "t"}), facts,
                                 config) if r == "dra-cpu-not-mirrored"]
    assert len(found) == 1 and "without it the driver pins no CPU" in found[0]
