"""``qos-guard nodes``: each node's verdict (pins, cannot pin, unreadable) and the pools that disagree, in the
formats of ``check`` (text, json, sarif, junit, github) and with its exit codes: 1 when a selected node cannot
pin, else 2 when one could not be read (or none was selected), else 0. A pool whose nodes differ is a warning:
it does not change the exit code, since each node's own verdict already does where it matters.

Who pins each node's CPUs (``PINNED BY``): kubelet's static CPU Manager (its configz), a DRA CPU driver (the
``dra.cpu`` devices its ResourceSlices publish for the node), both (``cpu-pinners-conflict``: the driver's README
says the two are mutually incompatible, each pins containers the other also sets; the node cannot pin), or
nobody; ``?`` when either source could not be read (unknown is not nobody). Where they cannot, the node agent's
NodeResourceTopology object says it if it publishes ``cpuPinner`` (``webhook.core.cpupinner``: the agent read
its own kubelet's configz and its node's ResourceSlices): the column then says ``(NRT)`` after it, and the json
``pinnedBySource`` ``nrt`` (``configz+resourceslices`` otherwise). A note says where ``numa: auto`` and the
extender, which read the CPU Manager policy from that ``cpuPinner`` (static where it is not published), judge a
node under another policy than its configz says (``cpuoptions.fit_policy_note``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from webhook import __version__
from webhook.batch.report import SARIF_SCHEMA, _escape_data, xml_lines
from webhook.batch.textsafe import escape, xml_text
from webhook.core.cpuoptions import fit_policy_note, nodes_note, options_text
from webhook.core.cpupinner import BOTH, CPU_MANAGER, DRA_CPU, Pinner
from webhook.core.cpupinner import NOBODY as NRT_NOBODY
from webhook.core.dracpu import CPU_DRIVER, SliceDevice
from webhook.core.kubeletpinning import (
    RULES,
    KubeletPinning,
    NodeVerdict,
    PoolMismatch,
    Problem,
    node_verdict,
    pool_mismatches,
)
from webhook.core.outcome import ExitCode, Refused, fold

if TYPE_CHECKING:  # the registry of formats imports this module: check's start-up does not pay for the client
    from webhook.cluster.configz import NodeConfig


CONFLICT_RULE = "cpu-pinners-conflict"
CONFLICT = ("kubelet's static CPU Manager and the DRA CPU driver ({driver}) both pin this node's CPUs: each sets "
            "containers' cpusets the other also sets (the driver requires cpuManagerPolicy: none); set "
            "cpuManagerPolicy: none on this node (drain it and delete cpu_manager_state), or remove the driver "
            "from it")
DRA_WAIVES = ("cpu-manager-none", "topology-manager-none")
DRA_NOTE = (f"CPUs pinned by the DRA driver {CPU_DRIVER}: a Pod gets them through a ResourceClaim (mirrored in its "
            "cpu requests and limits), aligned with its other devices only by the claim's matchAttribute "
            "(qos-guard check: dra-cpu-unpaired, dra-cpu-not-mirrored)")
STATIC = "static CPU Manager"
NOBODY = "nobody"
UNKNOWN = "?"
DIRECT, FROM_NRT = "configz+resourceslices", "nrt"
# The agent's published cpuPinner, in this column's words.
PUBLISHED = {CPU_MANAGER: STATIC, DRA_CPU: CPU_DRIVER, BOTH: f"{STATIC} and {CPU_DRIVER}", NRT_NOBODY: NOBODY}


def enabled_options(pinning: KubeletPinning) -> frozenset[str]:
    """The CPU Manager options set to true (kubelet reads each value with ``strconv.ParseBool``)."""
    return frozenset(k for k, v in pinning.cpu_manager_options if v in ("1", "t", "T", "TRUE", "true", "True"))


def pinned_by(pinning: KubeletPinning | None, drivers: frozenset[str] | None) -> str:
    """Who pins a node's CPUs (module docstring): ``drivers`` are the DRA drivers publishing devices on it (None:
    not known)."""
    static = pinning.cpu_manager_policy == "static" if pinning is not None else None
    dra = CPU_DRIVER in drivers if drivers is not None else None
    if static and dra:
        return f"{STATIC} and {CPU_DRIVER}"
    if static:
        return STATIC if dra is not None else f"{STATIC}, {UNKNOWN}"
    if dra:
        return CPU_DRIVER if static is not None else f"{CPU_DRIVER}, {UNKNOWN}"
    if static is None or dra is None:
        return UNKNOWN
    return NOBODY


@dataclass(frozen=True, slots=True)
class NodeResult:
    config: NodeConfig
    verdict: NodeVerdict | None
    pinned_by: str = UNKNOWN
    pinned_from: str = DIRECT  # where pinned_by was read: DIRECT or FROM_NRT
    # Where numa: auto and the extender judge its CPUs under another CPU Manager policy than it runs
    # (``cpuoptions.fit_policy_note``).
    fit_note: str | None = None

    @property
    def name(self) -> str:
        return self.config.node.name

    @property
    def conflict(self) -> bool:
        return self.pinned_by == f"{STATIC} and {CPU_DRIVER}"

    @property
    def dra_pins(self) -> bool:
        """The DRA CPU driver pins this node, and the CPU Manager is off as it requires."""
        return self.pinned_by == CPU_DRIVER

    @property
    def problems(self) -> tuple[Problem, ...]:
        """The kubelet's problems, and the two pinners' conflict. Where the DRA CPU driver pins, the CPU
        Manager's ``none`` is what it requires and the Topology Manager aligns none of its CPUs (claims align
        them with ``matchAttribute``), so neither is a problem there."""
        found = tuple(self.verdict.problems) if self.verdict is not None else ()
        if self.dra_pins:
            found = tuple(p for p in found if p.rule not in DRA_WAIVES)
        if self.conflict:
            found += (Problem(CONFLICT_RULE, "cpuManagerPolicy", CONFLICT.format(driver=CPU_DRIVER)),)
        return found

    @property
    def notes(self) -> tuple[str, ...]:
        found = tuple(self.verdict.notes) if self.verdict is not None else ()
        p = self.config.pinning
        sockets = nodes_note(p.cpu_manager_policy, enabled_options(p)) if p is not None else None
        if sockets is not None:
            found = (*found, sockets)
        if self.fit_note is not None:
            found = (*found, self.fit_note)
        return (*found, DRA_NOTE) if self.dra_pins else found

    @property
    def state(self) -> str:
        if self.verdict is None:
            return "unreadable"
        return "cannot pin" if self.problems else "pins"


@dataclass
class NodesReport:
    results: list[NodeResult]
    pools: list[PoolMismatch] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # about the selection itself, not one node
    # Why the ResourceSlices could not be read (who pins is then "?" where the CPU Manager does not say): a
    # notice, never an error (the kubelets' verdicts stand).
    unread_slices: str | None = None

    @property
    def exit_code(self) -> ExitCode:
        return fold(violations=any(r.state == "cannot pin" for r in self.results),
                    errors=bool(self.errors) or any(r.state == "unreadable" for r in self.results))

    def count(self, state: str) -> int:
        return sum(r.state == state for r in self.results)


def build(configs: Iterable[NodeConfig], pool_labels: Sequence[str], errors: Sequence[str] = (),
          devices: Sequence[SliceDevice] | None = None,
          published: Mapping[str, Pinner] | None = None) -> NodesReport:
    """Judge every node that was read, then compare the pools among them. ``devices``: what the cluster's
    ResourceSlices publish (None: not read), for who pins each node; ``published``: the agents' ``cpuPinner`` by
    node (None: not read), used where those and the configz cannot say, and to note where numa: auto and the
    extender judge a node under another CPU Manager policy than its configz says."""
    def drivers(name: str) -> frozenset[str] | None:
        return None if devices is None else frozenset(d.driver for d in devices if d.node == name)

    def result(c: NodeConfig) -> NodeResult:
        verdict = node_verdict(c.pinning) if c.pinning is not None else None
        direct = pinned_by(c.pinning, drivers(c.node.name))
        nrt = (published or {}).get(c.node.name)
        note = fit_policy_note(c.pinning.cpu_manager_policy if c.pinning is not None else None, nrt,
                               published is not None)
        if UNKNOWN in direct and nrt is not None:
            return NodeResult(c, verdict, PUBLISHED[nrt.value], FROM_NRT, note)
        return NodeResult(c, verdict, direct, fit_note=note)

    results = [result(c) for c in configs]
    read: list[tuple[str, dict[str, str], KubeletPinning]] = [
        (r.name, r.config.node.labels, r.config.pinning) for r in results if r.config.pinning is not None]
    return NodesReport(results, pool_mismatches(read, pool_labels), list(errors))


def read_nodes(kubeconfig: str | None, context: str | None, names: Sequence[str], selector: str | None,
               pool_labels: Sequence[str]) -> NodesReport:
    """``qos-guard nodes``: read the kubelet configuration of the nodes ``names`` (or those ``selector``
    matches, or all) and judge them. A named node that cannot be found is an unreadable row; a cluster that
    cannot be read is ``Refused``."""
    from webhook.cluster.client import ClusterError, Lister  # here, not at the top: see TYPE_CHECKING above
    from webhook.cluster.configz import NodeConfig, NodeInfo, NodeReader
    from webhook.cluster.dra_lists import read_slices
    from webhook.cluster.kubeconfig import explain, preflight

    errors: list[str] = []
    try:
        preflight(kubeconfig, context)
        reader = NodeReader(kubeconfig, context)
        if names:
            found = {name: reader.get(name) for name in dict.fromkeys(names)}
            nodes = [n for n in found.values() if isinstance(n, NodeInfo)]
            missing = [NodeConfig(NodeInfo(name), error=n) for name, n in found.items() if isinstance(n, str)]
        else:
            nodes, missing = reader.select(selector), []
            if not nodes:
                errors.append(f"no node matches -l {selector}" if selector else "the cluster has no node")
        configs = reader.read(nodes) + missing
        lister = Lister(kubeconfig, context=context)
        devices, unread = read_slices(lister)
        published = None
        # The agents' NRT may say who pins where configz or the slices cannot; and where a kubelet runs none,
        # whether numa: auto and the extender know it (``fit_policy_note``).
        if devices is None or any(c.pinning is None or c.pinning.cpu_manager_policy == "none" for c in configs):
            from webhook.cluster.nrtpinner import read_pinners

            published, _ = read_pinners(lister)  # unread: those nodes stay "?", as the note says
    except ClusterError as exc:
        needs = "; listing nodes needs list on nodes (the ClusterRole in docs/howto/nodes.md)"
        hint = needs if "403" in str(exc) else ""
        raise Refused(f"{explain(exc, kubeconfig)}{hint}") from None
    report = build(sorted(configs, key=lambda c: c.node.name), pool_labels, errors, devices, published)
    report.unread_slices = unread
    return report


def summary_line(report: NodesReport) -> str:
    pools, count = len(report.pools), len(report.results)
    return (f"qos-guard: {count} {'node' if count == 1 else 'nodes'}: {report.count('pins')} pin, "
            f"{report.count('cannot pin')} cannot pin, {report.count('unreadable')} unreadable; "
            f"{pools} {'pool differs' if pools == 1 else 'pools differ'}")


# --- text ---

COLUMNS = ("NODE", "KUBELET", "CPU MANAGER", "CPU OPTIONS", "RESERVED CPUS", "MEMORY MANAGER", "TOPOLOGY MANAGER",
           "PINNED BY", "VERDICT")


def _with_options(policy: str, options: tuple[tuple[str, str], ...]) -> str:
    return f"{policy} ({','.join(f'{k}={v}' for k, v in options)})" if options else policy


def _row(r: NodeResult) -> tuple[str, ...]:
    p, node = r.config.pinning, r.config.node
    if p is None:
        return (node.name, node.kubelet_version or "-", "?", options_text(None), "?", "?", "?", _pinned(r), r.state)
    memory = p.memory_manager_policy
    if p.reserved_memory:
        memory += f" ({'; '.join(m.describe() for m in p.reserved_memory)})"
    topology = _with_options(f"{p.topology_manager_policy}, {p.topology_manager_scope}",
                             p.topology_manager_options)
    return (node.name, node.kubelet_version or "-", p.cpu_manager_policy, options_text(p.cpu_manager_options),
            p.reserved.describe(), memory, topology, _pinned(r), r.state)


def _pinned(r: NodeResult) -> str:
    return f"{r.pinned_by} (NRT)" if r.pinned_from == FROM_NRT else r.pinned_by


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return ["   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _grouped_notes(report: NodesReport) -> list[tuple[str, list[str]]]:
    """Each distinct note once, with the nodes it applies to (a note on every node is one line)."""
    notes: dict[str, list[str]] = {}
    for r in report.results:
        for note in r.notes:
            notes.setdefault(note, []).append(r.name)
    return list(notes.items())


def _names(names: Sequence[str], shown: int = 5) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def render_text(report: NodesReport) -> str:
    lines = _table([COLUMNS, *(_row(r) for r in report.results)]) if report.results else []
    for message in report.errors:
        lines.append(f"error: {message}")
    for r in report.results:
        if r.config.error is not None:
            lines.append(f"node/{r.name}: error: {r.config.error}")
        for problem in r.problems:
            lines.append(f"node/{r.name}: {problem.rule}: {problem.message}")
    for pool in report.pools:
        lines.append(f"pool/{pool.pool}: pool-mismatch: {pool.message()}")
    for note, names in _grouped_notes(report):
        lines.append(f"note ({_names(names)}): {note}")
    if report.unread_slices is not None:
        lines.append(f"note: who pins CPUs is not known where the CPU Manager does not say (?): "
                     f"{report.unread_slices}")
    return "".join(escape(line) + "\n" for line in lines)


# --- json ---

def _node_json(r: NodeResult) -> dict[str, Any]:
    node = r.config.node
    out: dict[str, Any] = {"name": node.name, "kubeletVersion": node.kubelet_version or None,
                           "ready": node.ready, "verdict": r.state.replace(" ", "-"),
                           "pinnedBy": None if r.pinned_by == UNKNOWN else r.pinned_by,
                           "pinnedBySource": None if r.pinned_by == UNKNOWN else r.pinned_from}
    if r.config.pinning is not None:
        out.update(r.config.pinning.as_json())
    if r.verdict is not None:
        out["problems"] = [{"rule": p.rule, "setting": p.setting, "message": p.message} for p in r.problems]
        out["notes"] = list(r.notes)
    out["error"] = r.config.error
    return out


def render_json(report: NodesReport) -> str:
    doc = {
        "nodes": [_node_json(r) for r in report.results],
        "pools": [p.as_json() for p in report.pools],
        "errors": list(report.errors),
        "resourceSlicesUnread": report.unread_slices,
        "summary": {"nodes": len(report.results), "pins": report.count("pins"),
                    "cannotPin": report.count("cannot pin"), "unreadable": report.count("unreadable"),
                    "poolMismatches": len(report.pools)},
    }
    return json.dumps(doc, indent=2) + "\n"


# --- sarif, junit, github ---

def _where(name: str) -> dict[str, Any]:
    # A node has no file: the location names it the way audit names a namespace.
    return {"physicalLocation": {"artifactLocation": {"uri": f"node/{name}"}},
            "logicalLocations": [{"fullyQualifiedName": f"Node/{name}", "kind": "resource"}]}


def render_sarif(report: NodesReport) -> str:
    results: list[dict[str, Any]] = []
    for r in report.results:
        for p in r.problems:
            results.append({"ruleId": p.rule, "level": "error", "message": {"text": f"Node/{r.name}: {p.message}"},
                            "locations": [_where(r.name)], "properties": {"setting": p.setting}})
        for note in r.notes:
            results.append({"ruleId": "note", "level": "note", "message": {"text": f"Node/{r.name}: {note}"},
                            "locations": [_where(r.name)]})
    for pool in report.pools:
        results.append({"ruleId": "pool-mismatch", "level": "warning", "message": {"text": pool.describe()},
                        "locations": [_where(n) for n in pool.nodes]})
    notifications = [{"level": "error", "message": {"text": f"Node/{r.name}: {r.config.error}"},
                      "locations": [_where(r.name)]} for r in report.results if r.config.error is not None]
    notifications += [{"level": "error", "message": {"text": message}} for message in report.errors]
    rules = [{"id": rule, "shortDescription": {"text": text}, "defaultConfiguration": {
        "level": "warning" if rule == "pool-mismatch" else "error"}} for rule, text in RULES.items()]
    rules.append({"id": CONFLICT_RULE, "shortDescription": {"text": "the static CPU Manager and a DRA CPU driver both "
                  "pin the node's CPUs"}, "defaultConfiguration": {"level": "error"}})
    rules.append({"id": "note", "shortDescription": {"text": "a node pins, with a caveat"},
                  "defaultConfiguration": {"level": "note"}})
    doc = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "qos-guard", "version": __version__, "rules": rules}},
        "invocations": [{"executionSuccessful": not notifications, "toolExecutionNotifications": notifications}],
        "results": results}]}
    return json.dumps(doc, indent=2) + "\n"


def render_junit(report: NodesReport) -> str:
    """One test case per node: a failure per problem, an error when unreadable."""
    from xml.etree import ElementTree as ET  # here, as in report.py: only junit output pays for it

    suite = ET.Element("testsuite", name="qos-guard nodes")
    for r in report.results:
        case = ET.SubElement(suite, "testcase", classname="nodes", name=r.name)
        if r.config.error is not None:
            ET.SubElement(case, "error", type="unreadable", message=r.config.error).text = xml_lines([r.config.error])
        for p in r.problems:
            failure = ET.SubElement(case, "failure", type=p.rule, message=p.message)
            failure.text = xml_lines([f"Node/{r.name}: {p.message}"])
    for message in report.errors:
        case = ET.SubElement(suite, "testcase", classname="nodes", name="select nodes")
        ET.SubElement(case, "error", type="selection", message=message).text = xml_lines([message])
    warnings = [f"pool-mismatch: {p.describe()}" for p in report.pools]
    if warnings:  # JUnit has no warning: they go to the suite's output
        ET.SubElement(suite, "system-out").text = xml_lines(warnings)
    suite.set("tests", str(len(suite.findall("testcase"))))
    suite.set("failures", str(len(suite.findall("testcase/failure"))))
    suite.set("errors", str(len(suite.findall("testcase/error"))))
    root = ET.Element("testsuites")
    root.append(suite)
    for element in root.iter():  # values come from the cluster: only what XML 1.0 allows (texts: xml_lines)
        element.attrib.update({k: xml_text(v) for k, v in element.attrib.items()})
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def render_github(report: NodesReport) -> str:
    lines = [f"::error title=unreadable::{_escape_data(f'Node/{r.name}: {r.config.error}')}"
             for r in report.results if r.config.error is not None]
    lines += [f"::error title=nodes::{_escape_data(message)}" for message in report.errors]
    for r in report.results:
        for p in r.problems:
            lines.append(f"::error title={p.rule}::{_escape_data(f'Node/{r.name}: {p.message}')}")
    lines += [f"::warning title=pool-mismatch::{_escape_data(p.describe())}" for p in report.pools]
    lines += [f"::notice title=note::{_escape_data(f'{_names(names)}: {note}')}"
              for note, names in _grouped_notes(report)]
    return "".join(escape(line) + "\n" for line in lines)


