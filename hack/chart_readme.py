"""Writes the values table of charts/qos-guard/README.md from the `# --` comments in values.yaml, in the
helm-docs format (Key, Type, Default, Description), so the README cannot drift from the values.

    python hack/chart_readme.py          # rewrite the table in place
    python hack/chart_readme.py --check  # exit 1 when the README is not current (the chart tests run this)

As helm-docs does: a `# --` comment (continued by the `#` lines under it) documents the key that follows; a
documented mapping is listed whole, with its default as JSON; an undocumented mapping is descended into.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1] / "charts" / "qos-guard"
BEGIN, END = "<!-- values:begin (hack/chart_readme.py) -->", "<!-- values:end -->"
_KEY = re.compile(r"^(\s*)([A-Za-z0-9_.-]+):")


def descriptions(text: str) -> dict[str, str]:
    """Dotted key -> its `# --` description."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = [stripped[4:].strip()]
            continue
        if stripped.startswith("#"):
            if pending is not None and not stripped.startswith("#   "):
                pending.append(stripped[1:].strip())
            continue
        match = _KEY.match(line)
        if not match or line.lstrip().startswith("-"):
            continue
        indent, key = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        if pending is not None:
            found[".".join(k for _, k in stack)] = " ".join(p for p in pending if p)
            pending = None
    return found


def _type(value: Any) -> str:
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "string"), (list, "list"),
                       (dict, "object")):
        if isinstance(value, kind):
            return name
    return "string" if value is None else type(value).__name__


def rows(values: dict[str, Any], described: dict[str, str], prefix: str = "") -> list[str]:
    out = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and path not in described:
            out += rows(value, described, path + ".")
            continue
        default = json.dumps(value, separators=(",", ":")).replace("|", "\\|")
        out.append(f"| {path} | {_type(value)} | `{default}` | {described.get(path, '')} |")
    return out


def table() -> str:
    text = (CHART / "values.yaml").read_text()
    lines = ["| Key | Type | Default | Description |", "|-----|------|---------|-------------|"]
    return "\n".join(lines + rows(yaml.safe_load(text), descriptions(text)))


def render(readme: str) -> str:
    start, end = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    return readme[:start] + "\n" + table() + "\n" + readme[end:]


def main(argv: list[str]) -> int:
    path = CHART / "README.md"
    current = path.read_text()
    wanted = render(current)
    if "--check" in argv:
        if wanted != current:
            print(f"{path} is not current: run python hack/chart_readme.py", file=sys.stderr)
            return 1
        return 0
    path.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
