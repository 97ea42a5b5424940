"""The managed scheduler's ``tokenizer`` as KServe v0.20.0 finishes the scheduler Pod
(``webhook.core.operators.llmisvc_scheduler``; scheduler.go ``schedulerTransform``,
``withRemoveUnnecessaryTokenizer``): from version 0.9.0 (KServe's preset says so) it is dropped unless a config
text of ``main`` names ``precise-prefix-cache-scorer``; what was attached for it stays; a config the core cannot
read leaves the scheduler judged as a part."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.test_llmisvc import GOOD, llmisvc, main, targets, violations
from webhook.core.operators import collect
from webhook.core.operators.llmisvc import RELATED
from webhook.core.operators.llmisvc_scheduler import transforms
from webhook.core.workloads import walk

SCHEDULER = "spec.router.scheduler.template (scheduler, over kserve-config-llm-scheduler)"
PRECISE = {"kind": "EndpointPickerConfig", "plugins": [{"type": "precise-prefix-cache-scorer"},
                                                        {"type": "max-score-picker"}]}


def scheduled(main_args: list[str] | None = None, **scheduler: Any) -> dict[str, Any]:
    """An object whose managed scheduler's ``main`` is Guaranteed (2 CPU), the tokenizer left to KServe's preset
    (256m, no limits); ``scheduler`` adds to ``spec.router.scheduler``."""
    mine: dict[str, Any] = {"name": "main", "resources": GOOD}
    if main_args is not None:
        mine["args"] = main_args
    return llmisvc({"template": main(), "router": {"scheduler": {"template": {"containers": [mine]}, **scheduler}}})


def scheduler_pod(obj: dict[str, Any], *related: dict[str, Any]) -> Any:
    [built] = [t for t in targets(obj, *related) if t.template == SCHEDULER]
    return built


def names(obj: dict[str, Any], *related: dict[str, Any]) -> list[str]:
    return [c.name for c in scheduler_pod(obj, *related).pod_spec().containers]


def config_map(name: str, data: dict[str, str], namespace: str = "ns") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": data}


def test_the_shipped_scheduler_runs_without_the_tokenizer() -> None:
    """KServe's default config names no precise-prefix-cache-scorer: the preset's tokenizer (256m, no limits) is
    dropped, and a Guaranteed main makes a Guaranteed scheduler Pod. Its twin names the scorer (inline): the
    tokenizer stays, and the Pod is refused on it."""
    assert violations(scheduled()) == []
    assert names(scheduled()) == ["main"]
    kept = scheduled(config={"inline": PRECISE})
    assert names(kept) == ["main", "tokenizer"]
    assert {(path, rule) for t, path, rule in violations(kept) if t == SCHEDULER} == {
        ("spec.router.scheduler.template.containers[1].resources.limits.cpu", "limits-missing"),
        ("spec.router.scheduler.template.containers[1].resources.limits.memory", "limits-missing"),
        ("spec.router.scheduler.template.containers[1].resources.requests.cpu", "cpu-not-integer")}


def test_what_was_attached_for_the_tokenizer_stays() -> None:
    """attachModelArtifacts runs before schedulerTransform: hf:// leaves the storage-initializer (100m of 1 CPU),
    oci:// the modelcar, in a scheduler Pod that no longer has the tokenizer."""
    hf = scheduled()
    hf["spec"]["model"]["uri"] = "hf://facebook/opt-125m"
    assert {(path, rule) for t, path, rule in violations(hf) if t == SCHEDULER} == {
        ("spec.router.scheduler.template.initContainers[0].resources.requests.cpu", "requests-not-equal-limits"),
        ("spec.router.scheduler.template.initContainers[0].resources.requests.memory", "requests-not-equal-limits")}
    assert names(hf) == ["main"]
    oci = scheduled()
    oci["spec"]["model"]["uri"] = "oci://registry/opt:1"
    assert names(oci) == ["main", "modelcar"]


@pytest.mark.parametrize(("version", "dropped"), [
    ("0.9.0", True), ("0.10.0", True), ("1.0.0+build.5", True), ("0.8.9", False), ("0.9.0-rc.1", False)])
def test_only_a_scheduler_of_0_9_or_later_drops_it(version: str, dropped: bool) -> None:
    obj = scheduled(annotations={"app.kubernetes.io/version": version})
    assert names(obj) == (["main"] if dropped else ["main", "tokenizer"])


def test_a_version_kserve_cannot_read_makes_no_scheduler() -> None:
    """semver.NewVersion fails: expectedSchedulerDeployment errs, no scheduler Deployment; the workload's Pods are
    still built."""
    out = list(walk(scheduled(annotations={"app.kubernetes.io/version": "v0.9"})))
    assert [t.template for t in out if not isinstance(t, str)] == [
        "spec.template (main, over kserve-config-llm-template)"]
    assert [r for r in out if isinstance(r, str)] == [
        "LLMInferenceService spec.router.scheduler: annotation app.kubernetes.io/version 'v0.9' is not a version "
        "KServe reads (major.minor.patch), so it makes no scheduler Deployment"]


@pytest.mark.parametrize(("inline", "kept"), [
    ({"plugins": [{"type": "queue-scorer"}]}, True),  # no kind: not an Unstructured, the config is not read
    ({"kind": "EndpointPickerConfig"}, True),  # no plugins list: nothing to decide on
    ({"kind": "EndpointPickerConfig", "plugins": [{"type": "queue-scorer"}]}, False),
])
def test_an_inline_config_is_read_as_kserve_reads_it(inline: dict[str, Any], kept: bool) -> None:
    obj = scheduled(config={"inline": inline})
    assert names(obj) == (["main", "tokenizer"] if kept else ["main"])


def test_a_config_flag_in_mains_args_decides_instead_of_the_default() -> None:
    """preserveSchedulerConfig appends no config when main's args carry one: a --config-file is not rewritten
    (tokenizer kept), a --config-text is read (JSON here)."""
    assert names(scheduled(["--config-file", "/etc/epp.yaml"])) == ["main", "tokenizer"]
    assert names(scheduled(["--config-text", json.dumps(PRECISE)])) == ["main", "tokenizer"]
    plain = {"kind": "EndpointPickerConfig", "plugins": [{"type": "queue-scorer"}]}
    assert names(scheduled(["--config-text", json.dumps(plain)])) == ["main"]


def test_a_config_the_core_cannot_read_leaves_the_scheduler_a_part() -> None:
    """YAML (in main's args or a config.ref ConfigMap) is not parsed by the pure core: whether the tokenizer stays
    is unknown, so the scheduler Pod is judged without it and its pass is not claimed (Built.partial)."""
    yaml_text = "kind: EndpointPickerConfig\nplugins:\n- type: precise-prefix-cache-scorer\n"
    for obj, related in ((scheduled(["--config-text", yaml_text]), ()),
                         (scheduled(config={"ref": {"name": "mine"}}), ()),
                         (scheduled(config={"ref": {"name": "mine"}}), (config_map("mine", {"epp": yaml_text}),))):
        built = scheduler_pod(obj, *related)
        assert [c.name for c in built.pod_spec().containers] == ["main"]
        assert "KServe drops the tokenizer container unless" in built.partial


def test_a_config_ref_configmap_is_read_where_kserve_reads_it() -> None:
    """config_merge.go: the object's namespace, then KServe's for config-scheduler-* names; key epp unless
    named; a ConfigMap without the key means no Pods at all (combineBaseRefsConfig fails)."""
    text = json.dumps(PRECISE)
    assert names(scheduled(config={"ref": {"name": "mine"}}), config_map("mine", {"epp": text})) == [
        "main", "tokenizer"]
    assert names(scheduled(config={"ref": {"name": "mine", "key": "x"}}), config_map("mine", {"x": text})) == [
        "main", "tokenizer"]
    shipped = scheduled(config={"ref": {"name": "config-scheduler-p"}})
    assert names(shipped, config_map("config-scheduler-p", {"epp": text}, "kserve")) == ["main", "tokenizer"]
    [reason] = list(walk(scheduled(config={"ref": {"name": "mine"}}),
                         related=collect([config_map("mine", {"other": text})], RELATED)))
    assert reason == ('LLMInferenceService spec.router.scheduler.config.ref: ConfigMap "mine" has no key "epp", so '
                      "KServe builds no Pods")


@given(st.tuples(st.integers(0, 12), st.integers(0, 12), st.integers(0, 12)),
       st.one_of(st.none(), st.from_regex(r"[0-9A-Za-z-]{1,5}(\.[0-9A-Za-z-]{1,5})?", fullmatch=True)))
def test_the_version_compares_as_semver(release: tuple[int, int, int], pre: str | None) -> None:
    """coreos/go-semver: a pre-release sorts before its release; 0.9.0 and later transform."""
    version = ".".join(map(str, release)) + (f"-{pre}" if pre else "")
    scheduler = {"annotations": {"app.kubernetes.io/version": version}}
    assert transforms(scheduler) is (release > (0, 9, 0) or (release == (0, 9, 0) and not pre))
