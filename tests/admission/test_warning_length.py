"""Admission warnings cut at 120 characters keep the way out: what to do comes first, the template path last."""

from __future__ import annotations

from webhook.core.config import parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.refusal import WARNING_CHARS, fit_warnings, warning

LWS = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "vllm"},
    "spec": {"leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {"containers": [{
        "name": "vllm-worker", "image": "i",
        "resources": {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}}}]}}}},
}


def test_a_long_warning_says_what_to_do_first() -> None:
    """A LeaderWorkerSet's template path filled the 120 characters: the container and the fix were cut off."""
    verdict = evaluate(LWS, parse_config({}), Mode.WARN)
    (shown,) = fit_warnings([warning(v) for _, v in verdict.violations])
    assert len(shown) <= WARNING_CHARS
    assert shown.startswith('requests-not-equal-limits: container "vllm-worker": set resources.requests.cpu to 4; '), \
        shown
