"""``make bench``'s admission-latency part, run for a few rounds so that it keeps working."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import admission_latency
from tests.binaries import kube_version
from webhook.core.kubeversion import parse_minor
from webhook.policies.generate import VALIDATING_SINCE


def test_admission_latency_smoke(tmp_path: Path) -> None:
    release = kube_version()
    if parse_minor(release) < parse_minor(VALIDATING_SINCE):  # the bench installs the generated policies
        pytest.skip(f"kube-apiserver {release}: the generated ValidatingAdmissionPolicies use the CEL lists library "
                    f"(flatten()), accepted in new expressions from {VALIDATING_SINCE} (qos-guard policy refuses "
                    "older minors)")
    result = {"date": "today", "cpus": 2, "rounds": 3, "results": admission_latency.measure(3)}
    admission_latency.write(result, tmp_path)
    saved = json.loads((tmp_path / "admission-latency.json").read_text())
    assert set(saved["results"]) == set(admission_latency.NAMESPACES)
    for parts in saved["results"].values():
        assert parts["create"]["n"] == parts["refuse"]["n"] == 3
    table = (tmp_path / "admission-latency.md").read_text()
    assert "| admission policies (CEL in the API server) |" in table
