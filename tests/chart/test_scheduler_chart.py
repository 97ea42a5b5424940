"""The chart's optional second scheduler: off by default; when on, kube-scheduler at the cluster's version (from
the Kubernetes project's registry unless set) with one profile whose extender is ``qos-guard extender`` beside it,
called on 127.0.0.1 over TLS with the scheduler's client certificate, leader election always on its own Lease, a
rollout that starts the standby first, probes on both containers, and RBAC as kube-scheduler's own plus what the
extender reads."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.chart.conftest import Render, by_kind, one
from tests.chart.test_chart import KUBE_SCHEMA, NAMESPACE

IMAGE = "--set=scheduler.image.registry=example.invalid"


def scheduler_objects(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "scheduler"]


def test_off_by_default(render: Render) -> None:
    assert not scheduler_objects(render(namespace=NAMESPACE))


def test_the_image_is_kube_scheduler_at_the_clusters_version(render: Render) -> None:
    objects = scheduler_objects(render("--set", "scheduler.enabled=true,scheduler.image.registry=registry.invalid",
                                       "--kube-version", "1.35.2", namespace=NAMESPACE))
    spec = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert spec["containers"][0]["image"] == "registry.invalid/kube-scheduler:v1.35.2"


@pytest.mark.parametrize(("version", "tag"), [("1.36.3", "v1.36.3"), ("1.33.4-eks-a737599", "v1.33.4"),
                                              ("1.35.2-gke.1031000", "v1.35.2"), ("1.37.2+k3s1", "v1.37.2")])
def test_the_image_pulls_as_rendered_at_the_control_planes_minor(render: Render, version: str, tag: str) -> None:
    """By default the image is where upstream publishes kube-scheduler (an empty registry pulled from the
    runtime's default, which has none), tagged with the control plane's version less a vendor's suffix (upstream
    publishes no ``-eks-`` tags)."""
    objects = scheduler_objects(render("--set", "scheduler.enabled=true", "--kube-version", version,
                                       namespace=NAMESPACE))
    spec = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert spec["containers"][0]["image"] == f"registry.k8s.io/kube-scheduler:{tag}"


@pytest.fixture(scope="module")
def on(render: Render) -> list[dict[str, Any]]:
    return scheduler_objects(render("--set", "scheduler.enabled=true", IMAGE, "--kube-version", "1.36.3",
                                    namespace=NAMESPACE))


def config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(one(objects, "ConfigMap")["data"]["config.yaml"])
    return loaded


def test_the_profile_and_its_extender(on: list[dict[str, Any]]) -> None:
    c = config(on)
    assert c["apiVersion"] == "kubescheduler.config.k8s.io/v1" and c["kind"] == "KubeSchedulerConfiguration"
    assert c["profiles"] == [{"schedulerName": "qos-guard-numa"}]
    (ext,) = c["extenders"]
    # Changed deliberately: HTTPS with the scheduler's client certificate (was plain HTTP on loopback).
    assert ext == {"urlPrefix": "https://127.0.0.1:8444", "filterVerb": "filter", "prioritizeVerb": "prioritize",
                   "bindVerb": "bind", "weight": 5, "nodeCacheCapable": True, "enableHTTPS": True, "httpTimeout": "5s",
                   "tlsConfig": {"certFile": "/etc/qos-guard-scheduler-tls/client.crt",
                                 "keyFile": "/etc/qos-guard-scheduler-tls/client.key",
                                 "caFile": "/etc/qos-guard-scheduler-tls/ca.crt"},
                   "ignorable": False}
    # Changed deliberately: leader election with one replica too (was only with more than one).
    assert c["leaderElection"] == {"leaderElect": True, "resourceLock": "leases", "resourceName": "qos-guard-numa",
                                   "resourceNamespace": NAMESPACE}
    spec = one(on, "Deployment")["spec"]["template"]["spec"]
    scheduler, extender = spec["containers"]
    assert scheduler["image"] == "example.invalid/kube-scheduler:v1.36.3"  # the cluster's version
    assert scheduler["command"] == ["kube-scheduler"]
    assert "--config=/etc/qos-guard-scheduler/config.yaml" in scheduler["args"]
    assert extender["args"] == ["extender", "--bind=0.0.0.0:8444", "--cert-file=/etc/qos-guard-extender/tls.crt",
                                "--key-file=/etc/qos-guard-extender/tls.key",
                                "--client-ca-file=/etc/qos-guard-extender/ca.crt", "--reservation-timeout=120"]
    assert spec["serviceAccountName"] == "qos-guard-scheduler"
    for c in spec["containers"]:
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_the_rollout_never_runs_two_active_schedulers(on: list[dict[str, Any]]) -> None:
    """The new Pod starts beside the old one and waits on the Lease; the old one, stopped, releases it."""
    deployment = one(on, "Deployment")
    assert deployment["spec"]["strategy"] == {"type": "RollingUpdate",
                                              "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert config(on)["leaderElection"]["leaderElect"] is True


def test_both_containers_have_probes_that_need_no_client_certificate(on: list[dict[str, Any]]) -> None:
    scheduler, extender = one(on, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert scheduler["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert scheduler["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert extender[probe]["httpGet"] == {"path": path, "port": 8444, "scheme": "HTTPS"}
    assert extender["ports"] == [{"name": "extender", "containerPort": 8444}]


def test_both_containers_get_an_expiring_api_token_also_where_automounting_is_off(
        on: list[dict[str, Any]]) -> None:
    """kube-scheduler and the extender read the API in cluster: their token is mounted by the chart, not left to
    the ServiceAccount admission plugin (off in some clusters; the node tier's API server runs without it)."""
    spec = one(on, "Deployment")["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    volumes = {v["name"]: v for v in spec["volumes"]}
    sources = volumes["api-token"]["projected"]["sources"]
    assert sources[0]["serviceAccountToken"] == {"path": "token", "expirationSeconds": 3607}
    assert sources[1]["configMap"] == {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    assert sources[2]["downwardAPI"]["items"][0]["path"] == "namespace"
    for container in spec["containers"]:
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        token = {"name": "api-token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}
        assert mounts["api-token"] == token, container["name"]


def test_the_certificates_are_generated_once_or_taken(on: list[dict[str, Any]], render: Render) -> None:
    """The extender's serving pair is valid for 127.0.0.1 (where the scheduler calls it) and the scheduler's
    client pair is signed by the same CA, which the extender trusts for clients."""
    import base64

    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    (secret,) = [o for o in by_kind(on, "Secret")]
    assert secret["metadata"]["name"] == "qos-guard-scheduler-tls"
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert set(data) == {"ca.crt", "tls.crt", "tls.key", "client.crt", "client.key"}
    ca = x509.load_pem_x509_certificate(data["ca.crt"])
    server = x509.load_pem_x509_certificate(data["tls.crt"])
    client = x509.load_pem_x509_certificate(data["client.crt"])
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    for cert in (server, client):
        assert cert.issuer == ca.subject
        cert.verify_directly_issued_by(ca)
    usage = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usage
    volumes = {v["name"]: v for v in one(on, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["client-tls"]["secret"]["secretName"] == volumes["serving-tls"]["secret"]["secretName"] == \
        "qos-guard-scheduler-tls"
    own = scheduler_objects(render("--set", "scheduler.enabled=true,scheduler.extender.existingSecret=mine", IMAGE,
                                   namespace=NAMESPACE))
    assert not by_kind(own, "Secret")
    volumes = {v["name"]: v for v in one(own, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["client-tls"]["secret"]["secretName"] == volumes["serving-tls"]["secret"]["secretName"] == "mine"


def test_two_replicas_elect_a_leader(render: Render) -> None:
    objects = scheduler_objects(render("--set", "scheduler.enabled=true,scheduler.replicas=2", IMAGE,
                                       "--set", "scheduler.extender.ignorable=true", namespace=NAMESPACE))
    c = config(objects)
    assert c["leaderElection"]["leaderElect"] is True
    assert c["extenders"][0]["ignorable"] is True
    assert one(objects, "Deployment")["spec"]["replicas"] == 2


def test_rbac_is_kube_schedulers_own_plus_what_the_extender_reads(on: list[dict[str, Any]]) -> None:
    bound = {b["roleRef"]["name"]: b for b in by_kind(on, "ClusterRoleBinding")}
    assert set(bound) == {"system:kube-scheduler", "system:volume-scheduler", "qos-guard-scheduler"}
    for b in bound.values():
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "qos-guard-scheduler", "namespace": NAMESPACE}]
    (role,) = by_kind(on, "ClusterRole")
    assert role["rules"] == [
        {"apiGroups": ["topology.node.k8s.io"], "resources": ["noderesourcetopologies"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    ]
    roles = {r["metadata"]["name"]: r for r in by_kind(on, "Role")}
    lease = roles["qos-guard-scheduler-leader-election"]
    assert lease["metadata"]["namespace"] == NAMESPACE
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["qos-guard-numa"],
            "verbs": ["get", "update"]} in lease["rules"]
    reader = next(b for b in by_kind(on, "RoleBinding") if b["roleRef"]["name"] ==
                  "extension-apiserver-authentication-reader")
    assert reader["metadata"]["namespace"] == "kube-system"


def test_objects_valid_against_kubernetes_openapi(on: list[dict[str, Any]]) -> None:
    for obj in on:
        kubernetes_validate.validate(obj, KUBE_SCHEMA, strict=True)
    assert len(on) == 11  # the certificates' Secret added
