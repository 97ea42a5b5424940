"""``qos-guard audit``: objects already in a cluster, through the same engine and report as ``check``.

The listing (``cluster.Lister``) yields objects; this module judges them and groups the findings by
namespace. Records use the namespace as their ``file`` and line 0, since a live object has no source line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from webhook.cluster import Listed
from webhook.config import Config
from webhook.engine import Mode, evaluate
from webhook.podspec import ManifestError
from webhook.report import Report

Progress = Callable[[int, str, str], None]


def audit(objects: Iterable[Listed], config: Config, mode: Mode, progress: Progress | None = None) -> Report:
    """Judge each listed object; a listing error or a malformed object is an error record, not a stop."""
    report = Report(mode, live=True)
    seen = 0
    for item in objects:
        if item.error is not None:
            report.add_error(item.namespace or "(cluster)", 0, f"listing {item.kind}: {item.error}")
            continue
        assert item.obj is not None
        seen += 1
        if progress is not None:
            progress(seen, item.namespace, item.kind)
        try:
            verdict = evaluate(item.obj, config, mode, namespace=item.namespace)
        except ManifestError as exc:
            name = (item.obj.get("metadata") or {}).get("name", "?")
            report.add_error(item.namespace, 0, f"{item.kind}/{name}: malformed object: {exc}")
            continue
        report.add_verdict(item.namespace, verdict, lambda _path: 0)
    # Grouped by namespace, listing order kept within one (sort is stable).
    report.violations.sort(key=lambda r: r.file)
    report.notices.sort(key=lambda r: r.file)
    report.errors.sort(key=lambda e: e.file)
    return report
