"""Reports for ``check`` and ``audit``: text, json, sarif, junit and GitHub annotations.

The report is built from verdicts and knows nothing about how objects were read; the only format rule
shared by all outputs is the exit code (SPEC §6): 1 for a violation, else 2 for an input error, else 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any
from xml.etree import ElementTree as ET

from webhook import __version__
from webhook.engine import Mode, Verdict
from webhook.rules import RULES
from webhook.textsafe import escape, xml_text
from webhook.workloads import Target

FORMATS = ("text", "json", "sarif", "junit", "github")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


@dataclass(frozen=True, slots=True)
class Record:
    file: str
    line: int
    kind: str
    namespace: str | None
    name: str
    container: str | None
    path: str
    rule: str
    message: str
    fixable: bool


@dataclass(frozen=True, slots=True)
class ErrorRecord:
    file: str
    line: int
    message: str


@dataclass
class Report:
    mode: Mode
    violations: list[Record] = field(default_factory=list)
    notices: list[Record] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    objects: int = 0
    live: bool = False  # objects from a cluster (audit): ``file`` is the namespace and there is no line
    # Text output of ``check``: each line is written as it is found and no record is kept, so memory stays
    # flat however many files are checked. Other formats need the whole report and keep the records.
    stream: Callable[[str], None] | None = None
    violation_count: int = 0
    error_count: int = 0

    def _keep(self, into: list[Any], record: Record | ErrorRecord, line: str) -> None:
        if self.stream is not None:
            self.stream(line)
        else:
            into.append(record)

    def add_verdict(self, file: str, verdict: Verdict, line_of: Callable[[str], int]) -> None:
        """Record ``verdict``; ``line_of`` maps a field path in the document to its line."""
        self.objects += max(len(verdict.results), 1 if verdict.exempt else 0)
        if self.mode is Mode.MUTATE:
            for result in verdict.results:
                for change in result.changes:
                    n = _record(file, result.target, line_of(change.path), "mutation", change.message,
                                change.container, change.path, True)
                    self._keep(self.notices, n, _notice_line(self, n))
        for target, finding in verdict.violations:
            v = finding.violation
            r = _record(file, target, line_of(v.path), v.rule, v.message, v.container, v.path, finding.fixable)
            self.violation_count += 1
            self._keep(self.violations, r, _violation_line(self, r))

    def add_error(self, file: str, line: int, message: str) -> None:
        e = ErrorRecord(file, line, message)
        self.error_count += 1
        self._keep(self.errors, e, _error_line(self, e))

    @property
    def exit_code(self) -> int:
        if self.violation_count and self.mode is not Mode.WARN:
            return 1
        return 2 if self.error_count else 0


def _record(file: str, target: Target, line: int, rule: str, message: str, container: str | None,
            path: str, fixable: bool) -> Record:
    return Record(file, line, target.kind, target.namespace, target.name, container, path, rule, message,
                  fixable)


def render(report: Report, fmt: str) -> str:
    return _RENDERERS[fmt](report)


def _where(report: Report, file: str, line: int) -> str:
    """``file:line``; for a live object (``audit``) just the namespace, as it has no line."""
    return file if report.live else f"{file}:{line}"


def _error_line(report: Report, e: ErrorRecord) -> str:
    return escape(f"{_where(report, e.file, e.line)}: error: {e.message}")


def _notice_line(report: Report, r: Record) -> str:
    return escape(f"{_where(report, r.file, r.line)}: {r.kind}/{r.name}: notice: {r.message}")


def _violation_line(report: Report, r: Record) -> str:
    return escape(f"{_where(report, r.file, r.line)}: {r.kind}/{r.name}: {r.rule}: {r.message}")


def _text(report: Report) -> str:
    lines = [_error_line(report, e) for e in report.errors]
    lines += [_notice_line(report, r) for r in report.notices]
    lines += [_violation_line(report, r) for r in report.violations]
    return "\n".join(lines) + ("\n" if lines else "")


def summary_line(report: Report) -> str:
    return (f"qos-guard: {report.objects} objects checked, {report.violation_count} violations, "
            f"{report.error_count} errors ({report.mode} mode)")


def _json(report: Report) -> str:
    out: dict[str, Any] = {
        "violations": [asdict(r) for r in report.violations],
        "errors": [asdict(e) for e in report.errors],
        "summary": {"objects": report.objects, "violations": len(report.violations),
                    "errors": len(report.errors)},
    }
    if report.mode is Mode.MUTATE:
        out["notices"] = [asdict(r) for r in report.notices]
    return json.dumps(out, indent=2) + "\n"


def _sarif(report: Report) -> str:
    level = "warning" if report.mode is Mode.WARN else "error"
    results: list[dict[str, Any]] = []
    for r in report.violations:
        results.append({
            "ruleId": r.rule,
            "level": level,
            "message": {"text": f"{r.kind}/{r.name}: {r.message}"},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": {"uri": r.file},
                    "region": {"startLine": max(r.line, 1)},
                },
                "logicalLocations": [{"fullyQualifiedName": f"{r.kind}/{r.name}/{r.path}"}],
            }],
            "properties": {"fixable": r.fixable, "container": r.container, "path": r.path},
        })
    for n in report.notices:
        results.append({
            "ruleId": "mutation", "level": "note", "message": {"text": f"{n.kind}/{n.name}: {n.message}"},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": n.file},
                                                "region": {"startLine": max(n.line, 1)}}}],
        })
    notifications = [{
        "level": "error",
        "message": {"text": e.message},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": e.file},
                                            "region": {"startLine": max(e.line, 1)}}}],
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
        key = (r.file, r.kind, r.name)
        case = cases.get(key)
        if case is None:
            case = ET.SubElement(suite, "testcase", classname=r.file, name=f"{r.kind}/{r.name}")
            cases[key] = case
        failure = ET.SubElement(case, "failure", type=r.rule, message=r.message)
        failure.text = f"{r.file}:{r.line}: {r.rule}: {r.message}"
        failures += 1
    for e in report.errors:
        case = ET.SubElement(suite, "testcase", classname=e.file, name=f"read {e.file}")
        error = ET.SubElement(case, "error", type="input-error", message=e.message)
        error.text = f"{e.file}:{e.line}: {e.message}"
    passed = max(report.objects - len(cases), 0)
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


def _github(report: Report) -> str:
    level = "warning" if report.mode is Mode.WARN else "error"
    lines = [f"::error file={_escape_property(e.file)},line={max(e.line, 1)},title=input error::"
             f"{_escape_data(e.message)}" for e in report.errors]
    lines += [f"::notice file={_escape_property(n.file)},line={max(n.line, 1)},title=mutation::"
              f"{_escape_data(f'{n.kind}/{n.name}: {n.message}')}" for n in report.notices]
    lines += [f"::{level} file={_escape_property(r.file)},line={max(r.line, 1)},title={r.rule}::"
              f"{_escape_data(f'{r.kind}/{r.name}: {r.message}')}" for r in report.violations]
    return "\n".join(escape(line) for line in lines) + ("\n" if lines else "")


_RENDERERS: dict[str, Callable[[Report], str]] = {
    "text": _text, "json": _json, "sarif": _sarif, "junit": _junit, "github": _github,
}
