"""qos-guard registered with a real kube-apiserver, driven with the real kubectl as a user would."""

from __future__ import annotations

import copy
import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests import waiting
from tests.e2e.conftest import (
    WEBHOOK_CONFIG,
    Cluster,
    Webhook,
    compliant_pod,
    violating_pod,
)
from tests.serving import start_server


@pytest.fixture(scope="module")
def namespaces(cluster: Cluster, webhook: Webhook) -> dict[str, str]:
    return {mode: cluster.namespace(f"e2e-{mode}", None if mode == "plain" else mode)
            for mode in ("enforce", "mutate", "warn", "plain")}


def deployment(name: str, pod: dict[str, Any]) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": copy.deepcopy(pod["spec"])}}}


def apply(cluster: Cluster, ns: str, obj: dict[str, Any], *flags: str) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("apply", "-n", ns, *flags, "-f", "-", stdin=obj)


def test_fresh_configuration_needed_certs_patch_webhooks(webhook: Webhook) -> None:
    """Before `certs --patch-webhooks`, the chart's caBundle did not match: the call failed on TLS."""
    assert "failed calling webhook" in webhook.fresh_config_error
    assert "x509" in webhook.fresh_config_error or "certificate" in webhook.fresh_config_error


def test_enforce_refuses_violating_pod_with_the_message(cluster: Cluster, namespaces: dict[str, str]) -> None:
    proc = apply(cluster, namespaces["enforce"], violating_pod("fractional"))
    assert proc.returncode != 0
    assert 'admission webhook "validate.qos-guard.io" denied the request' in proc.stderr
    assert 'cpu-not-integer: container "app"' in proc.stderr
    assert cluster.kubectl("get", "pod", "fractional", "-n", namespaces["enforce"]).returncode != 0


def test_enforce_refuses_violating_deployment_at_create(cluster: Cluster, namespaces: dict[str, str]) -> None:
    proc = apply(cluster, namespaces["enforce"], deployment("bad-deploy", violating_pod("x")))
    assert proc.returncode != 0
    assert 'admission webhook "validate.qos-guard.io" denied the request' in proc.stderr
    assert "Deployment" in proc.stderr and "cpu-not-integer" in proc.stderr


def test_enforce_admits_compliant_pod_as_guaranteed(cluster: Cluster, namespaces: dict[str, str]) -> None:
    ns = namespaces["enforce"]
    proc = apply(cluster, ns, compliant_pod("pinned"))
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr
    # The API server's own QoS computation agrees with ours.
    assert cluster.get("pod", "pinned", "-n", ns)["status"]["qosClass"] == "Guaranteed"
    assert apply(cluster, ns, deployment("good-deploy", compliant_pod("x"))).returncode == 0


def test_enforce_judges_workload_updates(cluster: Cluster, namespaces: dict[str, str]) -> None:
    ns = namespaces["enforce"]
    good = deployment("updated", compliant_pod("x"))
    assert apply(cluster, ns, good).returncode == 0
    bad = copy.deepcopy(good)
    bad["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    proc = apply(cluster, ns, bad)
    assert proc.returncode != 0 and "requests-not-equal-limits" in proc.stderr


def test_mutate_patches_requests_to_limits(cluster: Cluster, namespaces: dict[str, str]) -> None:
    ns = namespaces["mutate"]
    pod = compliant_pod("patched")
    pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1", "memory": "512Mi"}
    proc = apply(cluster, ns, pod)
    assert proc.returncode == 0, proc.stderr
    assert "Warning:" in proc.stderr  # one warning per change, shown by kubectl
    stored = cluster.get("pod", "patched", "-n", ns)
    resources = stored["spec"]["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "2", "memory": "1Gi"}
    assert stored["status"]["qosClass"] == "Guaranteed"


def test_mutate_refuses_fractional_cpu(cluster: Cluster, namespaces: dict[str, str]) -> None:
    proc = apply(cluster, namespaces["mutate"], violating_pod("fractional"))
    assert proc.returncode != 0
    assert 'admission webhook "validate-mutated.qos-guard.io" denied the request' in proc.stderr
    assert "cpu-not-integer" in proc.stderr


def test_warn_admits_and_kubectl_prints_warnings(cluster: Cluster, namespaces: dict[str, str]) -> None:
    ns = namespaces["warn"]
    proc = apply(cluster, ns, violating_pod("warned"))
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("Warning:")]
    assert any("cpu-not-integer" in w for w in warnings), proc.stderr
    # Requests default to limits, so the API server calls it Guaranteed; 1.5 CPUs still cannot be pinned.
    assert cluster.get("pod", "warned", "-n", ns)["status"]["qosClass"] == "Guaranteed"


def test_server_dry_run_gives_the_same_verdicts_and_creates_nothing(cluster: Cluster,
                                                                    namespaces: dict[str, str]) -> None:
    ns = namespaces["enforce"]
    refused = apply(cluster, ns, violating_pod("dry-bad"), "--dry-run=server")
    assert refused.returncode != 0 and "cpu-not-integer" in refused.stderr
    admitted = apply(cluster, ns, compliant_pod("dry-good"), "--dry-run=server")
    assert admitted.returncode == 0 and "(server dry run)" in admitted.stdout
    assert cluster.kubectl("get", "pod", "dry-good", "-n", ns).returncode != 0
    mutated = cluster.kubectl("apply", "--dry-run=server", "-o", "json", "-n", namespaces["mutate"], "-f", "-",
                              stdin=compliant_pod("dry-mut") | {"spec": {"containers": [{
                                  "name": "app", "image": "registry.invalid/app:1",
                                  "resources": {"limits": {"cpu": "4", "memory": "1Gi"}}}]}})
    assert mutated.returncode == 0, mutated.stderr
    assert '"qosClass": "Guaranteed"' in mutated.stdout
    assert cluster.kubectl("get", "pod", "dry-mut", "-n", namespaces["mutate"]).returncode != 0


def test_unlabelled_namespace_and_kube_system_are_untouched(cluster: Cluster, namespaces: dict[str, str]) -> None:
    proc = apply(cluster, namespaces["plain"], violating_pod("free"))
    assert proc.returncode == 0 and "Warning" not in proc.stderr, proc.stderr
    cluster.kubectl("label", "namespace", "kube-system", "qos-guard.io/mode=enforce", "--overwrite", check=True)
    try:
        proc = apply(cluster, "kube-system", violating_pod("system-burstable"))
        assert proc.returncode == 0, proc.stderr
    finally:
        cluster.kubectl("label", "namespace", "kube-system", "qos-guard.io/mode-", check=True)


def test_bogus_mode_label_is_refused(cluster: Cluster, namespaces: dict[str, str]) -> None:
    proc = cluster.kubectl("apply", "-f", "-", stdin={"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "e2e-bogus", "labels": {"qos-guard.io/mode": "bogus"}}})
    assert proc.returncode != 0
    assert 'admission webhook "namespaces.qos-guard.io" denied the request' in proc.stderr
    assert "bogus" in proc.stderr
    relabel = cluster.kubectl("label", "namespace", namespaces["plain"], "qos-guard.io/mode=Enforce")
    assert relabel.returncode != 0 and "namespaces.qos-guard.io" in relabel.stderr


@pytest.fixture
def stopped_webhook(cluster: Cluster, webhook: Webhook, tmp_path: Any) -> Iterator[None]:
    """Point every webhook at a second qos-guard, then stop it; restore the first one afterwards."""
    second = start_server(tmp_path / "second", cert_dir=webhook.cert_dir)

    def point_at(base: str) -> None:
        for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
            conf = cluster.get(kind, WEBHOOK_CONFIG)
            ops = []
            for i, hook in enumerate(conf["webhooks"]):
                old = urlsplit(hook["clientConfig"]["url"])
                url = base + old.path + (f"?{old.query}" if old.query else "")
                ops.append({"op": "replace", "path": f"/webhooks/{i}/clientConfig/url", "value": url})
            cluster.kubectl("patch", kind, WEBHOOK_CONFIG, "--type=json", "-p", json.dumps(ops), check=True)

    point_at(f"https://127.0.0.1:{second.port}")
    try:
        # The second server answers (its own decision log says so: the first would admit this Pod as well, and
        # the API server takes a moment to see a changed configuration) ...
        def second_called() -> bool:
            if '"name": "via-second"' in (second.folder / "server.log").read_text():
                return True
            ok = apply(cluster, "e2e-enforce", compliant_pod("via-second"), "--dry-run=server")
            assert ok.returncode == 0, ok.stderr
            return False

        # decision lines are written every 50 ms
        waiting.eventually("the API server calling the second server", second_called, 20, every=0.2)
        started = time.monotonic()
        second.stop()  # ... and now nothing is left of it: no listener, no worker on a kept-alive connection
        # The API server keeps its connections to the webhook open: a stop that waited for them took the whole
        # graceful timeout and could leave a worker answering on them.
        assert time.monotonic() - started < 10, "the stop waited for the API server's idle connections"
        yield
    finally:
        second.stop()
        point_at(webhook.url)


def test_stopped_webhook_fails_closed_only_in_opted_in_namespaces(cluster: Cluster, namespaces: dict[str, str],
                                                                  stopped_webhook: None) -> None:
    for name in ("down-bad", "down-good"):
        pod = violating_pod(name) if name == "down-bad" else compliant_pod(name)
        proc = apply(cluster, namespaces["enforce"], pod)
        assert proc.returncode != 0 and "failed calling webhook" in proc.stderr, proc.stderr
    proc = apply(cluster, namespaces["mutate"], compliant_pod("down-mutate"))
    assert proc.returncode != 0 and "failed calling webhook" in proc.stderr
    # warn is failurePolicy Ignore; unlabelled namespaces never call the webhook.
    assert apply(cluster, namespaces["warn"], violating_pod("down-warn")).returncode == 0
    assert apply(cluster, namespaces["plain"], violating_pod("down-plain")).returncode == 0


def test_webhook_restored_after_outage(cluster: Cluster, namespaces: dict[str, str]) -> None:
    def admitted() -> subprocess.CompletedProcess[str]:
        return apply(cluster, namespaces["enforce"], compliant_pod("after-outage"), "--dry-run=server")

    waiting.eventually("the webhook admitting again after the outage", lambda: admitted().returncode == 0, 20,
                       every=0.5, seen=lambda: admitted().stderr)


def test_in_place_resize_is_judged(cluster: Cluster, namespaces: dict[str, str]) -> None:
    ns = namespaces["enforce"]
    assert apply(cluster, ns, compliant_pod("resized")).returncode == 0

    def resize(cpu: str) -> Any:
        patch = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu},
                                                                       "limits": {"cpu": cpu}}}]}}
        return cluster.kubectl("patch", "pod", "resized", "-n", ns, "--subresource", "resize", "-p",
                               json.dumps(patch))

    refused = resize("1500m")
    assert refused.returncode != 0
    assert 'admission webhook "validate.qos-guard.io" denied the request' in refused.stderr
    assert "cpu-not-integer" in refused.stderr
    allowed = resize("3")
    assert allowed.returncode == 0, allowed.stderr
    cpu = cluster.get("pod", "resized", "-n", ns)["spec"]["containers"][0]["resources"]["limits"]["cpu"]
    assert cpu == "3"
