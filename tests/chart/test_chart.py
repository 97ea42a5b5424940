"""The Helm chart, rendered by a real ``helm`` and checked against the Kubernetes OpenAPI schemas."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from tests.chart.conftest import CHART, ROOT, Render, by_kind, one, run_helm
from tests.serving import start_server
from webhook import __version__
from webhook.core.claims import CLAIM_KINDS
from webhook.core.config import parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.workloads import KINDS

NAMESPACE = "platform"  # not the chart's name, so the release namespace is told apart from defaults
KUBE_SCHEMA = "1.35.0"
WEBHOOK_PATHS = {
    "validate.qos-guard.io": ("/validate", "enforce"),
    "validate-mutated.qos-guard.io": ("/validate/mutate", "mutate"),
    "warn.qos-guard.io": ("/warn", "warn"),
    "mutate.qos-guard.io": ("/mutate", "mutate"),
}
# The chart's webhook rules and audit RBAC are checked against the engine's one table of judged kinds.
WORKLOADS = {(k.group, k.plural) for k in KINDS.values() if k.kind != "Pod"}
CLAIMS = {(k.group, k.plural) for k in CLAIM_KINDS.values()}


@pytest.fixture(scope="module")
def default(render: Render) -> list[dict[str, Any]]:
    return render(namespace=NAMESPACE)


@pytest.fixture(scope="module")
def cert_manager(render: Render) -> list[dict[str, Any]]:
    return render("--set", "certManager.enabled=true", namespace=NAMESPACE)


def webhooks(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    hooks = {}
    for conf in by_kind(objects, "MutatingWebhookConfiguration") + by_kind(objects, "ValidatingWebhookConfiguration"):
        for hook in conf["webhooks"]:
            assert hook["name"] not in hooks
            hooks[hook["name"]] = hook | {"_kind": conf["kind"]}
    return hooks


VERSIONS = {(k.group, k.plural): list(k.versions) for k in KINDS.values()} | {("", "namespaces"): ["v1"]} \
    | {(k.group, k.plural): [k.api_version.rpartition("/")[2]] for k in CLAIM_KINDS.values()}


def rules_of(hook: dict[str, Any],
             declared: dict[tuple[str, str], list[str]] | None = None) -> set[tuple[str, str, str]]:
    """(group, resource, operation) triples a webhook matches, each at the versions ``KINDS`` (or ``declared``)
    names for it."""
    out = set()
    versions = VERSIONS | (declared or {})
    for rule in hook["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert rule["apiVersions"] == versions[(group, resource.split("/")[0])], (group, resource)
                for op in rule["operations"]:
                    out.add((group, resource, op))
    return out


@pytest.mark.parametrize("values", [[], ["--set", "certManager.enabled=true"],
                                    ["--set", "rbac.audit=true,rbac.patchWebhooks=true,serviceMonitor.enabled=true"]])
def test_helm_lint_strict(helm: str, values: list[str]) -> None:
    proc = run_helm(helm, "lint", "--strict", str(CHART), *values)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


def test_default_objects(default: list[dict[str, Any]]) -> None:
    kinds = sorted(o["kind"] for o in default)
    assert kinds == ["ConfigMap", "Deployment", "MutatingWebhookConfiguration", "Pod", "PodDisruptionBudget",
                     "Secret", "Service", "ServiceAccount", "ValidatingWebhookConfiguration"]
    (test_pod,) = by_kind(default, "Pod")  # the `helm test` hook, and nothing else outside the Deployment
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    selector = one(default, "Service")["spec"]["selector"]
    assert not selector.items() <= test_pod["metadata"]["labels"].items()  # never one of the webhook's endpoints
    for obj in default:
        if obj["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"].startswith("qos-guard")


@pytest.mark.parametrize("values", [[], ["--set", "certManager.enabled=true"],
                                    ["--set", "rbac.audit=true,rbac.patchWebhooks=true"],
                                    ["--set", "webhook.url=https://127.0.0.1:9443,replicaCount=1"]])
def test_objects_valid_against_kubernetes_openapi(render: Render, values: list[str]) -> None:
    objects = render(*values, namespace=NAMESPACE)
    checked = 0
    for obj in objects:
        if obj["apiVersion"].startswith("cert-manager.io/"):
            continue  # a CRD: not in the Kubernetes schemas (asserted on in test_cert_manager)
        kubernetes_validate.validate(obj, KUBE_SCHEMA, strict=True)  # raises ValidationError with the path
        checked += 1
    assert checked >= 7


def test_validator_would_catch_a_broken_object(default: list[dict[str, Any]]) -> None:
    broken = one(default, "ValidatingWebhookConfiguration")
    broken = yaml.safe_load(yaml.safe_dump(broken))
    broken["webhooks"][0]["sideEffects"] = 7
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBE_SCHEMA, strict=True)


def test_webhook_names_paths_and_selectors(default: list[dict[str, Any]]) -> None:
    hooks = webhooks(default)
    assert set(hooks) == set(WEBHOOK_PATHS) | {"namespaces.qos-guard.io"}
    for name, (path, mode) in WEBHOOK_PATHS.items():
        hook = hooks[name]
        assert hook["clientConfig"]["service"] == {"name": "qos-guard", "namespace": NAMESPACE, "path": path,
                                                   "port": 443}
        exprs = hook["namespaceSelector"]["matchExpressions"]
        assert {"key": "qos-guard.io/mode", "operator": "In", "values": [mode]} in exprs
        excluded = [e for e in exprs if e["key"] == "kubernetes.io/metadata.name"]
        assert excluded == [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                             "values": ["kube-system", NAMESPACE]}]
        assert "objectSelector" not in hook
    assert hooks["mutate.qos-guard.io"]["_kind"] == "MutatingWebhookConfiguration"
    assert hooks["mutate.qos-guard.io"]["reinvocationPolicy"] == "IfNeeded"


def test_common_webhook_settings_and_failure_policies(default: list[dict[str, Any]]) -> None:
    hooks = webhooks(default)
    for hook in hooks.values():
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["matchPolicy"] == "Equivalent"
        assert hook["timeoutSeconds"] == 5
    policies = {name: hook["failurePolicy"] for name, hook in hooks.items()}
    assert policies == {"validate.qos-guard.io": "Fail", "validate-mutated.qos-guard.io": "Fail",
                        "mutate.qos-guard.io": "Fail", "warn.qos-guard.io": "Ignore",
                        "namespaces.qos-guard.io": "Ignore"}


def test_failure_policy_and_timeout_values(render: Render) -> None:
    hooks = webhooks(render("--set", "webhook.failurePolicy.validate=Ignore,webhook.failurePolicy.warn=Fail",
                            "--set", "webhook.timeoutSeconds=10,webhook.excludeNamespaces={monitoring,ci}"))
    assert hooks["validate.qos-guard.io"]["failurePolicy"] == "Ignore"
    assert hooks["warn.qos-guard.io"]["failurePolicy"] == "Fail"
    assert hooks["mutate.qos-guard.io"]["failurePolicy"] == "Fail"
    for hook in hooks.values():
        assert hook["timeoutSeconds"] == 10
        excluded = next(e for e in hook["namespaceSelector"]["matchExpressions"]
                        if e["key"] == "kubernetes.io/metadata.name")
        assert excluded["values"] == ["kube-system", "qos-guard", "monitoring", "ci"]


def test_rules_cover_pods_resize_and_every_workload(default: list[dict[str, Any]]) -> None:
    hooks = webhooks(default)
    assert ("", "pods") in {(k.group, k.plural) for k in KINDS.values()}
    expected = {("", "pods", "CREATE"), ("", "pods/resize", "UPDATE")}
    expected |= {(g, r, op) for g, r in WORKLOADS for op in ("CREATE", "UPDATE")}
    expected |= {(g, r, "CREATE") for g, r in CLAIMS}
    for name in ("validate.qos-guard.io", "validate-mutated.qos-guard.io", "warn.qos-guard.io"):
        assert rules_of(hooks[name]) == expected, name
        assert {r["scope"] for r in hooks[name]["rules"]} == {"Namespaced"}
    # Templates are never patched (docs/contract.md#modes-per-namespace-by-label): only Pods reach /mutate.
    assert rules_of(hooks["mutate.qos-guard.io"]) == {("", "pods", "CREATE")}
    ns_hook = hooks["namespaces.qos-guard.io"]
    assert rules_of(ns_hook) == {("", "namespaces", "CREATE"), ("", "namespaces", "UPDATE")}
    assert ns_hook["clientConfig"]["service"]["path"] == "/validate-namespace"
    assert ns_hook["objectSelector"] == {"matchExpressions": [{"key": "qos-guard.io/mode", "operator": "Exists"}]}
    assert ns_hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", NAMESPACE]


def _public_key_verifies(ca: x509.Certificate, cert: x509.Certificate) -> None:
    key = ca.public_key()
    if isinstance(key, rsa.RSAPublicKey):
        assert cert.signature_hash_algorithm is not None
        key.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm)
    else:
        assert isinstance(key, ec.EllipticCurvePublicKey) and cert.signature_hash_algorithm is not None
        key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))


def test_generated_certificate_is_signed_by_the_ca_bundle(default: list[dict[str, Any]]) -> None:
    secret = one(default, "Secret")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["name"] == "qos-guard-tls"
    bundles = {hook["clientConfig"]["caBundle"] for hook in webhooks(default).values()}
    assert bundles == {secret["data"]["ca.crt"]}
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.issuer == ca.subject
    _public_key_verifies(ca, cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert set(sans) == {"qos-guard", f"qos-guard.{NAMESPACE}", f"qos-guard.{NAMESPACE}.svc",
                         f"qos-guard.{NAMESPACE}.svc.cluster.local"}
    assert b"PRIVATE KEY" in base64.b64decode(secret["data"]["tls.key"])


def test_cert_manager(cert_manager: list[dict[str, Any]]) -> None:
    assert not by_kind(cert_manager, "Secret")
    certificates = {c["metadata"]["name"]: c for c in by_kind(cert_manager, "Certificate")}
    serving = certificates["qos-guard"]
    assert serving["apiVersion"] == "cert-manager.io/v1"
    assert serving["spec"]["secretName"] == "qos-guard-tls"
    assert set(serving["spec"]["dnsNames"]) == {"qos-guard", f"qos-guard.{NAMESPACE}", f"qos-guard.{NAMESPACE}.svc",
                                                f"qos-guard.{NAMESPACE}.svc.cluster.local"}
    assert serving["spec"]["issuerRef"] == {"name": "qos-guard-ca", "kind": "Issuer"}
    assert certificates["qos-guard-ca"]["spec"]["isCA"] is True
    issuers = {i["metadata"]["name"]: i["spec"] for i in by_kind(cert_manager, "Issuer")}
    assert issuers == {"qos-guard-selfsigned": {"selfSigned": {}},
                       "qos-guard-ca": {"ca": {"secretName": "qos-guard-ca"}}}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        conf = one(cert_manager, kind)
        assert conf["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/qos-guard"}
        assert all("caBundle" not in hook["clientConfig"] for hook in conf["webhooks"])
    volumes = one(cert_manager, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "qos-guard-tls"}} in volumes


def test_cert_manager_with_an_existing_issuer(render: Render) -> None:
    objects = render("--set", "certManager.enabled=true,certManager.issuerRef.name=corp-ca",
                     "--set", "certManager.issuerRef.kind=ClusterIssuer")
    assert not by_kind(objects, "Issuer")
    assert one(objects, "Certificate")["spec"]["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer"}


def test_deployment_security_and_probes(default: list[dict[str, Any]]) -> None:
    deploy = one(default, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["replicas"] == 2
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    ctx = container["securityContext"]
    assert ctx["readOnlyRootFilesystem"] is True
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert "add" not in ctx["capabilities"]
    assert not any(c.get("securityContext", {}).get("privileged") for c in pod["containers"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"https": 8443, "metrics": 8080}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    args = container["args"]
    assert args[0] == "serve"
    assert "--bind=0.0.0.0:8443" in args and "--metrics-bind=0.0.0.0:8080" in args
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in container["env"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/tmp" in mounts  # the only writable path under a read-only root
    for flag, mount in (("--cert-file", "/etc/qos-guard/tls"), ("--config", "/etc/qos-guard/config")):
        value = next(a.split("=", 1)[1] for a in args if a.startswith(flag + "="))
        assert value.startswith(mount + "/")


def test_webhook_is_guaranteed_in_the_shared_pool(default: list[dict[str, Any]], render: Render) -> None:
    """The webhook is Guaranteed (requests == limits) with a fractional cpu by default: it needs no exclusive
    CPU, so qos-guard's engine finds exactly that and nothing else (its namespace is never judged); with a
    whole cpu it follows every rule."""
    deploy = one(default, "Deployment")
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["requests"] == container["resources"]["limits"] == {"cpu": "250m",
                                                                                      "memory": "256Mi"}
    verdict = evaluate(deploy, parse_config(None), Mode.ENFORCE)
    assert {v.rule for _, v in verdict.violations} == {"cpu-not-integer"}
    whole = one(render("--set", "resources.requests.cpu=1,resources.limits.cpu=1"), "Deployment")
    assert evaluate(whole, parse_config(None), Mode.ENFORCE).violations == []


def test_spread_and_disruption_budget_select_the_pods(default: list[dict[str, Any]]) -> None:
    deploy = one(default, "Deployment")
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    selector = deploy["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()
    (spread,) = deploy["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["labelSelector"]["matchLabels"] == selector
    pdb = one(default, "PodDisruptionBudget")
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": selector}}
    service = one(default, "Service")
    assert service["spec"]["selector"] == selector
    assert {p["port"]: p["targetPort"] for p in service["spec"]["ports"]} == {443: "https", 8080: "metrics"}


def test_single_replica_has_no_disruption_budget(render: Render) -> None:
    assert not by_kind(render("--set", "replicaCount=1"), "PodDisruptionBudget")


@pytest.mark.parametrize(("values", "spec"), [
    ([], {"minAvailable": 1}),
    (["podDisruptionBudget.maxUnavailable=1"], {"maxUnavailable": 1}),
    (["podDisruptionBudget.maxUnavailable=50%"], {"maxUnavailable": "50%"}),
    (["podDisruptionBudget.minAvailable=2"], {"minAvailable": 2}),
    (["podDisruptionBudget.minAvailable=null", "podDisruptionBudget.maxUnavailable=1"], {"maxUnavailable": 1}),
])
def test_pdb_max_unavailable_is_honoured_without_nulling_min_available(render: Render, values: list[str],
                                                                       spec: dict[str, Any]) -> None:
    """`podDisruptionBudget.maxUnavailable=1` was ignored unless minAvailable was set to null as well."""
    args = [a for v in values for a in ("--set", v)]
    pdb = one(render("--set", "replicaCount=3", *args), "PodDisruptionBudget")["spec"]
    assert {k: v for k, v in pdb.items() if k != "selector"} == spec



def test_config_value_is_what_the_server_reads(render: Render) -> None:
    objects = render("--set", "config.policy.smtAlignment=2", "--set-json",
                     'config.exemptions.namespaces=["batch"]', "--set", "config.mutation.cpuRounding=up")
    raw = yaml.safe_load(one(objects, "ConfigMap")["data"]["config.yaml"])
    config = parse_config(raw)
    assert config.policy.smt_alignment == 2
    assert config.exemptions.namespaces == frozenset({"batch"})
    assert config.mutation.cpu_rounding == "up"
    assert parse_config(yaml.safe_load(one(render(), "ConfigMap")["data"]["config.yaml"])) == parse_config(None)
    # A new policy rolls the Pods; the checksum changes with it.
    before = one(render(), "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    after = one(objects, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    assert before != after


@pytest.mark.parametrize(("values", "named"), [
    (["--set", "resources.limits.cpu=0m"], "at '/resources/limits/cpu'"),
    (["--set", "resources.requests.cpu=-1"], "at '/resources/requests/cpu'"),
    (["--set", "resources.limits.cpu=0"], "at '/resources/limits/cpu'"),
    (["--set", "image.digest=latest"], "at '/image/digest'"),
    (["--set", "service.type=ExternalName"], "at '/service/type'"),
    (["--set", "networkPolicy.apiServerCIDRs={10.0.0.1}"], "at '/networkPolicy/apiServerCIDRs/0'"),
    (["--set", "webhook.failurePolicy.validate=Maybe"], "at '/webhook/failurePolicy/validate'"),
    (["--set", "webhook.timeoutSeconds=31"], "at '/webhook/timeoutSeconds'"),
    (["--set", "replicaCount=0"], "at '/replicaCount'"),
    (["--set", "config.policy.podLevelResources=sometimes"], "at '/config/policy/podLevelResources'"),
    (["--set", "config.policy.bogus=true"], "at '/config/policy': additional properties 'bogus' not allowed"),
    (["--set", "config.mutation.cpuRounding=down"], "at '/config/mutation/cpuRounding'"),
    (["--set", "certManager.enabled=yes"], "at '/certManager/enabled'"),
    (["--set", "webhook.url=http://insecure.example"], "at '/webhook/url'"),
    (["--set", "replicas=3"], "additional properties 'replicas' not allowed"),
])
def test_schema_refuses_bad_values(helm: str, values: list[str], named: str) -> None:
    proc = run_helm(helm, "template", "qos-guard", str(CHART), *values)
    assert proc.returncode != 0
    assert "values don't meet the specifications of the schema" in proc.stderr
    assert named in proc.stderr, proc.stderr  # helm names the JSON path of the offending value


def test_rbac_is_off_by_default_and_least_privilege_when_on(default: list[dict[str, Any]], render: Render) -> None:
    assert not by_kind(default, "ClusterRole") and not by_kind(default, "Role")
    assert one(default, "ServiceAccount")["automountServiceAccountToken"] is False
    audit = render("--set", "rbac.audit=true", namespace=NAMESPACE)
    (role,) = by_kind(audit, "ClusterRole")
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs == {"get", "list"}
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == WORKLOADS | CLAIMS | {("", "pods"), ("", "namespaces")}
    assert one(audit, "Deployment")["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    binding = one(audit, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "qos-guard", "namespace": NAMESPACE}]
    patch = render("--set", "rbac.patchWebhooks=true", namespace=NAMESPACE)
    (role,) = by_kind(patch, "ClusterRole")
    assert role["rules"] == [{"apiGroups": ["admissionregistration.k8s.io"],
                              "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
                              "resourceNames": ["qos-guard"], "verbs": ["get", "patch"]}]
    both = render("--set", "rbac.audit=true,rbac.patchWebhooks=true")
    assert len(by_kind(both, "ClusterRole")) == 2 and len(by_kind(both, "ClusterRoleBinding")) == 2
    for obj in both:
        if obj["kind"].startswith("ClusterRole"):
            assert "*" not in yaml.safe_dump(obj)


def test_url_client_config_for_a_webhook_outside_the_cluster(render: Render) -> None:
    hooks = webhooks(render("--set", "webhook.url=https://127.0.0.1:9443/"))
    assert hooks["validate-mutated.qos-guard.io"]["clientConfig"]["url"] == "https://127.0.0.1:9443/validate/mutate"
    assert all("service" not in h["clientConfig"] and h["clientConfig"]["caBundle"] for h in hooks.values())


def test_release_name_prefixes_everything(render: Render) -> None:
    objects = render(release="prod", namespace="ops")
    assert {o["metadata"]["name"] for o in objects} == {"prod-qos-guard", "prod-qos-guard-tls",
                                                        "prod-qos-guard-test-answers"}
    hook = webhooks(objects)["validate.qos-guard.io"]
    assert hook["clientConfig"]["service"]["name"] == "prod-qos-guard"


def test_chart_readme_values_table_is_generated_and_current() -> None:
    """helm-docs format from the `# --` comments; every value has a row (a documented mapping covers its keys)."""
    check = subprocess.run([sys.executable, str(ROOT / "hack" / "chart_readme.py"), "--check"], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stderr
    readme = (CHART / "README.md").read_text()
    documented = re.findall(r"^\| ([A-Za-z0-9_.]+) \| \w+ \| `.*` \| (.*) \|$", readme, re.M)
    assert all(description.strip() for _, description in documented), "a value without a description"
    keys = {key for key, _ in documented}
    assert {"image.digest", "resources", "networkPolicy.apiServerCIDRs", "existingSecret"} <= keys


def test_requests_must_equal_limits(helm: str) -> None:
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "--set", "resources.limits.cpu=1")
    assert proc.returncode != 0
    assert "resources.requests.cpu (250m) must equal resources.limits.cpu (1)" in proc.stderr


def test_kubernetes_shaped_values(render: Render) -> None:
    objects = render("--set", "podSecurityContext.runAsUser=null,podSecurityContext.runAsGroup=null,"
                     "podSecurityContext.fsGroup=null", "--set", "image.registry=registry.example:5000", "--set",
                     "image.digest=sha256:" + "a" * 64, "--set-json", 'commonLabels={"team":"platform"}',
                     "--set-json", 'server.extraArgs=["--connections=2000"]', "--set-json",
                     'server.extraEnv=[{"name":"X","value":"1"}]', "--set", "service.type=NodePort",
                     "--set", "service.port=8443", "--set-json", 'service.annotations={"a":"b"}',
                     "--set", "revisionHistoryLimit=3", "--set", "podDisruptionBudget.minAvailable=null",
                     "--set", "podDisruptionBudget.maxUnavailable=1", "--set", "serviceMonitor.enabled=true",
                     "--set", "serviceMonitor.namespace=monitoring", "--set-json",
                     'serviceMonitor.labels={"release":"prometheus"}', "--set-json",
                     'webhook.objectSelector.matchExpressions=[{"key":"skip","operator":"DoesNotExist"}]',
                     "--set-json", 'webhook.namespaceSelector.matchExpressions=[{"key":"env","operator":"In",'
                     '"values":["prod"]}]', namespace=NAMESPACE)
    deploy = one(objects, "Deployment")
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example:5000/qos-guard/qos-guard@sha256:" + "a" * 64
    assert "--connections=2000" in container["args"] and {"name": "X", "value": "1"} in container["env"]
    # A platform that assigns the user (OpenShift's restricted SCC) gets no fixed uid.
    assert deploy["spec"]["template"]["spec"]["securityContext"] == {"runAsNonRoot": True,
                                                                   "seccompProfile": {"type": "RuntimeDefault"}}
    assert deploy["spec"]["revisionHistoryLimit"] == 3
    assert all(obj["metadata"]["labels"]["team"] == "platform" for obj in objects if "labels" in obj["metadata"])
    service = one(objects, "Service")
    assert service["spec"]["type"] == "NodePort" and service["metadata"]["annotations"] == {"a": "b"}
    assert one(objects, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    monitor = one(objects, "ServiceMonitor")
    assert monitor["metadata"]["namespace"] == "monitoring" and monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    for name, hook in webhooks(objects).items():
        if name == "namespaces.qos-guard.io":
            continue
        assert hook["clientConfig"]["service"]["port"] == 8443
        assert hook["objectSelector"] == {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}
        assert hook["namespaceSelector"]["matchExpressions"][-1] == {"key": "env", "operator": "In",
                                                                     "values": ["prod"]}


def test_network_policy_admits_only_the_api_server_and_the_scrapers(render: Render) -> None:
    assert not by_kind(render(), "NetworkPolicy")
    peers = '[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]'
    policy = one(render("--set", "networkPolicy.enabled=true", "--set-json",
                        'networkPolicy.apiServerCIDRs=["10.0.0.1/32"]', "--set-json",
                        f"networkPolicy.metricsFrom={peers}"), "NetworkPolicy")
    tls, metrics = policy["spec"]["ingress"]
    assert tls == {"ports": [{"port": "https", "protocol": "TCP"}], "from": [{"ipBlock": {"cidr": "10.0.0.1/32"}}]}
    assert metrics["ports"] == [{"port": "metrics", "protocol": "TCP"}] and metrics["from"] == json.loads(peers)
    assert policy["spec"]["policyTypes"] == ["Ingress"]


def test_existing_secret_is_used_and_nothing_generated(render: Render) -> None:
    # helm template cannot read the Secret: its CA is given (without it the render is refused, test_second_walk.py)
    objects = render("--set", "existingSecret=my-tls", "--set", "existingSecretCABundle=QUJD")
    assert not by_kind(objects, "Secret")
    volumes = one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "tls", "secret": {"secretName": "my-tls"}} in volumes


def test_chart_version_is_the_package_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__
    assert chart["home"] and chart["sources"] and chart["maintainers"] and "qos" in chart["keywords"]


def test_helm_test_pod_checks_a_real_server(render: Render, tmp_path: Path) -> None:
    """The `helm test` Pod's script, run against a real `qos-guard serve` over TLS (the Service name replaced by
    localhost, which the local certificate names): it passes, and fails against a server that allows all."""
    pod = next(o for o in render() if o["kind"] == "Pod" and o["metadata"]["annotations"]["helm.sh/hook"] == "test")
    (container,) = pod["spec"]["containers"]
    assert container["command"] == ["python", "-c"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"WEBHOOK_HOST": "qos-guard.qos-guard.svc", "WEBHOOK_PORT": "443",
                   "WEBHOOK_CA": "/etc/qos-guard/tls/ca.crt"}
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text("policy:\n  fractionalCPUContainers: [app]\n")  # the script's Pod is then admitted
    for folder, extra, passes in ((tmp_path / "strict", (), True), (tmp_path / "lenient", ("--config", str(lenient)),
                                                                     False)):
        folder.mkdir()
        server = start_server(folder, *extra)
        try:
            run = subprocess.run([sys.executable, "-c", container["args"][0]], capture_output=True, text=True,
                                 timeout=60, env={**os.environ, "WEBHOOK_HOST": "localhost",
                                                  "WEBHOOK_PORT": server.url.rsplit(":", 1)[1],
                                                  "WEBHOOK_CA": str(server.ca)})
        finally:
            server.stop()
        assert (run.returncode == 0) is passes, run.stdout + run.stderr
        assert ("cpu-not-integer" in run.stdout) is passes


def _every_switch() -> list[str]:
    """Every RBAC switch and every ``X.enabled`` of values.yaml, on (new ones are covered as they come)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    on = [f"rbac.{key}=true" for key, value in values["rbac"].items() if isinstance(value, bool)]
    return on + [f"{key}.enabled=true" for key, value in values.items()
                 if isinstance(value, dict) and isinstance(value.get("enabled"), bool)]


def test_no_role_of_the_chart_reads_kubelets(render: Render) -> None:
    """Reading kubelet's configuration through the API server (``qos-guard nodes``) is the operator's, with the
    README's ClusterRole: whatever is switched on, no ServiceAccount of the chart may reach a kubelet's API through
    the API server (nodes/proxy also reaches exec and logs of every Pod on the node). The one kubelet read of the
    chart is the agent's of its own kubelet's configz (agent.publishTopology): nodes/configz, get, nothing else."""
    switches = [*_every_switch(), "agent.publishTopology=true"]
    assert "rbac.audit=true" in switches and "audit.enabled=true" in switches
    objects = render("--set", ",".join(switches), namespace=NAMESPACE)
    roles = by_kind(objects, "ClusterRole") + by_kind(objects, "Role")
    assert roles  # the switches turned RBAC on: the check below is not vacuous
    configz = []
    for role in roles:
        for rule in role["rules"]:
            if not {"", "*"} & set(rule.get("apiGroups", [])):
                continue
            granted = set(rule.get("resources", []))
            assert not granted & {"*", "nodes/*", "nodes/proxy"}, (role["metadata"]["name"], rule)
            if "nodes/configz" in granted:
                configz.append((role["metadata"]["name"], rule))
    assert configz == [("qos-guard-agent", {"apiGroups": [""], "resources": ["nodes/configz"], "verbs": ["get"]})]


DECLARED = {"group": "inference.example.com", "version": "v1", "kind": "ModelServer", "plural": "modelservers",
            "templates": ["spec.router.template.spec", {"path": "spec.shards[*].template.spec", "name": "shard"}]}


def test_declared_kinds_reach_the_webhook_rules_rbac_and_config(render: Render, tmp_path: Path) -> None:
    """``config.workloads``: the webhooks match the kind, audit's ClusterRole lists it, and the webhook reads it
    from its mounted configuration (which must parse as qos-guard parses it)."""
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"config": {"workloads": [DECLARED]}, "rbac": {"audit": True}}))
    objects = render("-f", str(values), namespace=NAMESPACE)
    hooks = webhooks(objects)
    declared = {("inference.example.com", "modelservers"): ["v1"]}
    for name in ("validate.qos-guard.io", "validate-mutated.qos-guard.io", "warn.qos-guard.io"):
        matched = rules_of(hooks[name], declared)
        assert {("inference.example.com", "modelservers", op) for op in ("CREATE", "UPDATE")} <= matched, name
    assert rules_of(hooks["mutate.qos-guard.io"]) == {("", "pods", "CREATE")}
    (role,) = by_kind(objects, "ClusterRole")
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == WORKLOADS | CLAIMS | {("", "pods"), ("", "namespaces"),
                                            ("inference.example.com", "modelservers")}
    mounted = yaml.safe_load(one(objects, "ConfigMap")["data"]["config.yaml"])
    (kind,) = parse_config(mounted).workloads
    assert (kind.group, kind.kind, kind.plural, [t.path for t in kind.templates]) == (
        "inference.example.com", "ModelServer", "modelservers",
        ["spec.router.template.spec", "spec.shards[*].template.spec"])


def test_claim_rules_and_rbac_are_generated_from_claim_kinds() -> None:
    """DRA's claims reach the webhook rules and audit's RBAC through the generated _kinds.tpl (hack/generate.py
    from ``CLAIM_KINDS``), not a hand-written list that could drift: defined there once, CREATE only."""
    templates = CHART / "templates"
    generated = (templates / "_kinds.tpl").read_text()
    defined = [p.name for p in templates.glob("*.tpl") if 'define "qos-guard.claimRules"' in p.read_text()]
    assert defined == ["_kinds.tpl"]
    claim_rules = generated.split('{{- define "qos-guard.claimRules" -}}', 1)[1].split("{{- end }}", 1)[0]
    groups = {k.group for k in CLAIM_KINDS.values()}
    assert groups == {"resource.k8s.io"}
    assert claim_rules.split("\n")[1:] == [
        '- apiGroups: ["resource.k8s.io"]', '  apiVersions: ["v1"]', '  operations: ["CREATE"]',
        '  resources: ["resourceclaims", "resourceclaimtemplates"]', "  scope: Namespaced", ""]
    rbac = generated.split('{{- define "qos-guard.kindRBAC" -}}', 1)[1]
    assert '- apiGroups: ["resource.k8s.io"]\n  resources: ["resourceclaims", "resourceclaimtemplates"]' in rbac


@pytest.mark.parametrize(("workload", "named"), [
    ({**DECLARED, "plural": None}, "at '/config/workloads/0'"),
    ({**DECLARED, "colour": "red"}, "at '/config/workloads/0'"),
    ({**DECLARED, "templates": []}, "at '/config/workloads/0/templates'"),
])
def test_schema_refuses_bad_declared_kinds(helm: str, tmp_path: Path, workload: dict[str, Any], named: str) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"config": {"workloads": [{k: v for k, v in workload.items() if v is not None}]}}))
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "-f", str(values))
    assert proc.returncode != 0 and named in proc.stderr, proc.stderr


def test_declared_kinds_are_refused_with_the_charts_fixed_policies(helm: str, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"config": {"workloads": [DECLARED]}, "enforcement": "policy"}))
    proc = run_helm(helm, "template", "qos-guard", str(CHART), "-f", str(values))
    assert proc.returncode != 0 and "config.workloads: the chart's policies are fixed text" in proc.stderr
