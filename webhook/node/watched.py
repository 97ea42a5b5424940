"""The agent's view of the API server, kept current by two watches instead of two lists per cycle: the
namespaces that opted in (label selector on ``qos-guard.io/mode``) and the Pods bound to its node (field
selector ``spec.nodeName=NODE``, as kubelet watches its own Pods). Each is a ``Reflector`` of
``webhook/cluster/watch.py`` (list, then watch with bookmarks; resume, relist on 410 Gone, backoff) in a daemon
thread; a cycle of the agent reads their stores and costs the API server nothing. On a 5,000-node cluster
that is 10,000 open watches instead of hundreds of LISTs per second.

Only what ``observe`` needs is kept: a namespace as its ``OptedIn`` (mode, and when it opted in), a Pod as its
object without ``metadata.managedFields``.

A third watch keeps the node's ResourceSlices (``resource.k8s.io/v1``, field selector ``spec.nodeName=NODE``),
each as ``dra.slice_kept`` keeps it, to find the NUMA node of each DRA device; a fourth those that name no node
(``spec.nodeName=``: ``perDeviceNodeSelection``, where each device names its node, ``allNodes``,
``nodeSelector``), keeping of each only this node's devices and those of no one node. It is not needed to judge: on a
cluster without DRA (the API answers 404) or without the grant, the other containers are still judged, and
every DRA device is unknown with that reason until the slices are listed.
The 404 is said once, as what it means: DRA devices are not visible on this node (Kubernetes serves
``resource.k8s.io/v1`` from 1.34, so never on 1.33).

Until both have been listed once, and while a list or watch has kept failing for ``STALE_AFTER`` seconds, the
view has nothing current to judge against: ``opted_in``/``pods`` raise
``NotSynced``, a ``ClusterError``, so the agent counts the cycle as an ``error`` (it judged nothing, so it is
not ``ok``, and no container is reported, so nothing is said that is not so), logs it once and tries again
next cycle; the agent waits a few seconds for the first lists before its first cycle, so a healthy start
counts no error. A refused list or watch (RBAC) is logged once, naming the verbs the agent needs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from webhook.cluster.client import ClusterError
from webhook.cluster.watch import ListRefused, Reflector, Store, Transport, refusal, wait_until
from webhook.node.dra_locality import (
    SLICES_PATH,
    admin_devices,
    claim_path,
    device_requests,
    kept_for,
    slice_kept,
)
from webhook.node.observe import MODE_SELECTOR, OptedIn, opted_in

NAMESPACES_PATH = "/api/v1/namespaces"
PODS_PATH = "/api/v1/pods"
JSON = ("application/json", "application/json")
GRANTED_BY = "the chart's agent ClusterRole grants list and watch on namespaces and pods"
SLICES_GRANTED_BY = "the chart's agent ClusterRole grants list and watch on resource.k8s.io resourceslices"
SLICES = "resourceslices"
SHARED_SLICES = "resourceslices of no node"  # spec.nodeName unset: perDeviceNodeSelection, allNodes, nodeSelector
SLICES_NOT_SERVED = ("DRA devices are not visible on this node: the API server does not serve resourceslices in "
                     "resource.k8s.io/v1 (Kubernetes serves it from 1.34); every other container is judged as usual")
STALE_AFTER = 60.0  # seconds a list or watch may keep failing before the view is too old to judge against
CLAIM_TTL = 60.0  # seconds a claim's adminAccess devices are kept before it is read again
CLAIMS_GRANT = "grant get on resource.k8s.io resourceclaims to the agent's ServiceAccount"


class NotSynced(ClusterError):
    """The view has not listed both resources yet, or has not been current for ``STALE_AFTER`` seconds: nothing
    to judge against."""


def pod_kept(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Pod as the agent keeps it: the object without ``metadata.managedFields`` (often half its size)."""
    meta = obj.get("metadata")
    if isinstance(meta, Mapping) and "managedFields" in meta:
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return dict(obj)


class AgentReflector(Reflector):
    """A reflector of the agent's view: a refusal names the RBAC the agent needs."""

    def _refused(self, exc: ListRefused) -> str:
        if self.name in (SLICES, SHARED_SLICES) and exc.status == 404:  # no DRA v1 API, not a missing grant
            return f"{SLICES_NOT_SERVED} ({exc.verb}ing them: {exc})"
        return refusal(self.name, exc, SLICES_GRANTED_BY if self.name in (SLICES, SHARED_SLICES) else GRANTED_BY)


class WatchedView:
    """The opted-in namespaces and ``node``'s Pods, from watches (a ``ClusterView`` for ``observe``).

    ``say`` is called (from the reflectors' threads) with each new problem, once, and when it is over.
    """

    def __init__(self, transport: Transport, node: str, say: Callable[[str], None]) -> None:
        self.node = node
        self.say = say
        self.namespaces = Store(opted_in)
        self.pod_store = Store(pod_kept)
        self.slice_store = Store(slice_kept)
        self.shared_slice_store = Store(kept_for(node))
        self.problems: dict[str, str] = {}
        self._since: dict[str, float] = {}  # when each current problem began
        self._transport = transport
        self._claims: dict[str, tuple[float, frozenset[tuple[str, str, str]], Mapping[tuple[str, str, str], str]]] = {}
        self._claim_problem: int | None = None  # the HTTP status claims were last refused with
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.reflectors = (
            AgentReflector("namespaces", transport, NAMESPACES_PATH, JSON, self.namespaces, self._changed,
                           self._stop, label_selector=MODE_SELECTOR),
            AgentReflector("pods", transport, PODS_PATH, JSON, self.pod_store, self._changed, self._stop,
                           field_selector=f"spec.nodeName={node}"),
            AgentReflector(SLICES, transport, SLICES_PATH, JSON, self.slice_store, self._changed, self._stop,
                           field_selector=f"spec.nodeName={node}"),
            AgentReflector(SHARED_SLICES, transport, SLICES_PATH, JSON, self.shared_slice_store, self._changed,
                           self._stop, field_selector="spec.nodeName="),
        )
        self._required = self.reflectors[:2]  # judging needs these; without slices DRA devices are unknown
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for reflector in self.reflectors:
            thread = threading.Thread(target=reflector.run, name=f"qos-guard-agent-{reflector.name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 5.0) -> None:
        """End both watches now and wait (at most ``timeout`` seconds) for their threads."""
        self._stop.set()
        for reflector in self.reflectors:
            reflector.interrupt()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def synced(self) -> bool:
        return self.namespaces.listed and self.pod_store.listed

    def slices_answered(self) -> bool:
        """The slices were listed, or their list has failed (the answer is then that problem)."""
        with self._lock:
            return all(store.listed or name in self.problems for name, store in
                       ((SLICES, self.slice_store), (SHARED_SLICES, self.shared_slice_store)))

    def wait_synced(self, timeout: float, stop: threading.Event | None = None) -> bool:
        """Whether both resources were listed within ``timeout`` seconds (or before ``stop``); the slices are
        waited for within the same time, so the first cycle does not call every DRA device unknown."""
        stop = stop or self._stop
        deadline = time.monotonic() + timeout
        synced = wait_until(self.synced, timeout, stop)
        wait_until(self.slices_answered, max(0.0, deadline - time.monotonic()), stop)
        return synced

    def _changed(self, resource: str, problem: str | None) -> None:
        with self._lock:
            before = self.problems.get(resource)
            if problem == before:
                return
            if problem is None:
                del self.problems[resource]
                self._since.pop(resource, None)
            else:
                # both slice watches meet a cluster without DRA: it is said once
                said = problem.startswith(SLICES_NOT_SERVED) and any(
                    p.startswith(SLICES_NOT_SERVED) for p in self.problems.values())
                self.problems[resource] = problem
                self._since.setdefault(resource, time.monotonic())  # a new problem does not restart the clock
                if said:
                    return
        self.say(problem if problem is not None else f"{resource}: listed and watched again")

    def _require_synced(self) -> None:
        """Judge only against a view that is current: listed once, and not failing for ``STALE_AFTER`` seconds
        (a revoked grant or an unreachable API server would otherwise leave cycles ``ok`` on a view that no
        longer changes, and a new Pod never judged)."""
        if not self.synced():
            waiting = [r.name for r in self._required if not r.store.listed]
            raise NotSynced(f"not judging yet: waiting for the first list of {' and '.join(waiting)} "
                            "from the API server")
        now = time.monotonic()
        with self._lock:
            stale = [(resource, now - since, self.problems[resource]) for resource, since in self._since.items()
                     if now - since > STALE_AFTER and resource not in (SLICES, SHARED_SLICES)]
        if stale:
            resource, age, problem = stale[0]
            raise NotSynced(f"not judging: the view of {resource} has not been current for {age:.0f} s ({problem})")

    def opted_in(self) -> dict[str, OptedIn]:
        self._require_synced()
        return self.namespaces.snapshot()

    def pods(self, node: str | None, namespaces: Iterable[str]) -> dict[tuple[str, str], dict[str, Any]]:
        """The Pods bound to this view's node (all of them: ``observe`` keeps those of opted-in namespaces)."""
        if node != self.node:
            raise ClusterError(f"this view watches the Pods of node {self.node}, not {node}")
        self._require_synced()
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for key, obj in self.pod_store.snapshot().items():
            namespace, _, name = key.partition("/")
            found[(namespace, name)] = obj
        return found

    def slices(self, node: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """This node's ResourceSlices as kept, and why they cannot be trusted: not listed yet, or a list or watch
        failing for ``STALE_AFTER`` seconds (a slice's devices rarely move, so a short outage keeps them)."""
        if node != self.node:
            raise ClusterError(f"this view watches the ResourceSlices of node {self.node}, not {node}")
        now = time.monotonic()
        found: list[dict[str, Any]] = []
        for name, store in ((SLICES, self.slice_store), (SHARED_SLICES, self.shared_slice_store)):
            with self._lock:
                problem = self.problems.get(name)
                since = self._since.get(name)
            if not store.listed:
                return [], problem or "not listed yet"
            if problem is not None and since is not None and now - since > STALE_AFTER:
                return [], f"the view of {name} has not been current for {now - since:.0f} s ({problem})"
            found += store.snapshot().values()
        return found, None

    def admin_devices(self, claim: str) -> frozenset[tuple[str, str, str]]:
        """The devices ``claim`` was given with adminAccess, read once a ``CLAIM_TTL`` (a claim's allocation does
        not change while a Pod uses it); a claim that cannot be read gives none, said once with the way out."""
        return self._claim(claim)[1]

    def device_requests(self, claim: str) -> Mapping[tuple[str, str, str], str]:
        """The request each device of ``claim`` answers, read with ``admin_devices`` (none when not read)."""
        return self._claim(claim)[2]

    def _claim(self, claim: str) -> tuple[float, frozenset[tuple[str, str, str]], Mapping[tuple[str, str, str], str]]:
        now = time.monotonic()
        cached = self._claims.get(claim)
        if cached is not None and now - cached[0] < CLAIM_TTL:
            return cached
        try:
            status, body = self._transport.get(claim_path(claim), [], JSON[0])
        except ClusterError as exc:
            status, body = 0, {"message": str(exc)}
        message = body.get("message", "") if isinstance(body, Mapping) else ""
        problem = None if status in (200, 404) else (
            f"reading ResourceClaims: HTTP {status} {message}".rstrip() + f" (claim {claim}); DRA devices are "
            "judged as the workload's (a container naming requests of the claim: unknown), adminAccess (monitoring "
            f"access) unknown: {CLAIMS_GRANT}")
        cause = None if problem is None else status  # said once per change of cause, not per claim
        if cause != self._claim_problem and (problem or self._claim_problem is not None):
            self.say(problem or "resourceclaims: read again")
        self._claim_problem = cause
        found = (now, admin_devices(body) if status == 200 else frozenset(),
                 device_requests(body) if status == 200 else {})
        if len(self._claims) > 4096:
            self._claims.clear()
        self._claims[claim] = found
        return found
