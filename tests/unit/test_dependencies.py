"""Every runtime dependency is one the package imports: the image installs exactly these, so one nothing in
webhook/ imports (jsonpatch was one, used by tests alone) is weight and attack surface in every replica."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Needed at run time without an import of ours: gunicorn's gevent worker imports packaging without declaring it.
UNIMPORTED = {"packaging": "gunicorn's gevent worker imports it without declaring it"}


def _imported_top_levels() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "webhook").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def test_every_runtime_dependency_is_imported_by_the_package() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    distributions = {re.split(r"[<>=!~\[ ;]", spec, maxsplit=1)[0].lower().replace("_", "-") for spec in declared}
    providers = importlib.metadata.packages_distributions()
    imported = {dist.lower().replace("_", "-") for top in _imported_top_levels() for dist in providers.get(top, [])}
    assert sorted(distributions - imported - set(UNIMPORTED)) == []
    assert set(UNIMPORTED) <= distributions

