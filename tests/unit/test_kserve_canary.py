"""An InferenceService's canaries (``spec.canary[*].predictor``) as KServe v0.20.0 builds and admits them, each
expectation read from KServe's code: the defaulter (``inference_service_defaults.go``) names and defaults the
containers of the predictor, transformer and explainer only, never a canary's; ``buildCanaryPredictor``
(``components/predictor.go``, mergo) replaces the stable predictor's containers by the canary's as written;
``validateCanarySpecs`` reads the deployment-mode annotation the defaulter wrote (from
``deploy.defaultDeploymentMode`` when the object has none)."""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import inprocess
from tests.unit.kserve_cases import AGENT, RT, both, config, isvc, model
from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.operators import Related, collect
from webhook.core.operators.kserve import RELATED
from webhook.core.operators.kserve_runtimes import NoPod
from webhook.core.resourceblock import ManifestError
from webhook.core.workloads import find_targets, walk

WITH_CANARY = Path(__file__).resolve().parents[1] / "fixtures" / "workloads" / "InferenceService" / "pass" / \
    "with-canary.yaml"
STANDARD = {"serving.kserve.io/deploymentMode": "Standard"}


def sample() -> dict[str, Any]:
    """The pass fixture: a custom stable predictor and one canary, both Guaranteed with whole CPUs."""
    loaded: dict[str, Any] = yaml.safe_load(WITH_CANARY.read_text())
    return loaded


def canary(obj: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = obj["spec"]["canary"][0]["predictor"]
    return found


def findings(obj: Any, related: Related | None = None) -> Counter[str]:
    facts = Facts(related=related) if related is not None else Facts()
    verdict = evaluate(obj, Config(), Mode.ENFORCE, facts)
    return Counter(f"{v.rule} {v.container} {dotted(v.subject)}" for _, v in verdict.violations)


def deploy(mode: str) -> dict[str, Any]:
    return config(deploy={"defaultDeploymentMode": mode})


def test_a_canary_without_resources_is_not_given_kserves_defaults() -> None:
    """The stable's containers get 1 CPU/2Gi from the defaulter; a canary's own do not (buildCanaryPredictor
    takes them as written): its Pod is BestEffort, refused."""
    obj = sample()
    assert findings(obj) == Counter()
    del canary(obj)["containers"][0]["resources"]
    assert findings(obj) == Counter({
        "limits-missing kserve-container spec.canary[0].predictor.containers[0].resources.cpu": 1,
        "limits-missing kserve-container spec.canary[0].predictor.containers[0].resources.memory": 1})
    cli = inprocess.run(("check", "-"), stdin=yaml.safe_dump(obj))
    assert cli.returncode == 1 and "spec.canary[0].predictor (canary v2)" in cli.stdout, cli.stdout + cli.stderr
    # the stable predictor's own containers without resources: defaulted (1 CPU, 2Gi), for it and for a canary
    # that inherits them (one without containers)
    stable = sample()
    del stable["spec"]["predictor"]["containers"][0]["resources"]
    del canary(stable)["containers"]
    assert findings(stable) == Counter()
    [_, inherited] = find_targets(stable)
    assert inherited.pod_spec().containers[0].name == "kserve-container"
    assert {k: dict(v) for k, v in inherited.spec["containers"][0]["resources"].items()} == {
        "requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}


def test_a_canary_with_no_kserve_container_builds_no_pod_and_says_why() -> None:
    """CustomPredictor.GetContainer finds no kserve-container (no defaulter renamed the canary's lone
    container): the controller fails at that canary, and reconcileCanaryDeployments builds none after it."""
    obj = sample()
    del canary(obj)["containers"][0]["name"]
    later = copy.deepcopy(obj["spec"]["canary"][0])
    later["predictor"]["name"] = "v3"
    later["predictor"]["containers"][0]["name"] = "kserve-container"
    obj["spec"]["canary"].append(later)
    out = list(walk(obj))
    assert [t.template for t in out if not isinstance(t, str)] == ["spec.predictor (predictor)"]
    [reason] = [r for r in out if isinstance(r, str)]
    assert reason.startswith("InferenceService spec.canary[0].predictor: no container is named kserve-container")
    assert "builds no Pod for it nor for the canaries after it" in reason
    # named, it is built as written
    canary(obj)["containers"][0]["name"] = "kserve-container"
    assert [t.template for t in find_targets(obj)] == [
        "spec.predictor (predictor)", "spec.canary[0].predictor (canary v2)", "spec.canary[1].predictor (canary v3)"]


@pytest.mark.parametrize(("annotations", "default", "built"), [
    (None, "Standard", True),  # the defaulter writes the annotation from the ConfigMap
    (None, "RawDeployment", True),  # NewDeployConfig renames the legacy value first
    (None, "Serverless", False),
    (None, None, False),  # KServe's shipped default: Serverless
    ({"serving.kserve.io/deploymentMode": "RawDeployment"}, "Serverless", True),  # renamed by the defaulter
    ({"serving.kserve.io/deploymentMode": "Knative"}, "Standard", False),  # the object's own word wins
])
def test_canaries_follow_the_mode_annotation_the_defaulter_writes(annotations: dict[str, str] | None,
                                                                  default: str | None, built: bool) -> None:
    obj = sample()
    if annotations is None:
        del obj["metadata"]["annotations"]
    else:
        obj["metadata"]["annotations"] = annotations
    canary(obj)["containers"][0]["resources"] = {"requests": {"cpu": "1500m", "memory": "8Gi"},
                                                 "limits": {"cpu": "1500m", "memory": "8Gi"}}
    related = collect([deploy(default)] if default else [], RELATED)
    out = list(walk(obj, related=related))
    canaries = [t for t in out if not isinstance(t, str) and t.template.startswith("spec.canary[0]")]
    assert bool(canaries) is built, out
    if built:
        assert findings(obj, related) == Counter(
            {"cpu-not-integer kserve-container spec.canary[0].predictor.containers[0].resources.cpu": 1})
    else:  # the whole InferenceService refused: no Pod, the stable predictor's neither, said once
        assert len(out) == 1 and isinstance(out[0], NoPod) and "KServe refuses a canary" in out[0], out


def test_a_bad_stable_field_is_named_where_it_is_written() -> None:
    """The canary is built over the stable predictor: a malformed value it inherits is the stable's field, one it
    sets is its own."""
    obj = sample()
    obj["spec"]["predictor"] = {"model": {"modelFormat": {"name": "sklearn"}, "storage": "x"}}
    with pytest.raises(ManifestError) as stable:
        list(walk(obj))
    assert dotted(stable.value.path) == "spec.predictor.model.storage"
    canary(obj)["model"] = {"storage": "y"}
    with pytest.raises(ManifestError) as own:
        list(walk(obj))
    assert dotted(own.value.path) == "spec.canary[0].predictor.model.storage"


def test_canaries_are_built_over_the_stable_predictor() -> None:
    """predictor.go reconcileCanaryDeployments/buildCanaryPredictor: each canary merged over the stable predictor
    (mergo, the canary's set fields win), a Deployment of its own; validateCanarySpecs refuses canaries outside
    Standard mode (said, never silently nothing)."""
    stable = {"model": model(storageUri="pvc://p/m")}
    canary = {"name": "v2", "model": model(storageUri="pvc://p/m2", resources={"requests": {"cpu": "500m"}})}
    obj = isvc(stable, {"serving.kserve.io/deploymentMode": "Standard"})
    obj["spec"]["canary"] = [{"trafficPercent": 10, "predictor": canary}]
    assert findings(obj, RT) == Counter(
        {"requests-not-equal-limits kserve-container spec.canary[0].predictor.model.resources.cpu": 1})
    targets = find_targets(obj, related=RT)
    assert [t.template for t in targets] == ["spec.predictor (predictor, ServingRuntime rt)",
                                             "spec.canary[0].predictor (canary v2, ServingRuntime rt)"]
    obj["spec"]["canary"][0]["predictor"]["model"]["resources"] = {"requests": {"cpu": "2"}}
    assert findings(obj, RT) == Counter()
    # the canary inherits the stable's logger: the agent, named at the stable's field
    obj["spec"]["predictor"]["logger"] = {"mode": "all"}
    assert findings(obj, RT) == both(AGENT, "spec.predictor.logger") + both(AGENT, "spec.predictor.logger")
    knative = isvc(stable)
    knative["spec"]["canary"] = [{"trafficPercent": 10, "predictor": canary}]
    assert list(walk(knative, related=RT)) == [
        "InferenceService spec.canary: KServe refuses a canary unless the serving.kserve.io/deploymentMode "
        "annotation is Standard (or, without it, inferenceservice-config deploy.defaultDeploymentMode is): its "
        "validating webhook (validateCanarySpecs) refuses the whole InferenceService, so KServe builds no Pod, the "
        "stable predictor's neither; set the annotation to Standard or remove spec.canary"]


@pytest.mark.parametrize("mode", ["Serverless", "Knative", "ModelMesh", "Raw"])
def test_a_canary_outside_standard_mode_refuses_the_whole_inferenceservice(mode: str) -> None:
    """validateCanarySpecs (inference_service_validation.go:183-192) runs in KServe's validating webhook
    (validateInferenceService:176, CREATE and UPDATE, failurePolicy Fail): outside Standard mode it refuses the
    object, so no Pod is built, the stable predictor's neither (formerly its Pod was judged beside a reason), nor
    is ModelMesh's own reason given. The twin, annotated Standard, builds both."""
    obj = sample()
    del obj["spec"]["predictor"]["containers"][0]["resources"]["limits"]  # the stable's Pod alone would fail
    obj["metadata"]["annotations"] = {"serving.kserve.io/deploymentMode": mode}
    (reason,) = walk(obj)
    assert isinstance(reason, NoPod) and reason.startswith("InferenceService spec.canary: KServe refuses a canary")
    assert "the stable predictor's neither" in reason
    assert findings(obj) == Counter()
    obj["metadata"]["annotations"] = STANDARD
    assert [t.template for t in find_targets(obj)] == [
        "spec.predictor (predictor)", "spec.canary[0].predictor (canary v2)"]
    assert findings(obj) != Counter()
