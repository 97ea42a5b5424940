"""Writes what the configuration schema (webhook/core/config.py ``SCHEMA``) drives outside the package: the
``config`` part of charts/qos-guard/values.schema.json, the ``config`` defaults in charts/qos-guard/values.yaml
and the configuration table of docs/contract.md, so none of them can drift from the parser.

    python hack/config_schema.py          # rewrite them in place (then python hack/chart_readme.py)
    python hack/config_schema.py --check  # exit 1 when one is not current (the chart tests run this)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from webhook.core.config import SCHEMA  # noqa: E402  (the repository root is on the path above)

SCHEMA_JSON = ROOT / "charts" / "qos-guard" / "values.schema.json"
VALUES = ROOT / "charts" / "qos-guard" / "values.yaml"
CONTRACT = ROOT / "docs" / "contract.md"
BEGIN, END = "<!-- config:begin (hack/config_schema.py) -->", "<!-- config:end -->"
_CONFIG_BLOCK = re.compile(r"^config:\n(?:(?:  .*)?\n)*?(?=\S)", re.MULTILINE)


def values_schema(current: str) -> str:
    schema = json.loads(current)
    schema["properties"]["config"] = SCHEMA.json_schema()
    return json.dumps(schema, indent=2) + "\n"


def values_yaml(current: str) -> str:
    block = yaml.safe_dump({"config": SCHEMA.document()}, sort_keys=False, default_flow_style=False)
    if not _CONFIG_BLOCK.search(current):
        raise SystemExit(f"{VALUES}: no top-level config: block")
    return _CONFIG_BLOCK.sub(lambda _: block + "\n", current, count=1)


def table() -> str:
    lines = ["| key | values | default | what it does |", "| --- | --- | --- | --- |"]
    lines += [f"| `{key}` | {values} | `{default}` | {text} |" for key, values, default, text in SCHEMA.rows()]
    return "\n".join(lines)


def contract(current: str) -> str:
    start, end = current.index(BEGIN) + len(BEGIN), current.index(END)
    return current[:start] + "\n" + table() + "\n" + current[end:]


def main(argv: list[str]) -> int:
    stale = []
    for path, render in ((SCHEMA_JSON, values_schema), (VALUES, values_yaml), (CONTRACT, contract)):
        current = path.read_text()
        wanted = render(current)
        if wanted == current:
            continue
        if "--check" in argv:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(wanted)
            print(f"wrote {path}", file=sys.stderr)
    if stale:
        print(f"not current: {', '.join(stale)}: run python hack/config_schema.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
