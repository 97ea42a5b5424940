"""The vendored CRDs (tests/fixtures/crds) are their projects' own files, unchanged: each matches the SHA-256
SOURCES.md records for it, and each defines the kind, group and versions ``KINDS`` judges it at."""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.core.workloads import KINDS

CRDS = Path(__file__).resolve().parents[1] / "fixtures" / "crds"
# Another project's CRD of the same name as one above, serving versions KINDS judges that one does not (one API
# server serves one CRD of a name; the e2e test swaps it in): the training-operator's MPIJob, kubeflow.org/v1.
ELSEWHERE = CRDS / "elsewhere"


# Where pytest's cache keeps what a CRD parsed to (``_parsed``), when the cache plugin is on.
_PARSED: list[Path] = []


@pytest.fixture(autouse=True, scope="module")
def _parsed_cache(request: pytest.FixtureRequest) -> None:
    cache = getattr(request.config, "cache", None)
    if cache is not None and not _PARSED:
        _PARSED.append(cache.mkdir("vendored-crds"))


def _parsed(path: Path) -> dict[str, Any]:
    """``path`` parsed (libyaml: 11 MB of YAML in all, about 3 CPU-seconds), or what the same bytes parsed to
    before, as JSON in pytest's cache (0.1 s): keyed by the bytes' SHA-256 and PyYAML's version, so never stale,
    and kept only where JSON gives back exactly the parsed value."""
    data = path.read_bytes()
    key = f"{hashlib.sha256(data).hexdigest()}-{yaml.__version__}.json"
    kept = _PARSED[0] / key if _PARSED else None
    if kept is not None and kept.is_file():
        parsed: dict[str, Any] = json.loads(kept.read_text())
        return parsed
    parsed = yaml.load(data.decode("utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if kept is not None:
        try:
            text = json.dumps(parsed)
        except (TypeError, ValueError):
            return parsed
        if json.loads(text) == parsed:
            partial = kept.with_name(f".{key}.{os.getpid()}")
            partial.write_text(text)
            partial.replace(kept)  # whole or absent, whichever xdist worker writes it
    return parsed


@cache
def _crds(folder: Path = CRDS) -> tuple[tuple[str, dict[str, Any]], ...]:
    """Each vendored CRD of ``folder`` by file name."""
    return tuple((p.name, _parsed(p)) for p in sorted(folder.glob("*.yaml")))


def _served(crd: dict[str, Any]) -> set[str]:
    return {v["name"] for v in crd["spec"]["versions"] if v.get("served")}


def _rows() -> dict[str, str]:
    rows = re.findall(r"^\| (\S+\.yaml) \|.*\| ([0-9a-f]{64}) \|$", (CRDS / "SOURCES.md").read_text(), re.M)
    return dict(rows)


def test_every_vendored_crd_is_unchanged_and_recorded() -> None:
    rows = _rows()
    assert sorted(rows) == sorted(str(p.relative_to(CRDS)) for p in CRDS.rglob("*.yaml"))
    for name, digest in rows.items():
        assert hashlib.sha256((CRDS / name).read_bytes()).hexdigest() == digest, f"{name} differs from its source"


def test_the_table_judges_each_at_a_version_its_crd_serves() -> None:
    for name, crd in _crds():
        spec = crd["spec"]
        kind = KINDS[(spec["group"], spec["names"]["kind"])]
        assert kind.plural == spec["names"]["plural"]
        served = _served(crd)
        assert kind.versions[0] == next(v["name"] for v in spec["versions"] if v.get("storage"))
        other = dict(_crds(ELSEWHERE)).get(name)
        elsewhere = set() if other is None else _served(other)
        assert other is None or other["metadata"]["name"] == crd["metadata"]["name"]
        assert not elsewhere & served, (name, "serves", elsewhere)
        assert set(kind.versions) <= served | elsewhere, (name, kind.versions, served)
    assert {name for name, _ in _crds(ELSEWHERE)} <= {name for name, _ in _crds()}


def test_every_kind_beyond_the_core_has_its_crd_vendored() -> None:
    """The e2e tests judge each built-in custom resource kind on a real API server, with its own CRD."""
    defined = set()
    for _, crd in _crds():
        spec = crd["spec"]
        defined.add((spec["group"], spec["names"]["kind"]))
    assert {k.key for k in KINDS.values() if not k.core} == defined
