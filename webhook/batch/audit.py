"""``qos-guard audit``: objects already in a cluster, through the same runner and report as ``check``.

The listing (``cluster.Lister``) yields objects; this module turns them into runner items located by
namespace (a live object has no source line) and groups the findings by namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from webhook.batch.clusterfacts import cluster_facts
from webhook.batch.policyreports import FLAVOURS, Subjects, build, write
from webhook.batch.report import Location, Report
from webhook.batch.runner import Item, at, run
from webhook.cluster.client import ClusterError, Listed, Lister
from webhook.cluster.kubeconfig import explain, preflight
from webhook.cluster.reports import Flavour, Written
from webhook.core.config import Config
from webhook.core.engine import Mode
from webhook.core.facts import NO_FACTS, Facts
from webhook.core.outcome import Refused
from webhook.core.workloads import table

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


@dataclass(frozen=True, slots=True)
class Audited:
    """One ``qos-guard audit`` run: its findings, the namespaces it covered (None: all), and with ``--report``
    the report API written and what was written."""

    report: Report
    namespaces: list[str] | None
    flavour: Flavour | None = None
    written: Written | None = None


def audit_cluster(config: Config, kubeconfig: str | None, mode: Mode, *, namespaces: Sequence[str] = (),
                  all_namespaces: bool = False, page_size: int = 500, report: str | None = None,
                  progress: Progress | None = None, say: Callable[[str], None] = print,
                  context: str | None = None) -> Audited:
    """``qos-guard audit``: list the opted-in namespaces' objects (or those of ``namespaces``, or of every
    namespace), judge them with what the cluster says, and with ``report`` (a ``FLAVOURS`` name) write the
    findings as report objects; stale ones are deleted everywhere, unless ``namespaces`` narrowed the run.
    ``say`` hears what is not judged and why; ``context`` is the kubeconfig's context to use (default its current
    one). A cluster that cannot be read is ``Refused``."""
    try:
        preflight(kubeconfig, context)
        lister = Lister(kubeconfig, page_size=page_size, context=context)
        # Every object is read from the API server: a Pod's status.qosClass is the class kubelet reads.
        facts = replace(cluster_facts(config, kubeconfig, say, required=True, context=context), stored=True)
        covered = None if all_namespaces else list(dict.fromkeys(namespaces)) or lister.opted_in_namespaces()
        subjects = Subjects()
        found = audit(subjects.watch(lister.objects(covered, table(config.workloads))), config, mode, progress,
                      facts)
        if report is None:
            return Audited(found, covered)
        flavour = FLAVOURS[report]
        written = write(lister, flavour, build(flavour, found, subjects, covered or []),
                        covered if namespaces else None)
        return Audited(found, covered, flavour, written)
    except ClusterError as exc:
        raise Refused(explain(exc, kubeconfig)) from None
