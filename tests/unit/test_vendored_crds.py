"""The vendored CRDs (tests/fixtures/crds) are their projects' own files, unchanged: each matches the SHA-256
SOURCES.md records for it, and each defines the kind, group and versions ``KINDS`` judges it at."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import yaml

from webhook.core.workloads import KINDS

CRDS = Path(__file__).resolve().parents[1] / "fixtures" / "crds"


def _rows() -> dict[str, str]:
    rows = re.findall(r"^\| (\S+\.yaml) \|.*\| ([0-9a-f]{64}) \|$", (CRDS / "SOURCES.md").read_text(), re.M)
    return dict(rows)


def test_every_vendored_crd_is_unchanged_and_recorded() -> None:
    rows = _rows()
    assert sorted(rows) == sorted(p.name for p in CRDS.glob("*.yaml"))
    for name, digest in rows.items():
        assert hashlib.sha256((CRDS / name).read_bytes()).hexdigest() == digest, f"{name} differs from its source"


def test_the_table_judges_each_at_a_version_its_crd_serves() -> None:
    for path in CRDS.glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        spec = crd["spec"]
        kind = KINDS[(spec["group"], spec["names"]["kind"])]
        assert kind.plural == spec["names"]["plural"]
        served = [v["name"] for v in spec["versions"] if v.get("served")]
        assert kind.versions[0] == next(v["name"] for v in spec["versions"] if v.get("storage"))
        assert set(kind.versions) <= set(served), (path.name, kind.versions, served)
