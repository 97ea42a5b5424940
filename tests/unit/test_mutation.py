"""The mutation: examples, and the properties docs/contract.md#modes-per-namespace-by-label promises, over
generated pod specs."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import container, pod, rl
from webhook.core.config import Config, parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.fieldpath import dotted
from webhook.core.mutation import Change, apply_changes, json_patch, plan_changes
from webhook.core.podspec import build_pod_spec
from webhook.core.quantity import QuantityError, parse_quantity
from webhook.core.resourceblock import COMPUTE
from webhook.core.rules import run_rules

CPUS = ["1", "2", "500m", "1500m", "2000m", "0.5", "3", "0", "4e0", "1.0001", "1K", "-1"]
MEMS = ["1Gi", "1024Mi", "512Mi", "2G", "0", "1e9", "1ki", "100"]


def resource_list(values: list[str]) -> st.SearchStrategy[dict[str, str]]:
    return st.fixed_dictionaries({}, optional={"cpu": st.sampled_from(values), "memory": st.sampled_from(MEMS)})


containers = st.builds(
    lambda name, req, lim, sidecar: container(name, req, lim) | ({"restartPolicy": "Always"} if sidecar else {}),
    st.sampled_from(["app", "istio-proxy", "init", "x"]), resource_list(CPUS), resource_list(CPUS), st.booleans())
pods = st.builds(lambda cs, inits: pod(*cs, init=inits), st.lists(containers, min_size=1, max_size=3),
                 st.lists(containers, max_size=2))
configs = st.builds(
    lambda limits, rounding, fractional: parse_config({"mutation": {"setLimitsFromRequests": limits,
                                                                    "cpuRounding": rounding},
                                                       "policy": {"fractionalCPUContainers": fractional}}),
    st.booleans(), st.sampled_from(["none", "up"]), st.sampled_from([[], ["istio-proxy"]]))


def milli(value: Any) -> int | None:
    try:
        return parse_quantity(str(value)).milli
    except QuantityError:
        return None


def changes_for(manifest: dict[str, Any], config: Config) -> list[Change]:
    return plan_changes(build_pod_spec(manifest["spec"], ("spec",), manifest.get("status")), config)


def mutate(manifest: dict[str, Any], config: Config) -> dict[str, Any]:
    return apply_changes(manifest, changes_for(manifest, config))  # type: ignore[no-any-return]


@given(pods, configs)
def test_patch_from_the_changes_applies_to_the_original(manifest: dict[str, Any], config: Config) -> None:
    changes = changes_for(manifest, config)
    assert jsonpatch.apply_patch(manifest, json_patch(manifest, changes)) == apply_changes(manifest, changes)


@given(pods, configs)
def test_mutating_twice_changes_nothing(manifest: dict[str, Any], config: Config) -> None:
    once = mutate(manifest, config)
    assert changes_for(once, config) == []


@given(pods, configs)
def test_limit_never_lowered_and_request_never_above_limit(manifest: dict[str, Any], config: Config) -> None:
    before = copy.deepcopy(manifest)
    mutated = mutate(manifest, config)
    assert manifest == before  # the input is not modified
    for group in ("containers", "initContainers"):
        for old, new in zip(manifest["spec"].get(group, []), mutated["spec"].get(group, []), strict=True):
            for resource in COMPUTE:
                old_limit = milli(old["resources"].get("limits", {}).get(resource))
                new_limit = milli(new["resources"].get("limits", {}).get(resource))
                new_request = milli(new["resources"].get("requests", {}).get(resource))
                old_request = milli(old["resources"].get("requests", {}).get(resource))
                if old_request is not None and old_limit is not None and old_request > old_limit >= 0:
                    # refused by the API server: reported invalid, and neither value is changed (a request is
                    # never lowered behind the user's back)
                    assert (new_request, new_limit) == (old_request, old_limit)
                    continue
                if old_limit is not None and old_limit > 0:
                    assert new_limit is not None and new_limit >= old_limit
                if new_request is not None and new_limit is not None and new_limit > 0 and new_request >= 0:
                    assert new_request <= new_limit


@given(pods, configs)
def test_mutated_spec_passes_unless_reported_unfixable(manifest: dict[str, Any], config: Config) -> None:
    (result,) = evaluate(manifest, config, Mode.ENFORCE).results
    mutated = mutate(manifest, config)
    left = {(v.rule, v.subject) for v in run_rules(build_pod_spec(mutated["spec"], ("spec",)), config.policy)}
    for finding in result.findings:
        key = (finding.violation.rule, finding.violation.subject)
        assert (key in left) is (not finding.fixable)
    # Nothing new appears: every remaining violation was there before the mutation.
    assert left <= {(v.rule, v.subject) for v in result.violations}


def _positive(resources: dict[str, Any], kind: str, resource: str) -> bool:
    value = milli(resources.get(kind, {}).get(resource))
    return value is not None and value > 0


@given(pods, configs)
def test_what_survives_mutation_is_explained_by_input_and_config(manifest: dict[str, Any], config: Config) -> None:
    """An oracle independent of the engine's own fixable bookkeeping: from the config and the original
    container alone, say which violations mutation may leave behind."""
    mutated = mutate(manifest, config)
    containers: dict[tuple[str | int, ...], Any] = {("spec", group, i): c for group in ("containers", "initContainers")
                  for i, c in enumerate(manifest["spec"].get(group, []))}
    for v in run_rules(build_pod_spec(mutated["spec"], ("spec",)), config.policy):
        assert v.rule != "requests-not-equal-limits", v  # a request is always set to its limit
        if v.rule == "limits-missing":
            original = containers[v.path[:3]]["resources"]
            resource = str(v.path[-1])
            # Only unfixable when there is no positive request to copy, or copying is switched off.
            assert not config.mutation.set_limits_from_requests or not _positive(original, "requests", resource)
        if v.rule == "cpu-not-integer" and config.mutation.cpu_rounding == "up":
            # Rounding raises the limit: it can only miss a container left without a positive cpu limit
            # (none written, and none taken from the request); that container is still limits-missing.
            original = containers[v.path[:3]]["resources"]
            assert not _positive(original, "limits", "cpu"), v
            assert not config.mutation.set_limits_from_requests or not _positive(original, "requests", "cpu"), v


def test_example_changes_and_messages() -> None:
    manifest = pod(container("vllm", rl("1", "8Gi"), rl("2", "8Gi")), container("side", rl("100m", "64Mi"), None))
    changes = changes_for(manifest, Config())
    assert [(dotted(c.path), c.new) for c in changes] == [
        ("spec.containers[0].resources.requests.cpu", "2"),
        ("spec.containers[1].resources.limits.cpu", "100m"),
        ("spec.containers[1].resources.limits.memory", "64Mi")]
    assert changes[0].message == 'container "vllm": set resources.requests.cpu to 2 (its limit): +1 CPU reserved ' \
                                 'exclusively'


def test_every_raised_request_says_what_it_costs() -> None:
    """Istio's injected proxy (100m/2000m cpu, 128Mi/1Gi memory): raising its requests to its limits takes 1.9
    CPUs out of the shared pool and 896Mi of memory; the change says so, not just "set to its limit"."""
    manifest = pod(container("vllm", rl("2", "8Gi"), rl("2", "8Gi")),
                   container("istio-proxy", rl("100m", "128Mi"), rl("2000m", "1Gi")))
    messages = [c.message for c in changes_for(manifest, Config())]
    assert messages == [
        'container "istio-proxy": set resources.requests.cpu to 2000m (its limit): +1.9 CPU reserved exclusively',
        'container "istio-proxy": set resources.requests.memory to 1Gi (its limit): +896Mi memory reserved']
    rounding = parse_config({"mutation": {"cpuRounding": "up"}})
    rounded = changes_for(pod(container("app", None, rl("1500m", "1Gi"))), rounding)
    # only a limit is set: the request defaults to it, so only the limit is written, and it carries the cost
    assert [c.path[-2:] for c in rounded] == [("limits", "cpu")]
    assert rounded[-1].message.endswith(": +0.5 CPU reserved exclusively (the request defaults to it)")
    assert rounded[-1].cost == ": +0.5 CPU reserved exclusively"
    # a fractional result is reserved, not pinned; a pod-level block is never pinned
    shared = changes_for(pod(container("side", rl("100m", "64Mi"), rl("500m", "64Mi"))), Config())
    assert shared[0].message.endswith(": +0.4 CPU reserved")


def test_cpu_rounding_up_raises_limit_and_request() -> None:
    config = parse_config({"mutation": {"cpuRounding": "up"}})
    manifest = pod(container("a", rl("1500m", "1Gi"), rl("1500m", "1Gi")))
    mutated = mutate(manifest, config)
    assert mutated["spec"]["containers"][0]["resources"] == {"requests": rl("2", "1Gi"), "limits": rl("2", "1Gi")}
    assert run_rules(build_pod_spec(mutated["spec"], ("spec",)), config.policy) == []


def test_no_limits_from_requests_when_disabled() -> None:
    config = parse_config({"mutation": {"setLimitsFromRequests": False}})
    assert changes_for(pod(container("a", rl("1", "1Gi"), None)), config) == []
