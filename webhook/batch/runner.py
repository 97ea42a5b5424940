"""The one loop of the batch commands: inputs -> ``evaluate`` -> ``Report``.

``check`` feeds it documents read from files, ``audit`` objects listed from a cluster; both get the same
error handling (a malformed object is an error record, never a stop) and the same counting. ``fix`` goes
through the same engine per file and reports through ``FixTally``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.batch.report import Location, Report
from webhook.batch.textsafe import escape
from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate
from webhook.core.fieldpath import FieldPath
from webhook.core.podspec import ManifestError
from webhook.manifests.reader import STDIN, Document, ReadError, expand_paths, read_documents


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


def at(where: Location) -> Callable[[FieldPath], Location]:
    """Every field of the object is shown at ``where``."""
    return lambda _path: where


def _in_document(shown: str, doc: Document) -> Callable[[FieldPath], Location]:
    return lambda path: Location(shown, doc.line_of(path))


def run(items: Iterable[Item], config: Config, mode: Mode, report: Report) -> Report:
    """Judge every item into ``report``; an unreadable or malformed one is an error record, never a stop."""
    for item in items:
        if item.error is not None:
            report.add_error(item.locate(()), item.error)
            continue
        try:
            verdict = evaluate(item.obj, config, mode, namespace=item.namespace)
        except ManifestError as exc:
            report.add_error(item.locate(exc.path), f"{item.label}malformed object: {exc}")
            continue
        except RecursionError:
            report.add_error(item.locate(()), f"{item.label}object is nested too deeply to be judged")
            continue
        report.add_verdict(verdict, item.locate)
    return report


def file_items(paths: Sequence[str]) -> Iterator[Item]:
    """Every document under ``paths`` (files, folders, ``-``), each located by file and line."""
    for path in expand_paths(paths):
        if isinstance(path, ReadError):
            yield Item(at(Location(path.file, path.line)), error=path.message)
            continue
        shown = "<stdin>" if path == STDIN else path
        for doc in read_documents(path):
            if isinstance(doc, ReadError):
                yield Item(at(Location(shown, doc.line)), error=doc.message)
            else:
                yield Item(_in_document(shown, doc), obj=doc.obj)


def check_paths(paths: Sequence[str], config: Config, mode: Mode,
                stream: Callable[[str], None] | None = None) -> Report:
    """``qos-guard check``: judge every document under ``paths``; unreadable inputs are recorded."""
    return run(file_items(paths), config, mode, Report(mode, stream=stream))


@dataclass
class FixTally:
    changed: int = 0
    remaining: int = 0
    errors: int = 0

    @property
    def exit_code(self) -> int:
        return 1 if self.remaining else 2 if self.errors else 0

    def summary(self) -> str:
        return f"qos-guard: {self.changed} files changed, {self.remaining} violations left, {self.errors} errors"


def fix_paths(paths: Sequence[str], config: Config, output: Path | None,
              print_line: Callable[[str], None]) -> FixTally:
    """``qos-guard fix``: apply the mutation to every manifest file under ``paths``, one line per change,
    per violation left and per file that could not be fixed (escaped: names come from the files)."""
    from webhook.batch.files import NotFixed
    from webhook.batch.rewrite import fix_file  # ruamel.yaml is imported by fix alone

    def out(line: str) -> None:
        print_line(escape(line))

    tally = FixTally()
    for arg in paths:
        if arg == STDIN:
            out("-: error: fix rewrites files; give file or folder names, not -")
            tally.errors += 1
            continue
        root = Path(arg) if Path(arg).is_dir() else Path(arg).parent
        for item in expand_paths([arg]):
            if isinstance(item, ReadError):
                out(f"{item.file}: error: {item.message}")
                tally.errors += 1
                continue
            try:
                result = fix_file(item, config, output, root)
            except NotFixed as exc:
                out(f"{item}: error: {exc.render()}")
                tally.errors += 1
                continue
            tally.changed += bool(result.changes)
            for target, change in result.changes:
                out(f"{item}: {target.kind}/{target.name}: fixed: {change.message}")
            for target, violation in result.remaining:
                out(f"{item}: {target.kind}/{target.name}: {violation.rule}: {violation.message} "
                    "(cannot be fixed automatically)")
                tally.remaining += 1
    return tally
