"""``qos-guard agent --publish-topology``: the agent keeps its node's NodeResourceTopology object current, where
NFD's topology-updater does not run (run one or the other on a node, never both: each applies the object with
``force`` as its own field manager, so they would overwrite each other's numbers on every change).

A thread of the agent polls kubelet's PodResources API (``GetAllocatableResources`` and ``List``, a local unix
socket) every ``poll`` seconds, builds the object (``topology_report.build_topology``) and applies it
(server-side apply, field manager ``qos-guard-agent``) only when its content changed, so an allocation shows in
the API within ``poll`` plus one request; an unchanged object is applied again every ``RESYNC`` seconds (a no-op
for the API server) in case someone deleted it (or its CRD was deleted and installed again). The object is owned
by the Node (``ownerReferences``): the garbage collector deletes it with the Node. Nothing is published until the
Node's uid is known; the Node is read again every ``RESYNC`` seconds, so a Node deleted and created again (a new
uid) gets an object owned by the new one, and none is written while there is no Node.

The Topology Manager's policy and scope come from ``--topology-manager-policy/--topology-manager-scope``, else
from the node's own kubelet (``/configz`` on its port, ``get`` on ``nodes/configz``: ``cluster.configz``); the
hugepages and memory totals and each NUMA node's socket from sysfs (``sysfs.read_node_facts``; sockets not known
are logged once, and left out). Both are read again when kubelet restarts (its PodResources socket is a new file)
and every ``REREAD`` seconds; while the policy cannot be read it is left out of the object (its node is unknown to
``numa: auto`` and the extender, never guessed), and the log says which values to set instead.

From the same configz, sysfs's cores and kubelet's allocatable CPUs come the CPU Manager's attributes
(``cpuManagerPolicyOptions``, ``threadsPerCore``, ``reservedCPUSiblings``: ``webhook.node.cpu_manager``); while
configz cannot be read (also with ``--topology-manager-policy`` given) they are left out, and the fit says the
node's options are unknown.

A failure (the API server's or kubelet's) is logged once per change of cause and retried with exponential backoff
and jitter (``cluster.backoff``; ``Retry-After`` honoured), so a fleet of agents does not hammer an API server
that is already struggling; any other exception is logged with its type and retried the same way: the thread
does not end before ``stop``. ``last_published`` (the agent's metric of its age) says when an apply last
worked."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

from webhook.cluster.backoff import OVERLOADED, Backoff, Cause
from webhook.cluster.client import ClusterError, Reply, Unreachable
from webhook.cluster.configz import KubeletConfigz
from webhook.core.numatopology import NRT_GROUP_VERSION, NRT_PATH
from webhook.node.cpu_manager import CPUManagerConfig, KubeletSettings, cpu_manager_attributes, read_cores
from webhook.node.kubelet import PodResourcesClient, PodResourcesError
from webhook.node.pinner_source import PinnerSource
from webhook.node.sysfs import NodeFacts, SysfsError, read_node_facts
from webhook.node.topology_report import Owner, build_topology

FIELD_MANAGER = "qos-guard-agent"
POLL = 0.25  # seconds between looks at kubelet's PodResources (two local gRPC calls each)
RESYNC = 60.0  # seconds: an unchanged object applied again, the Node's uid read again
REREAD = 600.0  # seconds: kubelet's Topology Manager settings and the hugepages totals read again
LOCAL_CAP = 5.0  # seconds: the longest wait after a failure of kubelet's socket or sysfs (local, cheap)


class Api(Protocol):
    """What the publisher asks of the API server (``cluster.client.Lister``)."""

    def request(self, method: str, path: str, query: list[tuple[str, str]], body: str | None,
                content_type: str | None) -> Reply: ...


class ApiFailure(ClusterError):
    """An answer of the API server that is not what was asked: its status and ``Retry-After`` for the backoff."""

    def __init__(self, message: str, status: int, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


def _socket_identity(socket: Path) -> tuple[int, int] | None:
    """The socket file's inode and change time: kubelet makes a new one each time it starts."""
    try:
        st = os.stat(socket)
    except OSError:
        return None
    return st.st_ino, st.st_ctime_ns


class TopologyPublisher:
    """The thread that keeps ``node``'s NodeResourceTopology object current (see the module docstring)."""

    def __init__(self, api: Api, node: str, socket: Path, sys_root: Path, log: Callable[[str], None],
                 poll: float = POLL, policy: str | None = None, scope: str | None = None,
                 configz: Callable[[], KubeletSettings | tuple[str, str] | str] | None = None,
                 clock: Callable[[], float] = time.monotonic, pinner: PinnerSource | None = None) -> None:
        self._api, self._node, self._socket, self._sys_root, self._log = api, node, socket, sys_root, log
        self.poll = poll
        self._policy, self._scope = policy, scope
        self._given = policy is not None and scope is not None  # from the command line: never read
        self._configz = None if self._given else configz
        self._clock = clock
        self._pinner = pinner  # who pins the CPUs (cpuPinner attributes: webhook/node/pinner_source.py)
        self._owner: Owner | None = None
        self._facts: NodeFacts | None = None
        # The CPU Manager's settings as configz last said them (None: not read, nothing published of them) and the
        # node's physical cores (sysfs): the cpuManagerPolicyOptions attributes (``webhook.node.cpu_manager``).
        self._cpu: CPUManagerConfig | None = None
        self._cores: tuple[frozenset[int], ...] | None = None
        self._written = ""  # digest of the last object applied
        self._written_at = 0.0
        self._node_at = -RESYNC  # when the Node was last read
        self._settings_at: float | None = None  # when kubelet's settings and sysfs are next read (None: now)
        self._kubelet_id: tuple[int, int] | None = None
        self.api_backoff = Backoff()
        self.local_backoff = Backoff(cap=LOCAL_CAP)
        self.configz_backoff = Backoff(base=1.0)
        self._cause, self._configz_cause = Cause(), Cause()
        self.applied = 0  # objects applied (tests, logs)
        self.attempts = {"ok": 0, "error": 0}  # requests to the API server, by outcome (the agent's metric)
        self.started = clock()
        self.last_published: float | None = None  # clock() of the last apply that worked
        self._thread: threading.Thread | None = None

    def start(self, stop: threading.Event) -> None:
        self._thread = threading.Thread(target=self.run, args=(stop,), name="qos-guard-topology", daemon=True)
        self._thread.start()

    @property
    def node(self) -> str:
        return self._node

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def age(self) -> float:
        """Seconds since the object was last applied (since the agent started, before the first time)."""
        return max(0.0, self._clock() - (self.last_published if self.last_published is not None else self.started))

    def run(self, stop: threading.Event) -> None:
        """Look every ``poll`` seconds until ``stop``, waiting out a backoff after a failure; one connection to
        kubelet kept while it answers. Nothing raised here ends the thread."""
        kubelet: PodResourcesClient | None = None
        while not stop.is_set():
            started = self._clock()
            if not self.api_backoff.ready(started):  # an earlier failed request's wait is not over
                stop.wait(self.api_backoff.wait(started))
                continue
            try:
                if kubelet is None:
                    kubelet = PodResourcesClient(self._socket)
                self.step(kubelet, started)
                self.local_backoff.succeeded()
                self.api_backoff.succeeded()  # every request the look made was answered as asked
                if self._cause.cleared():
                    self._log(f"NodeResourceTopology {self._node}: working again (kubelet and the API server "
                              "answer as asked)")
            except Exception as exc:  # the thread must outlive any failure: logged and retried
                if isinstance(exc, PodResourcesError) and kubelet is not None:
                    kubelet.__exit__()
                    kubelet = None  # kubelet restarted: its socket is a new one
                wait = self._failed(exc, started)
                stop.wait(wait)
                continue
            stop.wait(max(0.0, self.poll - (self._clock() - started)))
        if kubelet is not None:
            kubelet.__exit__()

    def _failed(self, exc: Exception, now: float) -> float:
        """Log ``exc`` once per change of cause; the seconds to wait before the next look."""
        if isinstance(exc, ApiFailure):
            kind, wait = f"HTTP {exc.status}", self.api_backoff.failed(now, exc.retry_after)
        elif isinstance(exc, Unreachable):
            kind, wait = "unreachable", self.api_backoff.failed(now)
        elif isinstance(exc, ClusterError):
            kind, wait = f"api: {exc}", self.api_backoff.failed(now)
        elif isinstance(exc, (PodResourcesError, SysfsError)):
            kind, wait = f"{type(exc).__name__}: {exc}", self.local_backoff.failed(now)
        else:
            kind, wait = f"{type(exc).__name__}: {exc}", self.api_backoff.failed(now)
            exc = RuntimeError(f"unexpected {type(exc).__name__}: {exc} (a defect: please report it; retried)")
        if self._cause.failed(kind):
            self._log(f"NodeResourceTopology {self._node}: {exc} (retried with backoff, next in {wait:.1f} s; "
                      "said again only when the cause changes)")
        return wait

    def _send(self, method: str, path: str, query: list[tuple[str, str]], body: str | None,
              content_type: str | None) -> Reply:
        try:
            reply = self._api.request(method, path, query, body, content_type)
        except ClusterError:
            self.attempts["error"] += 1
            raise
        self.attempts["ok" if reply.status < 400 else "error"] += 1
        return reply

    def _read_node(self, now: float) -> None:
        """The Node's uid, every ``RESYNC`` seconds: a Node created again has a new one, which the object's owner
        reference must name (the garbage collector deletes an object whose owner is gone)."""
        if self._owner is not None and now - self._node_at < RESYNC:
            return
        reply = self._send("GET", f"/api/v1/nodes/{quote(self._node, safe='')}", [], None, None)
        self._node_at = now
        uid = (reply.body.get("metadata") or {}).get("uid") if reply.status == 200 else None
        if reply.status == 404:
            self._owner = None
            raise ApiFailure(f"the Node {self._node} does not exist (HTTP 404): nothing is published until it "
                             "is registered again", 404)
        if not isinstance(uid, str) or not uid:
            raise ApiFailure(f"cannot read the Node (HTTP {reply.status} {str(reply.body.get('message', ''))[:200]}"
                             "); the object is owned by it and needs its uid: grant get on nodes (the chart does "
                             "with agent.publishTopology)", reply.status, reply.retry_after)
        if self._owner is not None and self._owner.uid != uid:
            self._log(f"NodeResourceTopology {self._node}: the Node was created again (uid {self._owner.uid} -> "
                      f"{uid}): the object is now owned by the new one")
        self._owner = Owner(self._node, uid)

    def _read_settings(self, now: float) -> None:
        """kubelet's Topology Manager settings and sysfs's totals: first, when kubelet restarted (a new socket
        file), and every ``REREAD`` seconds; a configz that cannot be read is asked again with backoff."""
        identity = _socket_identity(self._socket)
        if identity is not None and identity != self._kubelet_id:  # a socket gone for a while is no new kubelet
            if self._kubelet_id is not None:
                self._log(f"NodeResourceTopology {self._node}: kubelet restarted: its settings and the node's "
                          "memory totals are read again")
                self._settings_at = None
                if self._pinner is not None:
                    self._pinner.refresh(now)  # its cpuManagerPolicy may have changed too
            self._kubelet_id = identity
        if self._settings_at is not None and now < self._settings_at:
            return
        facts = read_node_facts(self._sys_root)
        if facts.sockets_unknown and (self._facts is None or facts.sockets_unknown != self._facts.sockets_unknown):
            self._log(f"NodeResourceTopology {self._node}: the NUMA nodes' sockets are not known, no Socket zones "
                      f"published (numa: auto then does not know which NUMA nodes share one): "
                      f"{facts.sockets_unknown}")
        self._facts = facts
        self._cores = read_cores(self._sys_root, self._facts.cpus)
        self._settings_at = now + REREAD
        if self._configz is None:
            return
        answer = self._configz()
        if isinstance(answer, str):
            self._cpu = None  # a kubelet restarted may run other options: none published until configz says
            self._settings_at = now + self.configz_backoff.failed(now)  # a kubelet still starting: soon again
            if self._configz_cause.failed(answer):
                kept = (f"topologyManagerPolicy {self._policy} and topologyManagerScope {self._scope} as last read "
                        "are kept until it answers" if self._policy is not None else
                        "Topology Manager policy and scope unknown, left out (the node is unknown to numa: auto "
                        "and the extender)")
                self._log(f"NodeResourceTopology {self._node}: {kept}: {answer}")
            return
        self.configz_backoff.succeeded()
        self._configz_cause.cleared()
        settings = answer if isinstance(answer, KubeletSettings) else KubeletSettings(*answer)
        if (settings.policy, settings.scope) != (self._policy, self._scope):
            self._log(f"NodeResourceTopology {self._node}: topologyManagerPolicy {settings.policy}, "
                      f"topologyManagerScope {settings.scope} (kubelet's configz)")
        if settings.cpu is not None and settings.cpu != self._cpu:
            self._log(f"NodeResourceTopology {self._node}: cpuManagerPolicy {settings.cpu.policy}, "
                      f"cpuManagerPolicyOptions {settings.cpu.text() or '(none)'} (kubelet's configz)")
        self._policy, self._scope, self._cpu = settings

    def step(self, kubelet: PodResourcesClient, now: float) -> bool:
        """One look: apply the object if it changed (or ``RESYNC`` passed); whether it was applied. Waits out the
        backoff of an earlier failed request to the API server (False)."""
        if not self.api_backoff.ready(now):
            return False
        self._read_settings(now)
        self._read_node(now)
        assert self._facts is not None  # read by _read_settings
        allocatable = kubelet.allocatable()
        pods = kubelet.list()
        obj = build_topology(self._node, self._facts, allocatable, pods, self._policy, self._scope, self._owner)
        cpus = frozenset().union(*self._facts.cpus.values())
        obj["attributes"] += cpu_manager_attributes(self._cpu, self._cores, cpus, allocatable.cpus)
        if self._pinner is not None:
            obj["attributes"] += self._pinner.attributes(now)
        digest = hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()
        if digest == self._written and now - self._written_at < RESYNC:
            return False
        path = f"{NRT_PATH}/{quote(self._node, safe='')}"
        reply = self._send("PATCH", path, [("fieldManager", FIELD_MANAGER), ("force", "true")],
                           json.dumps(obj), "application/apply-patch+yaml")
        status = reply.status
        if status not in (200, 201):
            message = str(reply.body.get("message", ""))[:300]
            if status == 404:
                raise ApiFailure(f"the NodeResourceTopology CRD ({NRT_GROUP_VERSION}) is not installed (HTTP 404 "
                                 f"{message}): install it (the chart's files/ has it) or run without "
                                 "--publish-topology", status)
            if status == 403:
                raise ApiFailure(f"applying it was refused (HTTP 403 {message}): grant create and patch on "
                                 "noderesourcetopologies.topology.node.k8s.io (the chart does with "
                                 "agent.publishTopology); a refusal naming another node's object is the chart's "
                                 "admission policy: each agent writes only its own node's", status)
            why = " (the API server is overloaded)" if status in OVERLOADED else ""
            raise ApiFailure(f"applying it failed: HTTP {status} {message}".rstrip() + why, status,
                             reply.retry_after)
        self._written, self._written_at = digest, now
        self.api_backoff.succeeded()
        self.last_published = now
        self.applied += 1
        return True


def configz_reader(address: str, port: int, ca: Path | None = None) -> Callable[[], KubeletSettings | str]:
    """The Topology Manager policy and scope and the CPU Manager's policy and options from the node's own
    kubelet's configz, or why not (with the way out: the settings given as values)."""
    kubelet = KubeletConfigz(address, port, ca=ca)

    def read() -> KubeletSettings | str:
        got = kubelet.read()
        if isinstance(got, str):
            return got
        return KubeletSettings(got.topology_manager_policy, got.topology_manager_scope,
                               CPUManagerConfig(got.cpu_manager_policy, got.cpu_manager_options))
    return read

