"""Per-rule fixtures (``tests/fixtures/rules/<rule-id>/{pass,fail}/*.yaml``, as Pod Security Admission keeps
them per check), each driven through the engine, ``qos-guard check`` and the webhook: a ``fail`` fixture
breaks exactly its rule's promise everywhere; a ``pass`` fixture is admitted everywhere."""

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
from webhook.core.engine import Mode, evaluate
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


def _fixtures(outcome: str) -> list[Any]:
    return [pytest.param(rule, path, id=f"{rule}/{path.stem}")
            for rule in RULE_IDS for path in sorted((RULES_DIR / rule / outcome).glob("*.yaml"))]


def test_every_rule_has_pass_and_fail_fixtures() -> None:
    assert sorted(p.name for p in RULES_DIR.iterdir() if p.is_dir()) == sorted(RULE_IDS)
    for rule in RULE_IDS:
        for outcome in ("pass", "fail"):
            assert list((RULES_DIR / rule / outcome).glob("*.yaml")), f"{rule} has no {outcome} fixture"


def _validate(obj: dict[str, Any], config: Config) -> dict[str, Any]:
    client = create_app(config).test_client()
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
    obj = yaml.safe_load(path.read_text())
    # Exactly its rule (CONTRIBUTING's promise), not "among others": a fixture that also broke another rule
    # would pass whichever of the two fired.
    assert {v.rule for _, v in evaluate(obj, config, Mode.ENFORCE).violations} == {rule}
    cli = _check(path, flags)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert {line.split(": ")[2] for line in cli.stdout.splitlines()} == {rule}, cli.stdout
    response = _validate(obj, config)
    assert response["allowed"] is False
    assert _named(response["status"]["message"]) == [rule], response["status"]["message"]


@pytest.mark.parametrize(("rule", "path"), _fixtures("pass"))
def test_pass_fixture_is_admitted_everywhere(rule: str, path: Path) -> None:
    config, flags = _config(rule, path)
    obj = yaml.safe_load(path.read_text())
    assert evaluate(obj, config, Mode.ENFORCE).violations == []
    cli = _check(path, flags)
    assert cli.returncode == 0 and cli.stdout == "", cli.stdout + cli.stderr
    assert _validate(obj, config)["allowed"] is True
