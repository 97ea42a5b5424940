"""The kind multi-host inference is deployed as, on the real node: LeaderWorkerSet's own controller
(sigs.k8s.io/lws, pinned; tests/node/lws.py) with its own webhooks, beside qos-guard's chart in enforce mode.
A LeaderWorkerSet with a fractional CPU in its worker template is refused at ``kubectl apply`` with the template
named; a compliant one rolls out through the real controllers and scheduler, and its leader and worker Pods get
exclusive CPUs from the static CPU Manager (cpusets printed from the cgroup and the CPU Manager's state).

This machine has two CPUs and the kubelet reserves one, so there is one exclusive CPU (1): a leader and a
worker of one CPU each cannot run at once. The test pins them in turn: the leader runs pinned while its worker,
created by the LWS controller, admitted and Guaranteed, waits for the scheduler (Insufficient cpu); then the
node is tainted (the worker template tolerates it, the leader's does not) and the leader Pod deleted: LWS
recreates the group, the new leader waits on the taint and the new worker runs pinned on the CPU the leader
left. On a node with two free CPUs the same LeaderWorkerSet runs both at once."""

from __future__ import annotations

import copy
import functools
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests import waiting
from tests.binaries import binary
from tests.e2e.conftest import Cluster
from tests.node.conftest import DENIED, Release, pod, report, wait_released
from tests.node.lws import LwsController, running_lws_controller
from tests.node.node import NODE_NAME, Node
from tests.node.test_pinning import apply, assert_pinned

pytestmark = [pytest.mark.node, pytest.mark.timeout(1800)]

NAME = "vllm"
LEADER, WORKER = f"{NAME}-0", f"{NAME}-0-1"  # the leader StatefulSet's Pod, its worker StatefulSet's first
TAINT_KEY = "qos-guard.io/lws-turn"
TAINT = f"{TAINT_KEY}=worker:NoSchedule"


@functools.cache
def _built() -> str | RuntimeError:
    """The controller's path, or why it did not build (tried once: each test would try again otherwise)."""
    try:
        return binary("lws-controller")
    except RuntimeError as error:
        return error


@pytest.fixture(scope="module")
def lws(node: Node, release: Release, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LwsController]:
    """The LWS controller running against the node's API server. Where it cannot be built the tests skip with
    the build's error; under CI=true they fail, as every node test does."""
    path = _built()
    if isinstance(path, RuntimeError):
        if os.environ.get("CI") == "true":
            pytest.fail(f"the LeaderWorkerSet controller must build in CI: {path}")
        last = str(path).strip().splitlines()[-1]
        pytest.skip(f"LeaderWorkerSet controller not built here (hack/build-tools.sh lws-controller): {last}")
    with running_lws_controller(node.cluster, path, tmp_path_factory.mktemp("lws")) as controller:
        yield controller


def leaderworkerset(name: str, worker_cpu: str = "1") -> dict[str, Any]:
    """One group of two (a leader and a worker), each a busybox container of one CPU and 64Mi, Guaranteed;
    only the worker template tolerates ``TAINT`` (how the test pins them in turn)."""
    leader = pod(name, "1")["spec"]
    worker = copy.deepcopy(pod(name, worker_cpu)["spec"])
    worker["tolerations"] = [{"key": TAINT_KEY, "operator": "Equal", "value": "worker", "effect": "NoSchedule"}]
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": name},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": {"metadata": {"labels": {"role": "leader"}}, "spec": leader},
                "workerTemplate": {"metadata": {"labels": {"role": "worker"}}, "spec": worker}}}}


def _pod_or_none(c: Cluster, ns: str, name: str) -> dict[str, Any] | None:
    proc = c.kubectl("get", "pod", name, "-n", ns, "-o", "json")
    if proc.returncode != 0:
        return None
    obj: dict[str, Any] = json.loads(proc.stdout)
    return None if obj["metadata"].get("deletionTimestamp") else obj


def wait_unschedulable(c: Cluster, ns: str, name: str, why: str, not_uid: str = "",
                       timeout: float = 60) -> dict[str, Any]:
    """The Pod (another than ``not_uid``) exists and the scheduler said why it cannot place it."""
    last: list[dict[str, Any] | None] = [None]

    def unschedulable() -> dict[str, Any] | None:
        obj = last[0] = _pod_or_none(c, ns, name)
        if obj is not None and obj["metadata"]["uid"] != not_uid:
            for cond in obj["status"].get("conditions", []):
                if cond["type"] == "PodScheduled" and cond["status"] == "False" and why in cond.get("message", ""):
                    return obj
        return None

    return waiting.result(f"{ns}/{name} unschedulable for {why!r}", unschedulable, within=timeout, every=1,
                          seen=lambda: last[0] and last[0]["status"])


def wait_new_pod(c: Cluster, ns: str, name: str, not_uid: str, timeout: float = 90) -> dict[str, Any]:
    def recreated() -> dict[str, Any] | None:
        obj = _pod_or_none(c, ns, name)
        return obj if obj is not None and obj["metadata"]["uid"] != not_uid else None

    return waiting.result(f"{ns}/{name} recreated (a uid other than {not_uid})", recreated, within=timeout, every=1)


def assert_lws_pod(obj: dict[str, Any], worker_index: str) -> None:
    """A Pod as LWS makes it: its labels (the worker index set by LWS's Pod webhook), the leader's address in
    its environment (the same webhook), owned by a StatefulSet, Guaranteed."""
    labels = obj["metadata"]["labels"]
    assert labels["leaderworkerset.sigs.k8s.io/name"] == NAME
    assert labels["leaderworkerset.sigs.k8s.io/worker-index"] == worker_index
    (owner,) = obj["metadata"]["ownerReferences"]
    assert owner["kind"] == "StatefulSet"
    env = {e["name"]: e.get("value") for e in obj["spec"]["containers"][0].get("env", [])}
    assert "LWS_LEADER_ADDRESS" in env, env
    assert obj["status"]["qosClass"] == "Guaranteed"


def test_1_fractional_worker_template_is_refused_by_name(node: Node, release: Release,
                                                         lws: LwsController) -> None:
    c = node.cluster
    ns = c.namespace("node-lws", "enforce")
    refused = apply(c, ns, leaderworkerset(f"{NAME}-frac", worker_cpu="1500m"))
    assert refused.returncode != 0 and DENIED in refused.stderr, refused.stderr
    assert "cpu-not-integer: spec.leaderWorkerTemplate.workerTemplate (worker)" in refused.stderr, refused.stderr
    assert "leaderTemplate" not in refused.stderr, refused.stderr
    assert c.kubectl("get", "leaderworkerset", f"{NAME}-frac", "-n", ns).returncode != 0
    report(f"lws {lws.version}: fractional worker refused at apply: "
           f"{next(ln for ln in refused.stderr.splitlines() if 'cpu-not-integer' in ln).strip()}")


def test_2_compliant_rolls_out_leader_and_worker_pinned_in_turn(node: Node, release: Release,
                                                                lws: LwsController) -> None:
    c = node.cluster
    ns = c.namespace("node-lws", "enforce")
    uids: list[str] = []
    try:
        created = apply(c, ns, leaderworkerset(NAME))
        assert created.returncode == 0, created.stderr
        # The leader: created by the leader StatefulSet LWS made, admitted by both webhooks, pinned.
        leader = wait_new_pod(c, ns, LEADER, not_uid="")
        uids.append(leader["metadata"]["uid"])
        assert_lws_pod(leader, "0")
        leader_cpus = assert_pinned(node, ns, LEADER, f"lws {lws.version} leader")
        # Its worker: made by LWS's worker StatefulSet (owned by the leader Pod), admitted and Guaranteed;
        # the node has no second exclusive CPU for it.
        worker = wait_unschedulable(c, ns, WORKER, "Insufficient cpu")
        uids.append(worker["metadata"]["uid"])
        assert_lws_pod(worker, "1")
        report(f"lws {lws.version} worker: {ns}/{WORKER} Guaranteed, waits for a second exclusive CPU "
               f"(scheduler: Insufficient cpu)")
        # In turn: the node tainted (only the worker template tolerates it), then the leader's Pod deleted; LWS
        # recreates the group. In the foreground, so its waiting worker (which tolerates the taint too) is gone
        # before the leader's CPU is free, and only the recreated worker can take it.
        assert c.kubectl("taint", "node", NODE_NAME, TAINT).returncode == 0
        c.kubectl("delete", "pod", LEADER, "-n", ns, "--cascade=foreground", "--wait=true", "--timeout=60s",
                  check=True)
        left = _pod_or_none(c, ns, WORKER)
        assert left is None or left["metadata"]["uid"] != worker["metadata"]["uid"], "the worker outlived its leader"
        wait_released(node, [leader["metadata"]["uid"]])
        new_worker = wait_new_pod(c, ns, WORKER, not_uid=worker["metadata"]["uid"])
        uids.append(new_worker["metadata"]["uid"])
        new_leader = wait_unschedulable(c, ns, LEADER, "untolerated taint", not_uid=leader["metadata"]["uid"])
        uids.append(new_leader["metadata"]["uid"])
        worker_cpus = assert_pinned(node, ns, WORKER, f"lws {lws.version} worker (in turn)")
        assert_lws_pod(c.get("pod", WORKER, "-n", ns), "1")
        assert worker_cpus == leader_cpus  # the one exclusive CPU this node has, the leader's before
    finally:
        c.kubectl("taint", "node", NODE_NAME, f"{TAINT_KEY}-")
        c.kubectl("delete", "leaderworkerset", NAME, "-n", ns, "--ignore-not-found", "--wait=true", "--timeout=90s")
        waiting.eventually(f"every Pod of {ns} gone", lambda: not c.get("pods", "-n", ns)["items"], within=90,
                           every=1, seen=lambda: c.get("pods", "-n", ns)["items"])
        wait_released(node, uids)


def test_3_controller_logged_no_error(lws: LwsController) -> None:
    """LWS ran through it all without a reconcile error or a failed call (its log's ERROR lines; an optimistic
    concurrency conflict is retried by design and is not one)."""
    assert lws.process.poll() is None, lws.log_tail()
    errors = [ln for ln in lws.log.read_text(errors="replace").splitlines()
              if "\tERROR\t" in ln and "the object has been modified" not in ln]
    assert not errors, "\n".join(errors[-20:])
    report(f"lws {lws.version}: controller log {len(lws.log.read_text(errors='replace').splitlines())} lines, "
           "no reconcile error")
