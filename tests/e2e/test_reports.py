"""``qos-guard audit --report``: policy report objects written into a real API server, with the CRDs their
projects publish (the chart's vendored openreports.io ``Report`` CRD, Kyverno's ``wgpolicyk8s.io``
``PolicyReport`` CRD), replaced on each run, and written under the chart's CronJob RBAC."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.binaries import KYVERNO, binary, go_module
from tests.e2e.conftest import CHART, RELEASE_NAMESPACE, Cluster, compliant_pod, violating_pod

NS = "e2e-reports"


def _helm(*args: str) -> list[dict[str, Any]]:
    proc = subprocess.run([binary("helm"), "template", "qos-guard", str(CHART), "--namespace", RELEASE_NAMESPACE,
                           *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def _deployment(name: str, pod: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod["spec"]}}}


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> None:
    openreports = _helm("--set", "reports.installCRDs=true", "--show-only", "templates/reports-crds.yaml")
    policyreport = go_module(*KYVERNO) / "config" / "crds" / "policyreport" / "wgpolicyk8s.io_policyreports.yaml"
    cluster.kubectl("apply", "--server-side", "-f", "-", stdin=openreports, check=True)
    cluster.kubectl("apply", "--server-side", "-f", str(policyreport), check=True)
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/reports.openreports.io",
                    "crd/policyreports.wgpolicyk8s.io", check=True)


@pytest.fixture(scope="module")
def audited(cluster: Cluster, crds: None) -> str:
    """A namespace with a fractional Pod, a compliant Pod and a fractional Deployment, created before it
    opted in (so a registered webhook never refused them)."""
    ns = cluster.namespace(NS)
    cluster.kubectl("apply", "-n", ns, "-f", "-", check=True, stdin=[
        violating_pod("frac"), compliant_pod("good"), _deployment("fixme", violating_pod("x"))])
    cluster.kubectl("label", "namespace", ns, "qos-guard.io/mode=enforce", check=True)
    return ns


def _audit(cluster: Cluster, *args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    return cluster.qos_guard("audit", "--kubeconfig", str(kubeconfig or cluster.kubeconfig), *args)


def _results(report: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    return {(r["result"], r["resources"][0]["kind"] if "resources" in r else "", r["resources"][0]["name"]
             if "resources" in r else "", r.get("rule", "")) for r in report.get("results", [])}


def test_openreports_written_replaced_and_a_fixed_object_leaves_it(cluster: Cluster, audited: str) -> None:
    proc = _audit(cluster, "-n", audited, "--report", "openreports")
    assert proc.returncode == 1, proc.stderr  # the exit code is audit's own
    assert "Report written in 1 namespace," in proc.stderr  # singular: "1 namespaces" was the old wording
    first = cluster.get("reports.openreports.io", "qos-guard", "-n", audited)
    assert first["source"] == "qos-guard"
    assert not first["metadata"].get("ownerReferences")
    assert _results(first) == {("fail", "Pod", "frac", "cpu-not-integer"),
                               ("fail", "Deployment", "fixme", "cpu-not-integer"),
                               ("pass", "Pod", "good", "")}
    assert first["summary"] == {"pass": 1, "fail": 2, "warn": 0, "error": 0, "skip": 0}
    uid = cluster.get("pod", "frac", "-n", audited)["metadata"]["uid"]
    frac = next(r for r in first["results"] if r["resources"][0]["name"] == "frac")
    assert frac["policy"] == "qos-guard" and frac["severity"] == "high"
    assert frac["resources"][0] == {"apiVersion": "v1", "kind": "Pod", "namespace": audited, "name": "frac",
                                    "uid": uid}
    assert "1500m is not a whole number of CPUs" in frac["message"]
    assert frac["properties"]["container"] == "app"

    # Fixed between runs: the Deployment's fail result goes, it is a pass now; nothing is appended.
    fixed = _deployment("fixme", compliant_pod("x"))
    cluster.kubectl("apply", "-n", audited, "-f", "-", stdin=fixed, check=True)
    assert _audit(cluster, "-n", audited, "--report", "openreports").returncode == 1
    second = cluster.get("reports.openreports.io", "qos-guard", "-n", audited)
    assert second["metadata"]["uid"] == first["metadata"]["uid"]  # replaced in place
    assert second["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]
    assert _results(second) == {("fail", "Pod", "frac", "cpu-not-integer"), ("pass", "Pod", "good", ""),
                                ("pass", "Deployment", "fixme", "")}
    assert second["summary"]["fail"] == 1 and second["summary"]["pass"] == 2

    # A namespace that opts out: the next cluster-wide run deletes its stale report.
    cluster.kubectl("label", "namespace", audited, "qos-guard.io/mode-", check=True)
    try:
        proc = _audit(cluster, "--report", "openreports")
        assert proc.returncode in (0, 1), proc.stderr
        gone = cluster.kubectl("get", "reports.openreports.io", "qos-guard", "-n", audited)
        assert gone.returncode != 0 and "NotFound" in gone.stderr
    finally:
        cluster.kubectl("label", "namespace", audited, "qos-guard.io/mode=enforce", check=True)


def test_policyreport_for_older_consumers(cluster: Cluster, audited: str) -> None:
    proc = _audit(cluster, "-n", audited, "--report", "policyreport")
    assert proc.returncode == 1, proc.stderr
    report = cluster.get("policyreports.wgpolicyk8s.io", "qos-guard", "-n", audited)
    assert report["apiVersion"] == "wgpolicyk8s.io/v1alpha2" and "source" not in report
    assert ("fail", "Pod", "frac", "cpu-not-integer") in _results(report)
    assert all(r["policy"] == "qos-guard" and r["source"] == "qos-guard" for r in report["results"])


def test_cronjob_rbac_is_enough_for_a_run_and_no_more(cluster: Cluster, audited: str, tmp_path: Path) -> None:
    cluster.namespace(RELEASE_NAMESPACE)
    docs = _helm("--set", "audit.enabled=true", "--show-only", "templates/audit-cronjob.yaml",
                 "--show-only", "templates/configmap.yaml")
    cluster.kubectl("apply", "-f", "-", stdin=docs, check=True)
    job = next(d for d in docs if d["kind"] == "CronJob")
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    account, args = pod["serviceAccountName"], pod["containers"][0]["args"]
    # The chart's config, as the Job's Pod sees it mounted from the ConfigMap, here as a local file.
    (mount,) = pod["containers"][0]["volumeMounts"]
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap"]
    local = tmp_path / "config.yaml"
    local.write_text(config_map["data"]["config.yaml"])
    mounted = f"--config={mount['mountPath']}/config.yaml"
    assert mounted in args
    args = [f"--config={local}" if a == mounted else a for a in args]
    kubeconfig = cluster.kubeconfig_as(account, RELEASE_NAMESPACE, tmp_path / "audit-kubeconfig")

    cluster.kubectl("delete", "reports.openreports.io", "qos-guard", "-n", audited, "--ignore-not-found", check=True)
    proc = _audit(cluster, *args[1:], kubeconfig=kubeconfig)
    assert args[0] == "audit" and proc.returncode == 0, proc.stderr  # warn mode: findings are not a failed Job
    assert ("fail", "Pod", "frac", "cpu-not-integer") in _results(
        cluster.get("reports.openreports.io", "qos-guard", "-n", audited))
    who = f"--as=system:serviceaccount:{RELEASE_NAMESPACE}:{account}"
    for verb, resource in (("get", "secrets"), ("get", "pods"), ("update", "reports.openreports.io"),
                           ("delete", "pods"), ("list", "configmaps")):
        can = cluster.kubectl("auth", "can-i", verb, resource, "-A", who)
        assert can.stdout.strip() == "no", (verb, resource, can.stdout, can.stderr)


def test_a_namespace_being_deleted_gets_no_report_and_fails_no_run(cluster: Cluster, crds: None) -> None:
    """A namespace whose deletion hangs on a finalizer stays Terminating, and the API server refuses new content
    in it (NamespaceLifecycle's NamespaceTerminating cause): a cluster-wide audit leaves it out, and one aimed
    at it judges its objects and says why no report was written, without failing."""
    going = "e2e-reports-going"
    cluster.kubectl("apply", "-f", "-", check=True, stdin={"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": going, "finalizers": ["e2e.qos-guard.io/hold"]}})
    cluster.kubectl("apply", "-n", going, "-f", "-", stdin=violating_pod("frac"), check=True)
    cluster.kubectl("label", "namespace", going, "qos-guard.io/mode=enforce", check=True)
    try:
        cluster.kubectl("delete", "namespace", going, "--wait=false", check=True)
        assert cluster.get("namespace", going)["status"]["phase"] == "Terminating"

        wide = _audit(cluster, "--report", "openreports")
        assert wide.returncode in (0, 1) and "writing Report" not in wide.stderr, wide.stderr
        absent = cluster.kubectl("get", "reports.openreports.io", "qos-guard", "-n", going)
        assert absent.returncode != 0 and "NotFound" in absent.stderr

        aimed = _audit(cluster, "-n", going, "--report", "openreports")
        assert aimed.returncode == 1, aimed.stderr  # its Pod is judged: the exit code is audit's own
        assert f"none written in {going} (being deleted)" in aimed.stderr, aimed.stderr
        assert "frac" in aimed.stdout
    finally:
        cluster.kubectl("patch", "namespace", going, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
