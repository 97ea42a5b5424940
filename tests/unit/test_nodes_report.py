"""``qos-guard nodes`` output: every format from the same results, and the exit codes (1 cannot pin, else 2
unreadable or nothing selected, else 0; a pool mismatch warns only)."""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from tests.unit.test_pinning import configz
from webhook.batch.formats import render_nodes as render
from webhook.batch.nodes import build
from webhook.cluster.configz import NodeConfig, NodeInfo
from webhook.core.cpupinner import AGENT_SOURCE, BOTH, CPU_MANAGER, DRA_CPU, NOBODY, Pinner
from webhook.core.kubeletpinning import DEFAULT_POOL_LABELS, read_configz

POOL = {"node.kubernetes.io/instance-type": "c7i.8xlarge"}


def node(name: str, labels: dict[str, str] | None = None, error: str | None = None, **settings: Any) -> NodeConfig:
    info = NodeInfo(name, labels or {}, "v1.36.3", True)
    if error is not None:
        return NodeConfig(info, error=error)
    return NodeConfig(info, pinning=read_configz(configz(**settings)))


def report(*configs: NodeConfig, errors: tuple[str, ...] = ()) -> Any:
    return build(list(configs), DEFAULT_POOL_LABELS, errors)


@pytest.mark.parametrize(("configs", "errors", "code"), [
    ([node("a")], (), 0),
    ([node("a"), node("b", cpuManagerPolicy="none")], (), 1),
    ([node("a"), node("b", error="forbidden")], (), 2),
    ([node("a", cpuManagerPolicy="none"), node("b", error="forbidden")], (), 1),
    ([], ("no node matches -l pool=x",), 2),
    ([node("a", POOL), node("b", POOL, topologyManagerPolicy="restricted")], (), 0),  # the pool only warns
])
def test_exit_codes(configs: list[NodeConfig], errors: tuple[str, ...], code: int) -> None:
    assert report(*configs, errors=errors).exit_code == code


def test_text_is_a_table_then_one_line_per_finding() -> None:
    out = render(report(node("gpu-a", POOL), node("gpu-b", POOL, cpuManagerPolicy="none", memoryManagerPolicy=None),
                        node("gpu-c", error="forbidden (HTTP 403): ...")), "text")
    lines = out.splitlines()
    assert lines[0].split() == ["NODE", "KUBELET", "CPU", "MANAGER", "CPU", "OPTIONS", "RESERVED", "CPUS", "MEMORY",
                                "MANAGER", "TOPOLOGY", "MANAGER", "PINNED", "BY", "VERDICT"]
    assert lines[1].startswith("gpu-a ") and lines[1].endswith("pins")
    assert "static" in lines[1] and "1 (systemReserved 100m)" in lines[1]
    assert "Static (NUMA 0 memory=600Mi)" in lines[1] and "single-numa-node, container" in lines[1]
    assert lines[2].endswith("cannot pin") and lines[3].endswith("unreadable")
    assert "node/gpu-c: error: forbidden (HTTP 403): ..." in lines
    assert any(x.startswith("node/gpu-b: cpu-manager-none: cpuManagerPolicy is none") for x in lines)
    assert any(x.startswith("pool/node.kubernetes.io/instance-type=c7i.8xlarge: pool-mismatch: its 2 nodes") for x
               in lines)


def test_a_note_on_many_nodes_is_one_line() -> None:
    out = render(report(*(node(f"n{i}", memoryManagerPolicy="None") for i in range(8))), "text")
    (note,) = [x for x in out.splitlines() if x.startswith("note")]
    assert note.startswith("note (n0, n1, n2, n3, n4 and 3 more): memoryManagerPolicy is None")


def test_memory_manager_none_says_what_it_means_for_pinned_pods() -> None:
    out = render(report(node("static-a"), node("none-b", memoryManagerPolicy="None")), "text")
    (note,) = [x for x in out.splitlines() if x.startswith("note (none-b)")]
    assert "a pinned Pod's memory is not pinned to its CPUs' NUMA node" in note
    assert "NUMARemoteMemory" in note and "Static with reservedMemory on each NUMA node pins it" in note
    assert "drained node" in note and "memory_manager_state" in note
    assert not [x for x in out.splitlines() if x.startswith("note (static-a") and "memoryManagerPolicy" in x]


def test_the_cpu_options_column_and_the_note_on_align_by_socket() -> None:
    """CPU OPTIONS: the options as kubelet's flag writes them, none, or unknown where configz was not read; a
    note says where numa: auto and the extender read align-by-socket's sockets from."""
    out = render(report(node("smt", cpuManagerPolicyOptions={"full-pcpus-only": "true"}),
                        node("sock", cpuManagerPolicyOptions={"align-by-socket": "true", "full-pcpus-only": "true"},
                             topologyManagerPolicy="restricted"),
                        node("plain"), node("gone", error="forbidden")), "text")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:5]}
    assert rows["smt"][2:4] == ["static", "full-pcpus-only=true"]
    assert rows["sock"][3] == "align-by-socket=true,full-pcpus-only=true"
    assert rows["plain"][2:4] == ["static", "none"] and rows["gone"][2:4] == ["?", "unknown"]
    notes = [x for x in out.splitlines() if "cpuManagerPolicyOptions" in x and x.startswith("note (")]
    # Every option is modelled (full-pcpus-only's SMTAlignmentError, across NUMA nodes too): only align-by-socket
    # gets a note, on sock: it needs each NUMA node's socket from the node's NodeResourceTopology object.
    assert notes == ["note (sock): cpuManagerPolicyOptions align-by-socket: numa: auto and the extender read each "
                     "NUMA node's socket from its NodeResourceTopology zone's parent (qos-guard agent "
                     "--publish-topology writes it); where it is not published, an answer that turns on the option "
                     "is unknown"], notes


def test_text_escapes_what_a_cluster_sends() -> None:
    out = render(report(node("a", error="bad\nforged line \x1b[31m")), "text")
    assert "bad\\nforged line \\x1b[31m" in out and "\x1b" not in out


def test_json_holds_every_setting_and_the_verdict() -> None:
    doc = json.loads(render(report(node("a", cpuManagerPolicyOptions={"full-pcpus-only": "true"}),
                                   node("b", error="x")), "json"))
    a, b = doc["nodes"]
    assert a["name"] == "a" and a["kubeletVersion"] == "v1.36.3" and a["ready"] is True and a["verdict"] == "pins"
    assert a["cpuManager"] == {"policy": "static", "options": {"full-pcpus-only": "true"},
                               "reservedCPUs": {"count": 1, "reservedSystemCPUs": None, "systemReservedCPU": "100m",
                                                "kubeReservedCPU": None}}
    assert a["memoryManager"] == {"policy": "Static",
                                  "reservedMemory": [{"numaNode": 0, "limits": {"memory": "600Mi"}}]}
    assert a["topologyManager"] == {"policy": "single-numa-node", "scope": "container", "options": {}}
    assert a["problems"] == [] and len(a["notes"]) == 1 and a["error"] is None
    assert a["pinnedBy"] == "static CPU Manager, ?"  # the ResourceSlices were not read: the driver not known
    assert a["pinnedBySource"] == "configz+resourceslices"
    assert b == {"name": "b", "kubeletVersion": "v1.36.3", "ready": True, "verdict": "unreadable", "error": "x",
                 "pinnedBy": None, "pinnedBySource": None}
    assert doc["summary"] == {"nodes": 2, "pins": 1, "cannotPin": 0, "unreadable": 1, "poolMismatches": 0}


def test_sarif_junit_github_carry_the_same_findings() -> None:
    r = report(node("a", POOL, cpuManagerPolicy="none"), node("b", POOL), node("c", error="unreachable"),
               errors=())
    sarif = json.loads(render(r, "sarif"))
    run = sarif["runs"][0]
    levels = sorted((x["ruleId"], x["level"]) for x in run["results"])
    assert levels == [("cpu-manager-none", "error"), ("pool-mismatch", "warning")]
    assert {rule["id"] for rule in run["tool"]["driver"]["rules"]} >= {x for x, _ in levels}
    assert run["invocations"][0]["executionSuccessful"] is False
    assert "Node/c: unreachable" in run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]

    suite = ET.fromstring(render(r, "junit").split("\n", 1)[1]).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")
    assert "pool-mismatch" in (suite.findtext("system-out") or "")

    github = render(r, "github").splitlines()
    assert github[0] == "::error title=unreadable::Node/c: unreachable"
    assert any(x.startswith("::error title=cpu-manager-none::Node/a: ") for x in github)
    assert any(x.startswith("::warning title=pool-mismatch::") for x in github)


def test_nothing_selected_is_said() -> None:
    r = report(errors=("no node matches -l pool=x",))
    assert render(r, "text") == "error: no node matches -l pool=x\n"
    assert json.loads(render(r, "json"))["errors"] == ["no node matches -l pool=x"]


def test_the_agent_s_published_pinner_answers_where_configz_or_the_slices_cannot_and_says_so() -> None:
    """Slices not read and one kubelet unreadable: each node's PINNED BY comes from its agent's NRT ``cpuPinner``
    where it publishes one (marked ``(NRT)``, ``pinnedBySource: nrt``), stays ``?`` where it does not; a node whose
    own sources say it is not overridden; the conflict the agent saw is the node's problem."""
    published = {"a": Pinner(DRA_CPU, AGENT_SOURCE), "b": Pinner(BOTH, AGENT_SOURCE)}
    r = build([node("a", cpuManagerPolicy="none"), node("b", error="forbidden"), node("c", error="forbidden")],
              DEFAULT_POOL_LABELS, (), None, published)
    rows = {line.split()[0]: line for line in render(r, "text").splitlines() if line.startswith(("a ", "b ", "c "))}
    assert " dra.cpu (NRT) " in rows["a"], rows["a"]
    assert rows["a"].rstrip().endswith("pins"), rows["a"]
    assert "static CPU Manager and dra.cpu (NRT)" in rows["b"] and rows["c"].split()[-2] == "?", rows
    doc = {n["name"]: n for n in json.loads(render(r, "json"))["nodes"]}
    assert (doc["a"]["pinnedBy"], doc["a"]["pinnedBySource"]) == ("dra.cpu", "nrt")
    assert (doc["c"]["pinnedBy"], doc["c"]["pinnedBySource"]) == (None, None)
    assert "cpu-manager-none" not in {p["rule"] for p in doc["a"]["problems"]}  # the driver needs it
    direct = build([node("a", cpuManagerPolicy="static")], DEFAULT_POOL_LABELS, (), [], published)
    assert (direct.results[0].pinned_by, direct.results[0].pinned_from) == ("static CPU Manager",
                                                                             "configz+resourceslices")


def test_a_note_where_numa_auto_judges_a_node_under_another_cpu_manager_policy() -> None:
    """numa: auto and the extender read a node's CPU Manager policy from its NRT ``cpuPinner`` and judge it as static
    where it is not published: a kubelet running none without it, or with a pinner that says static, gets a note
    that says what they do and the way out; nodes where they agree, and where the NRTs were not read, get none."""
    published = {"said": Pinner(NOBODY, AGENT_SOURCE), "dra": Pinner(DRA_CPU, AGENT_SOURCE),
                 "stale": Pinner(CPU_MANAGER, AGENT_SOURCE), "static": Pinner(CPU_MANAGER, AGENT_SOURCE)}
    configs = [node("said", cpuManagerPolicy="none"), node("dra", cpuManagerPolicy="none"),
               node("silent", cpuManagerPolicy="none"), node("stale", cpuManagerPolicy="none"), node("static"),
               node("plain")]
    r = build(configs, DEFAULT_POOL_LABELS, (), [], published)
    notes = {x.name: [n for n in x.notes if "cpuPinner" in n] for x in r.results}
    assert notes["said"] == notes["dra"] == notes["static"] == notes["plain"] == [], notes
    (silent,) = notes["silent"]
    assert "does not publish cpuPinner: numa: auto and the extender judge it as static" in silent
    assert "qos-guard agent --publish-topology" in silent
    (stale,) = notes["stale"]
    assert "publishes cpuPinner cpu-manager (CPU Manager static)" in stale, stale
    out = render(r, "text")
    assert any(x.startswith("note (silent): cpuManagerPolicy none, but its NodeResourceTopology") for x in
               out.splitlines()), out
    unread = build(configs, DEFAULT_POOL_LABELS, (), [], None)  # not listed: nothing to compare with
    assert not [n for x in unread.results for n in x.notes if "cpuPinner" in n]
