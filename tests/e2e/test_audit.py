"""``qos-guard audit`` against objects that predate a namespace opting in."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.conftest import Cluster, Webhook, compliant_pod, violating_pod


def _deployment(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": violating_pod("x")["spec"]}}}


@pytest.fixture(scope="module")
def legacy(cluster: Cluster, webhook: Webhook) -> str:
    """A namespace whose objects were created before it opted in (so the webhook never saw them)."""
    ns = cluster.namespace("e2e-legacy")
    cluster.kubectl("apply", "-n", ns, "-f", "-", check=True, stdin=[
        violating_pod("old-fractional"), compliant_pod("old-good"), _deployment("old-deploy")])
    for i in range(5):
        cluster.kubectl("apply", "-n", ns, "-f", "-", check=True, stdin=violating_pod(f"bulk-{i}", cpu="2500m"))
    # A Pod its ReplicaSet owns is reported through the controller, not once per replica.
    owned = violating_pod("owned-replica")
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                             "uid": "00000000-0000-0000-0000-000000000001", "controller": True}]
    cluster.kubectl("apply", "-n", ns, "-f", "-", check=True, stdin=owned)
    cluster.namespace("e2e-unlabelled-legacy")
    cluster.kubectl("apply", "-n", "e2e-unlabelled-legacy", "-f", "-", check=True, stdin=violating_pod("hidden"))
    cluster.kubectl("label", "namespace", ns, "qos-guard.io/mode=enforce", check=True)
    return ns


def _audit(cluster: Cluster, *args: str) -> tuple[int, dict[str, Any], str]:
    proc = cluster.qos_guard("audit", "--kubeconfig", str(cluster.kubeconfig), "--format", "json", *args)
    return proc.returncode, json.loads(proc.stdout) if proc.stdout else {}, proc.stderr


def test_audit_finds_objects_created_before_opt_in(cluster: Cluster, legacy: str) -> None:
    code, report, _ = _audit(cluster)
    assert code == 1
    found = {(v["namespace"], v["kind"], v["name"]) for v in report["violations"]}
    assert (legacy, "Pod", "old-fractional") in found
    assert (legacy, "Deployment", "old-deploy") in found
    assert {(legacy, "Pod", f"bulk-{i}") for i in range(5)} <= found
    assert (legacy, "Pod", "old-good") not in found
    assert not any(name == "owned-replica" for _, _, name in found)
    assert not any(ns == "e2e-unlabelled-legacy" for ns, _, _ in found)  # not opted in
    assert all(v["file"] is None and v["line"] is None for v in report["violations"])  # live: no file
    assert report["errors"] == []


def test_audit_paginates_to_the_same_answer(cluster: Cluster, legacy: str) -> None:
    _, whole, _ = _audit(cluster, "-n", legacy)
    _, paged, _ = _audit(cluster, "-n", legacy, "--page-size", "2")
    assert paged["violations"] == whole["violations"]
    assert paged["summary"]["objects"] == whole["summary"]["objects"] == 8  # the owned replica is not counted


def test_audit_all_namespaces_and_text_grouped_by_namespace(cluster: Cluster, legacy: str) -> None:
    proc = cluster.qos_guard("audit", "--all-namespaces", "--kubeconfig", str(cluster.kubeconfig))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert "e2e-unlabelled-legacy: Pod/hidden: cpu-not-integer: " in "\n".join(lines)
    assert any(line.startswith(f"{legacy}: Deployment/old-deploy: cpu-not-integer: ") for line in lines)
    namespaces = [line.split(":", 1)[0] for line in lines]
    assert namespaces == sorted(namespaces)  # grouped by namespace
    assert "in all namespaces" in proc.stderr


def test_audit_warn_mode_exits_zero(cluster: Cluster, legacy: str) -> None:
    code, report, _ = _audit(cluster, "-n", legacy, "--mode", "warn")
    assert code == 0 and report["violations"]


def test_audit_unreachable_cluster_is_a_usage_error(cluster: Cluster, tmp_path: Any) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(cluster.kubeconfig.read_text().replace(cluster.url, "https://127.0.0.1:1"))
    proc = cluster.qos_guard("audit", "--kubeconfig", str(kubeconfig))
    assert proc.returncode == 2
    assert "cannot reach the API server" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_audit_without_permission_names_what_it_could_not_list(cluster: Cluster, legacy: str,
                                                               tmp_path: Any) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(cluster.kubeconfig.read_text().replace("qos-guard-e2e-admin-token", "wrong-token"))
    proc = cluster.qos_guard("audit", "-n", legacy, "--kubeconfig", str(kubeconfig))
    assert proc.returncode == 2
    assert "HTTP 401" in proc.stdout + proc.stderr
