"""The one loop of the batch commands: inputs -> ``evaluate`` -> ``Report``.

``check`` feeds it documents read from files, ``audit`` objects listed from a cluster; both get the same
error handling (a malformed object is an error record, never a stop) and the same counting. ``fix`` goes
through the same engine per file and reports through ``FixTally``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from webhook.batch.inputs import with_input
from webhook.batch.report import STDIN_SHOWN, Location, Report, numbered, skipped_text
from webhook.batch.textsafe import escape
from webhook.batch.unified import Edit, unified_diff
from webhook.core.claims import CLAIM_KINDS
from webhook.core.config import Config
from webhook.core.dracpu import SLICE_KIND, DraFacts, dra_facts
from webhook.core.dracpu_merge import merge, said_unknown
from webhook.core.dracpu_objects import CLASS_KIND
from webhook.core.engine import (
    MODE_LABEL,
    MODE_LABEL_RULE,
    Mode,
    evaluate,
    mode_label_problem,
    namespace_manifests,
    namespace_of,
    related_of,
    without_containers,
)
from webhook.core.facts import NO_FACTS, Facts, Memo
from webhook.core.fieldpath import FieldPath
from webhook.core.operators.kserve_config import CONFIG_MAP, given_config_map
from webhook.core.outcome import ExitCode, fold
from webhook.core.resourceblock import ManifestError
from webhook.core.workloads import table
from webhook.manifests.reader import STDIN, Document, ReadError, expand_paths, open_manifest, read_documents


@dataclass(frozen=True)
class Item:
    """One object to judge (``obj``), or an input that could not be read (``error``).

    ``locate`` maps a field path inside the object to where it is shown; ``namespace`` overrides the
    object's own for exemptions; ``label`` names the object in an error when its location does not.
    """

    locate: Callable[[FieldPath], Location]
    obj: Any = None
    error: str | None = None
    namespace: str | None = None
    label: str = ""
    skip: str = ""  # a document with nothing to judge, counted by this reason (``report.skipped``)


def at(where: Location) -> Callable[[FieldPath], Location]:
    """Every field of the object is shown at ``where``."""
    return lambda _path: where


def _in_document(shown: str, doc: Document) -> Callable[[FieldPath], Location]:
    return lambda path: Location(shown, doc.line_of(path))


def run(items: Iterable[Item], config: Config, mode: Mode, report: Report, facts: Facts = NO_FACTS) -> Report:
    """Judge every item into ``report`` against ``facts`` (what the cluster says, read once for the run); an
    unreadable or malformed one is an error record, never a stop. Documents with nothing to judge are counted by
    reason (``report.skipped``)."""
    seen_from = in_namespace(facts)
    for item in items:
        if item.skip:
            report.add_skipped(item.skip)
            continue
        if item.error is not None:
            report.add_error(item.locate(()), item.error)
            continue
        try:
            verdict = evaluate(item.obj, config, mode, seen_from(item.namespace or namespace_of(item.obj)),
                               namespace=item.namespace)
        except ManifestError as exc:
            report.add_error(item.locate(exc.path), f"{item.label}malformed object: {exc}")
            continue
        except RecursionError:
            report.add_error(item.locate(()), f"{item.label}object is nested too deeply to be judged")
            continue
        empty = without_containers(verdict)
        if empty:
            for where, why in empty:
                report.add_error(item.locate(where), f"{item.label}invalid object: {why}")
            continue
        # A Namespace is judged by its mode label alone: one without the label has nothing to judge (a file of
        # such Namespaces and Services is "nothing to judge", exit 2, as one of Services alone).
        namespaces = [(where, ns) for where, ns in namespace_manifests(item.obj) if has_mode_label(ns)]
        judged_namespaces = len(namespaces)
        # what has no Pod to judge (``verdict.passed_over``) and what is not known: the builders' reasons and the
        # partial pod specs that passed (``verdict.unknown``)
        for reason in [*verdict.passed_over, *verdict.unknown]:
            if reason == "Namespace" and judged_namespaces:
                judged_namespaces -= 1
            else:
                report.add_skipped(NO_MODE_LABEL if reason == "Namespace" else reason)
        for where, namespace in namespaces:  # the mode label, as the webhook judges it (a typo fails CI)
            meta = namespace.get("metadata")
            name = str(meta.get("name") or "<unnamed>") if isinstance(meta, dict) else "<unnamed>"
            label = (*where, "metadata", "labels", MODE_LABEL)
            report.add_finding(item.locate(label), "Namespace", name, label, MODE_LABEL_RULE,
                               mode_label_problem(namespace))
        target = verdict.first
        if verdict.exempt is not None and target is not None:  # none: only what is not known, counted above
            report.add_exempt(target.kind, target.name, item.locate(target.path), verdict.exempt)
        elif verdict.results and _on_shipped_config(item.obj, config, facts):
            report.shipped[str(item.obj.get("kind"))] += 1
        report.add_verdict(verdict, item.locate)
    return report


def _on_shipped_config(obj: Any, config: Config, facts: Facts) -> bool:
    """Was ``obj`` judged with KServe's shipped ``inferenceservice-config``: a kind built from it, with none given
    (the input holds none, and no cluster was read: a cluster's absent or unread one is not judged at all)."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    known = table(config.workloads).get((group, str(obj.get("kind"))))
    return known is not None and CONFIG_MAP in known.related and given_config_map(related_of(config, facts)) is None


MAX_VIEWS = 4096  # namespaces whose facts a run keeps made (a run over more makes them again)


def in_namespace(facts: Facts) -> Callable[[str | None], Facts]:
    """The facts an object of a namespace is judged with: ``facts`` with that namespace's DRA view
    (``Facts.dra_of``: the cluster's claims there, as the webhook judges a request), made once per namespace
    with a memo of its own; ``facts`` itself for an object of no namespace, or when there are no views."""
    view = facts.dra_of
    if view is None:
        return lambda _namespace: facts
    made: dict[str, Facts] = {}

    def seen_from(namespace: str | None) -> Facts:
        if not namespace:
            return facts
        found = made.get(namespace)
        if found is None:
            if len(made) >= MAX_VIEWS:
                made.clear()
            found = made[namespace] = replace(facts, dra=view(namespace),
                                              memo=None if facts.memo is None else Memo())
        return found
    return seen_from


DRA_KINDS = (SLICE_KIND, "ResourceClaim", "ResourceClaimTemplate", CLASS_KIND)
NO_MODE_LABEL = f"Namespace without a {MODE_LABEL} label"


def has_mode_label(namespace: Any) -> bool:
    """Does a Namespace carry the ``qos-guard.io/mode`` label (whatever its value)?"""
    meta = namespace.get("metadata") if isinstance(namespace, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return isinstance(labels, dict) and MODE_LABEL in labels


HELM_TEMPLATES = "templates"


def helm_chart_of(path: str) -> Path | None:
    """The Helm chart whose ``templates/`` holds ``path`` (a folder with a ``Chart.yaml``), if any: its files
    are Go templates, not manifests, until ``helm template`` renders them."""
    for parent in Path(path).parents:
        if parent.name == HELM_TEMPLATES and (parent.parent / "Chart.yaml").is_file():
            return parent.parent
    return None


# What fix says beside check's hint: it edits manifests, and a template is not one until rendered.
FIX_TEMPLATE = "fix edits manifests, not templates: change the chart's values or templates; "


def helm_chart_error(chart: Path, files: int, fix: bool = False) -> str:
    what = f"its {files} template files are not manifests" if files > 1 else "its template file is not a manifest"
    return (f"a Helm chart: {what} until rendered; {FIX_TEMPLATE if fix else ''}check what it renders: "
            f"helm template {chart} | qos-guard check -{'' if fix else f', and leave it out here: --exclude {chart}'}")


def _template_hint(path: str, message: str, fix: str = "") -> str:
    """A file that does not parse and holds ``{{``: say it looks like a template, and what to do (the same
    words for ``check`` and ``fix``, which adds ``fix``)."""
    stream = open_manifest(path)  # a regular file only: never a blocking read of a FIFO
    if isinstance(stream, ReadError):
        return message
    try:
        with stream:
            looks_templated = b"{{" in stream.read(1 << 16)
    except OSError:
        return message
    return (f"{message} (the file holds {{{{ }}}}: a Helm or Go template? {fix}render it first: "
            "helm template RELEASE CHART | qos-guard check -)") if looks_templated \
        else message


def file_items(paths: Sequence[str], exclude: Sequence[str] = ()) -> Iterator[Item]:
    """Every document under ``paths`` (files, folders, ``-``), each located by file and line. A Helm chart's
    templates are one error for the chart, not one unreadable file each, located at the first template file
    (a folder with line 0 was ``chart:0:``, which GitHub annotations attach to no file)."""
    charts: dict[Path, list[str]] = {}
    for path in expand_paths(paths, exclude):
        if isinstance(path, ReadError):
            yield Item(at(Location(path.file, path.line)), error=path.message)
            continue
        chart = helm_chart_of(path) if path != STDIN else None
        if chart is not None:
            charts.setdefault(chart, []).append(path)
            continue
        shown = STDIN_SHOWN if path == STDIN else path
        for doc in read_documents(path):
            if isinstance(doc, ReadError) and doc.skip:
                yield Item(at(Location(shown, doc.line)), skip=doc.skip)
            elif isinstance(doc, ReadError):
                message = doc.message if path == STDIN else _template_hint(path, doc.message)
                yield Item(at(Location(shown, doc.line)), error=message)
            else:
                yield Item(_in_document(shown, doc), obj=doc.obj)
    for chart, templates in charts.items():
        yield Item(at(Location(templates[0], 0)), error=helm_chart_error(chart, len(templates)))


def check_paths(paths: Sequence[str], config: Config, mode: Mode,
                stream: Callable[[str], None] | None = None, facts: Facts = NO_FACTS,
                notices: Sequence[tuple[Location, str, str]] = (), exclude: Sequence[str] = ()) -> Report:
    """``qos-guard check``: judge every document under ``paths``; unreadable inputs are recorded. ``notices``
    (where, rule, message) are said first and counted: what the run cannot judge (a cluster it could not read)."""
    report = Report(mode, stream=stream)
    for where, rule, message in notices:
        report.add_notice(where, rule, message)
    items = list(file_items(paths, exclude))  # read whole first: the builders read the other documents
    facts = with_input(facts, (i.obj for i in items if i.obj is not None), config)
    return run(items, config, mode, report, with_input_dra(facts, items))


def with_input_dra(facts: Facts, items: Sequence[Item]) -> Facts:
    """``facts`` with what the input's own DRA objects say (ResourceSlices, the DeviceClasses that select the CPU
    driver, and the CPUs its ResourceClaims and templates ask), so a Pod is judged with the claims written beside
    it; unchanged when there is none. Claims are namespaced as the API server keeps them: a Pod of namespace ns
    judges with the input's claims of ns and those of no namespace (to be applied there) merged with the cluster's
    of ns (``Facts.dra_of``), never with another namespace's; a name the input and the cluster hold differently is
    unknown, said so (``differ``). An object of no namespace (``Facts.dra``) judges with the input's claims of no
    namespace merged with the cluster's of every namespace: it goes where kubectl's context says, which the input
    does not, so a claim the input holds only in named namespaces is unknown to it, said so (``elsewhere``)."""
    objects = [i.obj for i in items if isinstance(i.obj, dict) and i.obj.get("kind") in DRA_KINDS]
    if not objects:
        return facts
    slices = any(o.get("kind") == SLICE_KIND for o in objects)
    shared: list[Any] = []  # slices and classes (cluster-wide), claims of no namespace
    namespaced: dict[str, list[Any]] = {}
    for obj in objects:
        namespace = namespace_of(obj) if obj.get("kind") in CLAIM_KINDS else None
        (namespaced.setdefault(namespace, []) if namespace else shared).append(obj)
    made: dict[str, DraFacts] = {}

    def input_of(namespace: str) -> DraFacts:
        key = namespace if namespace in namespaced else ""  # a namespace the input names no claim of: shared
        if key not in made:
            made[key] = dra_facts([*shared, *namespaced.get(key, ())], slices=slices)
        return made[key]

    view = facts.dra_of
    cluster: Callable[[str], DraFacts | None] = view if view is not None else (lambda _namespace: facts.dra)
    unnamed = said_unknown(input_of(""), elsewhere(input_of(""), {n: input_of(n) for n in namespaced}))
    return replace(facts, dra=merge(facts.dra, unnamed, differ(None)),
                   dra_of=lambda namespace: merge(cluster(namespace), input_of(namespace), differ(namespace)))


def differ(namespace: str | None) -> Callable[[tuple[str, str]], str]:
    """Why a claim the input and the cluster hold differently is not known, and the way out."""
    where = f"in namespace {namespace}" if namespace else "(the object names no namespace)"
    return lambda _key: (f"the input and the cluster hold it differently {where}; apply the input, or check "
                         "without --kubeconfig")


def elsewhere(unnamed: DraFacts, named: Mapping[str, DraFacts]) -> dict[tuple[str, str], str]:
    """The claims the input holds only in named namespaces, and why an object of no namespace cannot use them: kubectl
    applies it to its context's namespace, which the input does not say. ``named``: each namespace's view of the
    input (its claims with those of no namespace, ``unnamed``'s, which are left out here)."""
    found: dict[tuple[str, str], list[str]] = {}
    for namespace, view in sorted(named.items()):
        for key in view.cpu_claims or {}:
            if key not in (unnamed.cpu_claims or {}):
                found.setdefault(key, []).append(namespace)
    return {key: (f"the object names no namespace and the input holds it only in namespace"
                  f"{'s' if len(names) > 1 else ''} {', '.join(names[:3])}{' and more' if len(names) > 3 else ''}; "
                  "set metadata.namespace") for key, names in found.items()}


@dataclass
class FixTally:
    changed: int = 0
    remaining: int = 0
    errors: int = 0
    dry_run: bool = False
    objects: int = 0  # judged, as check counts them
    skipped: Counter[str] = field(default_factory=Counter)  # documents with nothing to fix, by reason

    @property
    def exit_code(self) -> ExitCode:
        return fold(violations=bool(self.remaining), errors=bool(self.errors))

    def summary(self) -> str:
        # A file with an error was not judged: its violations are not in the count, and the count says so.
        where = " in the files read" if self.errors else ""
        if self.dry_run:
            return (f"qos-guard: {numbered(self.changed, 'file')} would change, "
                    f"{numbered(self.remaining, 'violation')} would be left{where}, "
                    f"{numbered(self.errors, 'error')} (dry run: nothing written)")
        return (f"qos-guard: {numbered(self.changed, 'file')} changed, {numbered(self.remaining, 'violation')} "
                f"left{where}, {numbered(self.errors, 'error')}")

    def nothing_to_fix(self, paths: Sequence[str]) -> str | None:
        """As ``check``'s "nothing to judge": no Pod or workload read, and no error to explain why (a wrong path
        in CI must not pass)."""
        if self.objects or self.errors:
            return None
        skipped = f" (skipped: {skipped_text(self.skipped)})" if self.skipped else ""
        return (f"nothing to judge: no Pod or workload in {', '.join(paths)}{skipped}; check the paths, or pass "
                "--allow-empty where finding none is expected")


def _diff(path: str, old: str, edits: Sequence[Edit]) -> str:
    """A unified diff of one file (``patch -p1`` or ``git apply`` can apply it), built from the spans ``fix``
    edited (``unified``: linear in the file, where difflib over the whole text was about quadratic); names
    escaped, text as is."""
    name = escape(os.path.normpath(path).lstrip("/"))
    return unified_diff(old, edits, f"a/{name}", f"b/{name}")


def fix_paths(paths: Sequence[str], config: Config, output: Path | None,
              print_line: Callable[[str], None], dry_run: bool = False,
              print_diff: Callable[[str], None] | None = None) -> FixTally:
    """``qos-guard fix``: apply the mutation to every manifest file under ``paths``, one line per change,
    per violation left and per file that could not be fixed (escaped: names come from the files). With
    ``dry_run`` nothing is written: ``print_diff`` gets each file's diff."""
    from webhook.batch.files import NotFixed, Unreadable
    from webhook.batch.rewrite import fix_file  # ruamel.yaml is imported by fix alone

    def out(line: str) -> None:
        print_line(escape(line))

    tally = FixTally(dry_run=dry_run)
    fixed = "would fix" if dry_run else "fixed"
    charts: dict[Path, int] = {}
    # every file read first (as check reads them): one file's InferenceService, another's ServingRuntime
    facts = with_input(NO_FACTS, (i.obj for i in file_items([p for p in paths if p != STDIN]) if i.obj is not None),
                       config)
    for arg in paths:
        if arg == STDIN:
            out(f"{STDIN_SHOWN}: error: fix rewrites files; to fix standard input give - alone "
                "(qos-guard fix - < in.yaml > out.yaml)")
            tally.errors += 1
            continue
        root = Path(arg) if Path(arg).is_dir() else Path(arg).parent
        for item in expand_paths([arg]):
            if isinstance(item, ReadError):
                out(f"{item.file}: error: {item.message}")
                tally.errors += 1
                continue
            chart = helm_chart_of(item)
            if chart is not None:
                charts[chart] = charts.get(chart, 0) + 1
                continue
            try:
                result = fix_file(item, config, output, root, dry_run=dry_run, facts=facts)
            except NotFixed as exc:
                if isinstance(exc, Unreadable):
                    exc.reason = _template_hint(item, exc.reason, FIX_TEMPLATE)
                out(exc.render(item))
                tally.errors += 1
                continue
            tally.objects += result.objects
            tally.skipped.update(result.skipped)
            for error in result.errors:
                out(f"{item}:{error.line}: error: {error.message}; this document not changed")
                tally.errors += 1
            tally.changed += bool(result.changes)
            for target, change in result.changes:
                out(f"{item}{result.at(target, change.path)}: {target.kind}/{target.name}: {fixed}: {change.message}")
            for target, change, why in result.refused:
                out(f"{item}{result.at(target, change.path)}: {target.kind}/{target.name}: not fixed: "
                    f"{change.message}: {why}")
                tally.remaining += 1
            for target, violation, remedy in result.remaining:
                why = f"cannot be fixed with this configuration: {remedy}" if remedy else \
                    "cannot be fixed automatically"
                out(f"{item}{result.at(target, violation.path)}: {target.kind}/{target.name}: {violation.rule}: "
                    f"{violation.message} ({why})")
                tally.remaining += 1
            if dry_run and print_diff is not None and result.new_text is not None and result.old_text is not None:
                print_diff(_diff(item, result.old_text, result.edits))
    for chart, files in charts.items():
        out(f"{chart}: error: {helm_chart_error(chart, files, fix=True)}")
        tally.errors += 1
    return tally
