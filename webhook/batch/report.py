"""Reports for ``check`` and ``audit``: text, json, sarif, junit and GitHub annotations.

The report is built from verdicts and knows nothing about how objects were read; the only format rule
shared by all outputs is the exit code (docs/contract.md#commands-and-exit-codes): 1 for a violation, else 2
for an input error, else 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from xml.etree import ElementTree as ET

from webhook import __version__
from webhook.batch.textsafe import escape, xml_text
from webhook.core.engine import Mode, Verdict
from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.rules import RULES

FORMATS = ("text", "json", "sarif", "junit", "github")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


@dataclass(frozen=True, slots=True)
class Location:
    """Where a finding is: a line in a file (``check``), or a namespace of a cluster (``audit``: a live
    object has no line)."""

    source: str
    line: int | None = None

    def __str__(self) -> str:
        return self.source if self.line is None else f"{self.source}:{self.line}"

    def as_json(self) -> dict[str, Any]:
        return {"file": self.source if self.line is not None else None, "line": self.line}


@dataclass(frozen=True, slots=True)
class Record:
    location: Location
    kind: str
    namespace: str | None
    name: str
    container: str | None
    path: FieldPath
    rule: str
    message: str
    fixable: bool

    def as_json(self) -> dict[str, Any]:
        return {**self.location.as_json(), "kind": self.kind, "namespace": self.namespace, "name": self.name,
                "container": self.container, "path": dotted(self.path), "rule": self.rule,
                "message": self.message, "fixable": self.fixable}


@dataclass(frozen=True, slots=True)
class ErrorRecord:
    location: Location
    message: str

    def as_json(self) -> dict[str, Any]:
        return {**self.location.as_json(), "message": self.message}


@dataclass
class Counts:
    objects: int = 0
    violations: int = 0
    notices: int = 0
    errors: int = 0


@dataclass
class Report:
    """Findings of ``check`` and ``audit``. With ``stream`` (text output of ``check``) each line is written
    as it is found and no record is kept, so memory stays flat however many files are checked; the other
    formats need the whole report and keep the records. ``counts`` counts either way."""

    mode: Mode
    stream: Callable[[str], None] | None = None
    violations: list[Record] = field(default_factory=list)
    notices: list[Record] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)

    def _keep(self, into: list[Any], record: Record | ErrorRecord, line: str) -> None:
        if self.stream is not None:
            self.stream(line)
        else:
            into.append(record)

    def add_verdict(self, verdict: Verdict, locate: Callable[[FieldPath], Location]) -> None:
        """Record ``verdict``; ``locate`` maps a field path in the object to its location."""
        self.counts.objects += max(len(verdict.results), 1 if verdict.exempt else 0)
        for result in verdict.results:
            target = result.target
            if self.mode is Mode.MUTATE:
                for change in result.changes:
                    n = Record(locate(change.path), target.kind, target.namespace, target.name, change.container,
                               change.path, "mutation", change.message, True)
                    self.counts.notices += 1
                    self._keep(self.notices, n, _notice_line(n))
                found = [(v, False) for v in result.remaining]
            elif self.stream is not None:
                found = [(v, False) for v in result.violations]  # text output shows no fixability
            else:
                found = [(f.violation, f.fixable) for f in result.findings]
            for v in result.advisories:
                n = Record(locate(v.path), target.kind, target.namespace, target.name, v.container, v.path,
                           v.rule, v.message, False)
                self.counts.notices += 1
                self._keep(self.notices, n, _notice_line(n))
            for v, fixable in found:
                r = Record(locate(v.path), target.kind, target.namespace, target.name, v.container, v.path,
                           v.rule, v.message, fixable)
                self.counts.violations += 1
                self._keep(self.violations, r, _violation_line(r))

    def add_error(self, location: Location, message: str) -> None:
        e = ErrorRecord(location, message)
        self.counts.errors += 1
        self._keep(self.errors, e, _error_line(e))

    @property
    def exit_code(self) -> int:
        if self.counts.violations and self.mode is not Mode.WARN:
            return 1
        return 2 if self.counts.errors else 0


def render(report: Report, fmt: str) -> str:
    return _RENDERERS[fmt](report)


def _error_line(e: ErrorRecord) -> str:
    return escape(f"{e.location}: error: {e.message}")


def _notice_line(r: Record) -> str:
    """A change the mutation makes, or a rule's advisory finding (reported, never refused)."""
    about = "" if r.rule == "mutation" else f"{r.rule}: "
    return escape(f"{r.location}: {r.kind}/{r.name}: notice: {about}{r.message}")


def _violation_line(r: Record) -> str:
    return escape(f"{r.location}: {r.kind}/{r.name}: {r.rule}: {r.message}")


def _text(report: Report) -> str:
    lines = [_error_line(e) for e in report.errors]
    lines += [_notice_line(r) for r in report.notices]
    lines += [_violation_line(r) for r in report.violations]
    return "\n".join(lines) + ("\n" if lines else "")


def summary_line(report: Report) -> str:
    c = report.counts
    return f"qos-guard: {c.objects} objects checked, {c.violations} violations, {c.errors} errors ({report.mode} mode)"


def _json(report: Report) -> str:
    out: dict[str, Any] = {
        "violations": [r.as_json() for r in report.violations],
        "errors": [e.as_json() for e in report.errors],
        "summary": {"objects": report.counts.objects, "violations": report.counts.violations,
                    "errors": report.counts.errors},
    }
    if report.mode is Mode.MUTATE or report.notices:
        out["notices"] = [r.as_json() for r in report.notices]
    return json.dumps(out, indent=2) + "\n"


def _physical(loc: Location) -> dict[str, Any]:
    return {"artifactLocation": {"uri": loc.source}, "region": {"startLine": max(loc.line or 1, 1)}}


def _sarif(report: Report) -> str:
    level = "warning" if report.mode is Mode.WARN else "error"
    results: list[dict[str, Any]] = []
    for r in report.violations:
        results.append({
            "ruleId": r.rule,
            "level": level,
            "message": {"text": f"{r.kind}/{r.name}: {r.message}"},
            "locations": [{
                "physicalLocation": _physical(r.location),
                "logicalLocations": [{"fullyQualifiedName": f"{r.kind}/{r.name}/{dotted(r.path)}"}],
            }],
            "properties": {"fixable": r.fixable, "container": r.container, "path": dotted(r.path)},
        })
    for n in report.notices:
        results.append({
            "ruleId": n.rule, "level": "note", "message": {"text": f"{n.kind}/{n.name}: {n.message}"},
            "locations": [{"physicalLocation": _physical(n.location)}],
        })
    notifications = [{
        "level": "error",
        "message": {"text": e.message},
        "locations": [{"physicalLocation": _physical(e.location)}],
    } for e in report.errors]
    rules = [{"id": rule.id, "shortDescription": {"text": rule.summary},
              "defaultConfiguration": {"level": "error" if rule.default_on else "none"}} for rule in RULES]
    rules.append({"id": "mutation", "shortDescription": {"text": "a change the mutating webhook makes"},
                  "defaultConfiguration": {"level": "note"}})
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "qos-guard", "version": __version__,
                                "informationUri": "https://qos-guard.io", "rules": rules}},
            "invocations": [{"executionSuccessful": not report.errors,
                             "toolExecutionNotifications": notifications}],
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


def _junit(report: Report) -> str:
    suite = ET.Element("testsuite", name="qos-guard", tests="0", failures="0", errors="0")
    cases: dict[tuple[str, str, str], ET.Element] = {}
    failures = 0
    for r in report.violations:
        key = (r.location.source, r.kind, r.name)
        case = cases.get(key)
        if case is None:
            case = ET.SubElement(suite, "testcase", classname=r.location.source, name=f"{r.kind}/{r.name}")
            cases[key] = case
        failure = ET.SubElement(case, "failure", type=r.rule, message=r.message)
        failure.text = f"{r.location}: {r.rule}: {r.message}"
        failures += 1
    for e in report.errors:
        case = ET.SubElement(suite, "testcase", classname=e.location.source, name=f"read {e.location.source}")
        error = ET.SubElement(case, "error", type="input-error", message=e.message)
        error.text = f"{e.location}: {e.message}"
    passed = max(report.counts.objects - len(cases), 0)
    if passed:
        ET.SubElement(suite, "testcase", classname="qos-guard", name=f"{passed} compliant objects")
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures if report.mode is not Mode.WARN else 0))
    suite.set("errors", str(len(report.errors)))
    root = ET.Element("testsuites")
    root.append(suite)
    for element in root.iter():  # names and messages come from files: only what XML 1.0 allows
        element.attrib.update({k: xml_text(v) for k, v in element.attrib.items()})
        if element.text:
            element.text = xml_text(element.text)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _github_where(loc: Location) -> str:
    return f"file={_escape_property(loc.source)},line={max(loc.line or 1, 1)}"


def _github(report: Report) -> str:
    level = "warning" if report.mode is Mode.WARN else "error"
    lines = [f"::error {_github_where(e.location)},title=input error::"
             f"{_escape_data(e.message)}" for e in report.errors]
    lines += [f"::notice {_github_where(n.location)},title={n.rule}::"
              f"{_escape_data(f'{n.kind}/{n.name}: {n.message}')}" for n in report.notices]
    lines += [f"::{level} {_github_where(r.location)},title={r.rule}::"
              f"{_escape_data(f'{r.kind}/{r.name}: {r.message}')}" for r in report.violations]
    return "\n".join(escape(line) for line in lines) + ("\n" if lines else "")


_RENDERERS: dict[str, Callable[[Report], str]] = {
    "text": _text, "json": _json, "sarif": _sarif, "junit": _junit, "github": _github,
}
