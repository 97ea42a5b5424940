"""Writes every file whose content the code decides, so none of them can drift from it:

- from the configuration schema (webhook/core/config.py ``SCHEMA``): the ``config`` part of
  charts/qos-guard/values.schema.json, the ``config`` defaults in charts/qos-guard/values.yaml and the
  configuration table of docs/contract.md;
- from the rule registry (webhook/core/rules ``RULES``): the rules tables of docs/contract.md and README.md;
- from both, through ``webhook.policies.generate``: the chart's policies and their parameters ConfigMap;
- from values.yaml's comments (hack/chart_readme.py): the values table of charts/qos-guard/README.md.

    python hack/generate.py          # rewrite them in place
    python hack/generate.py --check  # exit 1 naming the files that are not current (the tests run this)
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "hack")]

import chart_readme  # noqa: E402  (hack/ and the repository root are on the path above)

from webhook.core.config import SCHEMA  # noqa: E402
from webhook.core.rules import RULES  # noqa: E402
from webhook.policies import generate as policies  # noqa: E402
from webhook.policies import schema as config_schema  # noqa: E402

CHART = ROOT / "charts" / "qos-guard"
_CONFIG_BLOCK = re.compile(r"^config:\n(?:(?:  .*)?\n)*?(?=\S)", re.MULTILINE)


def _between(name: str, body: str) -> Callable[[str], str]:
    """Replace what stands between ``<!-- NAME:begin (hack/generate.py) -->`` and ``<!-- NAME:end -->``."""
    begin, end = f"<!-- {name}:begin (hack/generate.py) -->", f"<!-- {name}:end -->"

    def render(current: str) -> str:
        start, stop = current.index(begin) + len(begin), current.index(end)
        return current[:start] + "\n" + body + "\n" + current[stop:]

    return render


def values_schema(current: str) -> str:
    schema = json.loads(current)
    schema["properties"]["config"] = config_schema.json_schema(SCHEMA)
    return json.dumps(schema, indent=2) + "\n"


def values_yaml(current: str) -> str:
    block = yaml.safe_dump({"config": SCHEMA.document()}, sort_keys=False, default_flow_style=False)
    if not _CONFIG_BLOCK.search(current):
        raise SystemExit(f"{CHART / 'values.yaml'}: no top-level config: block")
    return _CONFIG_BLOCK.sub(lambda _: block + "\n", current, count=1)


def config_table() -> str:
    lines = ["| key | values | default | what it does |", "| --- | --- | --- | --- |"]
    lines += [f"| `{key}` | {values} | `{default}` | {text} |"
              for key, values, default, text in config_schema.rows(SCHEMA)]
    return "\n".join(lines)


def rules_table() -> str:
    lines = ["| id | default | fires when |", "| --- | --- | --- |"]
    lines += [f"| `{r.id}` | {'on' if r.default_on else 'off'} | {r.summary} |" for r in RULES]
    return "\n".join(lines)


def targets() -> list[tuple[Path, Callable[[str], str]]]:
    contract = _between("config", config_table())
    return [
        (CHART / "values.schema.json", values_schema),
        (CHART / "values.yaml", values_yaml),
        (ROOT / "docs" / "contract.md", lambda text: _between("rules", rules_table())(contract(text))),
        (ROOT / "README.md", _between("rules", rules_table())),
        (ROOT / policies.CHART_TEMPLATE, lambda _: policies.chart_template()),
        (ROOT / policies.CHART_PARAMS, lambda _: policies.chart_params()),
        (CHART / "README.md", chart_readme.render),  # after values.yaml: its table reads that file
    ]


def main(argv: list[str]) -> int:
    stale = []
    for path, render in targets():
        current = path.read_text()
        wanted = render(current)
        if wanted == current:
            continue
        if "--check" in argv:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(wanted)
            print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    if stale:
        print(f"not current: {', '.join(stale)}: run python hack/generate.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
