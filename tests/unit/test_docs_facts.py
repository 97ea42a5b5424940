"""What the pages a newcomer reads tell them to type exists: each `qos-guard COMMAND ... --option` written in code
is an option of that command's parser, each `make TARGET` a target of the Makefile, and the README and the
getting-started page run in the order they are written (the clone is entered before a command names its files).
Links and anchors are test_docs.py's."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from webhook.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "charts" / "qos-guard" / "README.md",
         *sorted((ROOT / "docs").rglob("*.md"))]


def _code(text: str) -> list[tuple[int, str]]:
    """(line number, code): each line of a fenced block, and each inline code span outside the blocks."""
    found: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            found.append((number, line))
        else:
            found.extend((number, span) for span in re.findall(r"`([^`]+)`", line))
    return found


def _options() -> dict[str, set[str]]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: {option for action in parser._actions for option in action.option_strings}
            for name, parser in sub.choices.items()}


def test_every_option_written_after_a_command_is_one_it_takes() -> None:
    options = _options()
    command = re.compile(rf"\bqos-guard ({'|'.join(options)})\b([^|#;<>]*)")
    unknown = [f"{page.relative_to(ROOT)}:{number}: qos-guard {name} {flag}"
               for page in PAGES for number, code in _code(page.read_text())
               for name, rest in command.findall(code)
               for flag in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", rest) if flag not in options[name]]
    assert unknown == []


def test_every_make_target_written_is_one_the_makefile_has() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):(?!=)", makefile, re.M))
    assert {"run", "test", "test-fast", "install", "docs"} <= targets
    command = re.compile(r"(?:^\s*(?:\$\s+)?(?:sudo\s+)?|&&\s*)make ([a-z][\w-]*)")  # a command, not "make it"
    unknown = [f"{page.relative_to(ROOT)}:{number}: make {target}"
               for page in PAGES for number, code in _code(page.read_text())
               for target in command.findall(code) if target not in targets]
    assert unknown == []


def test_the_first_steps_run_in_the_clone_in_the_order_written() -> None:
    """The getting-started page cloned the repository and ran `qos-guard check examples/` and `make run` from the
    folder above it; the README's quick start ran make without saying where."""
    for page, first in ((ROOT / "docs" / "getting-started.md", "examples/"), (ROOT / "README.md", "make run")):
        code = "\n".join(code for _, code in _code(page.read_text()))
        assert "cd qos-guard" in code, page.name
        assert code.index("cd qos-guard") < code.index(first), page.name
