"""The deployment mode KServe v0.20.0 builds an InferenceService in (``GetDeploymentMode``)."""

from __future__ import annotations

from collections import Counter

from tests.unit.kserve_cases import (
    QUEUE_PROXY,
    RT,
    config,
    findings,
    isvc,
    model,
    runtime,
)
from webhook.core.operators import collect
from webhook.core.operators.kserve import RELATED


def test_an_unknown_deployment_mode_is_the_default_one() -> None:
    """GetDeploymentMode (controller utils.go): status.deploymentMode first, then an annotation naming a known
    mode, else deploy.defaultDeploymentMode (KServe's: Serverless, so Knative's queue-proxy)."""
    raw = isvc({"model": model(storageUri="pvc://m")}, {"serving.kserve.io/deploymentMode": "Raw"})
    assert findings(raw, RT) == Counter(QUEUE_PROXY)
    standard = collect([runtime("rt", "sklearn"), config(deploy={"defaultDeploymentMode": "Standard"})], RELATED)
    assert findings(raw, standard) == Counter()
    updated = {**isvc({"model": model(storageUri="pvc://m")}, {"serving.kserve.io/deploymentMode": "Serverless"}),
               "status": {"deploymentMode": "RawDeployment"}}
    assert findings(updated, RT) == Counter()
