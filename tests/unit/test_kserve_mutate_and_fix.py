"""What mutate mode and ``fix`` change on an InferenceService (the model's own fields), and what they leave to the
Pods KServe builds (an injected container is never changed)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests import inprocess
from tests.unit.kserve_cases import (
    RAW,
    isvc,
    runtime,
)
from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.operators import collect
from webhook.core.operators.kserve import RELATED


def test_the_mutation_sets_the_models_resources_and_the_result_is_judged_again() -> None:
    obj = isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "rt",
                          "resources": {"requests": {"cpu": "1"}}}}, RAW)
    facts = Facts(related=collect([runtime("rt", "sklearn")], RELATED))
    verdict = evaluate(obj, Config(), Mode.MUTATE, facts)
    assert verdict.allowed
    assert [(dotted(c.path), c.new) for c in verdict.changes] == [("spec.predictor.model.resources.requests.cpu", "2")]
    # queue-proxy is Knative's: found, and no change is planned on it (the setting is named instead)
    knative = evaluate(isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "rt"}}), Config(),
                       Mode.MUTATE, facts)
    assert not knative.allowed and knative.changes == ()
    assert any("queue-sidecar-cpu-request" in v.message for _, v in knative.violations)


def test_an_injected_container_named_by_a_field_inside_a_container_is_never_changed() -> None:
    """A custom predictor's STORAGE_URI env brings the storage-initializer, named by that env value, which is
    inside the kserve-container the mutation may change: the initializer is still not changed (nor crashes)."""
    obj = isvc({"containers": [{"name": "kserve-container", "image": "x",
                                "env": [{"name": "STORAGE_URI", "value": "gs://bucket/model"}]}]}, RAW)
    verdict = evaluate(obj, Config(), Mode.MUTATE)
    assert verdict.changes == ()
    # the Pods KServe builds are patched at creation (the webhook is re-invoked after KServe's): mutate mode
    # admits it; fix, which edits the object alone, leaves the initializer's findings
    assert verdict.allowed
    [result] = verdict.results
    assert {dotted(v.subject) for v in result.left_by_fix} == {
        "spec.predictor.containers[0].env[0].value.resources.cpu",
        "spec.predictor.containers[0].env[0].value.resources.memory"}
    assert evaluate(obj, Config(), Mode.ENFORCE).allowed is False


def test_fix_sets_the_models_resources_from_a_runtime_in_another_file(tmp_path: Path) -> None:
    """``fix`` reads every file first, as check does: the runtime in one file, the InferenceService in another;
    the model's cpu request is set to the runtime's limit it runs under, and check then passes both."""
    (tmp_path / "runtime.yaml").write_text(yaml.safe_dump(runtime("rt", "sklearn")))
    isvc_file = tmp_path / "isvc.yaml"
    isvc_file.write_text(yaml.safe_dump(isvc({"model": {"modelFormat": {"name": "sklearn"}, "runtime": "rt",
                                                        "storageUri": "pvc://m",
                                                        "resources": {"requests": {"cpu": "1"}}}}, RAW)))
    assert inprocess.run(("check", str(tmp_path))).returncode == 1
    fixed = inprocess.run(("fix", str(tmp_path)))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    after = yaml.safe_load(isvc_file.read_text())
    assert after["spec"]["predictor"]["model"]["resources"]["requests"]["cpu"] == "2"
    again = inprocess.run(("check", str(tmp_path)))
    assert again.returncode == 0 and "2 objects checked, 0 violations" in again.stderr, again.stderr
