"""``policy.kserveNamespace``: KServe reads its ``inferenceservice-config``, its LLMInferenceServiceConfig presets
and its ``config-scheduler-*`` ConfigMaps from its own namespace (kserve/kserve v0.20.0 pkg/constants/constants.go:
``KServeNamespace = getEnvOrDefault("POD_NAMESPACE", "kserve")``), which OpenDataHub and OpenShift AI set to theirs.
Judged through the engine: the ConfigMap in the configured namespace is KServe's, one of that name in "kserve" is
any other ConfigMap; where none is found the shipped values judge, as for "kserve" before."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from tests.unit.kserve_cases import AGENT, RAW, both, config, isvc, model, runtime
from tests.unit.test_cluster_related import CSR, SR, FakeLister
from tests.unit.test_llmisvc_scheduler import PRECISE, SCHEDULER, config_map, scheduled
from webhook.cluster.related import read_related
from webhook.core.config import Config, ConfigError, Policy, parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.operators import CLUSTER, Related, collect
from webhook.core.operators.kserve import RELATED
from webhook.core.operators.llmisvc import CONFIG
from webhook.core.operators.llmisvc import RELATED as LLM_RELATED
from webhook.core.target import Target
from webhook.core.workloads import walk

WHOLE = {"cpuRequest": "1", "cpuLimit": "1", "memoryRequest": "1Gi", "memoryLimit": "1Gi"}
ODH = Config(policy=Policy(kserve_namespace="opendatahub"))
# A multi-model predictor (no storageUri): KServe's pod webhook adds its agent, 100m/1 CPU as shipped.
MMS = isvc({"model": model()}, RAW)
SHIPPED_AGENT = both(AGENT, "spec.predictor.model.storageUri")


def in_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}


def findings(obj: Any, related: Related, config: Config | None = None) -> Counter[str]:
    verdict = evaluate(obj, config or Config(), Mode.ENFORCE, Facts(related=related))
    return Counter(f"{v.rule} {v.container} {dotted(v.subject)}" for _, v in verdict.violations)


def test_the_configmap_in_the_configured_namespace_is_kserves() -> None:
    """The agent's resources whole in opendatahub's inferenceservice-config: no finding with kserveNamespace
    opendatahub, KServe's shipped 100m/1 without it (that ConfigMap is then any other)."""
    related = collect([runtime("rt", "sklearn"), in_namespace(config(agent=WHOLE), "opendatahub")], RELATED)
    assert findings(MMS, related, ODH) == Counter()
    assert findings(MMS, related) == SHIPPED_AGENT


def test_the_configmap_in_kserve_is_ignored_when_kserve_runs_elsewhere() -> None:
    related = collect([runtime("rt", "sklearn"), config(agent=WHOLE)], RELATED)
    assert findings(MMS, related) == Counter()
    assert findings(MMS, related, ODH) == SHIPPED_AGENT


def test_a_configmap_kserve_cannot_read_refuses_only_in_the_configured_namespace() -> None:
    """A storageInitializer KServe's Go code cannot unmarshal builds no Pods, from the namespace KServe reads."""
    obj = isvc({"model": model(storageUri="s3://b/m")}, RAW)
    related = collect([runtime("rt", "sklearn"), in_namespace(config(storageInitializer="not json"), "opendatahub")],
                      RELATED)
    (reason,) = walk(obj, related=replace(related, kserve_namespace="opendatahub"))
    assert isinstance(reason, str) and "storageInitializer is not what KServe's Go code reads" in reason
    assert all(not isinstance(t, str) for t in walk(obj, related=related))


def test_llmisvc_configs_come_from_the_configured_namespace() -> None:
    """LLMInferenceServiceConfig ``mine`` (a baseRef) in opendatahub: found there with kserveNamespace opendatahub;
    given elsewhere, it is not KServe's; read whole from a cluster, one absent builds no Pods, and the reason names
    the namespace KServe looked in."""
    obj = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService",
           "metadata": {"name": "m", "namespace": "ns"},
           "spec": {"model": {"uri": "pvc://models/m"}, "baseRefs": [{"name": "mine"}],
                    "template": {"containers": [{"name": "main"}]}}}
    mine = {"apiVersion": "serving.kserve.io/v1alpha2", "kind": "LLMInferenceServiceConfig",
            "metadata": {"name": "mine", "namespace": "opendatahub"}, "spec": {}}
    given = Related({CONFIG: (mine,)})
    assert all(not isinstance(t, str) for t in walk(obj, related=replace(given, kserve_namespace="opendatahub")))
    (reason,) = walk(obj, related=given)
    assert 'LLMInferenceServiceConfig "mine" not in the input' in str(reason)
    (reason,) = walk(obj, related=Related({CONFIG: ()}, CLUSTER, frozenset({CONFIG}), "opendatahub"))
    assert 'is in neither ns nor opendatahub of the cluster, so KServe builds no Pods' in str(reason)


def test_the_cluster_read_gets_the_configmap_from_the_configured_namespace() -> None:
    """check --kubeconfig and audit GET inferenceservice-config where KServe runs (the one in kserve is not read);
    one absent there is not KServe's namespace (KServe refuses to work without it), so not judged, naming the
    setting: it had been KServe's shipped values, which KServe never uses."""
    path = "/api/v1/namespaces/{}/configmaps/inferenceservice-config"
    maps = {path.format("opendatahub"): in_namespace(config(agent=WHOLE), "opendatahub"),
            path.format("kserve"): config(agent={**WHOLE, "cpuRequest": "100m"})}
    lister = FakeLister({SR: [in_namespace(runtime("rt", "sklearn"), "ml")], CSR: []}, maps)
    said: list[str] = []
    related = read_related(lister, said.append, "opendatahub")
    assert related.kserve_namespace == "opendatahub"
    assert [m["metadata"]["namespace"] for m in related.objects[("", "ConfigMap")]] == ["opendatahub"]
    assert findings(MMS, related, ODH) == Counter()
    elsewhere = read_related(lister, said.append, "redhat-ods-applications")
    assert ("", "ConfigMap") not in elsewhere.objects and said == []
    verdict = evaluate(MMS, Config(policy=Policy(kserve_namespace="redhat-ods-applications")), Mode.ENFORCE,
                       Facts(related=elsewhere))
    assert verdict.violations == [] and verdict.unknown == (
        "InferenceService: set policy.kserveNamespace: no redhat-ods-applications/inferenceservice-config "
        "(KServe's own)",), verdict.unknown


@pytest.mark.parametrize("bad", ["Open_DataHub", "odh.example", "-odh", "a" * 64, "", 5, "opendatahub\n"])
def test_kserve_namespace_must_be_a_dns_label(bad: Any) -> None:
    with pytest.raises(ConfigError, match=r"^policy\.kserveNamespace: .* a namespace must be a DNS-1123 label"):
        parse_config({"policy": {"kserveNamespace": bad}})


def test_kserve_namespace_defaults_to_kserve_and_is_read() -> None:
    assert parse_config(None).policy.kserve_namespace == "kserve"
    assert parse_config({"policy": {"kserveNamespace": "redhat-ods-applications"}}).policy.kserve_namespace == \
        "redhat-ods-applications"


def test_a_config_scheduler_configmap_comes_from_the_configured_namespace() -> None:
    """config_merge.go: a ``config-scheduler-*`` ref not in the object's namespace is KServe's own (the precise
    prefix-cache scorer there brings the tokenizer)."""
    text = json.dumps(PRECISE)
    obj = scheduled(config={"ref": {"name": "config-scheduler-p"}})
    given = collect([config_map("config-scheduler-p", {"epp": text}, "opendatahub")], LLM_RELATED)

    def containers(related: Related) -> list[Any]:
        return [[c.name for c in t.pod_spec().containers] if isinstance(t, Target) else str(t)
                for t in walk(obj, related=related) if not isinstance(t, Target) or t.template == SCHEDULER]

    assert containers(replace(given, kserve_namespace="opendatahub")) == [["main", "tokenizer"]]
    assert containers(given) == [["main"]]  # that ConfigMap is any other: the scheduler's text is not given


def test_check_with_kubernetes_version_keeps_why_kserve_s_config_map_is_not_known(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``check --kubeconfig --kubernetes-version`` (the minor not read) on a cluster whose runtimes are not listed
    and whose inferenceservice-config is refused: the reason had been dropped with the rest (NO_FACTS), so KServe's
    shipped values judged; it is kept, and the InferenceService is not judged."""
    from webhook.batch import clusterfacts

    refused = Related({}, CLUSTER, frozenset(), "kserve", "ConfigMap kserve/inferenceservice-config not read "
                      "(HTTP 403): grant get on it, or give it in the input")
    monkeypatch.setattr(clusterfacts, "_related", lambda *_a, **_k: refused)
    facts = clusterfacts._cluster_facts(Config(), "kubeconfig", lambda _m: None, required=False, version=False)
    assert facts.related is refused
    verdict = evaluate(MMS, Config(), Mode.ENFORCE, facts)
    assert verdict.violations == [] and verdict.unknown == (f"InferenceService: {refused.config_unknown}",)


def test_check_with_an_unusable_kubeconfig_does_not_judge_on_shipped_values(tmp_path: Any) -> None:
    """``check --kubeconfig`` naming a file that does not exist: the cluster's ConfigMap is not known, so the
    InferenceService is not judged (it had been judged on KServe's shipped values, as if no cluster was asked)."""
    from webhook.batch import clusterfacts

    facts = clusterfacts._cluster_facts(Config(), str(tmp_path / "nope"), lambda _m: None, required=False,
                                        version=False)
    verdict = evaluate(MMS, Config(), Mode.ENFORCE, facts)
    (why,) = verdict.unknown
    assert verdict.violations == [] and why.startswith(
        "InferenceService: ConfigMap kserve/inferenceservice-config not read (no usable kubeconfig: "), why
