"""``policy.operatorObjects: true`` on a real kube-apiserver with KServe v0.20.0's own CRDs
(tests/fixtures/crds): ``qos-guard serve`` watches the cluster's ServingRuntimes, so an InferenceService whose
model sets no resources is judged with the runtime KServe will build its Pod from, at ``kubectl apply``: refused,
naming the template and container, while the runtime's container sets requests below limits; admitted once the
runtime is Guaranteed. The webhook starts before the CRDs exist (its lists answer 404: unread) and reads them once
they are installed. With ``operatorObjects: false`` the same InferenceService is admitted (its runtime unknown):
this test fails then (checked by hand when it was written)."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import waiting
from tests.binaries import binary
from tests.e2e.conftest import (
    CHART,
    RELEASE_NAMESPACE,
    Cluster,
    chart_objects,
    compliant_pod,
    control_plane,
    violating_pod,
)
from tests.serving import start_server
from tests.unit.kserve_cases import config
from webhook.core.config import parse_config

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "tests" / "fixtures" / "crds"
KSERVE_CRDS = ("serving.kserve.io_inferenceservices.yaml", "serving.kserve.io_servingruntimes.yaml",
               "serving.kserve.io_clusterservingruntimes.yaml")
CONFIG = {"policy": {"operatorObjects": True}}
WHOLE = {"cpuRequest": "1", "cpuLimit": "1", "memoryRequest": "1Gi", "memoryLimit": "1Gi"}  # an agent Guaranteed
REFUSED = 'spec.predictor (predictor, ServingRuntime sklearn-rt): container "kserve-container"'


def runtime(request_cpu: str) -> dict[str, Any]:
    """KServe's sklearn runtime, reduced: one container, its cpu request ``request_cpu`` against a limit of 2."""
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime", "metadata": {"name": "sklearn-rt"},
            "spec": {"supportedModelFormats": [{"name": "sklearn", "version": "1", "autoSelect": True}],
                     "protocolVersions": ["v1", "v2"],
                     "containers": [{"name": "kserve-container", "image": "kserve/sklearnserver:v0.20.0",
                                     "args": ["--model_name={{.Name}}"],
                                     "resources": {"requests": {"cpu": request_cpu, "memory": "2Gi"},
                                                   "limits": {"cpu": "2", "memory": "2Gi"}}}]}}


ISVC: dict[str, Any] = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "iris", "annotations": {"serving.kserve.io/deploymentMode": "RawDeployment"}},
        "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"}, "storageUri": "pvc://models/iris"}}}}


def install_kserve_crds(cluster: Cluster) -> None:
    """KServe v0.20.0's CRDs for InferenceServices and their runtimes, created and established."""
    for crd in KSERVE_CRDS:
        cluster.kubectl("create", "-f", str(CRDS / crd), check=True)
    for name in ("inferenceservices", "servingruntimes", "clusterservingruntimes"):
        cluster.kubectl("wait", "--for", "condition=Established", f"crd/{name}.serving.kserve.io",
                        "--timeout=60s", check=True)


def _apply(cluster: Cluster, ns: str, obj: dict[str, Any], dry: bool = True) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("apply", "-n", ns, "-f", "-", *(["--dry-run=server"] if dry else []), stdin=obj)


def test_an_inference_service_is_judged_with_the_cluster_s_runtime_at_apply_time(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("operator-objects")
    config_file = folder / "config.yaml"
    config_file.write_text(yaml.safe_dump(CONFIG))
    assert parse_config(CONFIG).policy.operator_objects
    with control_plane(folder / "cp") as cluster:
        cluster.namespace("qos-guard")
        ns = cluster.namespace("models")  # not judged yet: its Burstable runtime is created first
        certs = ["certs", "--service", "qos-guard", "--namespace", "qos-guard", "--extra-san", "127.0.0.1",
                 "--output-dir", str(folder / "pki"), "--days", "1"]
        assert cluster.qos_guard(*certs).returncode == 0
        server = start_server(folder / "serve", "--config", str(config_file), "--kubeconfig",
                              str(cluster.kubeconfig), cert_dir=folder / "pki", workers=1)
        try:
            url = f"https://127.0.0.1:{server.port}"
            proc = subprocess.run([binary("helm"), "template", "qos-guard", str(CHART), "--namespace", "qos-guard",
                                   "--set", f"webhook.url={url}", "--show-only", "templates/webhooks.yaml"],
                                  capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, proc.stderr
            hooks = [d for d in yaml.safe_load_all(proc.stdout) if d and d["kind"].endswith("Configuration")]
            cluster.kubectl("apply", "-f", "-", stdin=hooks, check=True)
            patched = cluster.qos_guard(*certs, "--renew", "--patch-webhooks", "qos-guard", "--kubeconfig",
                                        str(cluster.kubeconfig))
            assert patched.returncode == 0, patched.stderr
            probe = cluster.namespace("probe", "enforce")
            waiting.eventually("the webhook", lambda: _apply(cluster, probe, violating_pod("p")).returncode != 0,
                               30, every=0.5)
            assert _apply(cluster, probe, compliant_pod("p")).returncode == 0
            install_kserve_crds(cluster)  # the cache has found them not served (404) until now: it lists again
            shipped = config()  # KServe's own, where it runs: KServe refuses to work without it
            shipped["metadata"]["namespace"] = cluster.namespace("kserve")
            cluster.kubectl("apply", "-f", "-", stdin=shipped, check=True)
            created = _apply(cluster, ns, runtime("1"), dry=False)
            assert created.returncode == 0, created.stderr
            # check, told the cluster (no setting needed: its builders' way out is "run with --kubeconfig"), judges
            # the file with the cluster's runtime; without it the runtime is unknown and the object skipped
            manifest = folder / "isvc.yaml"
            placed = copy.deepcopy(ISVC)
            placed["metadata"]["namespace"] = ns
            manifest.write_text(yaml.safe_dump(placed))
            alone = cluster.qos_guard("check", str(manifest))
            assert alone.returncode == 2 and "run with --kubeconfig" in alone.stderr, alone.stderr
            told = cluster.qos_guard("check", str(manifest), "--kubeconfig", str(cluster.kubeconfig))
            assert told.returncode == 1 and f"requests-not-equal-limits: {REFUSED}" in told.stdout, told
            cluster.namespace("models", "enforce")
            said: list[str] = []

            def refused() -> bool:
                out = _apply(cluster, ns, copy.deepcopy(ISVC))
                said[:] = [out.stderr]
                return out.returncode != 0

            # the reflector lists a kind not served again every RETRY_MISSING (10 s)
            waiting.eventually("the runtime read and the InferenceService refused", refused, 60, every=0.5)
            assert 'admission webhook "validate.qos-guard.io" denied the request' in said[0], said[0]
            assert f"requests-not-equal-limits: {REFUSED}" in said[0], said[0]
            # the runtime made Guaranteed (a compliant ServingRuntime is itself admitted): the twin is admitted
            fixed = _apply(cluster, ns, runtime("2"), dry=False)
            assert fixed.returncode == 0, fixed.stderr
            waiting.eventually("the fixed runtime watched and the InferenceService admitted",
                               lambda: _apply(cluster, ns, copy.deepcopy(ISVC)).returncode == 0, 30, every=0.5)
            assert _apply(cluster, ns, copy.deepcopy(ISVC), dry=False).returncode == 0
        finally:
            server.stop()


def test_audit_reads_inferenceservice_config_from_the_namespace_kserve_runs_in(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """``audit --kserve-namespace`` (``policy.kserveNamespace``) GETs ``inferenceservice-config`` where KServe
    runs (its controller's POD_NAMESPACE): a multi-model InferenceService's agent is judged with opendatahub's
    (whole, equal resources: nothing found); without the flag, with kserve's (Burstable: found); with a
    namespace that holds none, not judged, the setting named (KServe refuses to work without its ConfigMap)."""
    folder = tmp_path_factory.mktemp("kserve-namespace")
    with control_plane(folder / "cp") as cluster:
        install_kserve_crds(cluster)
        for namespace, agent in (("opendatahub", WHOLE), ("kserve", {**WHOLE, "cpuRequest": "100m"})):
            cm = config(agent=agent)
            cm["metadata"]["namespace"] = cluster.namespace(namespace)
            cluster.kubectl("apply", "-f", "-", stdin=cm, check=True)
        ns = cluster.namespace("models", "enforce")
        mms: dict[str, Any] = copy.deepcopy(ISVC)
        del mms["spec"]["predictor"]["model"]["storageUri"]  # a multi-model predictor: KServe adds its agent
        for obj in (runtime("2"), mms):
            assert _apply(cluster, ns, obj, dry=False).returncode == 0

        def audit(*flags: str) -> subprocess.CompletedProcess[str]:
            return cluster.qos_guard("audit", "-n", ns, "--kubeconfig", str(cluster.kubeconfig), *flags)

        assert audit("--kserve-namespace", "opendatahub").returncode == 0, audit("--kserve-namespace", "opendatahub")
        found = audit()
        assert found.returncode == 1 and "agent" in found.stdout, found
        absent = audit("--kserve-namespace", "redhat-ods-applications")
        assert absent.returncode == 0 and "agent" not in absent.stdout, absent
        assert ("set policy.kserveNamespace: no redhat-ods-applications/inferenceservice-config (KServe's own)"
                in absent.stdout + absent.stderr), absent
        # as the chart's audit CronJob runs: its ServiceAccount and ClusterRole only, which GET the ConfigMap by
        # name (without that grant the GET is refused: not judged)
        cluster.namespace(RELEASE_NAMESPACE)
        account = [o for o in chart_objects("qos-guard", "--set", "audit.enabled=true", "--show-only",
                                            "templates/audit-cronjob.yaml") if o["kind"] != "CronJob"]
        cluster.kubectl("apply", "-f", "-", stdin=account, check=True)
        name = next(o["metadata"]["name"] for o in account if o["kind"] == "ServiceAccount")
        scheduled = cluster.kubeconfig_as(name, RELEASE_NAMESPACE, folder / "audit-kubeconfig")
        as_cronjob = cluster.qos_guard("audit", "-n", ns, "--kubeconfig", str(scheduled), "--kserve-namespace",
                                       "opendatahub")
        assert as_cronjob.returncode == 0, as_cronjob


def test_the_webhook_judges_with_inferenceservice_config_from_kserve_s_namespace_as_the_chart_grants(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """``policy.operatorObjects`` with ``kserveNamespace: opendatahub``, the webhook authenticated as the chart's
    ServiceAccount with only the chart's ``-operatorobjects`` RBAC (its ConfigMap rule names
    ``inferenceservice-config``: the list and watch by fieldSelector are authorized against it). A multi-model
    InferenceService (KServe injects its agent): while opendatahub holds no ConfigMap it is not judged, the warning
    naming the setting (KServe refuses to work without its ConfigMap, so that is not KServe's namespace; kserve's,
    which makes the agent whole, is any other ConfigMap); admitted, with no warning, once opendatahub's makes the
    agent whole; refused naming the agent once opendatahub's keeps it Burstable. Before the ConfigMap was watched
    the webhook judged on the shipped values whatever the cluster held: the last two steps fail on that code."""
    settings = {"policy": {"operatorObjects": True, "kserveNamespace": "opendatahub"}}
    folder = tmp_path_factory.mktemp("operator-objects-configmap")
    config_file = folder / "config.yaml"
    config_file.write_text(yaml.safe_dump(settings))
    with control_plane(folder / "cp") as cluster:
        install_kserve_crds(cluster)
        cluster.namespace(RELEASE_NAMESPACE)
        rbac = chart_objects("qos-guard", "--set", "config.policy.operatorObjects=true,"
                             "config.policy.kserveNamespace=opendatahub", "--show-only",
                             "templates/serviceaccount.yaml", "--show-only", "templates/rbac-operatorobjects.yaml")
        assert {o["kind"] for o in rbac} == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
        cluster.kubectl("apply", "-f", "-", stdin=rbac, check=True)
        account = cluster.kubeconfig_as("qos-guard", RELEASE_NAMESPACE, folder / "kubeconfig", duration="2h")
        kserve = config(agent=WHOLE)  # in kserve, not the namespace named: any other ConfigMap
        kserve["metadata"]["namespace"] = cluster.namespace("kserve")
        cluster.kubectl("apply", "-f", "-", stdin=kserve, check=True)
        ns = cluster.namespace("models")
        assert _apply(cluster, ns, runtime("2"), dry=False).returncode == 0
        mms: dict[str, Any] = copy.deepcopy(ISVC)
        del mms["spec"]["predictor"]["model"]["storageUri"]  # a multi-model predictor: KServe adds its agent
        certs = ["certs", "--service", "qos-guard", "--namespace", RELEASE_NAMESPACE, "--extra-san", "127.0.0.1",
                 "--output-dir", str(folder / "pki"), "--days", "1"]
        assert cluster.qos_guard(*certs).returncode == 0
        server = start_server(folder / "serve", "--config", str(config_file), "--kubeconfig", str(account),
                              cert_dir=folder / "pki", workers=1)
        try:
            url = f"https://127.0.0.1:{server.port}"
            hooks = [d for d in chart_objects("qos-guard", "--set", f"webhook.url={url}", "--show-only",
                                              "templates/webhooks.yaml") if d["kind"].endswith("Configuration")]
            cluster.kubectl("apply", "-f", "-", stdin=hooks, check=True)
            patched = cluster.qos_guard(*certs, "--renew", "--patch-webhooks", "qos-guard", "--kubeconfig",
                                        str(cluster.kubeconfig))
            assert patched.returncode == 0, patched.stderr
            cluster.namespace(ns, "enforce")
            said: list[str] = []

            def answered(refused: bool, warned: str = "") -> bool:
                out = _apply(cluster, ns, copy.deepcopy(mms))
                said[:] = [out.stderr]
                told = warned in out.stderr if warned else "not judged" not in out.stderr
                return (out.returncode != 0) is refused and told

            # listed (opendatahub does not exist yet: an empty list): not KServe's namespace, said, not judged
            absent = ("Warning: qos-guard: not judged: set policy.kserveNamespace: no "
                      "opendatahub/inferenceservice-config (KServe's own)")
            waiting.eventually("the ConfigMap listed absent and the InferenceService not judged",
                               lambda: answered(False, absent), 60, every=0.5)
            odh = config(agent=WHOLE)
            odh["metadata"]["namespace"] = cluster.namespace("opendatahub")
            cluster.kubectl("apply", "-f", "-", stdin=odh, check=True)
            waiting.eventually("opendatahub's ConfigMap watched and the InferenceService admitted",
                               lambda: answered(False), 30, every=0.5)
            assert "Warning" not in said[0], said[0]
            odh = config(agent={**WHOLE, "cpuRequest": "100m"})
            odh["metadata"]["namespace"] = "opendatahub"
            cluster.kubectl("apply", "-f", "-", stdin=odh, check=True)
            waiting.eventually("opendatahub's Burstable agent watched and the InferenceService refused",
                               lambda: answered(True), 30, every=0.5)
            assert 'admission webhook "validate.qos-guard.io" denied the request' in said[0], said[0]
            assert 'container "agent"' in said[0], said[0]
        finally:
            server.stop()
