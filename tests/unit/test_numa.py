"""``policy.numa: auto``: reading NodeResourceTopology objects, the fit over the nodes a Pod can land on, and
what numa-unfit says (tests/fidelity/test_topology.py holds the fit to kubelet's own Topology Manager)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import GPU, container, nrt, pod
from webhook.admission.review import ENDPOINTS, Review, review_decision
from webhook.core.config import AUTO, ConfigError, parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts, Memo
from webhook.core.kubeversion import resolve
from webhook.core.numa import fit_cluster, fit_node
from webhook.core.numatopology import NodeTopology, Topology, TopologyError, parse_nrt, shapes_of
from webhook.core.podspec import build_pod_spec
from webhook.core.scheduling import Taint, Toleration, node_constraints, taints, tolerations
from webhook.policies.generate import PolicyError, render

SOCKET = {"cpu": "32", "memory": "256Gi", GPU: "4"}
SMALL = {"cpu": "8", "memory": "32Gi"}


def cluster(**policies: str) -> Topology:
    """The article's machine (two sockets of 32 CPUs, 256Gi and 4 GPUs) and a small node."""
    big = parse_nrt(nrt("gpu-1", [SOCKET, SOCKET], policies.get("gpu-1", "single-numa-node")))
    small = parse_nrt(nrt("small-1", [SMALL], policies.get("small-1", "single-numa-node")))
    return Topology(nodes={"gpu-1": {"pool": "gpu"}, "small-1": {"pool": "small"}},
                    topologies={"gpu-1": big, "small-1": small})


def llm(cpu: str, gpu: str = "0", **spec: Any) -> dict[str, Any]:
    """This file's workload: an LLM server's Pod asking ``cpu`` CPUs (and ``gpu`` GPUs) and 64Gi in limits."""
    limits = {"cpu": cpu, "memory": "64Gi"} | ({GPU: gpu} if gpu != "0" else {})
    return pod(container("vllm", limits=limits), name="llm", namespace="ai", **spec)


def judge(obj: dict[str, Any], topology: Topology, mode: Mode = Mode.ENFORCE) -> tuple[list[str], list[str]]:
    config = parse_config({"policy": {"numa": "auto"}})
    verdict = evaluate(obj, config, mode, Facts(topology=topology, memo=Memo()))
    return ([v.message for _, v in verdict.violations if v.rule == "numa-unfit"],
            [v.message for _, v in verdict.advisories])


# ---- reading the objects ----

def test_attributes_zones_and_amounts_are_read() -> None:
    topo = parse_nrt(nrt("n", [SOCKET, SMALL], "single-numa-node", "pod"))
    assert (topo.name, topo.policy, topo.scope) == ("n", "single-numa-node", "pod")
    assert [z.numa for z in topo.zones] == [0, 1]
    assert topo.zones[0].allocatable == {"cpu": 32_000, "memory": 256 * 2**30 * 1000, GPU: 4000}


def test_the_deprecated_topology_policies_field_is_understood() -> None:
    obj = nrt("n", [SMALL])
    del obj["attributes"]
    obj["topologyPolicies"] = ["SingleNUMANodePodLevel"]
    topo = parse_nrt(obj)
    assert (topo.policy, topo.scope) == ("single-numa-node", "pod")


def test_only_numa_zones_count_and_their_names_give_their_ids() -> None:
    obj = nrt("n", [SMALL, SMALL])
    obj["zones"][0]["name"] = "node-3"
    obj["zones"].append({"name": "socket-0", "type": "Socket", "resources": [{"name": "cpu", "capacity": "99",
                                                                              "allocatable": "99", "available": "9"}]})
    topo = parse_nrt(obj)
    assert [z.numa for z in topo.zones] == [1, 3]


def with_parents(obj: dict[str, Any], parents: list[Any]) -> dict[str, Any]:
    """``obj`` whose i-th Node zone has ``parents[i]`` as its parent (None: no parent field), with a Socket zone
    for each socket named."""
    for zone, parent in zip(obj["zones"], parents, strict=True):
        if parent is not None:
            zone["parent"] = parent
    obj["zones"] += [{"name": p, "type": "Socket"} for p in sorted({p for p in parents if isinstance(p, str)})]
    return obj


@pytest.mark.parametrize(("parents", "sockets"), [
    (["socket-0", "socket-0"], (0, 0)),  # one socket of two NUMA nodes
    (["socket-0", "socket-1"], (0, 1)),
    (["socket-7", "socket-3"], (7, 3)),  # ids as sysfs's physical_package_id says them
    ([None, None], None),  # NFD publishes no parents: not known
    (["socket-0", None], None),  # one zone without: the map is not known at all
    (["socket-0", "socket-x"], None),  # malformed: not a socket
    (["socket-0", "node-1"], None),
    (["socket-0", "socket-01x"], None),
    (["socket-0", 1], None),  # the CRD's parent is a string; anything else is no parent
    (["socket-0", "socket-" + "9" * 5000], None),  # bounded: never int() of 5,000 digits
])
def test_the_socket_of_each_numa_node_is_its_zones_parent(parents: list[Any], sockets: tuple[int, ...] | None) -> None:
    topo = parse_nrt(with_parents(nrt("n", [SMALL, SMALL]), parents))
    assert topo.sockets == sockets
    assert [z.numa for z in topo.zones] == [0, 1]  # Socket zones are no NUMA nodes
    if sockets is not None:
        assert tuple(z.socket for z in topo.zones) == sockets


def test_nodes_of_different_socket_layouts_are_judged_apart() -> None:
    one = parse_nrt(with_parents(nrt("a", [SMALL, SMALL]), ["socket-0", "socket-0"]))
    two = parse_nrt(with_parents(nrt("b", [SMALL, SMALL]), ["socket-0", "socket-1"]))
    same = parse_nrt(with_parents(nrt("c", [SMALL, SMALL]), ["socket-0", "socket-0"]))
    unknown = parse_nrt(nrt("d", [SMALL, SMALL]))
    assert one.key == same.key and len({one.key, two.key, unknown.key}) == 3
    shapes = shapes_of(Topology(nodes={"a": {}, "b": {}, "c": {}, "d": {}},
                                topologies={"a": one, "b": two, "c": same, "d": unknown}))
    assert sorted(g.nodes for g in shapes.shapes) == [("a", "c"), ("b",), ("d",)]
    # what is free of a node keeps its sockets (the extender's and the fleet's views)
    assert one.with_zones(one.zones).sockets == (0, 0)


@pytest.mark.parametrize(("cpus", "capacity"), [
    ("4", 4000),  # no cpu listed (NFD: something else allocatable, no CPU): its CPUs are all reserved
    ("0", None),  # a NUMA node without CPUs: nothing to say
    ("four", None), ("9" * 5000, None), ("²", None), (4, None),  # not a count: read as NFD's object alone
])
def test_a_zones_cpus_attribute_is_its_reserved_cpus_where_nfd_lists_none(cpus: Any, capacity: int | None) -> None:
    obj = nrt("n", [{"example.com/gpu": "1"}, SMALL])
    for zone in obj["zones"]:
        zone["attributes"] = [{"name": "other", "value": "1"}, {"name": "cpus", "value": cpus}]
    topo = parse_nrt(obj)
    assert topo.zones[0].capacity.get("cpu") == capacity and "cpu" not in topo.zones[0].allocatable
    assert topo.zones[1].capacity["cpu"] == topo.zones[1].allocatable["cpu"] == 8000  # listed: as listed
    assert (topo.key == parse_nrt(nrt("n", [{"example.com/gpu": "1"}, SMALL])).key) is (capacity is None)


def test_a_zone_name_of_5000_digits_is_no_numa_node_id() -> None:
    obj = nrt("n", [SMALL, SMALL])
    obj["zones"][1]["name"] = "node-" + "1" * 5000  # int() would refuse it with a ValueError, no TopologyError
    assert [z.numa for z in parse_nrt(obj).zones] == [0, 1]  # its index, as for any name that is not node-<id>


def test_an_unknown_policy_leaves_the_node_unknown() -> None:
    topo = parse_nrt(nrt("n", [SMALL], policy="static"))
    assert topo.policy == ""
    found = fit_cluster(build_pod_spec(llm("64")["spec"], ("spec",)),
                        Topology(nodes={"n": {}}, topologies={"n": topo}), exhaustive=True)
    assert found.unknown == ("n",) and not found.unfit


def test_a_bad_quantity_names_its_field() -> None:
    obj = nrt("n", [{"cpu": "lots"}])
    with pytest.raises(TopologyError, match=r"zones\[0\].resources\[0\].capacity"):
        parse_nrt(obj)


# ---- the verdict ----

def test_the_articles_machine() -> None:
    assert judge(llm("16", "2"), cluster()) == ([], [])
    denied, _ = judge(llm("48", "5"), cluster())
    assert denied == ['container "vllm" (spec.containers[0]): needs 48 CPUs and 5 nvidia.com/gpu on one NUMA node; '
                      "the largest zone of any matching node has 32 CPUs and 4; single-numa-node refuses it on node "
                      "gpu-1 (TopologyAffinityError); ask for at most 32 CPUs and 4 nvidia.com/gpu"]
    # small-1 has no GPU at all: the scheduler never puts a GPU Pod there, so it is not a matching node.
    assert judge(llm("48"), cluster())[0][0].startswith(
        'container "vllm" (spec.containers[0]): needs 48 CPUs on one NUMA node; the largest zone of any matching '
        "node has 32 CPUs; single-numa-node refuses it on nodes gpu-1, small-1")


def test_a_node_selector_changes_the_answer() -> None:
    assert judge(llm("16", nodeSelector={"pool": "gpu"}), cluster()) == ([], [])
    denied, _ = judge(llm("16", nodeSelector={"pool": "small"}), cluster())
    assert len(denied) == 1 and "needs 16 CPUs and 64Gi memory on one NUMA node" in denied[0]
    assert "on node small-1" in denied[0]
    assert judge(llm("16", nodeSelector={"pool": "none"}), cluster()) == ([], [])  # lands nowhere: not ours to say


def test_required_node_affinity_and_node_name_are_honoured() -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["gpu"]}]}]}}}
    assert judge(llm("16", affinity=affinity), cluster())[0]
    assert judge(llm("16", nodeName="small-1"), cluster())[0]
    assert judge(llm("16", nodeName="gpu-1"), cluster()) == ([], [])


def tainted(*taints: Taint) -> Topology:
    """``cluster()`` with the big node tainted (a dedicated GPU pool)."""
    base = cluster()
    return Topology(nodes=base.nodes, topologies=base.topologies, taints={"gpu-1": taints})


GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


def test_a_node_whose_taint_the_pod_does_not_tolerate_is_not_one_it_can_land_on() -> None:
    # 16 CPUs fit gpu-1's zones but not small-1's: without a toleration the scheduler puts it on small-1, where
    # kubelet refuses it.
    denied, _ = judge(llm("16"), tainted(GPU_TAINT))
    assert len(denied) == 1 and "single-numa-node refuses it on node small-1" in denied[0]
    for toleration in ({"key": "nvidia.com/gpu", "operator": "Exists"},
                       {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                       {"operator": "Exists"}):
        assert judge(llm("16", tolerations=[toleration]), tainted(GPU_TAINT)) == ([], []), toleration
    for toleration in ({"key": "nvidia.com/gpu", "value": "absent"},
                       {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"},
                       {"key": "other", "operator": "Exists"}):
        assert judge(llm("16", tolerations=[toleration]), tainted(GPU_TAINT))[0], toleration
    # PreferNoSchedule only scores: the node stays one the Pod can land on.
    assert judge(llm("16"), tainted(Taint("nvidia.com/gpu", "", "PreferNoSchedule"))) == ([], [])


def test_a_pod_named_to_its_node_only_minds_no_execute_taints() -> None:
    """spec.nodeName skips the scheduler; kubelet's own admission checks only NoExecute taints."""
    assert judge(llm("16", nodeName="gpu-1"), tainted(GPU_TAINT)) == ([], [])
    named = node_constraints(llm("16", nodeName="gpu-1")["spec"])
    assert named.allows("gpu-1", {}, (GPU_TAINT,))
    assert not named.allows("gpu-1", {}, (Taint("maintenance", "", "NoExecute"),))
    assert not node_constraints(llm("16")["spec"]).allows("gpu-1", {}, (GPU_TAINT,))


def test_comparison_tolerations_compare_integers() -> None:
    taint = Taint("example.com/generation", "5", "NoSchedule")
    assert Toleration("example.com/generation", "Gt", "4").tolerates(taint)
    assert not Toleration("example.com/generation", "Gt", "5").tolerates(taint)
    assert Toleration("example.com/generation", "Lt", "6").tolerates(taint)
    for value in ("+4", "04", "4.0", "", "9223372036854775808"):  # IsDecimalInteger and ParseInt refuse these
        assert not Toleration("example.com/generation", "Gt", value).tolerates(taint), value
    assert not Toleration("example.com/generation", "Gt", "4").tolerates(Taint("example.com/generation", "x",
                                                                                "NoSchedule"))


@pytest.mark.parametrize(("minor", "compares"), [("1.33", False), ("1.34", False), ("1.35", True), ("1.37", True)])
def test_comparison_tolerations_are_unknown_operators_before_1_35(minor: str, compares: bool) -> None:
    # Toleration.ToleratesTaint up to 1.34 knows Equal and Exists only (the oracle at v1.33.13 said so: a Pod
    # tolerating example.com/generation Lt 12 is kept off a node tainted example.com/generation=-2).
    spec = {"containers": [{"name": "c", "image": "x"}],
            "tolerations": [{"key": "example.com/generation", "operator": "Lt", "value": "12"}]}
    taint = (Taint("example.com/generation", "-2", "NoSchedule"),)
    built = build_pod_spec(spec, ("spec",), kube=resolve(minor))
    assert built.node_constraints.allows("gpu-a", {}, taint) is compares


def test_taints_and_tolerations_are_read_from_any_shape() -> None:
    assert taints([{"key": "a", "effect": "NoSchedule"}, {"key": 1, "effect": "NoSchedule"}, "x", None]) == (
        Taint("a", "", "NoSchedule"),)
    assert tolerations([{"key": "a"}, {"operator": ["Exists"]}, 3]) == (Toleration("a"),)
    assert tolerations("all") == () and taints({"key": "a"}) == ()


def test_a_node_without_a_topology_object_is_unknown_not_unfit() -> None:
    topology = cluster()
    assert topology.nodes is not None
    unknown = Topology(nodes={**topology.nodes, "new-1": {"pool": "gpu"}}, topologies=topology.topologies)
    assert judge(llm("48"), unknown) == ([], [])
    assert judge(llm("48"), Topology()) == ([], [])  # nothing known at all


def test_restricted_refuses_where_no_numa_nodes_suit_every_resource_alike() -> None:
    """kubelet's HintMerger marks a merged hint preferred only where every provider prefers the same NUMA nodes:
    48 CPUs prefer both NUMA nodes of gpu-1, 64Gi of memory one; restricted refuses it (TopologyAffinityError), and
    small-1's 8 CPUs cannot hold 48 on any policy (the CPU Manager's Allocate fails)."""
    denied, advised = judge(llm("48"), cluster(**{"gpu-1": "restricted", "small-1": "best-effort"}))
    assert advised == [] and len(denied) == 1
    assert "restricted refuses it on node gpu-1 (TopologyAffinityError" in denied[0]
    assert "kubelet fails it on node small-1 at allocation (UnexpectedAdmissionError: 48 CPUs asked, 8 free" \
        in denied[0]


def test_a_refusal_the_messages_do_not_expect_says_its_own_policy_and_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only restricted's TopologyAffinityError is told as "restricted refuses it"; any other refusal (none today:
    best-effort and none refuse only at allocation) names its own policy and kubelet's reason, never restricted's."""
    def refused_on_best_effort(*args: Any, **kwargs: Any) -> Any:
        fit = fit_cluster(*args, **kwargs)
        odd = replace(fit.refused[0], policy="best-effort", reason="TopologyAffinityError: as kubelet says")
        return replace(fit, refused=(odd,))

    monkeypatch.setattr("webhook.core.rules.numa_unfit.fit_cluster", refused_on_best_effort)
    denied, _ = judge(llm("48"), cluster(**{"gpu-1": "restricted", "small-1": "best-effort"}))
    assert "best-effort refuses it on node gpu-1 (TopologyAffinityError: as kubelet says)" in denied[0]
    assert "restricted refuses it" not in denied[0]


def test_restricted_and_best_effort_admit_across_numa_nodes_where_kubelet_does() -> None:
    """Where every resource prefers both NUMA nodes (memory past one NUMA node's 256Gi too), restricted admits the
    Pod across them; best-effort admits even where they prefer apart. Reported, never refused; none aligns nothing."""
    wide = llm("48")
    wide["spec"]["containers"][0]["resources"]["limits"]["memory"] = "300Gi"
    denied, advised = judge(wide, cluster(**{"gpu-1": "restricted", "small-1": "restricted"}))
    assert denied == [] and len(advised) == 1
    assert "restricted on node gpu-1 would admit it across NUMA nodes" in advised[0]
    denied, advised = judge(llm("48"), cluster(**{"gpu-1": "best-effort", "small-1": "best-effort"}))
    assert denied == [] and "best-effort on node gpu-1 would admit it across NUMA nodes" in advised[0]
    assert judge(llm("48"), cluster(**{"gpu-1": "none", "small-1": "none"})) == ([], [])


def test_advisories_are_warnings_in_admission_never_a_refusal() -> None:
    config = parse_config({"policy": {"numa": "auto"}})
    facts = Facts(topology=cluster(**{"gpu-1": "best-effort", "small-1": "best-effort"}))
    review = Review("admission.k8s.io/v1", "u1", "Pod", "", "CREATE", "ai", "llm", None, False, llm("48"))
    decision = review_decision(review, ENDPOINTS["/validate"], config, facts)
    assert decision.allowed and decision.warnings and decision.warnings[0].startswith("numa-unfit: ")


def test_containers_are_placed_in_order_on_what_the_earlier_ones_left() -> None:
    two = llm("20")
    two["spec"]["containers"].append({"name": "b", "image": "x", "resources": {"limits": {"cpu": "20",
                                                                                          "memory": "1Gi"}}})
    assert judge(two, cluster()) == ([], [])  # one per socket on gpu-1
    two["spec"]["containers"].append({"name": "c", "image": "x", "resources": {"limits": {"cpu": "20",
                                                                                          "memory": "1Gi"}}})
    denied, _ = judge(two, cluster())
    assert denied and 'container "c" (spec.containers[2]): needs 20 CPUs and 1Gi memory on one NUMA node once ' \
                      "the containers before it are placed" in denied[0]


def test_pod_scope_sums_the_containers() -> None:
    pod_scope = Topology(nodes={"n": {}}, topologies={"n": parse_nrt(nrt("n", [SOCKET, SOCKET], scope="pod"))})
    two = llm("20")
    two["spec"]["containers"].append({"name": "b", "image": "x", "resources": {"limits": {"cpu": "20",
                                                                                          "memory": "1Gi"}}})
    denied, _ = judge(two, pod_scope)
    assert denied and denied[0].startswith("pod (spec): in total needs 40 CPUs on one NUMA node;")


def test_burstable_pods_align_only_their_devices() -> None:
    burstable = llm("48", "2")
    burstable["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1", "memory": "1Gi", GPU: "2"}
    assert judge(burstable, cluster()) == ([], [])  # no exclusive CPUs to align: only the GPUs
    burstable["spec"]["containers"][0]["resources"]["limits"][GPU] = burstable["spec"]["containers"][0][
        "resources"]["requests"][GPU] = "5"
    assert "needs 5 nvidia.com/gpu on one NUMA node" in judge(burstable, cluster())[0][0]


def test_workload_templates_are_judged_as_their_pods() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"template": {"spec": llm("48", nodeSelector={"pool": "gpu"})["spec"]}}}
    denied, _ = judge(deployment, cluster())
    assert denied and "on node gpu-1" in denied[0]


# ---- configuration ----

def test_auto_is_a_configuration_form_of_numa() -> None:
    assert parse_config({"policy": {"numa": "auto"}}).policy.numa is AUTO
    with pytest.raises(ConfigError, match=r"policy\.numa: expected a mapping or 'auto'"):
        parse_config({"policy": {"numa": "yes"}})


def test_admission_policies_refuse_auto() -> None:
    with pytest.raises(PolicyError, match="numa: auto reads the cluster"):
        render(parse_config({"policy": {"numa": "auto"}}), "all", "qos-guard", "v1")


# ---- node constraints: never a crash on any shape (the differential test checks the answers) ----

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=3), max_leaves=12)
_keys = st.sampled_from(["nodeName", "nodeSelector", "affinity", "nodeAffinity", "nodeSelectorTerms",
                         "requiredDuringSchedulingIgnoredDuringExecution", "matchExpressions", "matchFields",
                         "key", "operator", "values"])


@given(st.dictionaries(_keys, _json | st.dictionaries(_keys, _json, max_size=3), max_size=4),
       st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3))
def test_node_constraints_read_any_shape(spec: dict[str, Any], labels: dict[str, str]) -> None:
    assert node_constraints(spec).allows("n", labels) in (True, False)


_nrt_keys = st.sampled_from(["metadata", "name", "attributes", "value", "topologyPolicies", "zones", "type",
                             "resources", "capacity", "allocatable", "available", "Node", "node-0", "cpu", "parent",
                             "Socket", "socket-0", "cpus", "4"])
_nrt_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6) | _nrt_keys,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_nrt_keys, inner, max_size=4),
                           max_leaves=20)


_resource = st.fixed_dictionaries({}, optional={"name": _nrt_values | st.just("cpu"), "capacity": _nrt_values,
                                                "allocatable": _nrt_values | st.just("4")})
_zone = st.fixed_dictionaries({}, optional={"name": _nrt_values | st.just("node-1"), "type": st.just("Node") |
                                            _nrt_values, "resources": st.lists(_resource | _nrt_values, max_size=3)
                                            | _nrt_values, "parent": st.just("socket-1") | _nrt_values,
                                            "attributes": st.just([{"name": "cpus", "value": "2"}]) | _nrt_values})


@given(st.fixed_dictionaries({"metadata": st.just({"name": "n"}) | _nrt_values}, optional={
    "attributes": st.lists(st.dictionaries(_nrt_keys, _nrt_values, max_size=2) | _nrt_values, max_size=3)
    | _nrt_values, "topologyPolicies": st.lists(_nrt_values | st.just("SingleNUMANodePodLevel"), max_size=2)
    | _nrt_values, "zones": st.lists(_zone | _nrt_values, max_size=3) | _nrt_values}))
def test_any_object_is_read_or_refused_by_name(obj: dict[str, Any]) -> None:
    """What the API server holds under the CRD's loose schema: read, or a TopologyError naming the field."""
    try:
        topo = parse_nrt(obj)
    except TopologyError:
        return
    assert isinstance(topo.zones, tuple)
    assert topo.sockets is None or len(topo.sockets) == len(topo.zones)


def test_memory_manager_none_publishes_no_memory_and_memory_is_no_constraint() -> None:
    """With memoryManagerPolicy None kubelet's GetAllocatableResources has no memory blocks, so NFD (and the
    agent) publish no memory in any zone: a Guaranteed Pod's memory is then no hint (kubelet aligns its CPUs and
    devices only), never a zone too small for it. Where some zone publishes memory, it still counts."""
    from webhook.core.numa import fit_node
    from webhook.core.podspec import build_pod_spec

    none = parse_nrt(nrt("mm-none", [{GPU: "1"}, {"cpu": "1"}]))
    small = llm("1")
    spec = build_pod_spec(small["spec"], ("spec",))
    assert fit_node(spec, none).fits and fit_node(spec, none).placed == {"vllm": 1}
    assert not fit_node(build_pod_spec(llm("1", "1")["spec"], ("spec",)), none).fits  # CPU and GPU apart
    static = parse_nrt(nrt("mm-static", [{GPU: "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}]))
    assert not fit_node(spec, static).fits  # 64Gi on a 1Gi zone: the Memory Manager refuses it


def test_where_no_matching_node_publishes_memory_the_refusal_does_not_name_it() -> None:
    """The refusal names only what kubelet aligns there: on Memory Manager None nodes (no memory in any zone) a
    Pod's 64Gi is no part of why it does not fit, and 'ask for at most 0 memory' would send its owner astray."""
    none = parse_nrt(nrt("mm-none", [{GPU: "1"}, {"cpu": "1"}]))
    denied, _ = judge(llm("1", "1"), Topology(nodes={"mm-none": {}}, topologies={"mm-none": none}))
    # The GPU and the free CPU are on different NUMA nodes: that is the reason, and memory is not named.
    assert denied == ['container "vllm" (spec.containers[0]): needs 1 CPU and 1 nvidia.com/gpu on one NUMA node; a '
                      "matching node has each, never all on one NUMA node (node mm-none: node-0 has 0 CPUs and 1; "
                      "node-1 has 1 CPU and 0); kubelet aligns them only where they share one NUMA node; "
                      "single-numa-node refuses it on node mm-none (TopologyAffinityError)"]
    static = parse_nrt(nrt("mm-static", [{GPU: "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}]))
    denied, _ = judge(llm("1"), Topology(nodes={"mm-static": {}}, topologies={"mm-static": static}))
    assert "64Gi memory" in denied[0] and "1Gi" in denied[0], denied  # where memory is published, it counts


@pytest.mark.parametrize(("minor", "fits"), [("1.33", True), ("1.34", True), ("1.35", True), ("1.36", False),
                                              ("1.37", False)])
def test_a_zero_device_request_needs_a_node_with_the_devices_from_1_36(minor: str, fits: bool) -> None:
    # kubelet 1.36's device manager hints only the NUMA nodes with the resource's devices, even for a request of 0
    # (generateDeviceTopologyHints over deviceNUMANodes); before, every NUMA node holds 0 devices.
    topo = parse_nrt(nrt("n", [{"cpu": "16", "memory": "128Gi"}, {"cpu": "4", "memory": "128Gi", GPU: "2"}]))
    zero = llm("8")
    zero["spec"]["containers"][0]["resources"]["limits"][GPU] = "0"
    fit = fit_node(build_pod_spec(zero["spec"], ("spec",), kube=resolve(minor)), topo)
    assert (fit.failed is None) is fits
    if fits:
        assert fit.placed == {"vllm": 0}


@pytest.mark.parametrize("minor", ["1.33", "1.35", "1.36", "1.37"])
def test_a_zero_device_request_follows_the_device_an_init_container_left(minor: str) -> None:
    # generateDeviceTopologyHints drops every mask missing a device left for reuse, whatever the request: a
    # shared-pool init container's GPU on NUMA node 1 ties the app's `0` GPUs to node 1 at every minor, where
    # its 8 CPUs do not fit (found by the topology differential at v1.33.13 to v1.35.4).
    topo = parse_nrt(nrt("n", [{"cpu": "16", "memory": "128Gi"}, {"cpu": "4", "memory": "128Gi", GPU: "2"}]))
    tied = llm("8")
    tied["spec"]["containers"][0]["resources"]["limits"][GPU] = "0"
    tied["spec"]["initContainers"] = [{"name": "warm", "image": "x",
                                       "resources": {"limits": {"cpu": "250m", "memory": "1Gi", GPU: "1"}}}]
    fit = fit_node(build_pod_spec(tied["spec"], ("spec",), kube=resolve(minor)), topo)
    assert fit.failed is not None
    # With room on the init container's NUMA node the app goes there, not to the first node with CPUs.
    roomy = parse_nrt(nrt("n", [{"cpu": "16", "memory": "128Gi"}, {"cpu": "16", "memory": "128Gi", GPU: "2"}]))
    fit = fit_node(build_pod_spec(tied["spec"], ("spec",), kube=resolve(minor)), roomy)
    assert fit.failed is None and fit.placed.get("vllm") == 1, fit.placed


def test_the_nrt_s_cpu_pinner_is_the_node_s_cpu_manager_policy() -> None:
    """``cpuPinner`` (the agent's): ``cpu-manager`` is the static policy, ``none`` and ``dra.cpu`` the none policy,
    whose CPUs the fit does not align: a Pod whose 4 CPUs no NUMA node holds fits there on its memory alone, and
    is refused where the policy is static or not published (judged as static)."""
    zones = [{"name": f"node-{i}", "type": "Node", "resources": [
        {"name": "cpu", "capacity": "2", "allocatable": "2", "available": "2"},
        {"name": "memory", "capacity": "8Gi", "allocatable": "8Gi", "available": "8Gi"}]} for i in range(2)]

    def topo(pinner: str | None) -> NodeTopology:
        attrs = [{"name": "topologyManagerPolicy", "value": "single-numa-node"}]
        if pinner is not None:
            attrs += [{"name": "cpuPinner", "value": pinner}, {"name": "cpuPinnerSource", "value": "x"}]
        return parse_nrt({"metadata": {"name": "n"}, "attributes": attrs, "zones": zones})

    spec = build_pod_spec({"containers": [{"name": "app", "resources": {
        "limits": {"cpu": "4", "memory": "1Gi"}, "requests": {"cpu": "4", "memory": "1Gi"}}}]}, ("spec",))
    got = {p: (topo(p).cpu_policy, fit_node(spec, topo(p)).fits) for p in ("cpu-manager", "none", "dra.cpu", None)}
    assert got == {"cpu-manager": ("static", False), "none": ("none", True), "dra.cpu": ("none", True),
                   None: (None, False)}, got
    assert topo("none").key != topo(None).key  # nodes of either policy are not one shape


def test_a_none_cpu_manager_node_is_said_spread_without_an_options_caveat() -> None:
    """restricted, memory that no NUMA node holds: on a node whose CPU Manager is none the Pod's CPUs add no hint,
    the Memory Manager's two-NUMA hint is preferred, and kubelet admits it across NUMA nodes; no
    cpuManagerPolicyOptions caveat is said there (the none policy takes none). Judged as static (cpuPinner not
    published), the CPUs' one-NUMA hint and the memory's two-NUMA one do not merge: TopologyAffinityError."""
    zones = [{"name": f"node-{i}", "type": "Node", "resources": [
        {"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"},
        {"name": "memory", "capacity": "8Gi", "allocatable": "8Gi", "available": "8Gi"}]} for i in range(2)]

    def said(pinner: str | None) -> list[tuple[str, bool]]:
        attrs = [{"name": "topologyManagerPolicy", "value": "restricted"}]
        attrs += [{"name": "cpuPinner", "value": pinner}] if pinner else []
        topology = Topology(nodes={"n": {}}, topologies={"n": parse_nrt(
            {"metadata": {"name": "n"}, "attributes": attrs, "zones": zones})})
        limits = {"cpu": "2", "memory": "12Gi"}
        manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "app", "image": "x", "resources": {"limits": limits, "requests": limits}}]}}
        verdict = evaluate(manifest, parse_config({"policy": {"numa": "auto"}}), Mode.ENFORCE,
                           Facts(topology=topology))
        return [(v.message, v.advisory) for _, v in (*verdict.violations, *verdict.advisories)
                if v.rule == "numa-unfit"]

    ((none, advisory),) = said("none")
    assert advisory and "would admit it across NUMA nodes" in none and "cpuManagerPolicyOptions" not in none, \
        none
    assert "2 CPUs" not in none  # its CPUs are not what fails to fit
    ((static, advisory),) = said(None)
    assert not advisory and "TopologyAffinityError" in static, static
