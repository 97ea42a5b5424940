"""The CPU Manager's policy options in the NUMA fit: which options each minor's kubelet starts with, what a
node's NodeResourceTopology attributes say of them, and what full-pcpus-only refuses (tests/fidelity's
``test_numa_fit_agrees_under_cpu_manager_policy_options`` holds all three to kubelet's own code)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import guaranteed, nrt, pod
from tests.unit.test_numa import llm
from webhook.core.config import parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts, Memo
from webhook.core.numa import fit_node
from webhook.core.numatopology import (
    CPU_MANAGER_OPTIONS,
    CPUManager,
    Topology,
    options_refusal,
    parse_cpu_manager,
    parse_nrt,
)
from webhook.core.podspec import build_pod_spec
from webhook.extender.fleet_rows import Columns

ZONE = {"cpu": "16", "memory": "64Gi"}


def smt_node(options: str, tpc: str = "2", siblings: str = "0", zones: int = 2) -> dict[str, Any]:
    obj = nrt("n", [ZONE] * zones)
    obj["attributes"] += [{"name": "cpuManagerPolicyOptions", "value": options},
                          {"name": "threadsPerCore", "value": tpc}, {"name": "reservedCPUSiblings", "value": siblings}]
    return obj


def test_the_attributes_read_and_what_is_not_known() -> None:
    cpu = parse_nrt(smt_node("full-pcpus-only=true,distribute-cpus-across-numa=false")).cpu_manager
    assert cpu == CPUManager(frozenset({"full-pcpus-only"}), 2, 0) and cpu.full_pcpus_only
    assert parse_nrt(nrt("n", [ZONE])).cpu_manager is None  # not published: not known
    for bad in ({"cpuManagerPolicyOptions": "made-up-option=true"}, {"threadsPerCore": "two"},
                {"cpuManagerPolicyOptions": "full-pcpus-only=maybe"}):
        attrs = {"cpuManagerPolicyOptions": "full-pcpus-only=true", "threadsPerCore": "2",
                 "reservedCPUSiblings": "0"} | bad
        assert parse_cpu_manager(attrs) is None, bad
    # Without SMT it still counts the free CPUs (an init container's, though reusable, are not free).
    single = parse_nrt(smt_node("full-pcpus-only=true", tpc="1")).cpu_manager
    assert single is not None and single.smt_refusal(3, 8) is None and single.smt_refusal(9, 8) is not None


def _fit(obj: dict[str, Any], cpu: str) -> Any:
    return fit_node(build_pod_spec(llm(cpu)["spec"], ("spec",)), parse_nrt(obj))


def test_full_pcpus_only_refuses_an_odd_count_on_smt_and_the_siblings_of_reserved_cpus() -> None:
    assert _fit(nrt("n", [ZONE, ZONE]), "3").fits  # no options published: as before
    odd = _fit(smt_node("full-pcpus-only=true"), "3")
    assert not odd.fits and odd.alone and odd.reason.startswith("SMTAlignmentError: 3 CPUs is not a multiple")
    assert _fit(smt_node("full-pcpus-only=true"), "4").fits
    assert _fit(smt_node("full-pcpus-only=false"), "3").fits
    # One NUMA node of 16 free CPUs, 2 of them siblings of reserved CPUs: 16 do not fit whole cores.
    lost = _fit(smt_node("full-pcpus-only=true", siblings="2", zones=1), "16")
    assert not lost.fits and "only 14 on whole free cores" in lost.reason
    assert _fit(smt_node("full-pcpus-only=true", siblings="2", zones=1), "14").fits


def test_numa_unfit_says_smt_alignment_and_the_way_out() -> None:
    topology = Topology(nodes={"n": {}}, topologies={"n": parse_nrt(smt_node("full-pcpus-only=true"))})
    config = parse_config({"policy": {"numa": "auto"}})
    found = evaluate(llm("3"), config, Mode.ENFORCE, Facts(topology=topology, memo=Memo())).violations
    (message,) = [v.message for _, v in found if v.rule == "numa-unfit"]
    assert "SMTAlignmentError: 3 CPUs is not a multiple of the node's 2 threads per core" in message
    assert "ask a multiple of 2" in message and "full-pcpus-only refuses it on node n (SMTAlignmentError)" in message
    assert "TopologyAffinityError" not in message, message  # the Topology Manager admits it: not its refusal


def test_the_extenders_rows_leave_full_pcpus_only_to_the_one_model() -> None:
    """The fleet's rows leave out a full-pcpus-only machine: its SMT refusal is a per-row step in Python (the one
    fit's ``_Rows.smt``), so such a node is judged one at a time (Judge.judged, fit_node: one row)."""
    columns = Columns()
    assert columns._machine(parse_nrt(smt_node("full-pcpus-only=true"))) is None
    assert columns._machine(parse_nrt(smt_node("distribute-cpus-across-numa=true"))) is not None


@pytest.mark.parametrize(("options", "minor", "policy", "alpha", "refused"), [
    ({"full-pcpus-only"}, 33, "single-numa-node", False, None),
    ({"align-by-socket"}, 38, "restricted", False, "align-by-socket is alpha in Kubernetes 1.38"),
    ({"align-by-socket"}, 38, "restricted", True, None),
    ({"align-by-socket"}, 38, "single-numa-node", True, "cannot be used with topologyManagerPolicy single-numa"),
    ({"prefer-align-cpus-by-uncorecache"}, 33, "best-effort", False, "alpha in Kubernetes 1.33"),
    ({"prefer-align-cpus-by-uncorecache"}, 34, "best-effort", False, None),  # beta, on by default
    ({"full-pcpus-only", "distribute-cpus-across-cores"}, 37, "restricted", True, "cannot be used together"),
    ({"full-pcpus-only", "distribute-cpus-across-numa"}, 38, "single-numa-node", False, None),
])
def test_which_options_kubelet_starts_with(options: set[str], minor: int, policy: str, alpha: bool,
                                           refused: str | None) -> None:
    said = options_refusal(frozenset(options), minor, policy, alpha)
    assert (said is None) == (refused is None) and (refused is None or refused in (said or "")), said


def test_the_none_policy_refuses_any_option_key() -> None:
    """NewNonePolicy errs on any key given, whatever its value (the differential hands "false" ones too: the
    proof against kubelet is there); static reads only the true ones."""
    said = options_refusal(frozenset({"full-pcpus-only"}), 36, "single-numa-node", cpu_policy="none")
    assert said is not None and "full-pcpus-only" in said
    assert options_refusal(frozenset(), 36, "single-numa-node", cpu_policy="none") is None


@given(st.frozensets(st.sampled_from(CPU_MANAGER_OPTIONS)), st.integers(33, 38))
def test_every_option_has_a_level_at_every_minor_and_the_alpha_gate_only_adds(options: frozenset[str],
                                                                              minor: int) -> None:
    """With the alpha gate on, kubelet refuses only what it refuses anyway with it off, less the gated ones."""
    with_gate = options_refusal(options, minor, "restricted", alpha_gate=True)
    if options_refusal(options, minor, "restricted") is None:
        assert with_gate is None


def _spread(options: str | None) -> list[str]:
    """The numa-unfit answer for a 20-CPU Pod on a best-effort node of two 16-CPU zones (admitted across them;
    restricted refuses it: its CPUs prefer both NUMA nodes, its 64Gi of memory one)."""
    obj = smt_node(options) if options is not None else nrt("n", [ZONE, ZONE])
    obj["attributes"][0]["value"] = "best-effort"
    topology = Topology(nodes={"n": {}}, topologies={"n": parse_nrt(obj)})
    config = parse_config({"policy": {"numa": "auto"}})
    found = evaluate(llm("20"), config, Mode.ENFORCE, Facts(topology=topology, memo=Memo()))
    return [v.message for _, v in (*found.violations, *found.advisories) if v.rule == "numa-unfit"]


@pytest.mark.parametrize(("options", "said"), [
    (None, "cpuManagerPolicyOptions unknown on node n (its NodeResourceTopology does not publish them"),
    ("full-pcpus-only=true", None),  # modelled there (20 CPUs: whole cores of 32 free, so admitted)
    ("align-by-socket=true,distribute-cpus-across-numa=true", None),  # modelled (core.numa_across)
    ("strict-cpu-reservation=true,prefer-align-cpus-by-uncorecache=true", None),  # no answer depends on them
    ("", None),  # known to be none
])
def test_admitted_across_numa_nodes_names_unknown_options(options: str | None, said: str | None) -> None:
    (message,) = _spread(options)
    assert message.startswith("best-effort on node n would admit it across NUMA nodes"), message
    if said is None:
        assert "cpuManagerPolicyOptions" not in message, message
    else:
        assert said in message, message


@given(st.frozensets(st.sampled_from(CPU_MANAGER_OPTIONS)))
def test_no_option_is_named_across_numa_nodes_where_the_options_are_known(options: frozenset[str]) -> None:
    """Every option is modelled where a Pod is admitted across NUMA nodes (align-by-socket from the zones'
    sockets; the others choose CPUs, or refuse as full-pcpus-only does), so none is named as a caveat."""
    text = ",".join(f"{o}=true" for o in sorted(options))
    (message,) = _spread(text)
    assert message.startswith("best-effort on node n would admit it across NUMA nodes"), message
    for option in CPU_MANAGER_OPTIONS:
        assert option not in message, (option, message)


def test_the_extender_gives_kubelets_smt_reason_not_a_numa_nodes_size() -> None:
    """A 3-CPU Pod on a full-pcpus-only SMT-2 node of two 16-CPU NUMA nodes: refused for the SMT alignment (it
    fits either NUMA node), unresolvable (not even on the empty node); without the option it is kept."""
    from webhook.extender.reservations import pod_demands, read_nrt
    from webhook.extender.verdicts import Judge

    wants = pod_demands(llm("3"))
    state = read_nrt(smt_node("full-pcpus-only=true"))
    assert wants is not None and state is not None
    verdict = Judge(wants).node("n", state)
    assert not verdict.kept and verdict.unresolvable
    assert "SMTAlignmentError: 3 CPUs is not a multiple of the node's 2 threads per core" in verdict.reason
    assert "on one NUMA node" not in verdict.reason, verdict.reason
    plain = read_nrt(smt_node(""))
    assert plain is not None and Judge(wants).node("n", plain).kept


# ---- full-pcpus-only where restricted and best-effort admit a Pod across NUMA nodes ----
# kubelet's Allocate (policy_static.go) runs enforceSMTAlignment for every container with exclusive CPUs, whatever
# the Topology Manager's hint: a count not a multiple of the threads per core, or above the node's shared pool
# less the reserved CPUs' cores (GetAvailablePhysicalCPUs: node-wide), is refused with SMTAlignmentError.

def _across_node(policy: str, zones: int, per_zone: int, tpc: int, siblings: int, scope: str = "container",
                 name: str = "n", memory: bool = True) -> dict[str, Any]:
    zone = {"cpu": str(per_zone), "memory": "64Gi"} if memory else {"cpu": str(per_zone)}
    obj = nrt(name, [zone] * zones, policy=policy, scope=scope)
    obj["attributes"] += [{"name": "cpuManagerPolicyOptions", "value": "full-pcpus-only=true"},
                          {"name": "threadsPerCore", "value": str(tpc)},
                          {"name": "reservedCPUSiblings", "value": str(siblings)}]
    return obj


def _expected_smt(cpus: list[int], free: int, tpc: int, siblings: int) -> int | None:
    """kubelet's answer, written out apart from the model: the first app container (in order) that
    enforceSMTAlignment refuses, each taking its CPUs from the node's shared pool; None: none."""
    for i, n in enumerate(cpus):
        if n % tpc or n > free - siblings:
            return i
        free -= n
    return None


def _messages(obj: dict[str, Any], pod_obj: dict[str, Any]) -> tuple[list[str], list[str]]:
    topology = Topology(nodes={"n": {}}, topologies={"n": parse_nrt(obj)})
    found = evaluate(pod_obj, parse_config({"policy": {"numa": "auto"}}), Mode.ENFORCE,
                     Facts(topology=topology, memo=Memo()))
    return ([v.message for _, v in found.violations if v.rule == "numa-unfit"],
            [v.message for _, v in found.advisories if v.rule == "numa-unfit"])


@given(scope=st.sampled_from(["container", "pod"]), memory=st.booleans(),
       zones=st.integers(2, 4), per_zone=st.integers(2, 24), tpc=st.sampled_from([1, 2, 4]),
       siblings=st.integers(0, 3), first=st.integers(1, 100), rest=st.lists(st.integers(1, 40), max_size=3))
def test_full_pcpus_only_refuses_across_numa_nodes_exactly_when_kubelets_allocate_does(
        scope: str, memory: bool, zones: int, per_zone: int, tpc: int, siblings: int, first: int,
        rest: list[int]) -> None:
    """best-effort, a Pod whose first container no NUMA node holds (so it is admitted across NUMA nodes, and every
    container after it is allocated from the whole node too): refused, with kubelet's reason, exactly where
    kubelet's Allocate refuses one of its containers (whatever NUMA nodes it would take); else admitted across NUMA
    nodes. In ``container`` scope on a node whose Memory Manager aligns memory, which NUMA nodes a later container's
    memory goes to turns on which CPUs the first took (not published): where the first did not take whole NUMA
    nodes and the second does not fail whatever its hint, not known, and said so. The extender's one-node path
    says the same (it keeps a node it does not know). restricted: test_numa.py's
    ``test_restricted_refuses_where_no_numa_nodes_suit_every_resource_alike`` and the differential."""
    policy = "best-effort"
    from webhook.extender.reservations import pod_demands, read_nrt
    from webhook.extender.verdicts import Judge

    first = per_zone + first  # more than any one NUMA node has
    cpus = [first, *rest]
    obj = _across_node(policy, zones, per_zone, tpc, siblings, scope, memory=memory)
    spec = pod(*(guaranteed(f"c{i}", str(n), "1Gi") for i, n in enumerate(cpus)), name="p", namespace="ai")
    refused_at = _expected_smt(cpus, zones * per_zone, tpc, siblings)
    refusals, advisories = _messages(obj, spec)
    wants, state = pod_demands(spec), read_nrt(obj)
    assert wants is not None and state is not None
    verdict = Judge(wants).node("n", state)
    # After the first container, each one's memory hint turns on which CPUs the first took: known where the first
    # took whole NUMA nodes' CPUs, or where a container fails whatever the hint; else not known, and said so (never
    # a verdict other than kubelet's).
    unknown = [a for a in advisories if a.startswith("whether best-effort on node n admits it is not known")]
    if unknown:
        assert memory and scope == "container" and rest and (refused_at is None or refused_at > 1), unknown
        assert not refusals and len(advisories) == 1 and verdict.kept, (advisories, verdict)
    elif refused_at is None:
        assert not refusals, refusals
        (advisory,) = advisories
        assert advisory.startswith(f"{policy} on node n would admit it across NUMA nodes"), advisory
        assert "SMTAlignmentError" not in advisory and "full-pcpus-only" not in advisory, advisory
        assert verdict.kept, verdict
    else:
        (message,) = refusals
        assert not advisories, advisories
        label = f'container "c{refused_at}" (spec.containers[{refused_at}]): SMTAlignmentError: {cpus[refused_at]} CPUs'
        assert label in message, message
        assert "full-pcpus-only refuses it on node n (SMTAlignmentError)" in message, message
        assert "would admit it across NUMA nodes" not in message, message
        assert not verdict.kept and f"SMTAlignmentError: {cpus[refused_at]} CPUs" in verdict.reason, verdict


def test_across_numa_nodes_the_free_cpus_are_the_whole_nodes_after_the_containers_before() -> None:
    """Two NUMA nodes of 16 CPUs, SMT-2, best-effort: 12 CPUs fit node 0, then 18 no NUMA node holds. kubelet
    allocates the 18 from the 20 left node-wide (admitted); 22 are more than the 20 left, so refused though the
    empty node has 32 (not alone: fewer before it would do)."""
    obj = _across_node("best-effort", 2, 16, 2, 0)
    refusals, advisories = _messages(obj, pod(guaranteed("a", "12", "1Gi"), guaranteed("b", "18", "1Gi")))
    assert not refusals and advisories and "would admit it across NUMA nodes" in advisories[0], advisories
    fit = fit_node(build_pod_spec(pod(guaranteed("a", "12", "1Gi"), guaranteed("b", "22", "1Gi"))["spec"],
                                  ("spec",)), parse_nrt(obj))
    assert not fit.fits and fit.failed is not None and fit.failed.container == "b", fit
    assert fit.reason.startswith("SMTAlignmentError: 22 CPUs but only 20 on whole free cores"), fit.reason
    assert not fit.alone
    # An init container's CPUs leave the shared pool (enforceSMTAlignment does not count them as free, though
    # the app container may reuse them): 20 after an init container of 20 on a 32-CPU node is refused.
    held = fit_node(build_pod_spec(pod(guaranteed("app", "20", "1Gi"), init=[guaranteed("init", "20", "1Gi")])["spec"],
                                   ("spec",)), parse_nrt(obj))
    assert not held.fits and held.reason.startswith("SMTAlignmentError: 20 CPUs but only 12"), held
    # Without the option 19 CPUs are admitted across NUMA nodes: an odd count is full-pcpus-only's refusal alone.
    plain = parse_nrt(nrt("n", [ZONE, ZONE], policy="best-effort"))
    across = fit_node(build_pod_spec(pod(guaranteed("a", "12", "1Gi"), guaranteed("b", "19", "1Gi"))["spec"],
                                     ("spec",)), plain)
    assert not across.fits and not across.kubelet_refuses and not across.unknown, across
    odd = fit_node(build_pod_spec(pod(guaranteed("a", "12", "1Gi"), guaranteed("b", "19", "1Gi"))["spec"],
                                  ("spec",)), parse_nrt(obj))
    assert odd.kubelet_refuses and odd.reason.startswith("SMTAlignmentError: 19 CPUs is not a multiple"), odd


def test_single_numa_node_still_refuses_what_no_numa_node_holds_before_any_smt_check() -> None:
    """single-numa-node refuses a container no NUMA node holds (TopologyAffinityError) before Allocate: the
    across-NUMA allocation applies only to the policies that admit it."""
    obj = _across_node("single-numa-node", 2, 16, 2, 0)
    fit = fit_node(build_pod_spec(llm("21")["spec"], ("spec",)), parse_nrt(obj))
    assert not fit.fits and not fit.reason, fit  # TopologyAffinityError, not kubelet's SMT reason


@pytest.mark.parametrize("policy", ["restricted", "best-effort"])
def test_an_odd_count_one_numa_node_holds_is_refused_under_the_policies_that_admit_across(policy: str) -> None:
    """3 CPUs fit either NUMA node, yet full-pcpus-only refuses them at Allocate: numa-unfit refuses (not 'admitted
    across NUMA nodes'), and so does the extender's one-node path (it kept every node of these policies before)."""
    from webhook.extender.reservations import pod_demands, read_nrt
    from webhook.extender.verdicts import Judge

    obj = _across_node(policy, 2, 16, 2, 0)
    refusals, advisories = _messages(obj, llm("3"))
    (message,) = refusals
    assert "SMTAlignmentError: 3 CPUs is not a multiple of the node's 2 threads per core" in message, message
    assert not advisories, advisories
    wants, state = pod_demands(llm("3")), read_nrt(obj)
    assert wants is not None and state is not None
    verdict = Judge(wants).node("n", state)
    assert not verdict.kept and verdict.unresolvable and "SMTAlignmentError" in verdict.reason, verdict
    one_thread = read_nrt(_across_node(policy, 2, 16, 1, 0))  # no SMT: 3 whole cores, kept
    assert one_thread is not None and Judge(wants).node("n", one_thread).kept


def test_one_caveat_names_every_node_whose_options_are_unknown() -> None:
    """Two best-effort nodes of different sizes, neither publishing its options: one sentence names both, so the
    answer's start (what the Pod needs) is not pushed out of an admission warning's 120 characters."""
    small, big = nrt("a", [ZONE, ZONE]), nrt("b", [{"cpu": "12", "memory": "64Gi"}] * 2)
    for obj in (small, big):
        obj["attributes"][0]["value"] = "best-effort"
    topology = Topology(nodes={"a": {}, "b": {}}, topologies={"a": parse_nrt(small), "b": parse_nrt(big)})
    found = evaluate(llm("20"), parse_config({"policy": {"numa": "auto"}}), Mode.ENFORCE,
                     Facts(topology=topology, memo=Memo()))
    (message,) = [v.message for _, v in (*found.violations, *found.advisories) if v.rule == "numa-unfit"]
    assert message.count("cpuManagerPolicyOptions unknown") == 1, message
    assert "cpuManagerPolicyOptions unknown on nodes a, b" in message, message


@pytest.mark.parametrize("bad", [
    {"name": ["threadsPerCore"], "value": "2"},  # a name that is no string
    {"name": "threadsPerCore", "value": "²"},  # a digit to str.isdigit(), not to int()
    {"name": "threadsPerCore", "value": "9" * 5000},  # over int()'s digit limit
])
def test_a_malformed_options_attribute_is_options_unknown_not_a_crash(bad: dict[str, Any]) -> None:
    obj = smt_node("full-pcpus-only=true")
    obj["attributes"] = [a for a in obj["attributes"] if a["name"] != "threadsPerCore"] + [bad]
    assert parse_nrt(obj).cpu_manager is None


def test_full_pcpus_only_refuses_on_a_none_node_too() -> None:
    """topologyManagerPolicy none gives no hints, yet kubelet's CPU Manager still runs full-pcpus-only's check in
    Allocate: 3 CPUs on an SMT-2 node are refused (SMTAlignmentError), 4 are not, and without SMT nothing is said."""
    refusals, advisories = _messages(_across_node("none", 2, 16, 2, 0), llm("3"))
    (message,) = refusals
    assert "SMTAlignmentError: 3 CPUs is not a multiple of the node's 2 threads per core" in message, message
    assert "full-pcpus-only refuses it on node n (SMTAlignmentError)" in message and not advisories, message
    assert _messages(_across_node("none", 2, 16, 2, 0), llm("4")) == ([], [])
    assert _messages(_across_node("none", 2, 16, 1, 0), llm("3")) == ([], [])


def test_on_a_node_in_use_the_memory_groups_of_other_pods_are_unknown_and_alone_means_the_empty_node() -> None:
    """The extender fits what is free now of a node (``fit_node``'s ``empty``): best-effort, 20 CPUs no NUMA node
    holds. Where other Pods hold memory on a NUMA node (how the Memory Manager grouped it is not published) the
    answer is not known; where only CPUs are short now, kubelet refuses it, but not alone (the empty node holds it:
    preemption can help)."""
    empty = parse_nrt(nrt("n", [ZONE, ZONE], policy="best-effort"))
    used = parse_nrt(nrt("n", [{"cpu": "16", "memory": "32Gi"}, ZONE], policy="best-effort"))
    spec = build_pod_spec(llm("20")["spec"], ("spec",))
    assert "other Pods' memory" in fit_node(spec, used, empty).unknown
    busy = parse_nrt(nrt("n", [{"cpu": "8", "memory": "64Gi"}, {"cpu": "8", "memory": "64Gi"}], policy="best-effort"))
    short = fit_node(spec, busy, empty)
    assert short.kubelet_refuses and short.reason.startswith("UnexpectedAdmissionError: 20 CPUs asked, 16 free")
    assert not short.alone, short
    assert fit_node(spec, busy).alone  # judged as an empty node of its own, nothing less would do
