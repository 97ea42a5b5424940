"""Each admission endpoint is a handler in one table, and every one makes the same skip test first."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers import admission_review, container, pod, rl
from webhook.admission.review import ENDPOINTS, Decision, parse_review, review_decision
from webhook.core.config import parse_config

CONFIG = parse_config({"placement": {"schedulerName": "qos-guard-numa"}})
BAD = pod(container("app", rl("1500m", "1Gi"), rl("1500m", "1Gi")))
UNEQUAL = pod(container("app", rl("1", "1Gi"), rl("2", "1Gi")))  # the mutation sets the request to the limit
POD_ENDPOINTS = [path for path in ENDPOINTS if path != "/validate-namespace"]


def decide(path: str, obj: Any, **request: Any) -> Decision:
    review = parse_review(json.dumps(admission_review(obj, **request)).encode(), ENDPOINTS[path])
    return review_decision(review, ENDPOINTS[path], CONFIG, own_namespace="qos-guard")


@pytest.mark.parametrize("path", POD_ENDPOINTS)
@pytest.mark.parametrize("namespace", ["kube-system", "qos-guard"])
def test_every_pod_endpoint_passes_over_the_namespaces_never_judged(path: str, namespace: str) -> None:
    decision = decide(path, BAD, namespace=namespace)
    assert decision == Decision(True, skipped=f"namespace {namespace} is never judged")
    assert decision.label == "skipped"


@pytest.mark.parametrize("path", POD_ENDPOINTS)
def test_every_pod_endpoint_passes_over_what_it_does_not_judge_in_the_same_words(path: str) -> None:
    assert decide(path, BAD, operation="DELETE").skipped == "DELETE of Pod"
    assert decide(path, BAD, subresource="binding").skipped == "CREATE of Pod/binding"


def test_each_endpoint_answers_with_its_own_handler() -> None:
    """One handler per endpoint: what each answers a bad Pod in a judged namespace."""
    labels = {path: decide(path, UNEQUAL, namespace="ns").label for path in POD_ENDPOINTS}
    assert labels == {"/validate": "denied", "/validate/mutate": "allowed", "/warn": "warned", "/mutate": "patched",
                      "/place": "allowed"}  # a Pod that needs no NUMA node of its own keeps its scheduler
    assert decide("/validate-namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "x", "labels": {"qos-guard.io/mode": "nope"}}}, kind="Namespace", namespace="").label == "denied"
