"""The agent's loop in process, against a real gRPC PodResources server, fixture sysfs and cgroup trees and an
in-memory API server: metrics (and their removal when the Pod goes), one Event per problem, reports; and the
``agent``/``verify`` commands' usage errors."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests import waiting
from tests.nodelogic.fakes import SLICES, FakeAPI, Kubelet, container, serve
from tests.nodelogic.trees import cgroup_container, memory_cgroup, sysfs, v1_numa_stat
from tests.serving import free_port
from webhook.cli import main
from webhook.cluster import watch
from webhook.cluster.reports import FLAVOURS
from webhook.node.agent import AgentOptions, build_reports, event_name, run_agent
from webhook.node.kubelet import PodResourcesClient
from webhook.node.observe import ListedView, observe
from webhook.node.podresources import api_pb2

CIDS = {"pinned": "a" * 64, "gpu": "b" * 64, "shared": "c" * 64, "elsewhere": "d" * 64}
UIDS = {name: f"{i:08x}-0000-4000-8000-000000000000" for i, name in enumerate(CIDS)}


def pod(name: str, ns: str, cpu: str, qos: str = "Guaranteed") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": UIDS[name],
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": cpu, "memory": "64Mi"}}}]},
            "status": {"phase": "Running", "qosClass": qos,
                       "containerStatuses": [{"name": "app", "containerID": f"containerd://{CIDS[name]}"}]}}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Kubelet, FakeAPI, Path, Path]]:
    sys_root = sysfs(tmp_path / "sys", {0: "0", 1: "1"})
    cgroups = tmp_path / "sys" / "fs" / "cgroup"
    for name, cpus in (("pinned", "1"), ("gpu", "1"), ("shared", "0")):
        cgroup_container(cgroups, 1, UIDS[name], "Guaranteed", CIDS[name], cpus)
    kubelet = Kubelet()
    kubelet.pods = [
        api_pb2.PodResources(name="pinned", namespace="enf", containers=[container("app", [1])]),
        api_pb2.PodResources(name="gpu", namespace="enf", containers=[
            container("app", [1], [("example.com/gpu", ["gpu-0"], [0])])]),
        api_pb2.PodResources(name="shared", namespace="wrn", containers=[container("app")]),
        api_pb2.PodResources(name="elsewhere", namespace="not-opted-in", containers=[container("app")]),
    ]
    api = FakeAPI()
    api.namespaces = [{"metadata": {"name": "enf", "labels": {"qos-guard.io/mode": "enforce"}}},
                      {"metadata": {"name": "wrn", "labels": {"qos-guard.io/mode": "warn"}}}]
    api.pods = [pod("pinned", "enf", "1"), pod("gpu", "enf", "1"), pod("shared", "wrn", "200m"),
                pod("elsewhere", "not-opted-in", "1")]
    socket = tmp_path / "kubelet.sock"
    server = serve(socket, kubelet)
    yield kubelet, api, socket, sys_root
    server.stop(None)


def scrape(port: int) -> dict[tuple[str, str], float]:
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {(s.name, s.labels.get("pod", "")): s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name.startswith("qos_guard_container_")}


def test_observe_judges_only_opted_in_namespaces(world: tuple[Kubelet, FakeAPI, Path, Path]) -> None:
    _, api, socket, sys_root = world
    with PodResourcesClient(socket) as client:
        snap = observe(client, ListedView(api), sys_root, sys_root / "fs" / "cgroup", "node-1")
    got = {p.pod: p for p in snap.verdicts}
    assert set(got) == {"pinned", "gpu", "shared"} and not snap.errors
    assert got["pinned"].pinned and got["pinned"].aligned and got["pinned"].cgroup_cpus == frozenset({1})
    assert got["gpu"].aligned is False and got["gpu"].problems[0].reason == "NUMAMisaligned"
    assert not got["shared"].pinned and got["shared"].reason == "fractional-cpu"
    assert got["shared"].cgroup_cpus == frozenset({0}) and got["shared"].cpu_numa == frozenset({0})


def test_verify_one_pod_uses_get(world: tuple[Kubelet, FakeAPI, Path, Path]) -> None:
    kubelet, api, socket, sys_root = world
    with PodResourcesClient(socket) as client:
        snap = observe(client, ListedView(api), sys_root, sys_root / "fs" / "cgroup", None, [("enf", "gpu")])
    assert [p.pod for p in snap.verdicts] == ["gpu"] and "Get" in kubelet.calls and "List" not in kubelet.calls
    kubelet.serve_get = False  # an older kubelet: List once, then pick
    with PodResourcesClient(socket) as client:
        snap = observe(client, ListedView(api), sys_root, sys_root / "fs" / "cgroup", None, [("enf", "gpu")])
    assert [p.pod for p in snap.verdicts] == ["gpu"] and "List" in kubelet.calls


@contextlib.contextmanager
def running_agent(world: tuple[Kubelet, FakeAPI, Path, Path], port: int, **options: Any) -> Iterator[None]:
    """The agent's loop in a thread against ``world``, its metrics on ``port``; stopped, and seen to end, on exit."""
    _, api, socket, sys_root = world
    opts = AgentOptions(node="node-1", socket=socket, sys_root=sys_root, cgroup_root=sys_root / "fs" / "cgroup",
                        metrics_host="127.0.0.1", metrics_port=port, **options)
    stop = threading.Event()
    thread = threading.Thread(target=run_agent, args=(opts, stop, lambda: api, lambda: api), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


def test_agent_metrics_events_and_removal(world: tuple[Kubelet, FakeAPI, Path, Path]) -> None:
    kubelet, api, _, _ = world
    port = free_port()
    with running_agent(world, port, interval=0.2, report=FLAVOURS["openreports"]):
        wait_for("no metrics", lambda: ("qos_guard_container_pinned", "gpu") in _scrape_or_empty(port))
        seen = _scrape_or_empty(port)
        assert seen[("qos_guard_container_pinned", "pinned")] == 1
        assert seen[("qos_guard_container_exclusive_cpus", "pinned")] == 1
        assert seen[("qos_guard_container_numa_aligned", "pinned")] == 1
        assert seen[("qos_guard_container_numa_aligned", "gpu")] == 0
        assert seen[("qos_guard_container_pinned", "shared")] == 0
        assert ("qos_guard_container_numa_aligned", "shared") not in seen  # alignment is for pinned ones
        assert not any(pod == "elsewhere" for _, pod in seen)
        # Three more cycles (each lists kubelet's Pods first, so the third begun means two more were judged and
        # reported in full): each problem still has one Event.
        cycles = kubelet.calls.count("List")
        wait_for("three more cycles", lambda: kubelet.calls.count("List") >= cycles + 3)
        events = [b for m, path, b in api.sent if m == "POST" and path.endswith("/events") and b]
        reasons = sorted((e["involvedObject"]["name"], e["reason"]) for e in events)
        assert reasons == [("gpu", "NUMAMisaligned"), ("shared", "NotPinned")], reasons
        names = {e["metadata"]["name"] for e in events}
        assert event_name("gpu", UIDS["gpu"], "NUMAMisaligned", "app") in names
        misaligned = next(e for e in events if e["reason"] == "NUMAMisaligned")
        assert "example.com/gpu gpu-0 on NUMA 0" in misaligned["message"] and misaligned["type"] == "Warning"
        reports = [(path, b) for m, path, b in api.sent if m == "PATCH"]
        assert sorted(path for path, _ in reports) == [
            "/apis/openreports.io/v1alpha1/namespaces/enf/reports/qos-guard-node-node-1",
            "/apis/openreports.io/v1alpha1/namespaces/wrn/reports/qos-guard-node-node-1"]  # once: content unchanged
        # The Pod goes: its series go too, and its report with its namespace.
        kubelet.pods = [p for p in kubelet.pods if p.name != "shared"]
        wait_for("series of a deleted Pod stayed",
                 lambda: ("qos_guard_container_pinned", "shared") not in _scrape_or_empty(port))
        stale = ("DELETE", "/apis/openreports.io/v1alpha1/namespaces/wrn/reports/qos-guard-node-node-1")
        wait_for("stale report not deleted", lambda: stale in [(m, p) for m, p, _ in api.sent])


def _scrape_or_empty(port: int) -> dict[tuple[str, str], float]:
    try:
        return scrape(port)
    except requests.ConnectionError:
        return {}


def test_report_shape(world: tuple[Kubelet, FakeAPI, Path, Path]) -> None:
    from datetime import UTC, datetime

    _, api, socket, sys_root = world
    with PodResourcesClient(socket) as client:
        snap = observe(client, ListedView(api), sys_root, sys_root / "fs" / "cgroup", "node-1")
    (enf, wrn) = build_reports(FLAVOURS["openreports"], "node-1", snap, datetime(2026, 1, 1, tzinfo=UTC))
    assert enf["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "qos-guard", "qos-guard.io/node": "node-1"}
    assert enf["summary"]["pass"] == 1 and enf["summary"]["fail"] == 1
    fail = next(r for r in enf["results"] if r["result"] == "fail")
    assert fail["rule"] == "NUMAMisaligned" and fail["resources"][0]["name"] == "gpu"
    assert fail["properties"]["numaNodes"] == "0-1"
    assert wrn["results"][0]["rule"] == "NotPinned"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The command in process (a subprocess per case costs seconds on a loaded 2-core machine)."""
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse: --help
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_commands_have_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("agent", "verify"):
        code, out, _ = run_cli(capsys, command, "--help")
        assert code == 0 and "--pod-resources-socket" in out and "--sys-root" in out


@pytest.mark.parametrize(("args", "message"), [
    (["verify", "not-a-ref"], "'not-a-ref' is not NAMESPACE/POD"),
    (["verify", "--pod-resources-socket", "/nonexistent/kubelet.sock", "--kubeconfig", "/dev/null"],
     "verify: "),
    (["agent", "--node", "n", "--interval", "0"], "--interval must be at least 1 second"),
    (["agent", "--node", "n", "--metrics-bind", "nope"], "is not HOST:PORT"),
])
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and message in err and "Traceback" not in err, err


def test_agent_without_api_access_is_a_named_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("")
    code, _, err = run_cli(capsys, "agent", "--node", "n", "--kubeconfig", str(tmp_path / "empty"),
                           "--metrics-bind", f"127.0.0.1:{free_port()}")
    assert code == 2 and "agent: no usable kubeconfig" in err, err


def test_agent_needs_a_node_name(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    code, _, err = run_cli(capsys, "agent")
    assert code == 2 and "no node name" in err


def cycles(port: int) -> dict[str, float]:
    """``qos_guard_agent_cycles_total`` by outcome ({} while the metrics port is not up)."""
    try:
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except requests.ConnectionError:
        return {}
    return {s.labels["outcome"]: s.value for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == "qos_guard_agent_cycles_total"}


def wait_for(what: str, check: Any, within: float = 10) -> None:
    waiting.eventually(what, check, within, every=0.05)


def test_agent_watches_and_lists_nothing_per_cycle(world: tuple[Kubelet, FakeAPI, Path, Path]) -> None:
    """A Pod created after the start, its deletion and a namespace opting out are seen through the watches;
    after the first four lists (namespaces, Pods, the node's ResourceSlices and those that name no node, where
    perDeviceNodeSelection slices are), cycles list nothing."""
    kubelet, api, _, sys_root = world
    port = free_port()
    with running_agent(world, port, interval=0.1, events=False):
        wait_for("no metrics", lambda: ("qos_guard_container_pinned", "pinned") in _scrape_or_empty(port))
        assert sorted(api.listed, key=repr) == sorted([
            ("/api/v1/namespaces", {"limit": str(watch.PAGE),
                                    "labelSelector": "qos-guard.io/mode in (enforce,mutate,warn)"}),
            ("/api/v1/pods", {"limit": str(watch.PAGE), "fieldSelector": "spec.nodeName=node-1"}),
            ("/apis/resource.k8s.io/v1/resourceslices", {"limit": str(watch.PAGE),
                                                         "fieldSelector": "spec.nodeName=node-1"}),
            ("/apis/resource.k8s.io/v1/resourceslices", {"limit": str(watch.PAGE),
                                                         "fieldSelector": "spec.nodeName="})], key=repr)
        assert sorted((path, q["labelSelector" if "namespaces" in path else "fieldSelector"])
                      for path, q in api.watched) == [
            ("/api/v1/namespaces", "qos-guard.io/mode in (enforce,mutate,warn)"),
            ("/api/v1/pods", "spec.nodeName=node-1"),
            ("/apis/resource.k8s.io/v1/resourceslices", "spec.nodeName="),
            ("/apis/resource.k8s.io/v1/resourceslices", "spec.nodeName=node-1")]
        synced = list(api.listed)
        # A Pod bound to the node after the start: kubelet has it, and the API server says so by a watch event.
        late = "e0000000-0000-4000-8000-000000000000"
        cgroup_container(sys_root / "fs" / "cgroup", 1, late, "Guaranteed", "e" * 64, "1")
        kubelet.pods = [*kubelet.pods, api_pb2.PodResources(name="late", namespace="enf",
                                                             containers=[container("app", [1])])]
        late_pod = pod("pinned", "enf", "1")
        late_pod["metadata"] = {**late_pod["metadata"], "name": "late", "uid": late}
        late_pod["status"] = {**late_pod["status"], "containerStatuses": [
            {"name": "app", "containerID": f"containerd://{'e' * 64}"}]}
        api.change("ADDED", late_pod)
        wait_for("a Pod created after the start is not judged",
                 lambda: _scrape_or_empty(port).get(("qos_guard_container_pinned", "late")) == 1)
        before = cycles(port).get("ok", 0)
        wait_for("no cycles", lambda: cycles(port).get("ok", 0) >= before + 5)
        assert api.listed == synced  # five cycles and more, not one list
        # Deleted in the API server (kubelet still reports it): not judged any more.
        api.change("DELETED", late_pod)
        wait_for("a deleted Pod is still judged",
                 lambda: ("qos_guard_container_pinned", "late") not in _scrape_or_empty(port))
        # A namespace opting out (its label removed) takes its Pods out of the judgement.
        api.change("MODIFIED", {"metadata": {"name": "wrn", "labels": {}}})
        wait_for("an opted-out namespace is still judged",
                 lambda: ("qos_guard_container_pinned", "shared") not in _scrape_or_empty(port))
        assert api.listed == synced and cycles(port).get("error", 0) == 0


def test_until_the_first_lists_the_agent_judges_nothing(world: tuple[Kubelet, FakeAPI, Path, Path],
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A refused list (RBAC) is said once with the grant needed; the cycles until both lists are errors that
    judge nothing, said once; then the agent judges."""
    from webhook.cluster import watch
    from webhook.node import agent

    monkeypatch.setattr(watch, "RETRY_MISSING", 0.05)
    monkeypatch.setattr(agent, "SYNC_WAIT", 0.1)
    api = world[1]
    api.refuse["/api/v1/pods"] = 403
    port = free_port()
    with running_agent(world, port, interval=0.1, events=False):
        wait_for("no error cycles", lambda: cycles(port).get("error", 0) >= 5)
        assert cycles(port).get("ok") == 0 and not _scrape_or_empty(port)
        assert len([p for p, _ in api.listed if p == "/api/v1/pods"]) >= 3  # listed again, not given up
        del api.refuse["/api/v1/pods"]
        wait_for("not judging after the list is allowed",
                 lambda: ("qos_guard_container_pinned", "pinned") in _scrape_or_empty(port))
        assert cycles(port).get("ok", 0) >= 1
    err = capsys.readouterr().err
    refused = ("qos-guard agent: listing pods is not allowed (HTTP 403 /api/v1/pods is forbidden): grant list and "
               "watch on pods (the chart's agent ClusterRole grants list and watch on namespaces and pods)")
    assert err.count(refused) == 1, err
    assert err.count("qos-guard agent: not judging yet: waiting for the first list of pods from the API server") \
        == 1, err


def test_the_agent_judges_dra_devices_from_the_watched_slices(world: tuple[Kubelet, FakeAPI, Path, Path]) -> None:
    """A DRA device's NUMA node from the node's ResourceSlice the agent watches: misaligned with its metric 0 and
    an Event naming the device; a slice published after the start, through the watch, makes another Pod's device
    known; a device no slice locates is unknown, metric -1 and a NUMAUnknown Event."""
    kubelet, api, _, _ = world
    driver = "gpu.example.com"
    dra = [("enf", "claim", [(driver, "node-1", "gpu-0")])]
    kubelet.pods = [api_pb2.PodResources(name="gpu", namespace="enf", containers=[container("app", [1], dra=dra)]),
                    api_pb2.PodResources(name="pinned", namespace="enf", containers=[
                        container("app", [1], dra=[("enf", "other", [(driver, "late-pool", "gpu-9")])])])]
    api.slices = [{"metadata": {"name": "node-1-gpus", "resourceVersion": "1"},
                   "spec": {"driver": driver, "nodeName": "node-1", "pool": {"name": "node-1", "generation": 1},
                            "devices": [{"name": "gpu-0", "attributes": {
                                "resource.kubernetes.io/numaNode": {"int": 0}}}]}}]
    port = free_port()
    with running_agent(world, port, interval=0.1):
        wait_for("no DRA verdicts", lambda: _scrape_or_empty(port).get(("qos_guard_container_numa_aligned", "pinned"))
                 == -1)
        assert _scrape_or_empty(port)[("qos_guard_container_numa_aligned", "gpu")] == 0
        reasons = {(b["involvedObject"]["name"], b["reason"]): b["message"] for _, _, b in api.sent if b}
        assert "DRA device gpu.example.com/node-1/gpu-0 (claim enf/claim) on NUMA 0 (from " \
               "resource.kubernetes.io/numaNode), the CPUs on NUMA 1: kubelet's Topology Manager does not align " \
               "devices allocated through DRA" in reasons[("gpu", "NUMAMisaligned")]
        assert "no ResourceSlice of node node-1 publishes device gpu-9 in pool late-pool" in \
               reasons[("pinned", "NUMAUnknown")]
        # The driver publishes the other pool: seen through the watch, no relist.
        with api._cond:
            api.rv += 1
            late = {"metadata": {"name": "node-1-late", "resourceVersion": str(api.rv)},
                    "spec": {"driver": driver, "nodeName": "node-1", "pool": {"name": "late-pool", "generation": 1},
                             "devices": [{"name": "gpu-9", "attributes": {
                                 "resource.kubernetes.io/numaNode": {"int": 1}}}]}}
            api.events.append((api.rv, SLICES, "ADDED", late))
            api._cond.notify_all()
        wait_for("a slice published after the start is not used",
                 lambda: _scrape_or_empty(port).get(("qos_guard_container_numa_aligned", "pinned")) == 1)
        assert [(p, q.get("fieldSelector")) for p, q in api.listed].count((SLICES, "spec.nodeName=node-1")) == 1


def test_memory_where_it_really_is(world: tuple[Kubelet, FakeAPI, Path, Path]) -> None:
    """memory.numa_stat beside the cpusets (v1, Memory Manager None): the pinned container's pages all on node 0
    with its CPU on NUMA 1 is NUMARemoteMemory (Event, metrics per NUMA node, the table in verify's text); a
    truncated file is an error naming that container, and the rest is still judged."""
    from webhook.node.verify import render_json, render_text, summary_line

    _, api, socket, sys_root = world
    cgroups = sys_root / "fs" / "cgroup"
    memory_cgroup(cgroups, 1, UIDS["pinned"], "Guaranteed", CIDS["pinned"], v1_numa_stat({0: 21}, {0: 3}))
    memory_cgroup(cgroups, 1, UIDS["shared"], "Guaranteed", CIDS["shared"], v1_numa_stat({0: 5, 1: 5}, {}))
    memory_cgroup(cgroups, 1, UIDS["gpu"], "Guaranteed", CIDS["gpu"], "total=5 N0=5 N1=0\nfile=2 N0=2 N1=0\nan")
    with PodResourcesClient(socket) as client:
        snap = observe(client, ListedView(api), sys_root, cgroups, "node-1")
    got = {p.pod: p for p in snap.verdicts}
    assert set(got) == {"pinned", "gpu", "shared"}  # the bad file costs the gpu Pod its figures only
    (error,) = snap.errors
    assert error.startswith("enf/gpu/app: memory: ") and "memory.numa_stat: truncated" in error
    page = os.sysconf("SC_PAGE_SIZE")
    pinned = got["pinned"]
    assert pinned.memory_pinned is False and pinned.pages is not None
    assert dict(pinned.pages.anon) == {0: 21 * page, 1: 0} and pinned.pages.mems == frozenset({0})
    assert [x.reason for x in pinned.problems] == ["NUMARemoteMemory"]
    assert "memory not pinned" in pinned.detail and "aligned" not in pinned.detail
    text = render_text(snap)
    assert ("enf/pinned/app: pinned, REMOTE MEMORY: 1 exclusive CPU, CPUs 1 on NUMA 1: on NUMA node 1; memory not "
            f"pinned (Memory Manager None, cpuset.mems 0): 100 % of {21 * page // 1024} KiB anonymous on NUMA 0"
            ) in text
    assert "    KiB   NUMA 0  NUMA 1  Total\n" in text
    body = json.loads(render_json(snap))
    memory = next(c for c in body["containers"] if c["pod"] == "pinned")["numaMemory"]
    assert memory["anonBytes"] == {"0": 21 * page, "1": 0} and memory["anonOffCPUNodesShare"] == 1.0
    assert body["summary"]["memoryNotPinned"] == 1 and body["summary"]["pinnedAligned"] == 0
    assert "1 pinned with memory not pinned" in summary_line(snap)
    port = free_port()
    with running_agent(world, port, interval=0.2):
        wait_for("no memory metrics", lambda: ("qos_guard_container_memory_remote_ratio", "pinned")
                 in _scrape_or_empty(port))
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        samples = {(s.name, s.labels.get("pod"), s.labels.get("numa_node"), s.labels.get("type")): s.value
                   for f in text_string_to_metric_families(text) for s in f.samples}
        assert samples[("qos_guard_container_memory_bytes", "pinned", "0", "anon")] == 21 * page
        assert samples[("qos_guard_container_memory_bytes", "pinned", "1", "anon")] == 0
        assert samples[("qos_guard_container_memory_remote_ratio", "pinned", None, None)] == 1.0
        assert samples[("qos_guard_container_memory_pinned", "pinned", None, None)] == 0
        assert {s[2] for s in samples if s[0] == "qos_guard_container_memory_bytes"} == {"0", "1"}  # the layout's
        assert ("qos_guard_container_memory_remote_ratio", "shared", None, None) not in samples  # pinned only
        wait_for("no NUMARemoteMemory Event", lambda: any(
            b and b.get("reason") == "NUMARemoteMemory" for m, _, b in api.sent if m == "POST"))
        event = next(b for m, _, b in api.sent if m == "POST" and b and b.get("reason") == "NUMARemoteMemory")
        assert event["involvedObject"]["name"] == "pinned" and "memoryManagerPolicy Static" in event["message"]


def test_remote_memory_share_flag_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "verify", "--remote-memory-share", "1.5")
    assert code == 2 and "--remote-memory-share 1.5 is not a share from 0 to under 1" in err
