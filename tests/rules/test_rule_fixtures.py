"""Per-rule fixtures (``tests/fixtures/rules/<rule-id>/{pass,fail}/*.yaml``, as Pod Security Admission keeps
them per check), each driven through the engine, ``qos-guard check`` and the webhook: a ``fail`` fixture
breaks exactly its rule's promise everywhere; a ``pass`` fixture is admitted everywhere.

A rule that reads the cluster's DRA objects has them in ``<rule-id>/facts.yaml`` (ResourceSlices, claims and
templates; a fixture whose facts would break the others' names its own file in a ``# facts: FILE`` line): the
engine gets them as ``Facts``, ``check`` as input files beside the fixture (it reads the DRA objects of its
input), the webhook as its ``policy.draObjects`` cache would hold them. A fixture that needs them says
``# needs: facts``: a fail one is not refused for its rule by the webhook without them (unknown is not a
refusal), a pass one is not judged there without them (the webhook cannot tell a DRA CPU claim then, so
``dra-unaligned`` judges it as any claim). What the
nodes' kubelets say (configz: ``cpuManagerPolicy``), which ``check`` reads only from a cluster, is a fixture's
``# kubelets: node-a=none, node-b=static`` line: the engine gets it, and a fail fixture with it is judged by the
engine alone."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import inprocess
from tests.helpers import admission_review
from webhook.core.config import Config
from webhook.core.dracpu import dra_facts
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import NO_FACTS, Facts
from webhook.core.kubeversion import resolve
from webhook.core.rules import RULE_IDS
from webhook.manifests.configfile import load_config
from webhook.serving.app import create_app

RULES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "rules"


def _config(rule: str, fixture: Path | None = None) -> tuple[Config, list[str]]:
    """The rule's configuration and ``check``'s flags for it; a fixture whose answer is one minor's says so in a
    ``# kubernetes: 1.MINOR`` line (``fixture_minor``), judged there, else at the default (newest) minor."""
    path = RULES_DIR / rule / "config.yaml"
    config = load_config(path if path.exists() else None)
    flags = ["--config", str(path)] if path.exists() else []
    minor = fixture_minor(fixture) if fixture is not None else None
    if minor is not None:
        config = replace(config, kubernetes_version=resolve(minor))
        flags += ["--kubernetes-version", minor]
    return config, flags


def fixture_minor(path: Path) -> str | None:
    """The minor a fixture is pinned to (``# kubernetes: 1.36``), or None."""
    found = re.search(r"^# kubernetes: (1\.[0-9]+)$", path.read_text(), re.M)
    return found[1] if found else None


def _facts(rule: str, fixture: Path) -> tuple[Facts, list[str]]:
    """The rule's cluster facts (``facts.yaml``, the fixture's ``# kubelets:`` line) for the engine, and the
    paths ``check`` reads them from."""
    named = re.search(r"^# facts: (\S+)$", fixture.read_text(), re.M)  # a fixture's own facts, else the rule's
    path = RULES_DIR / rule / (named[1] if named else "facts.yaml")
    if not path.exists():
        return NO_FACTS, []
    objects = [o for o in yaml.safe_load_all(path.read_text()) if o]
    slices = any(o.get("kind") == "ResourceSlice" for o in objects)
    dra = dra_facts(objects, slices=slices)
    kubelets = _kubelets(fixture)
    if kubelets is not None:
        dra = replace(dra, cpu_managers=kubelets)
    return Facts(dra=dra), [str(path)]


def _kubelets(fixture: Path) -> dict[str, str | None] | None:
    found = re.search(r"^# kubelets: (.*)$", fixture.read_text(), re.M)
    if found is None:
        return None
    pairs = (item.strip().split("=") for item in found[1].split(","))
    return {node: policy for node, policy in pairs}


def _needs_facts(path: Path) -> bool:
    return re.search(r"^# needs: facts$", path.read_text(), re.M) is not None


def _fixtures(outcome: str) -> list[Any]:
    return [pytest.param(rule, path, id=f"{rule}/{path.stem}")
            for rule in RULE_IDS for path in sorted((RULES_DIR / rule / outcome).glob("*.yaml"))]


def test_every_rule_has_pass_and_fail_fixtures() -> None:
    assert sorted(p.name for p in RULES_DIR.iterdir() if p.is_dir()) == sorted(RULE_IDS)
    for rule in RULE_IDS:
        for outcome in ("pass", "fail"):
            assert list((RULES_DIR / rule / outcome).glob("*.yaml")), f"{rule} has no {outcome} fixture"


def _validate(obj: dict[str, Any], config: Config, facts: Facts = NO_FACTS) -> dict[str, Any]:
    """The webhook's answer; with ``facts``' DRA objects as its ``policy.draObjects`` cache holds them."""
    dra = facts.dra
    client = create_app(config, dra=None if dra is None else lambda namespace: dra).test_client()
    review = admission_review(obj, namespace="fixtures")
    answer = client.post("/validate", data=json.dumps(review), content_type="application/json")
    assert answer.status_code == 200
    response: dict[str, Any] = answer.get_json()["response"]
    return response


def _check(path: Path, flags: list[str]) -> subprocess.CompletedProcess[str]:
    return inprocess.run(["check", str(path), *flags])


def _named(message: str) -> list[str]:
    """The rule ids a refusal names (each finding is ``rule-id: message``)."""
    return [r for r in RULE_IDS if re.search(rf"(^|[\s;:(]){re.escape(r)}: ", message)]


@pytest.mark.parametrize(("rule", "path"), _fixtures("fail"))
def test_fail_fixture_breaks_its_rule_everywhere(rule: str, path: Path) -> None:
    config, flags = _config(rule, path)
    facts, facts_paths = _facts(rule, path)
    obj = yaml.safe_load(path.read_text())
    # Exactly its rule (CONTRIBUTING's promise), not "among others": a fixture that also broke another rule
    # would pass whichever of the two fired.
    assert {v.rule for _, v in evaluate(obj, config, Mode.ENFORCE, facts).violations} == {rule}
    if _kubelets(path) is not None:  # check reads configz from a cluster only
        assert rule not in {v.rule for _, v in evaluate(obj, config, Mode.ENFORCE).violations}, "unknown without"
        return
    cli = _check(path, [*facts_paths, *flags])
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert {line.split(": ")[2] for line in cli.stdout.splitlines()} == {rule}, cli.stdout
    if _needs_facts(path):
        assert rule not in {v.rule for _, v in evaluate(obj, config, Mode.ENFORCE).violations}, "unknown without"
        without = _validate(obj, config)
        assert without["allowed"] or rule not in _named(without["status"]["message"]), "unknown without"
    response = _validate(obj, config, facts)
    assert response["allowed"] is False
    assert _named(response["status"]["message"]) == [rule], response["status"]["message"]


@pytest.mark.parametrize(("rule", "path"), _fixtures("pass"))
def test_pass_fixture_is_admitted_everywhere(rule: str, path: Path) -> None:
    config, flags = _config(rule, path)
    facts, facts_paths = _facts(rule, path)
    obj = yaml.safe_load(path.read_text())
    assert evaluate(obj, config, Mode.ENFORCE, facts).violations == []
    cli = _check(path, [*facts_paths, *flags])
    assert cli.returncode == 0 and cli.stdout == "", cli.stdout + cli.stderr
    # the webhook with the facts (policy.draObjects: true), and without them where it can tell
    assert _validate(obj, config, facts)["allowed"] is True
    if not _needs_facts(path):  # (without, dra-unaligned cannot tell a DRA CPU claim)
        assert _validate(obj, config)["allowed"] is True
