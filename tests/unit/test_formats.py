"""One registry of output formats for every command that has ``--format``: each command offers exactly its
entries, every entry renders every kind of report, and a new format is one entry (``nodes`` once took its
choices from ``check``'s list and failed with a KeyError on a format it had no renderer for)."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import MappingProxyType

import pytest

from tests.unit.test_nodes_report import node
from tests.unit.test_nodes_report import report as nodes_report
from webhook.batch import formats
from webhook.batch.formats import FORMATS, Format, render, render_nodes
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
