"""What KServe v0.20.0 refuses in an LLMInferenceService's merged spec before any Pod
(``webhook.core.operators.llmisvc_validation``; config_merge.go combineBaseRefsConfig, its validator and
``enumerateLoRAAdapters``): each means no Pods, said, never a verdict on Pods that do not exist."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_llmisvc import config, llmisvc, main, targets
from webhook.core.operators import collect
from webhook.core.operators.llmisvc import RELATED
from webhook.core.workloads import walk


def reasons(obj: dict[str, Any], *related: dict[str, Any]) -> list[str]:
    return [r for r in walk(obj, related=collect(related, RELATED)) if isinstance(r, str)]


@pytest.mark.parametrize(("spec", "said"), [
    ({"worker": main()}, "spec.worker needs spec.parallelism data (with dataLocal) or pipeline above 0"),
    ({"worker": main(), "parallelism": {"tensor": 2}}, "spec.worker needs spec.parallelism"),
    ({"worker": main(), "parallelism": {"data": 2}}, "sets one of data and dataLocal without the other"),
    ({"worker": main(), "parallelism": {"data": 2, "dataLocal": 1, "pipeline": 2}}, "sets both pipeline and data"),
    ({"parallelism": {"pipeline": 0}}, "spec.parallelism.pipeline is not above 0"),
    ({"prefill": {"template": main(), "worker": main()}}, "spec.prefill.worker needs spec.prefill.parallelism"),
])
def test_parallelism_kserve_refuses_means_no_pods(spec: dict[str, Any], said: str) -> None:
    """validateWorkloadParallelism on the merged spec (config_merge.go:432-445): the leader and worker judged
    before, with no preset, are Pods KServe never makes."""
    obj = llmisvc({"template": main(), **spec})
    [reason] = reasons(obj)
    assert said in reason and reason.endswith("so KServe builds no Pods")
    assert targets(obj) == []


def test_valid_parallelism_builds_the_leader_and_worker() -> None:
    """The twin: data with dataLocal (KServe's data-parallel preset), or pipeline with its preset given."""
    data = llmisvc({"template": main(), "worker": main(), "parallelism": {"data": 2, "dataLocal": 1}})
    assert [t.template.split(" (")[1].split(",")[0] for t in targets(data)] == ["leader", "worker"]
    pipeline = llmisvc({"template": main(), "worker": main(), "parallelism": {"pipeline": 2}})
    preset = config("kserve-config-llm-worker-pipeline-parallel", {"worker": main()})
    assert reasons(pipeline, preset) == [] and len(targets(pipeline, preset)) == 2


def test_a_base_ref_can_make_the_merged_spec_invalid() -> None:
    """The validator judges the merged spec: a worker from a baseRef without parallelism is refused too."""
    obj = llmisvc({"template": main(), "baseRefs": [{"name": "workers"}]})
    [reason] = reasons(obj, config("workers", {"worker": main()}))
    assert "spec.worker needs spec.parallelism" in reason
