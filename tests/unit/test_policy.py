"""``qos-guard policy`` output without an API server: which objects, which parameters, what is refused.
(What the CEL does is proven against a real kube-apiserver in tests/e2e/test_policy.py.)"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from webhook.cli import main
from webhook.core.config import parse_config
from webhook.core.kubeversion import DEFAULT
from webhook.policies.generate import PolicyError, render
from webhook.policies.objects import params_data


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.mark.parametrize(("mode", "kinds"), [
    ("enforce", ["ConfigMap", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                 "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]),
    ("mutate", ["ConfigMap", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
                "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding"]),
])
def test_modes_print_their_objects(mode: str, kinds: list[str]) -> None:
    assert [d["kind"] for d in docs(render(parse_config(None), mode))] == kinds


def test_bindings_select_the_mode_and_never_kube_system_or_the_namespace() -> None:
    for d in docs(render(parse_config(None), "all", namespace="ops")):
        if d["kind"].endswith("Binding") and "paramRef" in d["spec"]:
            expressions = d["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
            mode = d["metadata"]["name"].rsplit("-", 1)[1]
            assert {"key": "qos-guard.io/mode", "operator": "In", "values": [mode]} in expressions
            never = next(e for e in expressions if e["key"] == "kubernetes.io/metadata.name")
            assert never["operator"] == "NotIn" and sorted(never["values"]) == ["kube-system", "ops"]
            assert d["spec"]["paramRef"] == {"name": "qos-guard-policy", "namespace": "ops",
                                             "parameterNotFoundAction": "Deny"}
            assert d["spec"].get("validationActions", ["Deny"]) == (["Warn"] if mode == "warn" else ["Deny"])


def test_parameters_carry_the_config_under_its_own_keys() -> None:
    config = parse_config({"policy": {"fractionalCPUContainers": ["b", "a"], "smtAlignment": 2},
                           "mutation": {"setLimitsFromRequests": False, "cpuRounding": "up"},
                           "exemptions": {"usernames": ["system:serviceaccount:ci:bot"]}})
    assert params_data(config) == {
        "policy.fractionalCPUContainers": "a\nb", "policy.podLevelResources": "deny", "policy.smtAlignment": "2",
        "policy.dra": "warn",
        "mutation.setLimitsFromRequests": "false", "mutation.cpuRounding": "up", "exemptions.namespaces": "",
        "exemptions.usernames": "system:serviceaccount:ci:bot", "exemptions.runtimeClassNames": "",
        "kubernetesVersion": str(DEFAULT.minor)}  # unset: the newest released (the chart writes the cluster's own)


def test_numa_is_refused_naming_the_key(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    config = parse_config({"policy": {"numa": {"cpus": 32}}})
    with pytest.raises(PolicyError, match=r"^policy\.numa: "):
        render(config)
    path = tmp_path / "c.yaml"
    path.write_text("policy:\n  numa: {scope: pod, memory: 240Gi}\n")
    assert main(["policy", "--config", str(path)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith("qos-guard: policy: policy.numa: ")


def test_bad_config_and_flags_exit_2(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("policy:\n  smtAlignment: 0\n")
    assert main(["policy", "--config", str(path)]) == 2
    assert "policy.smtAlignment" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["policy", "--api-version", "v1beta1"])
    assert exit_info.value.code == 2


def test_expressions_never_contain_a_helm_action() -> None:
    """The chart ships this text inside a Helm template: '{{' would be parsed as an action."""
    assert "{{" not in render(parse_config(None))


def test_every_judged_kind_and_template_is_in_the_policies() -> None:
    """The validating policies match every kind of ``KINDS`` at its versions, and their CEL names every template
    path; a declared kind (``workloads``) is added, its list of templates walked with ``transformList``."""
    from webhook.core.workloads import KINDS

    declared = {"workloads": [{"group": "inference.example.com", "version": "v1", "kind": "ModelServer",
                               "plural": "modelservers", "templates": ["spec.shards[*].template.spec"]}]}
    for config, extra in ((parse_config(None), set()), (parse_config(declared), {("inference.example.com",
                                                                                   "modelservers", "v1")})):
        text = render(config, "enforce")
        # the kinds an operator builds (KServe's InferenceService) are left to the webhook, and the output says so
        assert "# Not judged by these policies: InferenceService (serving.kserve.io)" in text
        docs = list(yaml.safe_load_all(text))
        (vap,) = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy" and "enforce" in d["metadata"]["name"]]
        matched = {(g, r, v) for rule in vap["spec"]["matchConstraints"]["resourceRules"]
                   for g in rule["apiGroups"] for r in rule["resources"] for v in rule["apiVersions"]}
        wanted = {(k.group, k.plural, v) for k in KINDS.values() if k.build is None for v in k.versions} | extra
        assert ("serving.kserve.io", "inferenceservices", "v1beta1") not in matched
        assert wanted <= matched and {m for m in matched if "/" not in m[1]} == wanted
        templates = next(v["expression"] for v in vap["spec"]["variables"] if v["name"] == "templates0")
        for kind in (k for k in KINDS.values() if k.build is None):
            assert f"request.kind.group == '{kind.group}' && request.kind.kind == '{kind.kind}'" in templates \
                or kind.templates == KINDS[("apps", "Deployment")].templates, kind.kind
        assert "replicatedJobs" in templates and "workerGroupSpecs" in templates and "ReplicaSpecs" in templates
        assert ("object.?spec.?shards.orValue([]).transformList(" in templates) is bool(extra)


def test_a_worker_template_that_makes_no_pods_is_left_out_of_the_policies() -> None:
    """LeaderWorkerSet's and DisaggregatedSet's worker template, with a leader template and size 1 (absent: 1), makes
    no Pods (lws pod_controller.go:137): the CEL's ``templates0`` leaves it out as the engine's walk does (the
    API server's verdict: tests/e2e/test_workloads.py, the size-one fixtures)."""
    docs = list(yaml.safe_load_all(render(parse_config(None), "enforce")))
    (vap,) = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy" and "enforce" in d["metadata"]["name"]]
    templates = next(v["expression"] for v in vap["spec"]["variables"] if v["name"] == "templates0")
    for holder in ("object.?spec.?leaderWorkerTemplate", "x0.?spec.?leaderWorkerTemplate"):
        assert (f"({holder}.?leaderTemplate.hasValue() && {holder}.?size.orValue(1) == 1 ? [] : "
                f"[{{'path': dyn(") in templates, holder


def test_a_kind_declared_at_two_versions_is_matched_at_both_by_the_policies() -> None:
    """One kind at v1 and v1beta1 (a CRD serving both): the policies match its requests at either version."""
    entry = {"group": "inference.example.com", "version": "v1", "kind": "ModelServer", "plural": "modelservers",
             "templates": ["spec.shards[*].template.spec"]}
    docs = list(yaml.safe_load_all(render(parse_config({"workloads": [entry, {**entry, "version": "v1beta1"}]}),
                                          "enforce")))
    (vap,) = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy" and "enforce" in d["metadata"]["name"]]
    matched = {v for rule in vap["spec"]["matchConstraints"]["resourceRules"] if "modelservers" in rule["resources"]
               for v in rule["apiVersions"]}
    assert matched == {"v1", "v1beta1"}


def test_a_minor_that_does_not_serve_the_policies_is_refused_naming_what_it_lacks() -> None:
    """`qos-guard policy --kubernetes-version 1.34`: a clear refusal, not a partial install."""
    old = parse_config({"kubernetesVersion": "1.34"})
    with pytest.raises(PolicyError, match=r"^--kubernetes-version 1\.34: these policies need Kubernetes 1\.36 or "
                                          r"later, for MutatingAdmissionPolicy v1"):
        render(old)
    with pytest.raises(PolicyError, match=r"need Kubernetes 1\.35 or later"):
        render(old, "enforce")
    assert "kubernetesVersion: '1.35'" in render(parse_config({"kubernetesVersion": "1.35"}), "enforce")
    assert "kubernetesVersion: '1.36'" in render(parse_config({"kubernetesVersion": "1.36"}))
