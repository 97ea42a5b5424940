"""Per-kind fixtures for the custom resources inference and training run as (``tests/fixtures/workloads/<Kind>/
{pass,fail}/*.yaml``, one fail fixture per template path, the broken template named in its ``# broken:`` line),
each driven through the engine, ``qos-guard check``, ``qos-guard fix`` and the webhook: a fail fixture is refused
everywhere with the broken replica group named, and ``fix`` mends that template and no other; a pass fixture is
admitted everywhere."""

from __future__ import annotations

import difflib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import inprocess
from tests.helpers import admission_review
from webhook.core.config import Config, parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.fieldpath import dotted
from webhook.core.workloads import BUILTIN, LIST, MAP, find_targets
from webhook.serving.app import create_app

WORKLOADS_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "workloads"
CUSTOM = sorted(k.kind for k in BUILTIN if not k.core)
ROUND_UP = {"mutation": {"cpuRounding": "up"}}


def _fixtures(outcome: str) -> list[Any]:
    return [pytest.param(path, id=f"{path.parent.parent.name}/{outcome}/{path.stem}")
            for kind in CUSTOM for path in sorted((WORKLOADS_DIR / kind / outcome).glob("*.yaml"))]


def _broken(path: Path) -> str:
    found = re.search(r"^# broken: (.*)$", path.read_text(), re.M)
    assert found, f"{path}: no '# broken:' line"
    return "" if found[1] == "(the one template)" else found[1]


def _matches(pattern: tuple[str, ...], path: tuple[Any, ...]) -> bool:
    pairs = zip(pattern, path, strict=False)
    return len(pattern) == len(path) and all(
        (p == LIST and isinstance(s, int)) or (p == MAP and isinstance(s, str)) or p == s for p, s in pairs)


def test_every_custom_kind_has_fixtures_for_every_template() -> None:
    """A pass fixture per kind, and a fail fixture per template path (for a list or map: one of its items)."""
    for kind in BUILTIN:
        if kind.core:
            continue
        folder = WORKLOADS_DIR / kind.kind
        assert list((folder / "pass").glob("*.yaml")), f"{kind.kind} has no pass fixture"
        covered = set()
        for fixture in (folder / "fail").glob("*.yaml"):
            for target, _ in evaluate(yaml.safe_load(fixture.read_text()), Config(), Mode.ENFORCE).violations:
                covered |= {t.path for t in kind.templates if _matches(t.segments, target.path)}
        assert covered == {t.path for t in kind.templates}, kind.kind


def _validate(obj: dict[str, Any], config: Config) -> dict[str, Any]:
    client = create_app(config).test_client()
    answer = client.post("/validate", data=json.dumps(admission_review(obj, namespace="fixtures")),
                         content_type="application/json")
    assert answer.status_code == 200, answer.get_data(as_text=True)
    response: dict[str, Any] = answer.get_json()["response"]
    return response


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return inprocess.run(args)


@pytest.mark.parametrize("path", _fixtures("fail"))
def test_fail_fixture_names_its_broken_template_everywhere(path: Path) -> None:
    broken = _broken(path)
    obj = yaml.safe_load(path.read_text())
    found = evaluate(obj, Config(), Mode.ENFORCE).violations
    assert found and {v.rule for _, v in found} == {"cpu-not-integer"}
    assert {t.template for t, _ in found} == {broken}
    prefix = f"{broken}: " if broken else ""
    assert all(v.message.startswith(f"{prefix}container ") for _, v in found), found
    # the other templates of the object are judged, and clean
    others = [t for t in find_targets(obj) if t.template != broken]
    assert len(others) == len(list(find_targets(obj))) - 1
    cli = _cli("check", str(path))
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert cli.stdout.count(": cpu-not-integer: ") == 1 and f"cpu-not-integer: {prefix}container" in cli.stdout
    response = _validate(obj, Config())
    assert response["allowed"] is False and f"cpu-not-integer: {prefix}container" in response["status"]["message"]


# Kinds whose operator makes each of cpu and memory both a container's request and limit from one field
# (VLLMRuntime's spec.deploymentConfig.resources.cpu): the mutation, which sets requests and limits, has no
# field to set, so fix leaves them (and says so) rather than write fields the operator never reads.
UNMENDABLE = {"VLLMRuntime"}


@pytest.mark.parametrize("path", _fixtures("fail"))
def test_fix_rewrites_the_broken_template_only(path: Path, tmp_path: Path) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(ROUND_UP))
    copy = tmp_path / path.name
    copy.write_text(path.read_text())
    obj = yaml.safe_load(path.read_text())
    (broken,) = {t.path for t, _ in evaluate(obj, Config(), Mode.ENFORCE).violations}
    out = _cli("fix", "--config", str(config_file), str(copy))
    if obj["kind"] in UNMENDABLE:  # no field of the object is a request or a limit: left, said, file untouched
        assert out.returncode == 1 and copy.read_text() == path.read_text(), out.stdout + out.stderr
        assert "cpu-not-integer" in out.stdout and "(cannot be fixed automatically)" in out.stdout, out.stdout
        assert not evaluate(obj, parse_config(ROUND_UP), Mode.MUTATE).changes
        return
    assert out.returncode == 0, out.stdout + out.stderr
    fixed = yaml.safe_load(copy.read_text())
    assert evaluate(fixed, parse_config(ROUND_UP), Mode.ENFORCE).violations == []
    # only lines of the broken template changed: the cpu request and limit, nothing else
    changed = [line for line in difflib.unified_diff(path.read_text().splitlines(), copy.read_text().splitlines(),
                                                     n=0, lineterm="") if line[:1] in "+-" and line[:3] not in
               ("+++", "---")]
    assert len(changed) == 4 and all("cpu:" in line for line in changed), changed
    for target in find_targets(obj):
        after = next(t for t in find_targets(fixed) if t.path == target.path)
        # the pod fields (a ServingRuntime's spec holds its workerSpec: compare what is the template's own)
        own = ("containers", "initContainers", "resources")
        assert ({k: after.spec.get(k) for k in own} == {k: target.spec.get(k) for k in own}) is \
            (target.path != broken), dotted(target.path)


@pytest.mark.parametrize("path", _fixtures("pass"))
def test_pass_fixture_is_admitted_everywhere(path: Path) -> None:
    obj = yaml.safe_load(path.read_text())
    assert list(find_targets(obj)), "nothing judged"
    assert evaluate(obj, Config(), Mode.ENFORCE).violations == []
    cli = _cli("check", str(path))
    assert cli.returncode == 0 and cli.stdout == "", cli.stdout + cli.stderr
    assert _validate(obj, Config())["allowed"] is True


DECLARED: dict[str, Any] = {"workloads": [{"group": "inference.example.com", "version": "v1", "kind": "ModelServer",
                                            "plural": "modelservers",
                                            "templates": ["spec.router.template.spec",
                                                          {"path": "spec.shards[*].template.spec", "name": "shard"}]}]}
MODEL_SERVER: dict[str, Any] = {
    "apiVersion": "inference.example.com/v1", "kind": "ModelServer", "metadata": {"name": "llama"},
    "spec": {"router": {"template": {"spec": {"containers": [
                 {"name": "router", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}},
             "shards": [{"name": "s0", "template": {"spec": {"containers": [
                 {"name": "vllm", "resources": {"limits": {"cpu": "8", "memory": "64Gi"}}}]}}},
                        {"name": "s1", "template": {"spec": {"containers": [
                 {"name": "vllm", "resources": {"limits": {"cpu": "7500m", "memory": "64Gi"}}}]}}}]}}


def test_a_declared_kind_is_judged_by_check_fix_and_the_webhook(tmp_path: Path) -> None:
    """A kind from the configuration's ``workloads``: unknown without it, judged with it, everywhere."""
    config = parse_config(DECLARED)
    manifest = tmp_path / "llama.yaml"
    manifest.write_text(yaml.safe_dump(MODEL_SERVER, sort_keys=False))
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(DECLARED))
    assert evaluate(MODEL_SERVER, Config(), Mode.ENFORCE).results == ()
    assert _validate(MODEL_SERVER, Config())["allowed"] is True  # not a kind it judges
    (found,) = evaluate(MODEL_SERVER, config, Mode.ENFORCE).violations
    assert found[1].message.startswith('spec.shards[1] (s1): container "vllm" (spec.shards[1].template.spec.')
    plain = _cli("check", str(manifest), "--allow-empty")
    assert plain.returncode == 0 and "skipped: 1 ModelServer" in plain.stderr, plain.stderr
    cli = _cli("check", "--config", str(config_file), str(manifest))
    assert cli.returncode == 1 and "cpu-not-integer: spec.shards[1] (s1)" in cli.stdout, cli.stdout + cli.stderr
    response = _validate(MODEL_SERVER, config)
    assert response["allowed"] is False and "spec.shards[1] (s1)" in response["status"]["message"]
    round_up = tmp_path / "round.yaml"
    round_up.write_text(yaml.safe_dump({**DECLARED, **ROUND_UP}))
    fixed = _cli("fix", "--config", str(round_up), str(manifest))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    after = yaml.safe_load(manifest.read_text())
    assert after["spec"]["shards"][1]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "8"
    assert after["spec"]["shards"][0] == MODEL_SERVER["spec"]["shards"][0]


# The same kind at an older API version (a CRD serving both), whose shards were called workers there.
OLDER = {**DECLARED["workloads"][0], "version": "v1beta1",
         "templates": [{"path": "spec.shards[*].template.spec", "name": "shard"}, "spec.workers[*].template.spec"]}


def test_a_kind_declared_at_two_versions_is_one_kind_judged_at_both(tmp_path: Path) -> None:
    """A CRD serves several versions at once: one entry per version is one kind with both versions (matching
    ignores the version), judged by every entry's templates; it was refused as "declared twice"."""
    both = {"workloads": [DECLARED["workloads"][0], OLDER]}
    (kind,) = parse_config(both).workloads
    assert kind.versions == ("v1", "v1beta1") and kind.plural == "modelservers"
    assert [(t.path, t.name) for t in kind.templates] == [
        ("spec.router.template.spec", None), ("spec.shards[*].template.spec", "shard"),
        ("spec.workers[*].template.spec", None)]
    older = {**MODEL_SERVER, "apiVersion": "inference.example.com/v1beta1",
             "spec": {"workers": MODEL_SERVER["spec"]["shards"]}}
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(both))
    for obj, where in ((MODEL_SERVER, "spec.shards[1] (s1)"), (older, "spec.workers[1] (s1)")):
        (found,) = evaluate(obj, parse_config(both), Mode.ENFORCE).violations
        assert found[1].message.startswith(f'{where}: container "vllm"'), found
        manifest = tmp_path / "object.yaml"
        manifest.write_text(yaml.safe_dump(obj))
        cli = _cli("check", "--config", str(config_file), str(manifest))
        assert cli.returncode == 1 and f"cpu-not-integer: {where}" in cli.stdout, cli.stdout + cli.stderr
        response = _validate(obj, parse_config(both))
        assert response["allowed"] is False and where in response["status"]["message"]
    # written back as it was given: one entry per version, each with the kind's templates
    from webhook.core.config import WORKLOADS
    assert parse_config({"workloads": WORKLOADS.kind.document(parse_config(both).workloads)}) == parse_config(both)


@pytest.mark.parametrize(("workloads", "message"), [
    ([{"group": "example.com", "version": "v1", "kind": "X", "plural": "xs"}], "workloads[0].templates: required"),
    ([{**DECLARED["workloads"][0], "group": "nodot"}], "workloads[0].group: 'nodot' is not a DNS name"),
    ([{**DECLARED["workloads"][0], "templates": ["spec.shards[0].template.spec"]}],
     "workloads[0].templates[0]: 'spec.shards[0].template.spec': 'shards[0]' is not a field name"),
    ([{**DECLARED["workloads"][0], "templates": ["spec.shards[*]"]}],
     "workloads[0].templates[0]: 'spec.shards[*]': a path ends at a pod spec"),
    ([{**DECLARED["workloads"][0], "kind": "Deployment", "group": "apps"}],
     "workloads[0].group: 'apps' is not a DNS name"),
    ([{**DECLARED["workloads"][0], "kind": "JobSet", "group": "jobset.x-k8s.io"}],
     "workloads[0]: JobSet of jobset.x-k8s.io is built in"),
    # the engine judges a target named ResourceClaim as DRA's claim: another group's may not take the name
    ([{**DECLARED["workloads"][0], "kind": "ResourceClaim", "group": "claims.example.com"}],
     "workloads[0].kind: ResourceClaim is DRA's claim kind (resource.k8s.io)"),
    ([{**DECLARED["workloads"][0], "kind": "ResourceClaimTemplate", "group": "resource.k8s.io"}],
     "workloads[0].kind: ResourceClaimTemplate is DRA's claim kind"),
    ([DECLARED["workloads"][0], DECLARED["workloads"][0]], "workloads[1]: ModelServer of inference.example.com is "
                                                           "declared twice at v1"),
    ([DECLARED["workloads"][0], {**OLDER, "plural": "servers"}],
     "workloads[1].plural: 'servers', but ModelServer of inference.example.com is declared with plural "
     "'modelservers' at v1; a CRD has one plural"),
    ([DECLARED["workloads"][0], {**OLDER, "templates": [{"path": "spec.shards[*].template.spec", "name": "s"}]}],
     "workloads[1].templates: spec.shards[*].template.spec is named 's' here and 'shard' at v1"),
    ([{**DECLARED["workloads"][0], "colour": "red"}], "workloads[0].colour: unknown key"),
    ({"group": "x"}, "workloads: expected a list"),
])
def test_declared_kinds_are_validated_naming_the_key(workloads: Any, message: str, tmp_path: Path) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump({"workloads": workloads}))
    out = _cli("check", "--config", str(config_file), str(tmp_path))
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_one_object_is_one_case_and_one_object_checked() -> None:
    """A JobSet of two replicated jobs is one object: one JUnit case, ``1 objects checked``."""
    from xml.etree import ElementTree as ET

    path = WORKLOADS_DIR / "JobSet" / "fail" / "workers.yaml"
    junit = ET.fromstring(_cli("check", str(path), "--format", "junit").stdout)
    assert [c.get("name") for c in junit.iter("testcase")] == ["JobSet/train"]
    assert "1 object checked, 1 violation," in _cli("check", str(path)).stderr
