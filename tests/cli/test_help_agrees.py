"""Each command's --help says what the command prints and returns: the help read, then held to
the output and exit codes, and to the documentation (docs/)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from tests.cli.conftest import Run
from tests.unit.test_nodes_report import node
from tests.unit.test_nodes_report import report as nodes_report
from webhook.batch.audit import audit
from webhook.batch.formats import render, render_nodes
from webhook.cli.parser import build_parser
from webhook.cluster.client import Listed
from webhook.core.config import Config
from webhook.core.engine import Mode

ROOT = Path(__file__).resolve().parents[2]
FRACTIONAL = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"},
              "spec": {"containers": [{"name": "app", "image": "x",
                                       "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}}]}}


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _help(command: str) -> str:
    return " ".join(_commands()[command].format_help().split())


def _text_form(command: str) -> str:
    found = re.search(r"text \(([^)]*)\)", _help(command))
    assert found, _help(command)
    return found.group(1)


def test_audit_help_describes_the_text_audit_prints() -> None:
    """audit's help said `text (file:line: Kind/name: rule: message)`; a live object has no file or line."""
    form = _text_form("audit")
    assert "file:line" not in form
    out = render(audit([Listed("shop", "Pod", FRACTIONAL)], Config(), Mode.ENFORCE), "text").splitlines()[0]
    assert form == "namespace: Kind/name: rule: message"
    assert re.fullmatch(r"shop: Pod/web: [a-z-]+: .+", out), out
    guide = " ".join((ROOT / "docs" / "howto" / "audit.md").read_text().split())
    assert "`namespace: Kind/name: rule-id: message`" in guide


def test_nodes_help_describes_the_table_nodes_prints() -> None:
    form = _text_form("nodes")
    assert "file:line" not in form and "table" in form
    out = render_nodes(nodes_report(node("a", cpuManagerPolicy="none")), "text").splitlines()
    assert out[0].split()[0] == "NODE" and out[1].split()[0] == "a", out
    assert any(re.fullmatch(r"node/a: [a-z-]+: .+", line) for line in out), out


def test_check_keeps_its_file_and_line_form() -> None:
    assert _text_form("check") == "file:line: Kind/name: rule: message"


def test_verify_help_lists_every_problem_that_makes_exit_1() -> None:
    """verify --help said only "not pinned or pinned across NUMA nodes"; unknown NUMA and remote memory exit 1
    too (webhook/node/verify.py exit_code: any problem), as docs/contract.md says."""
    text = _help("verify")
    one = text[text.index(" 1 a container"):text.index(" 2 wrong usage")]
    for words in ("not pinned", "across NUMA nodes", "unknown NUMA", "remote memory", "--remote-memory-share"):
        assert words in one, (words, one)
    contract = " ".join((ROOT / "docs" / "contract.md").read_text().split())
    for words in ("not pinned", "pinned across NUMA nodes", "(unknown)", "--remote-memory-share"):
        assert "`verify` exits `1` when" in contract and words in contract, words
    guide = " ".join((ROOT / "docs" / "howto" / "node-agent.md").read_text().split())
    assert "exit 1 when a container is not pinned, not aligned, has a device whose NUMA node is unknown or has " \
           "its memory remote" in guide


def test_verify_format_has_a_help() -> None:
    action = next(a for a in _commands()["verify"]._actions if "--format" in a.option_strings)
    assert action.help and "json" in action.help and "text" in action.help


def test_the_top_level_help_names_every_command_that_can_exit_1() -> None:
    """The top-level exit codes said `1 violations found (check, audit, fix)`: nodes and verify exit 1 too."""
    top = " ".join(build_parser().format_help().split())
    one = top[top.index("; 1 "):top.index("; 2 ")]
    exits_one = [name for name in _commands() if re.search(r"\n {2}1 {2}\S", _commands()[name].format_help())]
    assert set(exits_one) >= {"check", "audit", "fix", "nodes", "verify"}, exits_one
    for name in exits_one:
        assert f"({name}" in one or f", {name}" in one or f"{name})" in one, (name, one)


# --- every --help, run as the real command: a description and the exit codes ---


COMMANDS = ["check", "fix", "audit", "serve", "certs", "policy", "nodes", "agent", "verify", "extender"]


def test_the_top_level_help_lists_every_command_tested_here(qos_guard: Run) -> None:
    listed = re.findall(r"^    ([a-z]+)  ", qos_guard("--help").stdout, re.M)
    assert sorted(listed) == sorted(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_has_a_description_and_exit_codes(qos_guard: Run, command: str) -> None:
    """`agent --help` and `verify --help` had neither, though the contract says every --help lists them."""
    out = qos_guard(command, "--help")
    assert out.returncode == 0
    after_usage = out.stdout.split("\n\n", 1)[1]
    description = after_usage.split("\n\n", 1)[0].strip()
    assert description and not description.startswith(("positional arguments", "options")), out.stdout
    codes = out.stdout.split("exit codes:", 1)[1]
    for code in ("0", "2"):
        assert re.search(rf"^  {code}  \S", codes, re.M), (code, out.stdout)
