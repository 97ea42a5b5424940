"""Reports for ``check`` and ``audit``: the records, and how each format renders them (the registry that
names the formats, and holds ``nodes``' renderers beside these, is ``webhook.batch.formats``).

The report is built from verdicts and knows nothing about how objects were read; the only format rule
shared by all outputs is the exit code (docs/contract.md#commands-and-exit-codes): 1 for a violation, else 2
for an input error, else 0.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any
from urllib.parse import quote

from webhook import __version__
from webhook.batch.textsafe import escape, xml_text
from webhook.core.engine import MODE_LABEL, MODE_LABEL_RULE, NEVER_JUDGED, NEVER_JUDGED_HINT, Mode, ObjectVerdict
from webhook.core.fieldpath import FieldPath, dotted
from webhook.core.outcome import ExitCode, fold
from webhook.core.refusal import finding, remedied
from webhook.core.rules import RULES

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


@dataclass(frozen=True, slots=True)
class Location:
    """Where a finding is: a line in a file (``check``), or a namespace of a cluster (``audit``: a live
    object has no line)."""

    source: str
    line: int | None = None

    def __str__(self) -> str:
        # line 0: the input as a whole (a missing file, a folder that cannot be listed), not a line of it
        return f"{self.source}:{self.line}" if self.line else self.source

    def as_json(self) -> dict[str, Any]:
        return {"file": self.source if self.line is not None else None, "line": self.line or None}


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
class Case:
    """One judged object (a JUnit test case): what it is, where, and what was found in it."""

    location: Location
    kind: str
    name: str
    violations: list[Record] = field(default_factory=list)
    notices: list[Record] = field(default_factory=list)
    exempt: str | None = None


@dataclass
class Counts:
    objects: int = 0
    violations: int = 0
    notices: int = 0
    errors: int = 0
    exempt: int = 0  # of ``objects``: let through by an exemption


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
    cases: list[Case] = field(default_factory=list)  # one per judged object, kept as the records are
    skipped: Counter[str] = field(default_factory=Counter)  # documents not judged, by reason
    shipped: Counter[str] = field(default_factory=Counter)  # kinds judged with KServe's shipped ConfigMap, by kind

    def _keep(self, into: list[Any], record: Record | ErrorRecord, line: str) -> None:
        if self.stream is not None:
            self.stream(line)
        else:
            into.append(record)

    def add_verdict(self, verdict: ObjectVerdict, locate: Callable[[FieldPath], Location]) -> None:
        """Record ``verdict``; ``locate`` maps a field path in the object to its location. Its findings are kept
        in line order (each rule reports its own in turn: lines 36, 36, 26, 37 read as a shuffle)."""
        self.counts.objects += len({r.target.root for r in verdict.results})  # a JobSet is one, however many jobs
        cases: dict[FieldPath, Case] = {}  # one per object, however many templates it holds
        found: list[tuple[Case, Record, bool]] = []  # (case, record, a notice?)
        for result in verdict.results:
            target = result.target
            case = cases.get(target.root) or Case(locate(target.path), target.kind, target.name)
            if self.stream is None and target.root not in cases:
                self.cases.append(case)
            cases[target.root] = case
            if self.mode is Mode.MUTATE:
                for change in result.changes:
                    found.append((case, Record(locate(change.path), target.kind, target.namespace, target.name,
                                               change.container, change.path, "mutation", change.message, True),
                                  True))
                # What the mutation leaves, with the setting that would have fixed it where one would.
                remedies = result.remedies
                judged = [(v, False, remedies.get((v.rule, v.subject))) for v in result.remaining]
            elif self.stream is not None:
                judged = [(v, False, None) for v in result.violations]  # text output shows no fixability
            else:
                judged = [(f.violation, f.fixable, None) for f in result.findings]
            for v in result.advisories:  # reported, never refused: a notice
                found.append((case, Record(locate(v.path), target.kind, target.namespace, target.name, v.container,
                                           v.path, v.rule, v.message, False), True))
            never = NEVER_JUDGED_HINT.format(namespace=target.namespace) if target.namespace in NEVER_JUDGED else ""
            for v, fixable, remedy in judged:
                message = remedied(v.message, remedy) + never
                found.append((case, Record(locate(v.path), target.kind, target.namespace, target.name, v.container,
                                           v.path, v.rule, message, fixable), False))
        found.sort(key=lambda item: item[1].location.line or 0)  # stable: one line keeps the rules' order
        for case, record, notice in found:
            if notice:
                self.counts.notices += 1
                self._keep(self.notices, record, _notice_line(record))
                case.notices.append(record)
            else:
                self.counts.violations += 1
                self._keep(self.violations, record, _violation_line(record))
                case.violations.append(record)

    def add_finding(self, location: Location, kind: str, name: str, path: FieldPath, rule: str,
                    message: str | None) -> None:
        """One object judged outside the pod-spec rules (a Namespace's mode label): passed (``message`` None)
        or with one violation."""
        self.counts.objects += 1
        case = Case(location, kind, name)
        if message is not None:
            r = Record(location, kind, None, name, None, path, rule, message, False)
            self.counts.violations += 1
            self._keep(self.violations, r, _violation_line(r))
            case.violations.append(r)
        if self.stream is None:
            self.cases.append(case)

    def add_exempt(self, kind: str, name: str, location: Location, why: str) -> None:
        """An object an exemption let through: counted as judged (it is, by the configuration)."""
        self.counts.objects += 1
        self.counts.exempt += 1
        if self.stream is None:
            self.cases.append(Case(location, kind, name, exempt=why))

    def add_skipped(self, reason: str) -> None:
        """A document that is not judged (its kind, no kind, no pod template): counted, never silent."""
        self.skipped[reason] += 1

    def add_notice(self, location: Location, rule: str, message: str) -> None:
        """A notice about the run rather than one object (what could not be judged, and why): counted and shown
        as any notice, never a failure."""
        r = Record(location, "", None, "", None, (), rule, message, False)
        self.counts.notices += 1
        self._keep(self.notices, r, _notice_line(r))

    def add_error(self, location: Location, message: str) -> None:
        e = ErrorRecord(location, message)
        self.counts.errors += 1
        self._keep(self.errors, e, _error_line(e))

    @property
    def exit_code(self) -> ExitCode:
        return fold(violations=bool(self.counts.violations) and self.mode is not Mode.WARN,
                    errors=bool(self.counts.errors))



def _error_line(e: ErrorRecord) -> str:
    return escape(f"{e.location}: error: {e.message}")


def _notice_line(r: Record) -> str:
    """A change the mutation makes, or a rule's advisory finding (reported, never refused)."""
    about = "" if r.rule == "mutation" else f"{r.rule}: "
    if not r.kind:  # about the run, not an object
        return escape(f"{r.location}: notice: {about}{r.message}")
    return escape(f"{r.location}: {r.kind}/{r.name}: notice: {about}{r.message}")


def _violation_line(r: Record) -> str:
    return escape(f"{r.location}: {r.kind}/{r.name}: {finding(r.rule, r.message)}")


def render_text(report: Report) -> str:
    lines = [_error_line(e) for e in report.errors]
    lines += [_notice_line(r) for r in report.notices]
    lines += [_violation_line(r) for r in report.violations]
    return "\n".join(lines) + ("\n" if lines else "")


def skipped_text(skipped: Counter[str]) -> str:
    """``3 Service, 2 documents without a kind, 1 AdmissionReview``: most frequent first."""
    def counted(reason: str, n: int) -> str:
        plural = n > 1 and reason.startswith("document ")
        many = "documents" + reason.removeprefix("document").replace(" that is ", " that are ", 1)
        return f"{n} {many if plural else reason}"

    return ", ".join(counted(reason, n) for reason, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))


# Why a known kind was passed over is the rest of its reason (``InferenceService with spec.predictor.model
# (...)``); a reason that is only a kind (``Service``, ``DaemonSet of extensions/v1beta1``) or a document without
# one has nothing more to say.
_PLAIN = re.compile(r"^(\S+( of \S+)?|document without a kind)$")


def skipped_lines(skipped: Counter[str], most: int = 3) -> tuple[str, list[str]]:
    """The skipped summary, short however many objects were skipped: the kinds passed over for being kinds
    qos-guard does not judge, on one line (``2 Service, 1 ConfigMap``; empty when none), and one line per kind it
    knows but could not judge, its reasons counted (``3 InferenceService: 2 with ..., 1 with ...``; beyond
    ``most`` reasons, how many more: JSON's ``summary.skipped`` lists every one)."""
    plain: Counter[str] = Counter()
    why: dict[str, Counter[str]] = {}
    for reason, n in skipped.items():
        if _PLAIN.match(reason):
            plain[reason] += n
        else:
            kind, _, rest = reason.partition(" ")
            why.setdefault(kind, Counter())[rest] += n
    lines = []
    for kind, reasons in sorted(why.items(), key=lambda kv: (-kv[1].total(), kv[0])):
        ranked = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        if len(ranked) == 1:
            lines.append(f"{ranked[0][1]} {kind} {ranked[0][0]}")
            continue
        shown = ", ".join(f"{n} {rest}" for rest, n in ranked[:most])
        more = sum(n for _, n in ranked[most:])
        tail = (f", {more} more for {numbered(len(ranked) - most, 'other reason')} (--format json lists each)"
                if more else "")
        lines.append(f"{reasons.total()} {kind}: {shown}{tail}")
    return skipped_text(plain), lines


def numbered(n: int, noun: str, plural: str | None = None) -> str:
    """``1 error``, ``2 errors`` (``plural`` where adding an s will not do): no summary says "1 errors"."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def summary_line(report: Report, scope: str = "") -> str:
    """What the run judged and found (``scope``: where, ``in all namespaces``); exempt objects are judged (by
    the configuration) and said, as JUnit's ``skipped`` counts them. What was skipped follows, one line per kind
    that has a reason (``skipped_lines``): several lines then."""
    c = report.counts
    exempt = f" ({c.exempt} exempt)" if c.exempt else ""
    notices = f", {numbered(c.notices, 'notice')}" if c.notices else ""
    line = (f"qos-guard: {numbered(c.objects, 'object')} checked{exempt}, {numbered(c.violations, 'violation')}"
            f"{notices}, {numbered(c.errors, 'error')} ({report.mode} mode){scope}")
    plain, reasons = skipped_lines(report.skipped)
    lines = [f"{line}; skipped: {plain}" if plain else line] + [f"qos-guard: skipped: {r}" for r in reasons]
    return "\n".join(lines)


def render_json(report: Report) -> str:
    out: dict[str, Any] = {
        "violations": [r.as_json() for r in report.violations],
        "errors": [e.as_json() for e in report.errors],
        "summary": {"objects": report.counts.objects, "violations": report.counts.violations,
                    "notices": report.counts.notices, "errors": report.counts.errors,
                    "skipped": dict(sorted(report.skipped.items()))},
    }
    if report.mode is Mode.MUTATE or report.notices:
        out["notices"] = [r.as_json() for r in report.notices]
    return json.dumps(out, indent=2) + "\n"


STDIN_SHOWN = "<stdin>"  # how text output names standard input


def artifact_location(source: str) -> dict[str, Any]:
    """A SARIF ``artifactLocation`` whose ``uri`` is a valid URI reference (RFC 3986), as the schema requires
    and code scanning resolves: a relative path percent-encoded with ``/`` separators (relative to the
    folder ``check`` ran in, normally the repository root), an absolute one a ``file:`` URI, standard input
    the relative reference ``stdin`` with a description."""
    if source == STDIN_SHOWN:
        return {"uri": "stdin", "description": {"text": "standard input (qos-guard check -)"}}
    path = PurePath(source)
    if path.is_absolute():
        return {"uri": path.as_uri()}
    return {"uri": quote(source.replace(os.sep, "/"), safe="/")}


def _physical(loc: Location) -> dict[str, Any]:
    return {"artifactLocation": artifact_location(loc.source), "region": {"startLine": max(loc.line or 1, 1)}}


def render_sarif(report: Report) -> str:
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
        if not n.kind:
            continue  # about the run: a notification below
        results.append({
            "ruleId": n.rule, "level": "note", "message": {"text": f"{n.kind}/{n.name}: {n.message}"},
            "locations": [{"physicalLocation": _physical(n.location)}],
        })
    notifications = [{
        "level": "error",
        "message": {"text": e.message},
        "locations": [{"physicalLocation": _physical(e.location)}],
    } for e in report.errors]
    notifications += [{"level": "note", "message": {"text": f"{n.rule}: {n.message}"}}
                      for n in report.notices if not n.kind]
    rules = [{"id": rule.id, "shortDescription": {"text": rule.summary.replace("`", ""), "markdown": rule.summary},
              "defaultConfiguration": {"level": "error" if rule.default_on else "none"}} for rule in RULES]
    rules.append({"id": "mutation", "shortDescription": {"text": "a change the mutating webhook makes"},
                  "defaultConfiguration": {"level": "note"}})
    rules.append({"id": MODE_LABEL_RULE,
                  "shortDescription": {"text": f"a Namespace's {MODE_LABEL} label is not enforce, mutate or warn"},
                  "defaultConfiguration": {"level": "error"}})
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "qos-guard", "version": __version__,
                                "rules": rules}},
            "invocations": [{"executionSuccessful": not report.errors,
                             "toolExecutionNotifications": notifications}],
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


def render_junit(report: Report) -> str:
    """JUnit XML as CI readers take it (Ant/Surefire; validated against Jenkins' junit-10.xsd in the tests):
    one test case per judged object, failed when anything is found in it (all its violations in one
    ``failure``), an input that could not be read an ``error`` case, an exempt object a ``skipped`` case;
    ``tests``, ``failures``, ``errors`` and ``skipped`` count cases. In ``warn`` mode nothing fails: the
    violations are the case's ``system-out``."""
    from xml.etree import ElementTree as ET  # here: check's start-up (text output) does not pay for it

    suite = ET.Element("testsuite", name="qos-guard")
    counted = Counter[str]()
    seen: set[tuple[str, str]] = set()
    for case in report.cases:
        name = f"{case.kind}/{case.name}"
        if (case.location.source, name) in seen and case.location.line is not None:
            name = f"{name} (line {case.location.line})"  # two objects of one name in one file stay two cases
        seen.add((case.location.source, name))
        element = ET.SubElement(suite, "testcase", classname=case.location.source, name=name)
        lines = [f"{r.location}: {r.rule}: {r.message}" for r in case.violations]
        if case.exempt is not None:
            ET.SubElement(element, "skipped", message=case.exempt)
            counted["skipped"] += 1
        elif case.violations and report.mode is not Mode.WARN:
            rules = list(dict.fromkeys(r.rule for r in case.violations))
            failure = ET.SubElement(element, "failure", type=rules[0],
                                    message=f"{len(case.violations)} violation"
                                            f"{'s' if len(case.violations) > 1 else ''}: {', '.join(rules)}")
            failure.text = xml_lines(lines)
            counted["failures"] += 1
        notes = [f"{n.location}: notice: {n.rule}: {n.message}" for n in case.notices]
        if notes or (lines and report.mode is Mode.WARN):
            ET.SubElement(element, "system-out").text = xml_lines(notes + (lines if report.mode is Mode.WARN else []))
    for e in report.errors:
        unread = ET.SubElement(suite, "testcase", classname=e.location.source, name=f"read {e.location}")
        error = ET.SubElement(unread, "error", type="input-error", message=e.message)
        error.text = xml_lines([f"{e.location}: {e.message}"])
        counted["errors"] += 1
    about_run = [f"notice: {n.rule}: {n.message}" for n in report.notices if not n.kind]
    if about_run:  # what the run could not judge, beside the cases
        ET.SubElement(suite, "system-out").text = xml_lines(about_run)
    totals = {"tests": str(len(suite.findall("testcase"))), "failures": str(counted["failures"]),
              "errors": str(counted["errors"])}
    suite.attrib.update(totals, skipped=str(counted["skipped"]))
    root = ET.Element("testsuites", {"name": "qos-guard", **totals})
    root.append(suite)
    for element in root.iter():  # names and messages come from files: only what XML 1.0 allows (texts: above)
        element.attrib.update({k: xml_text(v) for k, v in element.attrib.items()})
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def xml_lines(lines: list[str]) -> str:
    """A JUnit element's text: each line made safe on its own (a newline in a name cannot forge a line), then
    one line each. Escaping the joined text wrote a literal ``\\n`` between two violations of one object."""
    return "\n".join(xml_text(line) for line in lines)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _github_where(loc: Location) -> str:
    return f"file={_escape_property(loc.source)},line={max(loc.line or 1, 1)}"


def render_github(report: Report) -> str:
    level = "warning" if report.mode is Mode.WARN else "error"
    lines = [f"::error {_github_where(e.location)},title=input error::"
             f"{_escape_data(e.message)}" for e in report.errors]
    lines += [f"::notice {_github_where(n.location)},title={n.rule}::"
              f"{_escape_data(f'{n.kind}/{n.name}: {n.message}')}" if n.kind else
              f"::notice title={_escape_property(n.rule)}::{_escape_data(n.message)}" for n in report.notices]
    lines += [f"::{level} {_github_where(r.location)},title={r.rule}::"
              f"{_escape_data(f'{r.kind}/{r.name}: {r.message}')}" for r in report.violations]
    return "\n".join(escape(line) for line in lines) + ("\n" if lines else "")

