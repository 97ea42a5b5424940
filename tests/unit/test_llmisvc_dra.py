"""KServe v0.20.0's managed DRA on an LLMInferenceService (``webhook.core.operators.llmisvc_dra``; managed_dra.go):
the ``serving.kserve.io/exp-dra-*`` annotations give each workload Pod the claim ``managed-device`` from KServe's
ResourceClaimTemplate, so the DRA rules judge it as the Pod KServe makes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.test_llmisvc import GOOD, llmisvc, main, targets
from webhook.core.config import Config, Policy
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.operators.llmisvc_dra import child_name
from webhook.core.workloads import walk

CLASS = "serving.kserve.io/exp-dra-device-class"


def annotated(spec: dict[str, Any] | None = None, /, **annotations: str) -> dict[str, Any]:
    """The object with ``serving.kserve.io/exp-dra-<key>`` annotations (``device_class=...``)."""
    return llmisvc(spec or {"template": main()},
                   annotations={f"serving.kserve.io/exp-dra-{k.replace('_', '-')}": v for k, v in annotations.items()})


def findings(obj: dict[str, Any], dra: str = "warn") -> list[tuple[str, str, str]]:
    """(rule, template, "violation" or "notice") of each finding, under ``policy.dra``."""
    config = Config(policy=Policy(dra=dra))
    result = evaluate(obj, config, Mode.ENFORCE, Facts())
    return sorted([(v.rule, t.template, "violation") for t, v in result.violations]
                  + [(v.rule, t.template, "notice") for t, v in result.advisories])


def test_a_managed_dra_claim_is_judged_as_kserve_adds_it() -> None:
    """A Guaranteed main with whole CPUs and the managed claim: dra-unaligned's notice, and a refusal under
    policy.dra: deny. The twin without the annotation has neither."""
    template = "spec.template (main, over kserve-config-llm-template)"
    obj = annotated(device_class="gpu.nvidia.com")
    assert findings(obj) == [("dra-unaligned", template, "notice")]
    assert findings(obj, "deny") == [("dra-unaligned", template, "violation")]
    assert findings(llmisvc({"template": main()}), "deny") == []


def test_the_claim_goes_to_every_workload_pod_not_the_scheduler() -> None:
    obj = annotated({"template": main(), "prefill": {"template": main()},
                     "router": {"scheduler": {"template": {"containers": [{"name": "main", "resources": GOOD}]}}}},
                    device_class="gpu.nvidia.com")
    claims = {t.template.split(" ")[0]: (t.spec.get("resourceClaims"), t.spec["containers"][0]["resources"].get(
        "claims")) for t in targets(obj)}
    made = ([{"name": "managed-device", "resourceClaimTemplateName": "m-managed-dra"}], [{"name": "managed-device"}])
    assert claims == {"spec.template": made, "spec.prefill.template": made,
                      "spec.router.scheduler.template": (None, None)}


def test_the_named_container_takes_it_else_the_first() -> None:
    """targetContainerForDRA: the container exp-dra-container-name names (none when it is not there), else the
    first; the pod claim is added either way."""
    two = {"template": {"containers": [{"name": "main", "resources": GOOD}, {"name": "side", "resources": GOOD}]}}
    for name, taker in (("side", "side"), ("", "main"), ("absent", None)):
        extra = {"container_name": name} if name else {}
        [built] = targets(annotated(two, device_class="gpu.nvidia.com", **extra))
        takers = [c["name"] for c in built.spec["containers"] if c["resources"].get("claims")]
        assert takers == ([taker] if taker else []), name
        assert [c["name"] for c in built.spec["resourceClaims"]] == ["managed-device"]


@pytest.mark.parametrize("annotations", [
    {"device_class": "  "}, {"device_class": "GPU_Class"}, {"device_class": "gpu.nvidia.com", "device_count": "0"},
    {"device_class": "gpu.nvidia.com", "device_count": "two"}, {"device_count": "2"},
    {"device_class": "gpu.nvidia.com", "cel_selector": " \n "},
    {"device_class": "gpu.nvidia.com", "container_name": "Main"}])
def test_annotations_kserves_webhook_refuses_build_no_pods(annotations: dict[str, str]) -> None:
    [reason] = list(walk(annotated(**annotations)))
    assert isinstance(reason, str) and reason.endswith("KServe's webhook refuses the object, so it builds no Pods")


@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,70}[a-z0-9])?", fullmatch=True))
def test_the_template_name_is_knatives_child_name(name: str) -> None:
    """kmeta.ChildName: at most 63 characters, the plain concatenation whenever that fits."""
    made = child_name(name, "-managed-dra")
    assert len(made) <= 63 and made.endswith("-managed-dra")
    assert (made == name + "-managed-dra") is (len(name) <= 51)
