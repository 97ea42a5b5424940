"""Each rule on its own: what fires, on which container and field, and what the message tells."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import container, guaranteed, pod, rl
from webhook.core.config import NumaPolicy, Policy, parse_config
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.podspec import PodSpec, build_pod_spec
from webhook.core.rules import BY_ID, RULE_IDS, RULES, Violation, run_rules
from webhook.core.rules.base import Text


def violations(manifest: dict[str, Any], policy: Policy | None = None) -> list[Violation]:
    return run_rules(build_pod_spec(manifest["spec"], ("spec",)), policy or Policy())


def rules_of(manifest: dict[str, Any], policy: Policy | None = None) -> list[tuple[str, str]]:
    return [(v.rule, dotted(v.path)) for v in violations(manifest, policy)]


def test_rule_ids_are_stable() -> None:
    """Rule ids are a contract (scripts and reports filter on them): none is ever renamed or dropped. A new
    rule adds its own (its fixtures folder and the generated tables hold it: CONTRIBUTING.md)."""
    assert {"limits-missing", "requests-not-equal-limits", "invalid-quantity", "cpu-not-integer",
            "status-qos-class", "pod-level-resources", "smt-misaligned", "numa-unfit"} <= set(RULE_IDS)
    assert len(set(RULE_IDS)) == len(RULE_IDS)


def test_guaranteed_whole_cpu_pod_passes() -> None:
    assert violations(pod(guaranteed("a"), guaranteed("b", "4", "8Gi"))) == []


def test_spec_example_message() -> None:
    found = violations(pod(container("vllm", rl("1500m", "8Gi"), rl("1500m", "8Gi"))))
    assert [v.message for v in found] == [
        'container "vllm" (spec.containers[0]): cpu limit 1500m is not a whole number of CPUs; use 1 or 2']
    assert found[0].container == "vllm" and dotted(found[0].path) == "spec.containers[0].resources.limits.cpu"


def test_limits_missing_each_resource_and_zero_counts_as_missing() -> None:
    got = rules_of(pod(container("a", rl("1"), rl("", "0"))))
    assert got == [("limits-missing", "spec.containers[0].resources.limits.cpu"),
                   ("limits-missing", "spec.containers[0].resources.limits.memory")]
    # A request above a zero limit is refused by the API server (ValidateResourceRequirements: "must be less
    # than or equal to memory limit of 0"): invalid, not a missing limit to fill in.
    got = rules_of(pod(container("a", rl("1", "1Gi"), rl("", "0"))))
    assert got == [("limits-missing", "spec.containers[0].resources.limits.cpu"),
                   ("invalid-quantity", "spec.containers[0].resources.requests.memory")]
    message = violations(pod(container("a", rl("1", "1Gi"), rl("1")))) [0].message
    assert "no memory limit" in message and "set resources.limits.memory to 1Gi (its request)" in message


def test_init_containers_and_sidecars_count() -> None:
    side = container("istio-proxy", rl("1", "128Mi"), rl()) | {"restartPolicy": "Always"}
    got = rules_of(pod(guaranteed(), init=[side, container("setup", rl(), rl())]))
    assert ("limits-missing", "spec.initContainers[0].resources.limits.cpu") in got
    assert ("limits-missing", "spec.initContainers[1].resources.limits.memory") in got


def test_ephemeral_containers_do_not_count() -> None:
    assert violations(pod(guaranteed(), ephemeralContainers=[{"name": "dbg", "image": "busybox"}])) == []


def test_requests_not_equal_limits_numeric_compare() -> None:
    assert rules_of(pod(container("a", rl("2000m", "1024Mi"), rl("2", "1Gi")))) == []
    found = violations(pod(container("a", rl("1", "1Gi"), rl("2", "2Gi"))))
    assert [(v.rule, dotted(v.path)) for v in found] == [
        ("requests-not-equal-limits", "spec.containers[0].resources.requests.cpu"),
        ("requests-not-equal-limits", "spec.containers[0].resources.requests.memory")]
    assert "set resources.requests.cpu to 2" in found[0].message


def test_requests_equal_limits_after_defaulting() -> None:
    assert violations(pod(container("a", None, rl("2", "1Gi")))) == []


def test_invalid_quantity_suppresses_other_rules_for_that_resource() -> None:
    found = violations(pod(container("a", rl("1K", "1Gi"), rl("2.5", "1Gi"))))
    assert [(v.rule, dotted(v.path)) for v in found] == [
        ("invalid-quantity", "spec.containers[0].resources.requests.cpu")]
    assert '"1K"' in found[0].message and "not a valid Kubernetes quantity" in found[0].message


def test_invalid_limit_reported_once_not_for_its_defaulted_request() -> None:
    got = rules_of(pod(container("a", None, {"cpu": "0x10", "memory": "1Gi"})))
    assert got == [("invalid-quantity", "spec.containers[0].resources.limits.cpu")]


def test_negative_is_invalid() -> None:
    assert rules_of(pod(container("a", rl("-1", "1Gi"), rl("-1", "1Gi")))) == [
        ("invalid-quantity", "spec.containers[0].resources.limits.cpu"),
        ("invalid-quantity", "spec.containers[0].resources.requests.cpu")]


@pytest.mark.parametrize(("cpu", "fires"), [("2", False), ("2000m", False), ("4e0", False), ("40e-1", False),
                                            ("1500m", True), ("0.5", True), ("1.0001", True)])
def test_cpu_not_integer(cpu: str, fires: bool) -> None:
    got = rules_of(pod(container("a", rl(cpu, "1Gi"), rl(cpu, "1Gi"))))
    assert (("cpu-not-integer", "spec.containers[0].resources.limits.cpu") in got) is fires


def test_cpu_not_integer_uses_request_when_no_limit() -> None:
    got = rules_of(pod(container("a", rl("500m", "1Gi"), rl("", "1Gi"))))
    assert ("cpu-not-integer", "spec.containers[0].resources.requests.cpu") in got


def test_fractional_cpu_containers_allowed_but_still_equal() -> None:
    policy = parse_config({"policy": {"fractionalCPUContainers": ["istio-proxy"]}}).policy
    side = container("istio-proxy", rl("100m", "128Mi"), rl("200m", "128Mi"))
    got = rules_of(pod(guaranteed(), side), policy)
    assert got == [("requests-not-equal-limits", "spec.containers[1].resources.requests.cpu")]


def test_pod_level_resources_judged_in_place_of_containers() -> None:
    manifest = pod(container("a", rl(), rl()), resources={"requests": rl("2", "1Gi"),
                                                          "limits": rl("2500m", "1Gi")})
    got = rules_of(manifest)
    assert ("requests-not-equal-limits", "spec.resources.requests.cpu") in got
    assert ("cpu-not-integer", "spec.resources.limits.cpu") in got
    assert ("pod-level-resources", "spec.resources") in got
    assert not any(path.startswith("spec.containers") for _, path in got)
    allow = parse_config({"policy": {"podLevelResources": "allow"}}).policy
    assert "pod-level-resources" not in [rule for rule, _ in rules_of(manifest, allow)]


def test_smt_alignment() -> None:
    policy = Policy(smt_alignment=2)
    got = violations(pod(guaranteed("a", "3"), guaranteed("b", "4")), policy)
    assert [(v.rule, v.container) for v in got] == [("smt-misaligned", "a")]
    assert "use 2 or 4" in got[0].message
    assert violations(pod(guaranteed("a", "3"))) == []  # off by default


def test_numa_container_scope() -> None:
    policy = Policy(numa=NumaPolicy(scope="container", cpus=32_000, memory=240 * 2**30 * 1000,
                                    devices={"nvidia.com/gpu": 4000}))
    big = container("big", rl("40", "16Gi") | {"nvidia.com/gpu": "8"}, rl("40", "16Gi") | {"nvidia.com/gpu": "8"})
    found = violations(pod(guaranteed(), big), policy)
    assert [(v.rule, v.container) for v in found] == [("numa-unfit", "big")]
    assert "40 CPUs" in found[0].message and "8 nvidia.com/gpu" in found[0].message


def test_numa_pod_scope_uses_effective_total() -> None:
    policy = Policy(numa=NumaPolicy(scope="pod", cpus=8_000))
    # App containers 4+4 = 8 fit; an init container of 6 plus an earlier 4-CPU sidecar needs 10.
    side = guaranteed("side", "4") | {"restartPolicy": "Always"}
    found = violations(pod(guaranteed("a", "4"), init=[side, guaranteed("init", "6")]), policy)
    assert [v.rule for v in found] == ["numa-unfit"]
    fits = violations(pod(guaranteed("a", "4"), init=[guaranteed("init", "6")]), policy)
    assert fits == []


def test_config_defaults_are_the_documented_ones() -> None:
    """No file, an empty one and empty sections mean the defaults docs/contract.md lists, spelt out here (the
    comparison with ``Config()`` was true by construction: both are the dataclasses' defaults)."""
    raws: tuple[dict[str, Any] | None, ...] = (None, {}, {"policy": None, "mutation": {}, "exemptions": None})
    for raw in raws:
        config = parse_config(raw)
        assert config.policy.fractional_cpu_containers == frozenset()
        assert config.policy.pod_level_resources == "deny"
        assert config.policy.smt_alignment == 1
        assert config.policy.numa is None
        assert config.policy.dra == "warn"
        assert config.policy.device_classes is False
        assert config.workloads == ()
        assert config.mutation.set_limits_from_requests is True
        assert config.mutation.cpu_rounding == "none"
        assert (config.exemptions.namespaces, config.exemptions.usernames,
                config.exemptions.runtime_class_names) == (frozenset(), frozenset(), frozenset())


# ------------------------------------------------------------------------------------------ the rule unit

CONTRACT = Path(__file__).resolve().parents[2] / "docs" / "contract.md"


def test_each_rule_is_one_unit_listed_in_the_contract() -> None:
    """Id, default and order as docs/contract.md's rules table lists them; severity and CEL on the rule."""
    table = re.findall(r"^\| `([a-z0-9-]+)` \| (on|off) \|", CONTRACT.read_text(), re.M)
    assert [(r.id, "on" if r.default_on else "off") for r in RULES] == [
        (rule, default) for rule, default in table if rule in BY_ID]
    assert sorted(BY_ID) == sorted(rule for rule, _ in table)
    for rule in RULES:
        assert rule.severity in ("high", "medium"), rule.id
        # A rule without CEL says why: the API server refuses those objects itself, `qos-guard policy`
        # refuses a configuration that turns it on, or it judges kinds other than pod specs (claims), which the
        # admission policies do not match, or it judges only with cluster facts a policy cannot read (then it says
        # nothing without them).
        refusal = rule.policy_refusal
        assert rule.cel is not None or rule.id == "invalid-quantity" or bool(rule.kinds) or bool(rule.facts_only) or (
            refusal is not None and refusal.key.startswith("policy.") and not refusal.message.startswith(refusal.key))
        if rule.facts_only:
            assert rule.check(build_pod_spec(pod(guaranteed("a"))["spec"], ("spec",)), Policy(), Facts()) == []
    assert BY_ID["smt-misaligned"].enabled(Policy(smt_alignment=2))
    assert BY_ID["numa-unfit"].enabled(Policy(numa=NumaPolicy(cpus=1000)))


def test_off_rules_do_not_run() -> None:
    calls: list[str] = []

    def spy(pod_spec: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
        calls.append("ran")
        return []

    off = replace(BY_ID["smt-misaligned"], check=spy)
    with mock.patch("webhook.core.rules.RULES", (off,)):
        run_rules(build_pod_spec(pod(guaranteed("a"))["spec"], ("spec",)), Policy())
        assert calls == []
        run_rules(build_pod_spec(pod(guaranteed("a"))["spec"], ("spec",)), Policy(smt_alignment=2))
        assert calls == ["ran"]


@given(st.text(alphabet=st.sampled_from("ab'\\\" {}:;\n"), max_size=30))
def test_message_templates_quote_for_cel(literal: str) -> None:
    """Text.cel escapes what CEL's single-quoted strings need; holes stay expressions."""
    text = Text(literal.replace("{", "{{").replace("}", "}}") + "{x}")
    expr = text.cel(x="f.r")
    assert expr.endswith(" + f.r") or expr == "f.r"
    if literal:
        body = expr.removesuffix(" + f.r")
        assert body.startswith("'") and body.endswith("'")
        inner = body[1:-1]
        assert re.fullmatch(r"([^'\\]|\\['\\])*", inner), inner  # no bare quote or backslash
        assert re.sub(r"\\(.)", r"\1", inner) == text(x="")


def test_templates_render_the_engine_message() -> None:
    from webhook.core.rules.requests_not_equal_limits import DIFFERS, TO_LIMIT
    assert DIFFERS(label="L", resource="cpu", request="1", limit="2", mesh="",
                   advice=TO_LIMIT(resource="cpu", limit="2")) == (
        "L: cpu request 1 differs from its limit 2; set resources.requests.cpu to 2")
    assert DIFFERS.cel(label="f.b.label", resource="f.r", request="f.q", limit="f.l", mesh="m",
                       advice=TO_LIMIT.cel(resource="f.r", limit="f.l")) == (
        "f.b.label + ': ' + f.r + ' request ' + f.q + ' differs from its limit ' + f.l + "
        "'; ' + ('set resources.requests.' + f.r + ' to ' + f.l) + m")
