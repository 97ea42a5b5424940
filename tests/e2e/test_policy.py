"""``qos-guard policy`` on a real kube-apiserver that has nothing else registered (no webhook): the generated
ValidatingAdmissionPolicy / MutatingAdmissionPolicy objects apply cleanly, the webhook's end-to-end scenarios
hold, and a three-way differential test (engine, webhook, API server) agrees on thousands of objects."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings

from tests import waiting
from tests.binaries import binary, kube_version
from tests.e2e.conftest import CHART, TOKEN, Cluster, compliant_pod, control_plane, violating_pod
from tests.e2e.policy_sample import (
    KINDS,
    ServerJudge,
    Tally,
    Verdict,
    WebhookJudge,
    build,
    engine_verdict,
    fixture_objects,
    objects,
)
from tests.helpers import admission_review
from webhook.core.config import Config, parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.kubeversion import resolve
from webhook.core.quantity import QuantityError, quantity_from_value
from webhook.core.refusal import LINE_BREAK
from webhook.core.rules import BY_ID, RULE_IDS
from webhook.policies.generate import KNOWN_DIFFERENCES
from webhook.serving.app import create_app

NAMESPACES = {"enforce": "pol-enforce", "mutate": "pol-mutate", "warn": "pol-warn", "plain": "pol-plain"}
CUSTOM = {  # the second half of the differential sample runs under this configuration
    "policy": {"fractionalCPUContainers": ["istio-proxy"], "smtAlignment": 2, "podLevelResources": "allow",
               "dra": "deny"},
    "mutation": {"cpuRounding": "up"},
    "exemptions": {"runtimeClassNames": ["kata"]},
}


@pytest.fixture(scope="module")
def pcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A second control plane with only the generated policies (the session cluster may carry the webhook)."""
    with control_plane(tmp_path_factory.mktemp("policy-control-plane")) as c:
        c.require("admissionregistration.k8s.io/v1", "mutatingadmissionpolicies",
                  "the generated admission policies (qos-guard policy: MutatingAdmissionPolicy v1)")
        c.namespace("qos-guard")
        for name in ("kata", "gvisor"):
            c.kubectl("apply", "-f", "-", check=True, stdin={
                "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name},
                "handler": name})
        for mode, ns in NAMESPACES.items():
            c.namespace(ns, None if mode == "plain" else mode)
        yield c


def apply_policies(cluster: Cluster, config: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    path = cluster.folder / "policy-config.yaml"
    path.write_text(yaml.safe_dump(config or {}))
    # the server's own minor, as the chart writes it from .Capabilities
    out = cluster.qos_guard("policy", "--config", str(path), "--kubernetes-version", kube_version())
    assert out.returncode == 0, out.stderr
    applied = cluster.kubectl("apply", "-f", "-", stdin=out.stdout)
    assert applied.returncode == 0, applied.stderr
    return applied



def wait_for(what: str, check: Any, timeout: float = 60) -> None:
    """Policies and their parameters reach the admission plugin through informers: poll until they act."""
    waiting.eventually(f"{what} in effect", check, timeout, every=0.3)


def istio_probe() -> dict[str, Any]:
    pod = compliant_pod("probe")
    pod["spec"]["containers"][0]["name"] = "istio-proxy"
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "500m", "memory": "1Gi"}}
    return pod


def dry_run(cluster: Cluster, ns: str, obj: dict[str, Any]) -> Any:
    return cluster.kubectl("apply", "--dry-run=server", "-n", ns, "-f", "-", stdin=obj)


def use_config(cluster: Cluster, config: dict[str, Any] | None) -> None:
    apply_policies(cluster, config)
    fractional = "istio-proxy" in ((config or {}).get("policy") or {}).get("fractionalCPUContainers", [])
    wait_for("the configuration", lambda: (dry_run(cluster, NAMESPACES["enforce"], istio_probe()).returncode == 0)
             == fractional)


@pytest.fixture(scope="module")
def policies(pcluster: Cluster) -> Cluster:
    applied = apply_policies(pcluster)
    assert "created" in applied.stdout
    wait_for("the enforce policy", lambda: dry_run(pcluster, NAMESPACES["enforce"],
                                                   violating_pod("probe")).returncode != 0)
    wait_for("the mutate policy", lambda: dry_run(pcluster, NAMESPACES["mutate"],
                                                  violating_pod("probe")).returncode != 0)
    return pcluster


def test_generated_policies_apply_cleanly(policies: Cluster) -> None:
    again = apply_policies(policies)
    assert "configured" not in again.stdout, again.stdout  # re-applying the same output is a no-op
    vaps = policies.get("validatingadmissionpolicies")["items"]
    names = sorted(v["metadata"]["name"] for v in vaps)
    assert names == ["qos-guard-enforce", "qos-guard-mutate", "qos-guard-namespaces", "qos-guard-warn"]
    maps = policies.get("mutatingadmissionpolicies.v1.admissionregistration.k8s.io")["items"]
    assert [m["metadata"]["name"] for m in maps] == ["qos-guard-mutate"]


def test_enforce_refuses_with_the_webhook_message(policies: Cluster) -> None:
    ns = NAMESPACES["enforce"]
    proc = policies.kubectl("apply", "-n", ns, "-f", "-", stdin=violating_pod("frac"))
    assert proc.returncode != 0
    assert "ValidatingAdmissionPolicy 'qos-guard-enforce'" in proc.stderr
    assert ('Pod "frac" would not get exclusive CPUs (Guaranteed QoS, whole CPUs) from kubelet: cpu-not-integer: '
            'container "app" (spec.containers[0]): cpu limit 1500m is not a whole number of CPUs; use 1 or 2'
            ) in proc.stderr, proc.stderr
    assert policies.kubectl("get", "pod", "frac", "-n", ns).returncode != 0
    ok = policies.kubectl("apply", "-n", ns, "-f", "-", stdin=compliant_pod("ok"))
    assert ok.returncode == 0, ok.stderr
    assert policies.get("pod", "ok", "-n", ns)["status"]["qosClass"] == "Guaranteed"


def test_the_api_server_refuses_in_the_webhook_words(policies: Cluster) -> None:
    """The generated policy's refusal is the webhook's for the same Pod, head and findings in the same order,
    on one line (webhook/core/refusal.py words both; the API server discards a message with a line break)."""
    pod = violating_pod("alike")
    pod["spec"]["containers"].append({"name": "side", "image": "x", "resources": {
        "requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}})
    app = create_app(Config(), kubernetes=policies.facts().kubernetes).test_client()
    answer = app.post("/validate", data=json.dumps(admission_review(pod, namespace=NAMESPACES["enforce"])),
                      content_type="application/json").get_json()["response"]
    head, *lines = answer["status"]["message"].split(LINE_BREAK)
    assert len(lines) == 2, answer
    proc = dry_run(policies, NAMESPACES["enforce"], pod)
    assert proc.returncode != 0
    assert f"denied request: {head} {'; '.join(lines)}" in proc.stderr, (answer, proc.stderr)


def test_every_violation_is_named(policies: Cluster) -> None:
    pod = violating_pod("many")
    pod["spec"]["containers"].append({"name": "side", "image": "x", "resources": {
        "requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}})
    pod["spec"]["initContainers"] = [{"name": "setup", "image": "x", "restartPolicy": "Always", "resources": {
        "requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]
    proc = dry_run(policies, NAMESPACES["enforce"], pod)
    assert proc.returncode != 0
    for part in ('limits-missing: container "side" (spec.containers[1]): no cpu limit, so the Pod is not '
                 "Guaranteed; set resources.limits.cpu to 1 (its request)",
                 'requests-not-equal-limits: container "setup" (spec.initContainers[0]): memory request 512Mi '
                 "differs from its limit 1Gi; set resources.requests.memory to 1Gi",
                 'cpu-not-integer: container "app" (spec.containers[0]): cpu limit 1500m'):
        assert part in proc.stderr, proc.stderr


def test_a_fractional_request_without_a_limit_gets_one_advice(policies: Cluster) -> None:
    """limits-missing and cpu-not-integer name the same whole numbers for a sidecar's 50m or 1500m request (not
    "set resources.limits.cpu to 50m (its request)", which cpu-not-integer then refuses), in the CEL as in the
    engine: the API server's refusal holds the engine's messages word for word."""
    pod = compliant_pod("fractional-sidecars")
    for name, cpu in (("shipper", "50m"), ("proxy", "1500m")):
        pod["spec"]["containers"].append({"name": name, "image": "x", "resources": {
            "requests": {"cpu": cpu, "memory": "64Mi"}, "limits": {"memory": "64Mi"}}})
    proc = dry_run(policies, NAMESPACES["enforce"], pod)
    assert proc.returncode != 0
    expected = [f"{v.rule}: {v.message}" for _, v in evaluate(pod, Config(), Mode.ENFORCE, policies.facts()).violations]
    assert [m for m in expected if m.startswith("limits-missing: ")] == [
        f'limits-missing: container "{name}" (spec.containers[{i}]): no cpu limit, so the Pod is not Guaranteed; '
        f"set resources.requests.cpu and resources.limits.cpu to one whole number of CPUs ({cpu} is not one): {use}"
        for i, name, cpu, use in ((1, "shipper", "50m", "use 1"), (2, "proxy", "1500m", "use 1 or 2"))]
    for message in expected:
        assert message in proc.stderr, proc.stderr


def test_dry_run_server_shows_the_verdict_and_stores_nothing(policies: Cluster) -> None:
    ns = NAMESPACES["enforce"]
    bad = dry_run(policies, ns, violating_pod("dry-bad"))
    assert bad.returncode != 0 and "cpu-not-integer" in bad.stderr
    good = dry_run(policies, ns, compliant_pod("dry-good"))
    assert good.returncode == 0 and "(server dry run)" in good.stdout
    assert policies.kubectl("get", "pod", "dry-good", "-n", ns).returncode != 0


def test_warn_admits_with_one_warning_per_violation(policies: Cluster) -> None:
    ns = NAMESPACES["warn"]
    pod = violating_pod("warned")
    pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1", "memory": "1Gi"}
    proc = policies.kubectl("apply", "-n", ns, "-f", "-", stdin=pod)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 2, proc.stderr
    assert "requests-not-equal-limits: container \"app\"" in warnings[0]
    assert "cpu-not-integer: container \"app\"" in warnings[1]


def test_warn_counts_beyond_ten(policies: Cluster) -> None:
    pod = compliant_pod("crowded")
    pod["spec"]["containers"] = [{"name": f"c{i}", "image": "x", "resources": {"limits": {"cpu": "500m"}}}
                                 for i in range(7)]
    proc = dry_run(policies, NAMESPACES["warn"], pod)
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 11, proc.stderr  # 14 violations: ten named, then the count
    assert "... and 4 more (see qos-guard check)" in warnings[-1]


def test_mutate_sets_requests_to_limits_and_limits_from_requests(policies: Cluster) -> None:
    ns = NAMESPACES["mutate"]
    pod = compliant_pod("fixed")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2", "memory": "1Gi"},
                                                 "requests": {"cpu": "1", "memory": "512Mi"}}
    pod["spec"]["containers"].append({"name": "lazy", "image": "x", "resources": {
        "requests": {"cpu": "1", "memory": "256Mi"}}})
    proc = policies.kubectl("apply", "-n", ns, "-f", "-", stdin=pod)
    assert proc.returncode == 0, proc.stderr
    stored = policies.get("pod", "fixed", "-n", ns)
    app, lazy = stored["spec"]["containers"]
    assert app["resources"] == {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "2", "memory": "1Gi"}}
    assert lazy["resources"] == {"limits": {"cpu": "1", "memory": "256Mi"},
                                 "requests": {"cpu": "1", "memory": "256Mi"}}
    assert stored["status"]["qosClass"] == "Guaranteed"
    # What mutation cannot fix is still refused, with the message.
    bad = dry_run(policies, ns, violating_pod("frac"))
    assert bad.returncode != 0 and "ValidatingAdmissionPolicy 'qos-guard-mutate'" in bad.stderr
    assert "cpu-not-integer" in bad.stderr


def test_mutate_drops_a_copied_status_qos_class(policies: Cluster) -> None:
    """Up to 1.36 the API server keeps a copied status.qosClass: enforce refuses it, mutate removes it. From 1.37
    it resets the status on create: the Pod is admitted in enforce and stored Guaranteed either way."""
    pod = compliant_pod("copied")
    pod["status"] = {"qosClass": "Burstable"}
    enforced = dry_run(policies, NAMESPACES["enforce"], pod)
    if resolve(kube_version()).keeps_declared_qos:
        assert enforced.returncode != 0 and "status-qos-class" in enforced.stderr, enforced.stderr
    else:
        assert enforced.returncode == 0, enforced.stderr
    mutated = policies.kubectl("create", "--dry-run=server", "-o", "json", "-n", NAMESPACES["mutate"], "-f", "-",
                               stdin=pod)
    assert mutated.returncode == 0, mutated.stderr
    assert yaml.safe_load(mutated.stdout)["status"]["qosClass"] == "Guaranteed"


def deployment(name: str, pod: dict[str, Any]) -> dict[str, Any]:
    return build("Deployment", name, pod["spec"])


@pytest.mark.parametrize("kind", sorted(set(KINDS) - {"Pod"}))
def test_workloads_refused_at_apply(policies: Cluster, kind: str) -> None:
    obj = build(kind, f"bad-{kind.lower()}", violating_pod("x")["spec"])
    proc = policies.kubectl("apply", "-n", NAMESPACES["enforce"], "-f", "-", stdin=obj)
    assert proc.returncode != 0
    assert f'{kind} "bad-{kind.lower()}" would not get exclusive CPUs' in proc.stderr, proc.stderr
    path = {"CronJob": "spec.jobTemplate.spec.template.spec", "PodTemplate": "template.spec"}.get(
        kind, "spec.template.spec")
    assert f'container "app" ({path}.containers[0]): cpu limit 1500m' in proc.stderr
    good = dry_run(policies, NAMESPACES["enforce"], build(kind, "good", compliant_pod("x")["spec"]))
    assert good.returncode == 0, good.stderr


def test_mutate_namespace_refuses_templates_only_for_what_mutation_cannot_fix(policies: Cluster) -> None:
    ns = NAMESPACES["mutate"]
    fixable = compliant_pod("x")
    fixable["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1", "memory": "1Gi"}
    ok = dry_run(policies, ns, deployment("fixable", fixable))
    assert ok.returncode == 0, ok.stderr
    bad = dry_run(policies, ns, deployment("unfixable", violating_pod("x")))
    assert bad.returncode != 0 and "cpu-not-integer" in bad.stderr


def test_resize_is_judged_on_the_new_resources(policies: Cluster) -> None:
    ns = NAMESPACES["enforce"]
    policies.kubectl("apply", "-n", ns, "-f", "-", stdin=compliant_pod("resized"), check=True)
    patch = {"spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "1500m"},
                                                                   "requests": {"cpu": "1500m"}}}]}}
    bad = policies.kubectl("patch", "pod", "resized", "-n", ns, "--subresource", "resize", "--type", "strategic",
                           "-p", json.dumps(patch))
    assert bad.returncode != 0
    assert "cpu-not-integer: container \"app\" (spec.containers[0]): cpu limit 1500m" in bad.stderr, bad.stderr
    patch["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "3"}, "requests": {"cpu": "3"}}
    good = policies.kubectl("patch", "pod", "resized", "-n", ns, "--subresource", "resize", "--type", "strategic",
                            "-p", json.dumps(patch))
    assert good.returncode == 0, good.stderr


def test_unlabelled_and_kube_system_untouched(policies: Cluster) -> None:
    plain = policies.kubectl("apply", "-n", NAMESPACES["plain"], "-f", "-", stdin=violating_pod("free"))
    assert plain.returncode == 0, plain.stderr
    policies.kubectl("label", "namespace", "kube-system", "qos-guard.io/mode=enforce", "--overwrite", check=True)
    policies.kubectl("label", "namespace", "qos-guard", "qos-guard.io/mode=enforce", "--overwrite", check=True)
    try:
        for ns in ("kube-system", "qos-guard"):
            proc = dry_run(policies, ns, violating_pod("free"))
            assert proc.returncode == 0, proc.stderr
    finally:
        policies.kubectl("label", "namespace", "kube-system", "qos-guard.io/mode-")
        policies.kubectl("label", "namespace", "qos-guard", "qos-guard.io/mode-")


def test_namespace_label_must_name_a_mode(policies: Cluster) -> None:
    proc = policies.kubectl("apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "pol-typo", "labels": {"qos-guard.io/mode": "enforcing"}}})
    assert proc.returncode != 0
    assert 'namespace label qos-guard.io/mode="enforcing" is not one of enforce, mutate, warn' in proc.stderr


def test_exemptions_from_the_config(policies: Cluster) -> None:
    config = {"exemptions": {"usernames": ["e2e-admin"], "runtimeClassNames": ["kata"]}}
    apply_policies(policies, config)
    try:
        wait_for("the username exemption",
                 lambda: dry_run(policies, NAMESPACES["enforce"], violating_pod("p")).returncode == 0)
        apply_policies(policies, {"exemptions": {"namespaces": [NAMESPACES["enforce"]],
                                                 "runtimeClassNames": ["kata"]}})
        wait_for("the namespace exemption",
                 lambda: dry_run(policies, NAMESPACES["mutate"], violating_pod("p")).returncode != 0)
        assert dry_run(policies, NAMESPACES["enforce"], violating_pod("p")).returncode == 0
        kata = violating_pod("kata")
        kata["spec"]["runtimeClassName"] = "kata"
        assert dry_run(policies, NAMESPACES["warn"], kata).stderr.count("Warning:") == 0
        assert dry_run(policies, NAMESPACES["mutate"], kata).returncode == 0
    finally:
        use_config(policies, None)


def _refusal(stderr: str, version: str) -> str:
    """stderr after the line a pre-release minor says first (``Semantics.note``), which it must say there and
    only there."""
    first, _, rest = stderr.partition("\n")
    noted = "is judged from its pre-release" in first
    assert noted == (resolve(version).prerelease is not None), stderr
    return rest if noted else stderr


def test_numa_is_refused_naming_the_key(policies: Cluster) -> None:
    path = policies.folder / "numa.yaml"
    path.write_text("policy:\n  numa: {cpus: 32, memory: 240Gi}\n")
    out = policies.qos_guard("policy", "--config", str(path), "--kubernetes-version", policies.version())
    assert out.returncode == 2
    assert _refusal(out.stderr, policies.version()).startswith("qos-guard: policy: policy.numa: ")
    assert out.stdout == ""


def test_documented_differences_from_the_engine(policies: Cluster) -> None:
    """webhook/policies/generate.py KNOWN_DIFFERENCES, each shown on the API server (README: "Admission policies")."""
    assert set(KNOWN_DIFFERENCES) == {"cpu-beyond-int64", "template-pod-level-request", "template-pod-level-limit",
                                      "pod-level-mutation"}
    enforce, mutate = NAMESPACES["enforce"], NAMESPACES["mutate"]
    # cpu-beyond-int64: whole to the engine, not to CEL's isInteger().
    huge = compliant_pod("huge")
    huge["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1e19", "memory": "1Gi"}}
    assert evaluate(huge, Config(), Mode.ENFORCE, policies.facts()).allowed
    assert dry_run(policies, enforce, huge).returncode != 0
    allow = {"policy": {"podLevelResources": "allow"}}
    use_config(policies, allow)
    wait_for("podLevelResources: allow", lambda: dry_run(policies, enforce, _pod_level_pod()).returncode == 0)
    try:
        # template-pod-level-request: the Pods get the containers' total as pod-level request, not the limit.
        template = build("Deployment", "pl", _pod_level_pod()["spec"])
        template["spec"]["template"]["spec"]["resources"] = {"limits": {"cpu": "2", "memory": "2Gi"}}
        assert not evaluate(template, parse_config(allow), Mode.ENFORCE, policies.facts()).allowed
        assert dry_run(policies, enforce, template).returncode == 0
        pod = _pod_level_pod()
        pod["spec"]["resources"] = {"limits": {"cpu": "2", "memory": "2Gi"}}
        assert "requests-not-equal-limits" in dry_run(policies, enforce, pod).stderr
        # pod-level-mutation: the engine would set the pod-level request to its limit; the policy refuses.
        pod["spec"]["resources"] = {"limits": {"cpu": "2", "memory": "2Gi"}, "requests": {"cpu": "1", "memory": "2Gi"}}
        assert evaluate(pod, parse_config(allow), Mode.MUTATE, policies.facts()).allowed
        refused = dry_run(policies, mutate, pod)
        assert refused.returncode != 0 and "requests-not-equal-limits: pod (spec.resources)" in refused.stderr
    finally:
        use_config(policies, None)


def _pod_level_pod() -> dict[str, Any]:
    pod = compliant_pod("pl")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    pod["spec"]["resources"] = {"limits": {"cpu": "2", "memory": "2Gi"}, "requests": {"cpu": "2", "memory": "2Gi"}}
    return pod


# ------------------------------------------------------------------------------------------ rule fixtures

RULE_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rules"


def _rule_fixtures() -> list[Any]:
    """Every tests/fixtures/rules/<rule>/{pass,fail}/*.yaml, those sharing a configuration together."""
    found = [(rule, outcome, path) for rule in RULE_IDS for outcome in ("fail", "pass")
             for path in sorted((RULE_FIXTURES / rule / outcome).glob("*.yaml"))]
    found.sort(key=lambda f: (RULE_FIXTURES / f[0] / "config.yaml").exists())
    return [pytest.param(rule, outcome, path, id=f"{rule}/{outcome}/{path.stem}") for rule, outcome, path in found]


@pytest.mark.parametrize(("rule", "outcome", "path"), _rule_fixtures())
def test_rule_fixture_through_the_generated_cel(policies: Cluster, rule: str, outcome: str, path: Path) -> None:
    """The per-rule fixtures the engine, ``check`` and the webhook are held to (tests/rules), judged by the
    generated policies on the API server: same verdict, and the engine's message for the object as the API
    server stores it appears word for word in the refusal, so the Python and CEL forms of a rule cannot drift."""
    config_file = RULE_FIXTURES / rule / "config.yaml"
    raw = yaml.safe_load(config_file.read_text()) if config_file.exists() else None
    obj = yaml.safe_load(path.read_text())
    pinned = re.search(r"^# kubernetes: (1\.[0-9]+)$", path.read_text(), re.M)
    if pinned and resolve(pinned[1]).minor != resolve(kube_version()).minor:
        pytest.skip(f"{path.name} is {pinned[1]}'s answer; this API server is {kube_version()}")
    if BY_ID[rule].cel is None and BY_ID[rule].policy_refusal is not None:
        out = policies.qos_guard("policy", "--config", str(config_file), "--kubernetes-version",
                                 policies.version())
        assert out.returncode == 2
        assert _refusal(out.stderr, policies.version()).startswith(f"qos-guard: policy: {BY_ID[rule].policy_refusal}")
        return
    config = parse_config(raw)
    if (policies.folder / "policy-config.yaml").read_text() != yaml.safe_dump(raw or {}):
        apply_policies(policies, raw)  # the fixtures sharing a configuration come together
    stored = policies.kubectl("create", "--dry-run=server", "-o", "json", "-n", NAMESPACES["plain"], "-f", "-",
                              stdin=obj)
    if re.search(r"^# needs: facts$", path.read_text(), re.M):
        # judged by the claims it names, which a policy over pod specs cannot read: the policies never name the
        # rule (with policy.dra: deny their dra-unaligned refuses any Guaranteed Pod with a claim, the webhook's
        # only where it does not know the claim's CPUs are DRA's)
        assert stored.returncode == 0, stored.stderr
        assert f"{rule}: " not in dry_run(policies, NAMESPACES["enforce"], obj).stderr
        return
    if BY_ID[rule].kinds:  # dra-claim-spread judges claims, which the policies (over pod specs) do not match
        assert stored.returncode == 0 and "AdmissionPolicy" not in stored.stderr, stored.stderr
        assert dry_run(policies, NAMESPACES["enforce"], obj).returncode == 0
        return
    if BY_ID[rule].facts_only:  # judged with cluster facts a policy cannot read: the policies never name it
        assert stored.returncode == 0, stored.stderr
        assert f"{rule}: " not in dry_run(policies, NAMESPACES["enforce"], obj).stderr
        return
    if BY_ID[rule].cel is None:  # invalid-quantity: the API server refuses such objects before any policy
        assert (stored.returncode != 0) is (outcome == "fail"), stored.stderr
        assert "AdmissionPolicy" not in stored.stderr
        return
    assert stored.returncode == 0, stored.stderr
    expected = [f"{v.rule}: {v.message}"
                for _, v in evaluate(json.loads(stored.stdout), config, Mode.ENFORCE, policies.facts()).violations]
    assert (rule in {line.split(":")[0] for line in expected}) is (outcome == "fail"), expected
    if outcome == "pass":
        wait_for(f"{path.name} admitted", lambda: dry_run(policies, NAMESPACES["enforce"], obj).returncode == 0)
        return
    # The parameters reach the admission plugin through an informer: poll until this rule's refusal shows.
    refused: list[str] = []

    def judged() -> bool:
        proc = dry_run(policies, NAMESPACES["enforce"], obj)
        refused[:] = [proc.stderr]
        return proc.returncode != 0 and f"{rule}: " in proc.stderr

    try:
        wait_for(f"{path.name} refused", judged)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the API server said: {refused[0]}") from None
    for line in expected:
        assert line in refused[0], f"engine: {line}\nAPI server: {refused[0]}"


# ------------------------------------------------------------------------------------------ differential

MIN_OBJECTS = 2000


def hypothesis_objects(count: int) -> list[dict[str, Any]]:
    """``count`` hypothesis-generated objects (generation only: no shrinking, fixed seed)."""
    found: list[dict[str, Any]] = []

    @settings(max_examples=count, phases=[Phase.generate], derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(objects(0))
    def collect(obj: dict[str, Any]) -> None:
        obj = copy.deepcopy(obj)
        obj["metadata"]["name"] = f"hy-{len(found)}"
        found.append(obj)

    collect()
    return found


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    from webhook.core.workloads import find_targets
    return dict(next(iter(t.spec for t in find_targets(obj))))


def _pod_level(obj: dict[str, Any]) -> dict[str, Any]:
    return _spec(obj).get("resources") or {}


def _engine_trims_quantities() -> bool:
    try:
        quantity_from_value(" 1")
    except QuantityError:
        return False
    return True


def _padded_quantity(obj: dict[str, Any]) -> bool:
    from webhook.core.workloads import find_targets
    spec = next(iter(t.spec for t in find_targets(obj)))
    blocks = [c.get("resources") or {} for c in spec.get("containers", []) + spec.get("initContainers", [])]
    blocks.append(spec.get("resources") or {})
    return any(isinstance(v, str) and v != v.strip()
               for b in blocks for kind in ("limits", "requests") for v in (b.get(kind) or {}).values())


def _engine_judges_empty_pod_resources(facts: Facts) -> bool:
    probe = compliant_pod("probe")
    probe["spec"]["resources"] = {}
    return not evaluate(probe, Config(), Mode.ENFORCE, facts).allowed


def known_difference(obj: dict[str, Any], config: Config, mode: Mode | None, facts: Facts) -> str | None:
    """The classes where the engine and the policies are known to differ (each counted and printed)."""
    pod_block = _pod_level(obj)
    if (not _engine_judges_empty_pod_resources(facts) and "resources" in _spec(obj)
            and not any(r in (pod_block.get(k) or {}) for k in ("limits", "requests") for r in ("cpu", "memory"))):
        # ComputePodQOS takes the class from spec.resources whenever it is set, even {} (BestEffort).
        return "engine-ignores-pod-resources-without-cpu-memory"
    if not _engine_trims_quantities() and _padded_quantity(obj):
        # Quantity.UnmarshalJSON trims surrounding spaces (" 2" is 2 CPUs); the engine refuses them.
        return "engine-refuses-padded-quantity"
    if ("status-qos-class" not in RULE_IDS and obj["kind"] == "Pod"
            and obj.get("status", {}).get("qosClass", "Guaranteed") != "Guaranteed"):
        return "engine-has-no-status-qos-class"  # upstream fidelity: being added to the engine
    limits, requests_ = pod_block.get("limits") or {}, pod_block.get("requests") or {}
    if any(r in limits or r in requests_ for r in ("cpu", "memory")):
        if mode is Mode.MUTATE:
            return "pod-level-mutation"
        if obj["kind"] != "Pod" and any(r in limits and r not in requests_ for r in ("cpu", "memory")):
            return "template-pod-level-request"  # verdicts differ only with allow; with deny the rule ids
        if (obj["kind"] != "Pod" and resolve(kube_version()).pod_level_fix_defaulting
                and any(r not in limits for r in ("cpu", "memory"))):
            return "template-pod-level-limit"  # from 1.37: the engine defaults the limit, the policy cannot
    return None


def agree(e: Verdict, w: Verdict, s: Verdict, kind: str) -> str | None:
    """None when the three agree, else what differs."""
    if (e.outcome, e.rules) != (w.outcome, w.rules):
        return f"engine {e.outcome} {sorted(e.rules)} != webhook {w.outcome} {sorted(w.rules)}"
    if e.outcome == "invalid" or s.outcome == "invalid":
        return f"engine {e.outcome}, API server {s.outcome} where it accepts the object without policies: {s.detail}"
    if e.outcome == "deny":
        if s.outcome != "deny":
            return f"engine denies {sorted(e.rules)}, API server admits"
        if s.rules - {"status-qos-class"} != e.rules - {"status-qos-class"}:
            return f"rules differ: engine {sorted(e.rules)}, API server {sorted(s.rules)}: {s.detail}"
        return None
    if s.outcome != "admit":
        return f"engine admits, API server {s.outcome} {sorted(s.rules)}: {s.detail}"
    if kind == "Pod" and e.resources != s.resources:
        return f"resources differ: engine {e.resources}, API server {s.resources}"
    if kind == "Pod" and w.resources != e.resources:
        return f"resources differ: engine {e.resources}, webhook {w.resources}"
    return None


def run_differential(cluster: Cluster, config_raw: dict[str, Any] | None, sample: list[dict[str, Any]],
                     tally: Tally) -> list[str]:
    config = parse_config(config_raw)
    use_config(cluster, config_raw)
    server = ServerJudge(cluster.url, TOKEN, str(cluster.folder / "pki" / "ca.crt"))
    hook = WebhookJudge(config, cluster.semantics())
    facts = cluster.facts()
    failures: list[str] = []
    # The same objects where no policy applies: what the API server refuses by itself (a Pod without
    # containers, a request above its limit, an unparsable quantity) is not a verdict of the rules.
    plain = server.judge_all(sample, NAMESPACES["plain"])
    for obj, p in zip(sample, plain, strict=True):
        e = engine_verdict(obj, config, Mode.ENFORCE, NAMESPACES["enforce"], facts)
        if e.outcome == "invalid" and p.outcome != "invalid" and known_difference(obj, config, None, facts) is None:
            failures.append(f"[plain] engine: invalid quantity, API server accepts it\n{yaml.safe_dump(obj)}")
        if p.outcome == "invalid":
            tally.add("refused by the API server itself (not compared)", tally.outcomes)
    comparable = [obj for obj, p in zip(sample, plain, strict=True) if p.outcome == "admit"]
    tally.compared += len(comparable)
    for mode in (Mode.ENFORCE, Mode.MUTATE):
        ns = NAMESPACES[mode.value]
        verdicts = server.judge_all(comparable, ns)
        for obj, s in zip(comparable, verdicts, strict=True):
            e = engine_verdict(obj, config, mode, ns, facts)
            w = hook.judge(obj, mode, ns)
            tally.add(f"{mode.value}: {s.outcome}", tally.outcomes)
            why = known_difference(obj, config, mode, facts)
            problem = agree(e, w, s, obj["kind"])
            if why is not None:
                tally.add(f"{why} ({'differed' if problem else 'agreed anyway'})", tally.known)
                continue
            if problem is None and mode is Mode.ENFORCE and s.outcome == "admit" and obj["kind"] == "Pod":
                exempt = obj["spec"].get("runtimeClassName") in config.exemptions.runtime_class_names
                if not exempt and s.qos != "Guaranteed" and not _pod_level(obj):
                    problem = f"admitted as {s.qos}"
            if problem is None:
                tally.agreed += 1
            else:
                failures.append(f"[{mode.value}] {problem}\n{yaml.safe_dump(obj, sort_keys=False)}")
    return failures


@pytest.mark.timeout(900)  # ~2-3 minutes on 2 busy cores; the suite's 300 s default is for single scenarios
def test_three_way_differential(policies: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    fixtures = fixture_objects()
    # About a quarter of the generated objects are refused by the API server itself (no containers' limits
    # above requests, unparsable values): generate enough that over MIN_OBJECTS remain comparable.
    generated = hypothesis_objects(int(MIN_OBJECTS * 1.4) - 2 * len(fixtures))
    half = len(generated) // 2
    samples = [(None, fixtures + generated[:half]), (CUSTOM, fixtures + generated[half:])]
    tally = Tally()
    failures: list[str] = []
    try:
        for config_raw, sample in samples:
            tally.objects += len(sample)
            for obj in sample:
                tally.add(obj["kind"], tally.by_kind)
            failures += run_differential(policies, config_raw, sample, tally)
    finally:
        use_config(policies, None)
    elapsed = time.monotonic() - started
    with capsys.disabled():
        print(f"\ndifferential: {tally.objects} objects ({tally.compared} accepted by the API server without "
              "policies, each judged by engine, webhook and API server in enforce and mutate); "
              f"agreed {tally.agreed}, known differences {sum(tally.known.values())}, "
              f"disagreements {len(failures)}; {elapsed:.0f} s")
        print(f"  kinds: {dict(sorted(tally.by_kind.items()))}")
        print(f"  API server outcomes: {dict(sorted(tally.outcomes.items()))}")
        for reason, count in sorted(tally.known.items()):
            print(f"  known: {reason}: {count}")
    kinds: dict[str, int] = {}
    for failure in failures:
        head = re.sub(r"\d+m?\b|'[^']*'|\"[^\"]*\"", "_", failure.split("\n", 1)[0])[:100]
        kinds[head] = kinds.get(head, 0) + 1
    assert not failures, (f"{len(failures)} disagreements: {kinds}; first ones:\n" + "\n".join(failures[:4]))
    assert tally.compared >= MIN_OBJECTS
    assert set(KNOWN_DIFFERENCES)  # documented (README) and listed in webhook/policies/generate.py


def test_chart_installs_in_policy_mode(policies: Cluster) -> None:
    """Last in this module: the chart's policies sit beside the CLI's ones until uninstalled."""
    helm = [binary("helm"), "--namespace", "qg-system"]
    install = subprocess.run([*helm, "install", "qg", str(CHART), "--create-namespace", "--set", "enforcement=policy",
                              "--set", "config.policy.fractionalCPUContainers={istio-proxy}"],
                             capture_output=True, text=True, timeout=180, env=policies.env)
    try:
        assert install.returncode == 0, install.stderr
        assert "ValidatingAdmissionPolicy qg-qos-guard-enforce" in install.stdout
        kinds = policies.kubectl("get", "deployments,services,secrets,validatingwebhookconfigurations",
                                 "-n", "qg-system", "-o", "name", check=True).stdout
        assert "qg-qos-guard" not in kinds
        params = policies.get("configmap", "qg-qos-guard-policy", "-n", "qg-system")["data"]
        assert params["policy.fractionalCPUContainers"] == "istio-proxy"
        binding = policies.get("validatingadmissionpolicybinding", "qg-qos-guard-enforce")["spec"]
        assert binding["paramRef"]["namespace"] == "qg-system"
        # The chart's binding judges too: with the CLI's policies gone only the chart's remain.
        policies.kubectl("delete", "validatingadmissionpolicybinding", "qos-guard-enforce", check=True)
        wait_for("the chart's policy", lambda: "ValidatingAdmissionPolicy 'qg-qos-guard-enforce'" in dry_run(
            policies, NAMESPACES["enforce"], violating_pod("chart")).stderr)
    finally:
        subprocess.run([*helm, "uninstall", "qg", "--wait"], capture_output=True, text=True, timeout=180,
                       env=policies.env)
        apply_policies(policies)
    assert policies.kubectl("get", "validatingadmissionpolicy", "qg-qos-guard-enforce").returncode != 0
