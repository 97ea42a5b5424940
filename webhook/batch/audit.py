"""``qos-guard audit``: objects already in a cluster, through the same runner and report as ``check``.

The listing (``cluster.Lister``) yields objects; this module turns them into runner items located by
namespace (a live object has no source line) and groups the findings by namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from webhook.batch.report import Location, Report
from webhook.batch.runner import Item, at, run
from webhook.cluster.client import Listed
from webhook.core.config import Config
from webhook.core.engine import Mode
from webhook.core.facts import NO_FACTS, Facts

Progress = Callable[[int, str, str], None]


def _items(objects: Iterable[Listed], progress: Progress | None) -> Iterator[Item]:
    seen = 0
    for listed in objects:
        where = Location(listed.namespace or "(cluster)")
        if listed.error is not None:
            yield Item(at(where), error=f"listing {listed.kind}: {listed.error}")
            continue
        seen += 1
        if progress is not None:
            progress(seen, listed.namespace, listed.kind)
        name = ((listed.obj or {}).get("metadata") or {}).get("name", "?")
        yield Item(at(where), obj=listed.obj, namespace=listed.namespace,
                   label=f"{listed.kind}/{name}: ")


def audit(objects: Iterable[Listed], config: Config, mode: Mode, progress: Progress | None = None,
          facts: Facts = NO_FACTS) -> Report:
    """Judge each listed object; a listing error or a malformed object is an error record, not a stop."""
    report = run(_items(objects, progress), config, mode, Report(mode), facts)
    # Grouped by namespace, listing order kept within one (sort is stable).
    report.violations.sort(key=lambda r: r.location.source)
    report.notices.sort(key=lambda r: r.location.source)
    report.errors.sort(key=lambda e: e.location.source)
    return report
