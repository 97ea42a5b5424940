"""``check`` does each piece of work once per object: the engine's walk (its verdict carries what the runner counts
and where an exempt object is said), and each namespace's projection of the input's claims."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.test_cluster_claim_specs import cpus, template
from tests.unit.test_cluster_claim_specs import pod as claim_pod
from tests.unit.test_dra_cpu_class import DENY
from webhook.batch import runner
from webhook.batch.report import Report
from webhook.core import engine, workloads
from webhook.core.config import parse_config
from webhook.core.engine import Mode, evaluate


def check(tmp_path: Path, objects: list[dict[str, Any]], config: Any = DENY) -> Report:
    path = tmp_path / "input.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return runner.check_paths([str(path)], config, Mode.ENFORCE)


def counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Count the calls of ``module.name``."""
    calls = [0]
    real = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, counted)
    return calls


DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "team"},
              "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:1"}]}}}}


def test_check_walks_each_object_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    walks = [0]
    real = workloads.walk

    def walk(obj: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        walks[0] += not args  # the top of a walk (a List's items recurse with a path)
        return real(obj, *args, **kwargs)
    for module in (engine, runner):
        monkeypatch.setattr(module, "walk", walk, raising=False)
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}
    report = check(tmp_path, [DEPLOYMENT, service])
    assert walks[0] == 2 and report.skipped == {"Service": 1}, (walks, report.skipped)


def test_the_verdict_says_what_has_no_pod_and_the_first_pod_spec() -> None:
    listed = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}, DEPLOYMENT,
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "empty"}, "spec": {}}]}
    verdict = evaluate(listed, DENY, Mode.ENFORCE)
    assert verdict.passed_over == ("Service", "Deployment without a pod template"), verdict.passed_over
    assert verdict.first is not None and verdict.first.name == "d", verdict.first
    exempt = evaluate(listed, parse_config({"exemptions": {"namespaces": ["team"]}}), Mode.ENFORCE)
    assert exempt.exempt is not None and exempt.first == verdict.first, exempt


def test_each_namespace_s_claims_are_projected_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Of no namespace, of a and of c: three projections, however many Pods judge with them."""
    projections = counting(monkeypatch, runner, "dra_facts")
    unplaced = copy.deepcopy(template("t", "a", cpus("cpus", "2")))
    del unplaced["metadata"]["namespace"]
    check(tmp_path, [unplaced, template("t", "a", cpus("cpus", "2")), template("u", "c", cpus("cpus", "2")),
                     claim_pod("one", "a", "1", "t"), claim_pod("two", "c", "1", "u"),
                     claim_pod("three", None, "1", "u")])
    assert projections[0] == 3, projections
