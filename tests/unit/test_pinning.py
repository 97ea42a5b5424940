"""The node verdict on configz documents: every policy combination, the reserved-CPU forms kubelet computes,
malformed replies (a named error, never a traceback), and the pools whose nodes disagree."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.kubeletpinning import (
    CPU_POLICIES,
    MEMORY_POLICIES,
    TOPOLOGY_POLICIES,
    TOPOLOGY_SCOPES,
    ConfigzError,
    KubeletPinning,
    node_verdict,
    pool_mismatches,
    read_configz,
    valid_pool_label,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "configz"
ABSENT = object()


def configz(**settings: Any) -> str:
    """A configz reply as kubelet v1.36 serves it, with ``settings`` changed (``ABSENT`` leaves one out)."""
    config: dict[str, Any] = {"kind": "KubeletConfiguration", "apiVersion": "kubelet.config.k8s.io/v1beta1",
                              "cpuManagerPolicy": "static", "systemReserved": {"cpu": "100m", "memory": "500Mi"},
                              "memoryManagerPolicy": "Static",
                              "reservedMemory": [{"numaNode": 0, "limits": {"memory": "600Mi"}}],
                              "topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "container"}
    for key, value in settings.items():
        if value is ABSENT:
            config.pop(key, None)
        else:
            config[key] = value
    return json.dumps({"kubeletconfig": config})


def test_the_real_kubelets_configz_pins() -> None:
    """A reply captured from the node tests' kubelet v1.36.3 (tests/node), as the API server proxied it (its
    temporary folder renamed)."""
    body = (FIXTURES / "kubelet-v1.36.3.json").read_bytes()
    p = read_configz(body)
    assert (p.cpu_manager_policy, p.memory_manager_policy, p.topology_manager_policy, p.topology_manager_scope) == (
        "static", "Static", "single-numa-node", "container")
    assert p.reserved.count == 1 and p.reserved.system == "100m" and p.reserved.cpus is None
    assert [(r.numa_node, r.limits) for r in p.reserved_memory] == [(0, (("memory", "600Mi"),))]
    assert node_verdict(p).pins and node_verdict(p).notes == ()


@pytest.mark.parametrize(("cpu", "topology", "memory", "scope"), list(itertools.product(
    [*CPU_POLICIES, ABSENT], [*TOPOLOGY_POLICIES, ABSENT], [*MEMORY_POLICIES, ABSENT], [*TOPOLOGY_SCOPES, ABSENT])))
def test_every_policy_combination(cpu: Any, topology: Any, memory: Any, scope: Any) -> None:
    p = read_configz(configz(cpuManagerPolicy=cpu, topologyManagerPolicy=topology, memoryManagerPolicy=memory,
                             topologyManagerScope=scope))
    # kubelet's defaults for what the document leaves out (v1beta1 defaults.go).
    assert p.cpu_manager_policy == ("none" if cpu is ABSENT else cpu)
    assert p.topology_manager_policy == ("none" if topology is ABSENT else topology)
    assert p.memory_manager_policy == ("None" if memory is ABSENT else memory)
    assert p.topology_manager_scope == ("container" if scope is ABSENT else scope)
    verdict = node_verdict(p)
    static, aligned = p.cpu_manager_policy == "static", p.topology_manager_policy != "none"
    assert verdict.pins == (static and aligned)
    assert [x.rule for x in verdict.problems] == (["cpu-manager-none"] if not static else []) + (
        ["topology-manager-none"] if not aligned else [])
    assert any("best-effort" in n for n in verdict.notes) == (p.topology_manager_policy == "best-effort")
    assert any("memory is not pinned" in n for n in verdict.notes) == (static and p.memory_manager_policy != "Static")
    for problem in verdict.problems:  # each message names the setting and ends with the way out
        assert problem.setting in problem.message and "; set " in problem.message


@pytest.mark.parametrize(("settings", "count", "shown"), [
    ({"reservedSystemCPUs": "0-1"}, 2, "2 (reservedSystemCPUs 0-1)"),
    ({"reservedSystemCPUs": "0,2-3", "systemReserved": {"cpu": "5"}}, 3, "3 (reservedSystemCPUs 0,2-3)"),
    ({"systemReserved": {"cpu": "100m"}}, 1, "1 (systemReserved 100m)"),
    ({"systemReserved": {"cpu": "1100m"}}, 2, "2 (systemReserved 1100m)"),
    ({"systemReserved": {"cpu": "500m"}, "kubeReserved": {"cpu": "500m"}}, 1,
     "1 (systemReserved 500m + kubeReserved 500m)"),
    # kubelet adds the quantities as ParseQuantity keeps them (to nano) and rounds the sum, not each one.
    ({"systemReserved": {"cpu": "500.5m"}, "kubeReserved": {"cpu": "499.5m"}}, 1,
     "1 (systemReserved 500.5m + kubeReserved 499.5m)"),
    ({"systemReserved": {"cpu": "1n"}}, 1, "1 (systemReserved 1n)"),
    ({"systemReserved": ABSENT, "kubeReserved": {"cpu": "2"}}, 2, "2 (kubeReserved 2)"),
    ({"systemReserved": {"memory": "1Gi"}}, 0, "0"),
    ({"systemReserved": ABSENT, "reservedSystemCPUs": ""}, 0, "0"),
    ({"systemReserved": {"cpu": "0"}}, 0, "0 (systemReserved 0)"),
])
def test_reserved_cpus_as_kubelet_computes_them(settings: dict[str, Any], count: int, shown: str) -> None:
    p = read_configz(configz(**settings))
    assert p.reserved.count == count and p.reserved.describe() == shown
    rules = [x.rule for x in node_verdict(p).problems]
    assert rules == ([] if count else ["no-reserved-cpus"])


@pytest.mark.parametrize(("body", "named"), [
    (b"", "not JSON"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"<html>", "not JSON"),
    (b"[]", "a list, not an object"),
    (b'"kubeletconfig"', "a string, not an object"),
    (b"{}", "no kubeletconfig (it has nothing)"),
    (b'{"componentconfig": {}}', "no kubeletconfig (it has componentconfig)"),
    (b'{"kubeletconfig": []}', "kubeletconfig: expected an object, got a list"),
    (b'{"kubeletconfig": {"cpuManagerPolicy": NaN}}', "not JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (configz(kind="Pod").encode(), "kubeletconfig.kind: 'Pod' is not KubeletConfiguration"),
    (configz(apiVersion="kubelet.config.k8s.io/v2").encode(), "kubeletconfig.apiVersion"),
    (configz(cpuManagerPolicy=5).encode(), "kubeletconfig.cpuManagerPolicy: expected a string, got a number"),
    (configz(cpuManagerPolicy="Static").encode(), "kubeletconfig.cpuManagerPolicy: unknown value 'Static'"),
    (configz(topologyManagerPolicy="numa").encode(), "kubeletconfig.topologyManagerPolicy: unknown value"),
    (configz(topologyManagerScope="node").encode(), "kubeletconfig.topologyManagerScope: unknown value"),
    (configz(memoryManagerPolicy="static").encode(), "kubeletconfig.memoryManagerPolicy: unknown value"),
    (configz(cpuManagerPolicyOptions=["full-pcpus-only"]).encode(), "cpuManagerPolicyOptions: expected an object"),
    (configz(cpuManagerPolicyOptions={"full-pcpus-only": True}).encode(),
     "cpuManagerPolicyOptions.full-pcpus-only: expected a string, got a boolean"),
    (configz(reservedSystemCPUs="0-").encode(), "kubeletconfig.reservedSystemCPUs: '0-': an empty element"),
    (configz(reservedSystemCPUs=3).encode(), "kubeletconfig.reservedSystemCPUs: expected a string"),
    (configz(systemReserved={"cpu": "1K"}).encode(), "kubeletconfig.systemReserved.cpu: '1K' is not a quantity"),
    (configz(kubeReserved={"cpu": "-1"}).encode(), "kubeletconfig.kubeReserved.cpu: '-1' is negative"),
    (configz(systemReserved="100m").encode(), "kubeletconfig.systemReserved: expected an object, got a string"),
    (configz(reservedMemory={"numaNode": 0}).encode(), "kubeletconfig.reservedMemory: expected a list"),
    (configz(reservedMemory=[7]).encode(), "kubeletconfig.reservedMemory[0]: expected an object"),
    (configz(reservedMemory=[{"numaNode": True}]).encode(), "kubeletconfig.reservedMemory[0].numaNode"),
    (configz(reservedMemory=[{"numaNode": 1.0}]).encode(), "kubeletconfig.reservedMemory[0].numaNode"),
    (configz(reservedMemory=[{"numaNode": -1}]).encode(), "kubeletconfig.reservedMemory[0].numaNode"),
    (configz(featureGates={"PodLevelResourceManagers": "true"}).encode(), "kubeletconfig.featureGates"),
])
def test_malformed_replies_are_named(body: bytes, named: str) -> None:
    with pytest.raises(ConfigzError) as caught:
        read_configz(body)
    assert named in str(caught.value)


def test_absent_and_empty_settings_take_kubelets_defaults() -> None:
    p = read_configz('{"kubeletconfig": {"cpuManagerPolicy": "", "topologyManagerPolicy": null}}')
    assert (p.cpu_manager_policy, p.topology_manager_policy, p.memory_manager_policy) == ("none", "none", "None")


@pytest.mark.parametrize(("value", "noted"), [("true", True), ("True", True), ("1", True), ("t", True),
                                             ("false", False), ("0", False), ("yes", False)])
def test_full_pcpus_only_is_noted_when_strconv_parsebool_says_true(value: str, noted: bool) -> None:
    p = read_configz(configz(cpuManagerPolicyOptions={"full-pcpus-only": value}))
    assert any("SMTAlignmentError" in n for n in node_verdict(p).notes) == noted


def test_pod_level_resource_managers_gate_is_noted() -> None:
    p = read_configz(configz(featureGates={"PodLevelResourceManagers": True, "Other": False}))
    assert p.pod_level_resource_managers and any("podLevelResources: allow" in n for n in node_verdict(p).notes)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children,
                                                                                     max_size=3), max_leaves=12)
SETTING = st.sampled_from(["cpuManagerPolicy", "cpuManagerPolicyOptions", "reservedSystemCPUs", "systemReserved",
                           "kubeReserved", "memoryManagerPolicy", "reservedMemory", "topologyManagerPolicy",
                           "topologyManagerScope", "topologyManagerPolicyOptions", "featureGates", "kind",
                           "apiVersion"])


@given(st.dictionaries(SETTING, JSON | st.sampled_from([*CPU_POLICIES, *TOPOLOGY_POLICIES, "0-3", "100m"]),
                       max_size=6))
def test_any_settings_give_a_verdict_or_a_named_error(settings: dict[str, Any]) -> None:
    try:
        p = read_configz(json.dumps({"kubeletconfig": settings}))
    except ConfigzError as exc:
        assert exc.path == "" or exc.path.startswith("kubeletconfig")
        return
    verdict = node_verdict(p)
    assert verdict.pins == (p.cpu_manager_policy == "static" and p.reserved.count > 0
                            and p.topology_manager_policy != "none")


@given(st.binary(max_size=64) | JSON.map(lambda v: json.dumps(v).encode()))
def test_any_reply_is_read_or_refused_by_name(body: bytes) -> None:
    try:
        p = read_configz(body)
    except ConfigzError as exc:
        assert str(exc)
        return
    assert p.cpu_manager_policy in CPU_POLICIES


def _pinning(**settings: Any) -> KubeletPinning:
    return read_configz(configz(**settings))


def test_a_pool_whose_nodes_differ_is_named_with_who_holds_what() -> None:
    pool = {"node.kubernetes.io/instance-type": "c7i.8xlarge"}
    (mismatch,) = pool_mismatches([
        ("a", pool, _pinning()),
        ("b", pool, _pinning(topologyManagerPolicy="best-effort")),
        ("c", pool, _pinning()),
        ("d", {"node.kubernetes.io/instance-type": "m7i.large"}, _pinning(cpuManagerPolicy="none")),
    ])
    assert mismatch.pool == "node.kubernetes.io/instance-type=c7i.8xlarge" and mismatch.nodes == ("a", "b", "c")
    assert mismatch.differences == (("topologyManagerPolicy", (("best-effort", ("b",)),
                                                               ("single-numa-node", ("a", "c")))),)
    assert "topologyManagerPolicy (best-effort on b; single-numa-node on a, c)" in mismatch.message()


def test_pools_by_role_prefix_and_by_chosen_labels() -> None:
    nodes = [("a", {"node-role.kubernetes.io/inference": "", "team": "x"}, _pinning()),
             ("b", {"node-role.kubernetes.io/inference": "", "team": "x"},
              _pinning(cpuManagerPolicyOptions={"full-pcpus-only": "true"}))]
    (by_role,) = pool_mismatches(nodes)
    assert by_role.pool == "node-role.kubernetes.io/inference"
    assert by_role.differences[0][0] == "cpuManagerPolicyOptions"
    (by_team,) = pool_mismatches(nodes, ["team"])
    assert by_team.pool == "team=x"
    assert pool_mismatches(nodes, ["zone"]) == []


def test_nodes_that_agree_or_stand_alone_are_no_mismatch() -> None:
    pool = {"karpenter.sh/nodepool": "gpu"}
    # Reservations may differ with node size: not a pinning setting.
    assert pool_mismatches([("a", pool, _pinning()), ("b", pool, _pinning(systemReserved={"cpu": "2"}))]) == []
    assert pool_mismatches([("a", pool, _pinning(cpuManagerPolicy="none"))]) == []


@pytest.mark.parametrize(("label", "valid"), [
    ("node.kubernetes.io/instance-type", True), ("node-role.kubernetes.io/*", True), ("pool", True),
    ("a/b/c", False), ("*", False), ("/x", False), ("Upper.io/x", False), ("x/", False), ("", False),
    ("x" * 64, False)])
def test_pool_label_keys(label: str, valid: bool) -> None:
    assert valid_pool_label(label) == valid
