"""The output formats of every command that has ``--format`` (``check``, ``audit``, ``nodes``): one registry.

A format is one entry here, with a renderer for each kind of report, so a new format cannot exist for one
command and break another (``nodes`` once took its choices from ``check``'s list and failed with a KeyError on
one it had no renderer for); the parser's choices and help come from this table. ``verify`` runs on a node and
prints its own snapshot (text or json, ``webhook.node.verify``): it is not a report of this layer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from webhook.batch import nodes, report
from webhook.batch.nodes import NodesReport
from webhook.batch.report import Report


@dataclass(frozen=True, slots=True)
class Format:
    """One output format: its name, what it is for (the ``--format`` help), and how it renders the findings of
    ``check`` and ``audit`` (``objects``) and those of ``nodes``."""

    name: str
    purpose: str
    objects: Callable[[Report], str]
    nodes: Callable[[NodesReport], str]


FORMATS: Mapping[str, Format] = MappingProxyType({f.name: f for f in (
    Format("text", "file:line: Kind/name: rule: message", report.render_text, nodes.render_text),
    Format("json", "one document", report.render_json, nodes.render_json),
    Format("sarif", "2.1.0, code scanning", report.render_sarif, nodes.render_sarif),
    Format("junit", "one test case per object or node", report.render_junit, nodes.render_junit),
    Format("github", "workflow annotations", report.render_github, nodes.render_github),
)})
DEFAULT = "text"


# What the text form is, by command: only check and fix read files with lines; audit's objects live in a
# namespace, nodes prints a table and then one line a finding.
TEXT_FORMS: Mapping[str, str] = MappingProxyType({
    "check": FORMATS["text"].purpose,
    "audit": "namespace: Kind/name: rule: message",
    "nodes": "a table, one row a node, then node/NAME: rule: message",
})


def choices_help(command: str = "check") -> str:
    """The ``--format`` help of ``command``: each format with its purpose, from the table (the text form as that
    command prints it)."""
    shown = [f"{f.name} ({TEXT_FORMS[command] if f.name == 'text' else f.purpose})" for f in FORMATS.values()]
    return f"{', '.join(shown[:-1])} or {shown[-1]} (default {DEFAULT})"


def render(findings: Report, fmt: str) -> str:
    """``check``'s or ``audit``'s findings in format ``fmt`` (one of ``FORMATS``)."""
    return FORMATS[fmt].objects(findings)


def render_nodes(findings: NodesReport, fmt: str) -> str:
    """``nodes``' verdicts in format ``fmt`` (one of ``FORMATS``)."""
    return FORMATS[fmt].nodes(findings)
