"""``qos-guard agent``: a DaemonSet that, every ``--interval``, judges where kubelet placed each container of the
opted-in namespaces' Pods on its node (``observe``) and says so as Prometheus metrics, one Kubernetes Event per
problem on the Pod, and optionally as ``openreports.io``/``wgpolicyk8s.io`` report results.

The opted-in namespaces and the node's Pods come from watches (``WatchedView``: a list, then a watch, of the
namespaces with the mode label and of the Pods with ``spec.nodeName=NODE``), not from lists each cycle: a cycle
asks kubelet and reads sysfs and cgroups, and the API server only sees the watches and what the agent writes.
Until both watches have listed once, and while either has kept failing for ``STALE_AFTER`` seconds, a cycle
judges nothing and counts as an ``error`` (logged once); see ``webhook/node/watched.py``.

Metrics carry only ``namespace``, ``pod`` and ``container`` labels (the memory per NUMA node also ``numa_node``,
one of the node's NUMA ids, and ``type`` anon or file) and are rebuilt from the last look on each
scrape, so a Pod's series go when the Pod goes. Events have a name derived from the Pod's uid, the reason and
the container: the API server refuses the second create (409), so a problem is reported once, not every cycle,
and not again after the agent restarts (until the API server's event TTL, one hour by default, expires it).

Every write loop (Events, reports, the NodeResourceTopology publisher) waits after a failed write with exponential
backoff and jitter (``cluster.backoff``: ``Retry-After`` honoured) and skips its writes until then, and logs a
failure once per change of cause; the publisher's thread is started again should it ever end."""

from __future__ import annotations

import hashlib
import json
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from webhook import interpreter
from webhook.cluster.backoff import OVERLOADED, Backoff, Cause
from webhook.cluster.client import ClusterError, Lister, Unreachable
from webhook.cluster.reports import MANAGED_BY, Failure, Flavour, ReportWriter
from webhook.cluster.watch import ApiTransport, Transport
from webhook.node.cpulist import format_list
from webhook.node.dra_locality import DEFAULT_DRIVER_ATTRIBUTES
from webhook.node.kubelet import PodResourcesClient, PodResourcesError
from webhook.node.memory_verdict import REMOTE_SHARE
from webhook.node.observe import Snapshot, observe
from webhook.node.pinner_source import PinnerSource, cpu_manager_reader
from webhook.node.sysfs import SysfsError
from webhook.node.topology_publisher import TopologyPublisher, configz_reader
from webhook.node.verdict import ContainerVerdict
from webhook.node.watched import WatchedView

COMPONENT = "qos-guard-agent"
NODE_LABEL = "qos-guard.io/node"
REPORT_POLICY = "qos-guard-node"
SYNC_WAIT = 10.0  # seconds the first cycle waits for the watches' first lists
MAX_EMITTED = 100_000  # event names remembered; beyond it the oldest are forgotten (the API server still dedupes)
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")


@dataclass(frozen=True, slots=True)
class AgentOptions:
    node: str
    socket: Path
    sys_root: Path
    cgroup_root: Path
    interval: float
    metrics_host: str
    metrics_port: int
    kubeconfig: str | None = None
    report: Flavour | None = None
    fractional_allowed: tuple[str, ...] = ()
    events: bool = True
    dra_attributes: tuple[str, ...] = DEFAULT_DRIVER_ATTRIBUTES
    remote_share: float = REMOTE_SHARE  # NUMARemoteMemory above this share of anonymous memory off the CPUs' node
    topology: TopologyOptions | None = None  # --publish-topology: this node's NodeResourceTopology


@dataclass(frozen=True, slots=True)
class TopologyOptions:
    """``--publish-topology``: how often kubelet is asked, the Topology Manager settings when given, and where the
    node's kubelet serves its configz when they are not."""

    poll: float
    policy: str | None = None
    scope: str | None = None
    kubelet_address: str = "127.0.0.1"
    kubelet_port: int = 10250
    kubelet_ca: Path | None = None


def log(message: str) -> None:
    print(f"qos-guard agent: {message}", file=sys.stderr, flush=True)


class VerdictGauges(Collector):
    """The per-container gauges, from the last snapshot (no stale series: they are rebuilt per scrape)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._verdicts: list[ContainerVerdict] = []

    def update(self, verdicts: list[ContainerVerdict]) -> None:
        with self._lock:
            self._verdicts = list(verdicts)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["namespace", "pod", "container"]
        pinned = GaugeMetricFamily("qos_guard_container_pinned", "1 when kubelet gave the container exclusive "
                                   "CPUs, 0 when it runs in the shared pool", labels=labels)
        cpus = GaugeMetricFamily("qos_guard_container_exclusive_cpus", "Exclusive CPUs kubelet's CPU Manager "
                                 "assigned to the container", labels=labels)
        aligned = GaugeMetricFamily("qos_guard_container_numa_aligned", "1 when a pinned container's CPUs, memory "
                                    "blocks and devices are all on one NUMA node, 0 when not, -1 when unknown (a "
                                    "device whose NUMA node could not be found; pinned containers only; see "
                                    "qos_guard_container_memory_pinned)", labels=labels)
        memory_pinned = GaugeMetricFamily("qos_guard_container_memory_pinned", "1 when kubelet's Memory Manager "
                                          "(Static) gave the pinned container memory blocks, 0 when its memory is "
                                          "left to the kernel (Memory Manager None)", labels=labels)
        memory = GaugeMetricFamily("qos_guard_container_memory_bytes", "The container's memory per NUMA node "
                                   "(its cgroup's memory.numa_stat), by type anon or file",
                                   labels=[*labels, "numa_node", "type"])
        remote = GaugeMetricFamily("qos_guard_container_memory_remote_ratio", "Share (0-1) of a pinned "
                                   "container's anonymous memory off its CPUs' NUMA node", labels=labels)
        with self._lock:
            verdicts = list(self._verdicts)
        for p in verdicts:
            if not p.pinned and not p.problems:
                continue  # in the shared pool by choice (policy.fractionalCPUContainers): nothing to watch
            values = [p.namespace, p.pod, p.container]
            pinned.add_metric(values, 1.0 if p.pinned else 0.0)
            cpus.add_metric(values, float(len(p.exclusive_cpus)))
            if p.pinned:
                aligned.add_metric(values, -1.0 if p.aligned is None else 1.0 if p.aligned else 0.0)
            if p.memory_pinned is not None:
                memory_pinned.add_metric(values, 1.0 if p.memory_pinned else 0.0)
            if p.pages is not None:
                for kind, per_node in (("anon", p.pages.anon), ("file", p.pages.file)):
                    for node, size in per_node:
                        memory.add_metric([*values, str(node), kind], float(size))
                share = p.pages.remote_share(p.cpu_numa) if p.pinned else None
                if share is not None:
                    remote.add_metric(values, share)
        yield pinned
        yield cpus
        yield aligned
        yield memory_pinned
        yield memory
        yield remote

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())


class PublisherMetrics(Collector):
    """The publisher's health: the age of its last successful apply (the alert's series) and its requests to the
    API server by outcome (a backoff's effect is seen in their rate)."""

    def __init__(self, publisher: TopologyPublisher) -> None:
        self._publisher = publisher

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        age = GaugeMetricFamily("qos_guard_agent_topology_publish_age_seconds", "Seconds since this node's "
                                "NodeResourceTopology was last applied (since the agent started, before the first "
                                "time); an unchanged object is applied again every 60 s", labels=["node"])
        age.add_metric([self._publisher.node], self._publisher.age())
        yield age
        requests = CounterMetricFamily("qos_guard_agent_topology_requests", "Requests of the NodeResourceTopology "
                                       "publisher to the API server, by outcome", labels=["outcome"])
        for outcome, count in sorted(self._publisher.attempts.items()):
            requests.add_metric([outcome], float(count))
        yield requests

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())


def event_name(pod: str, uid: str, reason: str, container: str) -> str:
    digest = hashlib.sha256(f"{uid}\0{reason}\0{container}".encode()).hexdigest()[:16]
    return f"{pod[:200]}.{digest}"


class Events:
    """One Warning Event per (Pod, reason, container) problem. An overloaded (429, 5xx) or unreachable API server
    ends the cycle's creates and none is tried again before the backoff's wait is over (``Retry-After`` honoured);
    one Event refused for itself does not hold up the others. A failure is said once per change of cause, and its
    end once."""

    def __init__(self, api: Lister, node: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._api = api
        self._node = node
        self._emitted: dict[str, None] = {}
        self._clock = clock
        self.backoff = Backoff()
        self._cause = Cause()

    def _failed(self, kind: str, message: str, server_wait: float | None) -> list[str]:
        wait = self.backoff.failed(self._clock(), server_wait)
        if not self._cause.failed(kind):
            return []
        return [f"{message} (Events wait {wait:.1f} s, with backoff; said again only when the cause changes)"]

    def emit(self, verdicts: list[ContainerVerdict], now: datetime) -> tuple[int, list[str]]:
        """Create the Events not created yet; how many, and the lines to log (failures, once per cause)."""
        created = 0
        errors: list[str] = []
        if not self.backoff.ready(self._clock()):
            return 0, []
        for p in verdicts:
            for problem in p.problems:
                name = event_name(p.pod, p.uid, problem.reason, p.container)
                if name in self._emitted:
                    continue
                stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
                body = {"apiVersion": "v1", "kind": "Event",
                        "metadata": {"name": name, "namespace": p.namespace},
                        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": p.namespace,
                                           "name": p.pod, "uid": p.uid,
                                           "fieldPath": f"spec.containers{{{p.container}}}"},
                        "reason": problem.reason, "message": problem.message[:1024], "type": "Warning",
                        "source": {"component": COMPONENT, "host": self._node},
                        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
                what = f"Event {problem.reason} on {p.namespace}/{p.pod}"
                try:
                    answer = self._api.request("POST", f"/api/v1/namespaces/{p.namespace}/events", [],
                                               body, "application/json")
                except ClusterError as exc:
                    kind = "unreachable" if isinstance(exc, Unreachable) else str(exc)
                    return created, errors + self._failed(kind, f"{what}: {exc}", None)
                if answer.status in (200, 201, 409):  # 409: already there, from an earlier cycle or agent
                    created += answer.status != 409
                    self._emitted[name] = None
                    if len(self._emitted) > MAX_EMITTED:
                        self._emitted.pop(next(iter(self._emitted)))
                    self.backoff.succeeded()
                    if self._cause.cleared():
                        errors.append("Events are created again")
                else:
                    message = f"{what}: HTTP {answer.status} {str(answer.body.get('message', ''))[:200]}".rstrip()
                    if answer.status in OVERLOADED:  # the API server's load: no more this cycle, and back off
                        return created, errors + self._failed(f"HTTP {answer.status}", message, answer.retry_after)
                    # This Event's own refusal (its namespace going, a bad field): the others are still created;
                    # it is tried again next cycle, said once.
                    if self._cause.failed(f"HTTP {answer.status}"):
                        errors.append(message)
        return created, errors


def node_label(node: str) -> str:
    """The node's name as a label value (names longer than 63 characters are hashed)."""
    if _LABEL_VALUE.fullmatch(node):
        return node
    return "sha256-" + hashlib.sha256(node.encode()).hexdigest()[:48]


def report_name(node: str) -> str:
    return f"{REPORT_POLICY}-{node}"[:253].rstrip(".-")


def build_reports(flavour: Flavour, node: str, snap: Snapshot, now: datetime) -> list[dict[str, Any]]:
    """One report per namespace with judged containers: ``pass`` for a pinned, aligned container (or one allowed
    in the shared pool), ``fail`` for each problem."""
    stamp = {"seconds": int(now.timestamp()), "nanos": 0}
    by_ns: dict[str, list[dict[str, Any]]] = {}
    for p in snap.verdicts:
        ref = {"apiVersion": "v1", "kind": "Pod", "namespace": p.namespace, "name": p.pod, "uid": p.uid}
        props = {"container": p.container, "node": node, "pinned": str(p.pinned).lower(),
                 "exclusiveCPUs": format_list(p.exclusive_cpus), "numaNodes": format_list(p.numa)}
        base = {"source": "qos-guard", "policy": REPORT_POLICY, "category": "NUMA alignment", "scored": True,
                "timestamp": stamp, "resources": [ref], "properties": props}
        results = by_ns.setdefault(p.namespace, [])
        if not p.problems:
            message = p.detail if not p.pinned else f"container {p.container}: {p.detail}"
            results.append({**base, "rule": "Pinned" if p.pinned else "SharedPool", "severity": "info",
                            "result": "pass", "message": message[:1024]})
        for problem in p.problems:
            results.append({**base, "rule": problem.reason, "severity": "high", "result": "fail",
                            "message": problem.message[:1024]})
    objects = []
    for ns, results in sorted(by_ns.items()):
        summary = {k: sum(1 for r in results if r["result"] == k) for k in ("pass", "fail", "warn", "error", "skip")}
        obj: dict[str, Any] = {"apiVersion": flavour.api_version, "kind": flavour.kind,
                               "metadata": {"name": report_name(node), "namespace": ns,
                                            "labels": {MANAGED_BY[0]: MANAGED_BY[1], NODE_LABEL: node_label(node)}}}
        if flavour.top_level_source:
            obj["source"] = "qos-guard"
        obj["summary"] = summary
        obj["results"] = results
        objects.append(obj)
    return objects


class Reports:
    """Writes this node's reports when their content changes; deletes those of namespaces it no longer has
    (``cluster.reports.ReportWriter``, the writer of ``audit --report`` too)."""

    def __init__(self, api: Lister, flavour: Flavour, node: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._flavour, self._node = flavour, node
        self._writer = ReportWriter(api, flavour, COMPONENT)
        self._written: dict[str, str] = {}  # namespace -> digest of what was written
        self._known: set[str] | None = None
        self._clock = clock
        self.backoff = Backoff()
        self._cause = Cause()

    def _existing(self) -> set[str]:
        if self._known is None:  # reports left by an earlier run of this node's agent
            selector = f"{'='.join(MANAGED_BY)},{NODE_LABEL}={node_label(self._node)}"
            self._known = set(self._writer.ours([None], selector, report_name(self._node)))
        return self._known | set(self._written)

    def write(self, snap: Snapshot, now: datetime) -> list[str]:
        """Write what changed; the lines to log (a failure once per change of cause, and its end). After a
        failure nothing is written until the backoff's wait is over (``Retry-After`` honoured)."""
        if not self.backoff.ready(self._clock()):
            return []
        try:
            failures = self._write(snap, now)
        except ClusterError as exc:  # unreachable, or our reports could not be listed
            kind = "unreachable" if isinstance(exc, Unreachable) else str(exc)
            return self._failed(kind, f"reports: {exc}", None)
        if failures:
            first = failures[0]
            return self._failed(f"{first.verb} HTTP {first.status}", "; ".join(str(f) for f in failures[:5]),
                                max((f.retry_after for f in failures if f.retry_after is not None), default=None))
        self.backoff.succeeded()
        return ["reports are written again"] if self._cause.cleared() else []

    def _failed(self, kind: str, message: str, server_wait: float | None) -> list[str]:
        wait = self.backoff.failed(self._clock(), server_wait)
        if not self._cause.failed(kind):
            return []
        return [f"{message} (reports wait {wait:.1f} s, with backoff; said again only when the cause changes)"]

    def _write(self, snap: Snapshot, now: datetime) -> list[Failure]:
        objects = build_reports(self._flavour, self._node, snap, now)
        digests = {obj["metadata"]["namespace"]: hashlib.sha256(json.dumps(
            [{k: v for k, v in r.items() if k != "timestamp"} for r in obj["results"]],
            sort_keys=True).encode()).hexdigest() for obj in objects}
        changed = [obj for obj in objects if self._written.get(obj["metadata"]["namespace"]) !=
                   digests[obj["metadata"]["namespace"]]]
        done = self._writer.sync(changed, report_name(self._node), self._existing, keep=digests)
        self._written.update((ns, digests[ns]) for ns in done.applied)
        for ns in done.deleted:
            self._written.pop(ns, None)
        self._known = (self._known or set()) - set(done.deleted) | set(digests)
        return done.failures


def run_agent(opts: AgentOptions, stop: threading.Event | None = None,
              api_factory: Callable[[], Lister] | None = None,
              transport_factory: Callable[[], Transport] | None = None) -> int:
    """The agent's loop until SIGTERM/SIGINT (or ``stop``); metrics on ``metrics_host:metrics_port``. ``api``
    writes Events and reports; ``transport`` carries the watches of namespaces and Pods."""
    interpreter.configure(batch=False)  # the process's settings, once: the agent runs for weeks
    stop = stop or threading.Event()
    registry = CollectorRegistry()
    verdicts = VerdictGauges()
    registry.register(verdicts)
    cycles = Counter("qos_guard_agent_cycles", "Looks at the node, by outcome", ["outcome"], registry=registry)
    last = Gauge("qos_guard_agent_last_success_timestamp_seconds", "When the agent last judged its node",
                 registry=registry)
    for outcome in ("ok", "error"):
        cycles.labels(outcome)
    api = (api_factory or (lambda: Lister(opts.kubeconfig)))()
    transport = (transport_factory or (lambda: ApiTransport(opts.kubeconfig)))()
    start_http_server(opts.metrics_port, addr=opts.metrics_host, registry=registry)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    log(f"judging node {opts.node} every {opts.interval:g} s; PodResources {opts.socket}, sysfs {opts.sys_root}, "
        f"metrics on {opts.metrics_host}:{opts.metrics_port}; watching opted-in namespaces, this node's Pods and "
        f"ResourceSlices (DRA NUMA attributes: {', '.join(('resource.kubernetes.io/numaNode', *opts.dra_attributes))},"
        " then pciBusID, pcieRoot)")
    view = WatchedView(transport, opts.node, log)
    view.start()
    publisher: TopologyPublisher | None = None
    if opts.topology is not None:
        t = opts.topology
        given = t.policy is not None and t.scope is not None
        pinner = None if given else PinnerSource(api, opts.node, cpu_manager_reader(
            t.kubelet_address, t.kubelet_port, t.kubelet_ca), log)
        publisher = TopologyPublisher(api, opts.node, opts.socket, opts.sys_root, log, t.poll, t.policy, t.scope,
                                      None if given else configz_reader(t.kubelet_address, t.kubelet_port,
                                                                        t.kubelet_ca), pinner=pinner)
        registry.register(PublisherMetrics(publisher))
        publisher.start(stop)
        source = "given" if given else f"read from kubelet's configz at {t.kubelet_address}:{t.kubelet_port}"
        log(f"publishing NodeResourceTopology {opts.node} when it changes (PodResources polled every {t.poll:g} s; "
            f"Topology Manager settings {source})")
    try:
        view.wait_synced(SYNC_WAIT, stop)
        _loop(opts, stop, api, view, verdicts, cycles, last, publisher)
    finally:
        view.stop()
    log("stopped")
    return 0


def _loop(opts: AgentOptions, stop: threading.Event, api: Lister, view: WatchedView, verdicts: VerdictGauges,
          cycles: Counter, last: Gauge, publisher: TopologyPublisher | None = None) -> None:
    """One look per ``opts.interval`` until ``stop``; the publisher's thread started again if it ended."""
    events = Events(api, opts.node) if opts.events else None
    reports = Reports(api, opts.report, opts.node) if opts.report is not None else None
    previous_error = ""
    while not stop.is_set():
        started = time.monotonic()
        if publisher is not None and not publisher.alive() and not stop.is_set():
            log(f"NodeResourceTopology {opts.node}: the publisher's thread ended; started again")
            publisher.start(stop)
        try:
            with PodResourcesClient(opts.socket) as kubelet:
                snap = observe(kubelet, view, opts.sys_root, opts.cgroup_root, opts.node,
                               fractional_allowed=opts.fractional_allowed, dra_attributes=opts.dra_attributes,
                               remote_share=opts.remote_share)
            verdicts.update(snap.verdicts)
            now = datetime.now(UTC)
            problems = snap.errors[:]
            created = 0
            if events is not None:
                created, failed = events.emit(snap.verdicts, now)
                problems += failed
            if reports is not None:
                problems += reports.write(snap, now)
            for message in problems[:20]:
                log(message)
            bad = sum(1 for p in snap.verdicts if p.problems)
            if created or previous_error:
                log(f"{len(snap.verdicts)} containers judged, {bad} with a problem, {created} Events created")
            previous_error = ""
            cycles.labels("ok").inc()
            last.set(time.time())
        except (PodResourcesError, SysfsError, ClusterError) as exc:
            cycles.labels("error").inc()
            if str(exc) != previous_error:  # a lasting outage is logged once, not every cycle
                log(str(exc))
            previous_error = str(exc)
        stop.wait(max(0.0, opts.interval - (time.monotonic() - started)))
