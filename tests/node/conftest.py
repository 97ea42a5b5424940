"""Fixtures for the node tests: one real node (tests/node/node.py) and the chart installed on it with the image
built from the repository's Dockerfile. Package scope: every module of tests/node shares the one node (starting
one costs about a minute), and it is gone before the rest of the suite runs. A test that changes the node (a
kubelet restarted with other settings, ``Node.kubelet_configured``) leaves it as it found it.
Without root these tests are skipped with the reason; under CI=true they never skip: a node that cannot start
fails the run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests import waiting
from tests.binaries import binary, kube_minor
from tests.e2e.conftest import CHART, RELEASE_NAMESPACE, Cluster
from tests.node.node import CGROUP_V1, MIN_FREE_DISK, WEBHOOK_TAG, Node, running_node, why_not

BUSYBOX = "localhost/qos-guard/busybox:1"
DENIED = 'admission webhook "validate.qos-guard.io" denied the request'


@pytest.fixture(scope="package")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    reason = why_not()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the node tests must run in CI, but cannot here: {reason}")
        pytest.skip(f"node tests: {reason}")
    folder = tmp_path_factory.mktemp("node")
    free = shutil.disk_usage(folder).free
    if free < MIN_FREE_DISK:
        pytest.fail(f"the node tier needs {MIN_FREE_DISK >> 30} GiB free on the disk of {folder}, which has "
                    f"{free / (1 << 30):.1f} GiB: free some and run again")
    with running_node(folder) as n:
        yield n


# Namespaces the tests never create workloads in: what is left in the others after a failed test is the test's.
KEPT_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease", RELEASE_NAMESPACE})
LEFT_KINDS = "deployments,replicasets,statefulsets,jobs,pods"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Each phase's report kept on the test, so that ``_clear_after_failure`` knows the test failed."""
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)
    return rep


@pytest.fixture(autouse=True)
def _clear_after_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that fails before its own clean-up leaves its Pods on the one node, holding its 2 CPUs: every later
    test then fails on "Insufficient cpu" instead of its own assertion. After a failed test, its workloads are
    deleted and the kubelet's CPUs released; a passing test's objects are left as it left them."""
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is None or not rep.failed or "node" not in request.fixturenames:
        return
    n: Node = request.getfixturevalue("node")
    listed = n.cluster.kubectl("get", "pods", "-A", "-o", "json")
    if listed.returncode != 0:
        return
    left = [p for p in json.loads(listed.stdout)["items"] if p["metadata"]["namespace"] not in KEPT_NAMESPACES]
    for ns in sorted({p["metadata"]["namespace"] for p in left}):
        n.cluster.kubectl("delete", "-n", ns, LEFT_KINDS, "--all", "--wait=true", "--timeout=90s")
    wait_released(n, [p["metadata"]["uid"] for p in left], within=90)


@dataclass
class Release:
    """The chart installed by helm on the node, with the locally built image."""

    cluster: Cluster
    name: str
    image: str


# Not tests/builders.pod: a Pod a real kubelet runs (busybox, never pulled, stopped in 2 s, no token).
def pod(name: str, cpu: str, memory: str = "64Mi", request_cpu: str | None = None) -> dict[str, Any]:
    """A busybox Pod whose container asks ``cpu`` (limits; requests ``request_cpu`` or the same)."""
    resources = {"limits": {"cpu": cpu, "memory": memory},
                 "requests": {"cpu": request_cpu or cpu, "memory": memory}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"terminationGracePeriodSeconds": 2, "automountServiceAccountToken": False,
                     "containers": [{"name": "app", "image": BUSYBOX, "imagePullPolicy": "Never",
                                     "resources": resources}]}}


def admits(c: Cluster, ns: str, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return c.kubectl("apply", "--dry-run=server", "-n", ns, "-f", "-", stdin=obj)


@pytest.fixture(scope="package")
def release(node: Node) -> Release:
    """``helm install`` of the chart, image from the Dockerfile, reached by the API server through the Service."""
    c = node.cluster
    name, tag = node.images["qos-guard"].rsplit(":", 1)
    assert tag == WEBHOOK_TAG
    # The webhook's Pods cannot reach this API server (127.0.0.1 of the host, no kube-proxy): it cannot read the
    # minor from /version, so it is given the tier's as an operator would (config.kubernetesVersion), never the
    # newest by default (a 1.36 tier would be judged with 1.37's semantics).
    proc = subprocess.run([binary("helm"), "install", "qos-guard", str(CHART), "--namespace", RELEASE_NAMESPACE,
                           "--create-namespace", "--set", f"image.repository={name}", "--set", f"image.tag={tag}",
                           "--set", "image.pullPolicy=Never", "--set-string",
                           f"config.kubernetesVersion=1.{kube_minor()}", "--wait", "--timeout", "4m"],
                          capture_output=True, text=True, timeout=300, env=c.env)
    if proc.returncode != 0:
        pods = c.kubectl("describe", "pods", "-n", RELEASE_NAMESPACE).stdout
        raise AssertionError(f"helm install failed:\n{proc.stderr}\n{pods[-6000:]}")
    # The Service's EndpointSlice may trail the Pods' readiness by a moment: wait for a judged answer.
    probe = c.namespace("node-probe", "enforce")
    answer = ""

    def judged() -> bool:
        nonlocal answer
        answer = admits(c, probe, pod("probe", "1500m")).stderr
        return DENIED in answer

    waiting.eventually("the webhook Service answering (a judged denial of a probe Pod)", judged, within=60,
                       every=1, seen=lambda: answer)
    return Release(c, "qos-guard", f"{name}:{tag}")


# --- reading what the node really did ---

def helm_upgrade_release(c: Cluster, values: tuple[str, ...], label: str, timeout: str = "4m") -> None:
    """``helm upgrade --reuse-values --wait`` of the release with ``key=value`` (``key:=value`` sets a string);
    a failure shows helm's error and the described Pods of ``label``."""
    flags = [a for v in values for a in (("--set-string", v.replace(":=", "=", 1)) if ":=" in v else ("--set", v))]
    proc = subprocess.run([binary("helm"), "upgrade", "qos-guard", str(CHART), "--namespace", RELEASE_NAMESPACE,
                           "--reuse-values", *flags, "--wait", "--timeout", timeout],
                          capture_output=True, text=True, timeout=300, env=c.env)
    if proc.returncode != 0:
        described = c.kubectl("describe", "pods", "-n", RELEASE_NAMESPACE, "-l", label).stdout
        raise AssertionError(f"helm upgrade {' '.join(values)} failed:\n{proc.stderr}\n{described[-6000:]}")


def parse_cpus(text: str) -> set[int]:
    """A Linux CPU list ("0-2,5") as a set."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def wait_running(c: Cluster, ns: str, name: str, timeout: int = 120) -> dict[str, Any]:
    proc = c.kubectl("wait", "-n", ns, "--for=condition=Ready", f"pod/{name}", f"--timeout={timeout}s")
    if proc.returncode != 0:
        described = c.kubectl("describe", "pod", "-n", ns, name).stdout
        raise AssertionError(f"pod {ns}/{name} not Ready:\n{proc.stderr}\n{described[-4000:]}")
    return c.get("pod", name, "-n", ns)


def exec_cpus(c: Cluster, ns: str, name: str) -> set[int]:
    """Cpus_allowed_list of the container's PID 1, read inside it through kubectl exec (kubelet, CRI, runc)."""
    proc = c.kubectl("exec", "-n", ns, name, "--", "cat", "/proc/1/status", check=True)
    match = re.search(r"^Cpus_allowed_list:\s*(\S+)$", proc.stdout, re.MULTILINE)
    assert match, proc.stdout
    return parse_cpus(match.group(1))


def container_cgroup_cpus() -> dict[str, set[int]]:
    """cpuset.cpus of every container cgroup the kubelet made, keyed by container id, read from the host."""
    found: dict[str, set[int]] = {}
    top = CGROUP_V1 / "cpuset" / "kubepods"
    for cpus in top.rglob("cpuset.cpus"):
        if cpus.parent.name.startswith("pod") or cpus.parent.name in ("kubepods", "burstable", "besteffort"):
            continue
        found[cpus.parent.name] = parse_cpus(cpus.read_text())
    return found


def app_container_ids(c: Cluster) -> dict[str, str]:
    """Container id -> "namespace/pod/container" for every container the API server knows runs on the node."""
    ids: dict[str, str] = {}
    for p in c.get("pods", "--all-namespaces")["items"]:
        for status in p["status"].get("containerStatuses", []):
            if status.get("containerID"):
                ids[status["containerID"].split("://", 1)[1]] = (
                    f"{p['metadata']['namespace']}/{p['metadata']['name']}/{status['name']}")
    return ids


def cgroup_file(pod_obj: dict[str, Any], name: str, container: str = "app") -> str:
    """A file of the container's cpuset cgroup, read from the host."""
    status = next(s for s in pod_obj["status"]["containerStatuses"] if s["name"] == container)
    cid = status["containerID"].split("://", 1)[1]
    found = list((CGROUP_V1 / "cpuset" / "kubepods").rglob(f"{cid}/{name}"))
    assert len(found) == 1, f"no cpuset cgroup for container {cid}"
    return found[0].read_text()


def cgroup_cpus(pod_obj: dict[str, Any], container: str = "app") -> set[int]:
    return parse_cpus(cgroup_file(pod_obj, "cpuset.cpus", container))


def delete_and_release(node: Node, ns: str, kind: str, name: str, uids: list[str]) -> None:
    """Delete and wait until the kubelet has released the Pods' exclusive CPUs (the next test needs them)."""
    node.cluster.kubectl("delete", "-n", ns, kind, name, "--wait=true", "--timeout=90s")
    wait_released(node, uids)


def wait_released(node: Node, uids: list[str], within: float = 60) -> None:
    """Wait until the kubelet's CPU Manager state holds no entry of the Pods ``uids``."""
    waiting.eventually(f"CPUs of {uids} released", lambda: not any(
        uid in node.cpu_manager_state().get("entries", {}) for uid in uids), within=within, every=1,
        seen=node.cpu_manager_state)


def report(line: str) -> None:
    """Printed in the test output (pytest -s, or the captured section of a failure) and in the summary."""
    print(f"[node] {line}", flush=True)
    _REPORT.append(line)


_REPORT: list[str] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _REPORT:
        terminalreporter.section("cpusets on the real node (tests/node)")
        for line in _REPORT:
            terminalreporter.write_line(line)

