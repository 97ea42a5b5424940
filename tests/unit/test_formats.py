"""One registry of output formats for every command that has ``--format``: each command offers exactly its
entries, every entry renders every kind of report, and a new format is one entry (``nodes`` once took its
choices from ``check``'s list and failed with a KeyError on a format it had no renderer for)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import MappingProxyType

import pytest

from tests.unit.test_nodes_report import node
from tests.unit.test_nodes_report import report as nodes_report
from webhook.batch import formats
from webhook.batch.formats import FORMATS, Format, render, render_nodes
from webhook.batch.nodes import build
from webhook.batch.report import Report
from webhook.batch.runner import check_paths
from webhook.cli.parser import build_parser, main
from webhook.core.config import Config
from webhook.core.engine import Mode

COMMANDS = ("check", "audit", "nodes")


def _format_choices(parser: argparse.ArgumentParser, command: str) -> list[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    (option,) = [a for a in sub.choices[command]._actions if "--format" in a.option_strings]
    assert option.default == "text"
    return list(option.choices or ())


def _findings(tmp_path: Path) -> Report:
    (tmp_path / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: i\n"
        "    resources: {requests: {cpu: 1500m, memory: 1Gi}, limits: {cpu: 1500m, memory: 1Gi}}\n")
    return check_paths([str(tmp_path)], Config(), Mode.ENFORCE)


def test_every_command_offers_the_registry() -> None:
    parser = build_parser()
    assert {command: _format_choices(parser, command) for command in COMMANDS} == {
        command: ["text", "json", "sarif", "junit", "github"] for command in COMMANDS}


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_format_renders_every_report(fmt: str, tmp_path: Path) -> None:
    objects = render(_findings(tmp_path), fmt)
    assert "cpu-not-integer" in objects
    nodes = render_nodes(nodes_report(node("a", cpuManagerPolicy="none")), fmt)
    assert "cpu-manager-none" in nodes


def test_a_new_format_is_one_entry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    tap = Format("tap", "Test Anything Protocol",
                 lambda r: f"1..{r.counts.objects}\n" + "".join(f"not ok {v.rule}\n" for v in r.violations),
                 lambda r: f"1..{len(r.results)}\n")
    monkeypatch.setattr(formats, "FORMATS", MappingProxyType({**FORMATS, "tap": tap}))
    parser = build_parser()
    assert all(_format_choices(parser, command)[-1] == "tap" for command in COMMANDS)
    assert "tap (Test Anything Protocol)" in formats.choices_help()
    assert render_nodes(nodes_report(node("a"), node("b")), "tap") == "1..2\n"
    _findings(tmp_path)
    assert main(["check", str(tmp_path), "--format", "tap"]) == 1
    assert capsys.readouterr().out == "1..1\nnot ok cpu-not-integer\n"


def _junit_texts(xml: str, tag: str) -> list[str]:
    from xml.etree import ElementTree as ET

    root = ET.fromstring(xml.split("\n", 1)[1])
    return [e.text or "" for e in root.iter(tag)]


@pytest.mark.parametrize(("mode", "tag"), [(Mode.ENFORCE, "failure"), (Mode.WARN, "system-out")])
def test_junit_puts_each_violation_of_an_object_on_its_own_line(mode: Mode, tag: str, tmp_path: Path) -> None:
    """Two violations of one object were joined with a newline, then escaped whole: one line with a literal
    ``\\n`` between them. Each line is escaped on its own; a newline inside a name still cannot forge one."""
    (tmp_path / "pod.yaml").write_text(
        'apiVersion: v1\nkind: Pod\nmetadata: {name: "p\\nforged"}\nspec:\n  containers:\n  - name: c\n'
        "    image: i\n    resources: {requests: {cpu: 1500m, memory: 1Gi}, limits: {memory: 1Gi}}\n")
    findings = check_paths([str(tmp_path)], Config(), mode)
    assert findings.counts.violations == 2
    (text,) = _junit_texts(render(findings, "junit"), tag)
    lines = text.split("\n")
    assert [line.split(": ")[1] for line in lines] == ["limits-missing", "cpu-not-integer"]
    assert "\\n" not in text.replace("p\\nforged", "")


def test_junit_nodes_pool_warnings_one_a_line() -> None:
    pool = {"node.kubernetes.io/instance-type": "c7i.8xlarge"}
    other = {"node.kubernetes.io/instance-type": "c7i.4xlarge"}
    findings = nodes_report(node("a1", pool), node("a2", pool, topologyManagerPolicy="restricted"),
                            node("b1", other), node("b2", other, topologyManagerPolicy="restricted"))
    (text,) = _junit_texts(render_nodes(findings, "junit"), "system-out")
    assert len(text.split("\n")) == 2 and "\\n" not in text


def test_nodes_sarif_names_no_domain_nobody_owns() -> None:
    """Both SARIF renderers (check's and nodes') name the tool and no informationUri on a domain nobody owns."""
    nodes = render_nodes(build([], [], ["the cluster has no node"]), "sarif")
    for text in (nodes, render(Report(Mode.ENFORCE), "sarif")):
        driver = json.loads(text)["runs"][0]["tool"]["driver"]
        assert "informationUri" not in driver and "//qos-guard.io" not in json.dumps(driver)
        assert driver["name"] == "qos-guard"
