"""The Helm chart, rendered by a real ``helm`` and checked against the Kubernetes OpenAPI schemas."""

from __future__ import annotations

import base64
import re
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from tests.chart.conftest import CHART, Render, by_kind, one, run_helm
from webhook.config import parse_config
from webhook.engine import Mode, evaluate

NAMESPACE = "platform"  # not the chart's name, so the release namespace is told apart from defaults
KUBE_SCHEMA = "1.35.0"
WEBHOOK_PATHS = {
    "validate.qos-guard.io": ("/validate", "enforce"),
    "validate-mutated.qos-guard.io": ("/validate/mutate", "mutate"),
    "warn.qos-guard.io": ("/warn", "warn"),
    "mutate.qos-guard.io": ("/mutate", "mutate"),
}
WORKLOADS = {("", "replicationcontrollers"), ("", "podtemplates"), ("apps", "deployments"),
             ("apps", "replicasets"), ("apps", "statefulsets"), ("apps", "daemonsets"), ("batch", "jobs"),
             ("batch", "cronjobs")}


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


def rules_of(hook: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(group, resource, operation) triples a webhook matches, all at version v1."""
    out = set()
    for rule in hook["rules"]:
        assert rule["apiVersions"] == ["v1"]
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
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
    assert kinds == ["ConfigMap", "Deployment", "MutatingWebhookConfiguration", "PodDisruptionBudget", "Secret",
                     "Service", "ServiceAccount", "ValidatingWebhookConfiguration"]
    for obj in default:
        if obj["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == "qos-guard"


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
    expected = {("", "pods", "CREATE"), ("", "pods/resize", "UPDATE")}
    expected |= {(g, r, op) for g, r in WORKLOADS for op in ("CREATE", "UPDATE")}
    for name in ("validate.qos-guard.io", "validate-mutated.qos-guard.io", "warn.qos-guard.io"):
        assert rules_of(hooks[name]) == expected, name
        assert {r["scope"] for r in hooks[name]["rules"]} == {"Namespaced"}
    # Templates are never patched (SPEC §5): only Pods reach /mutate.
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


def test_webhook_follows_its_own_rules(default: list[dict[str, Any]]) -> None:
    """The webhook Deployment is Guaranteed with whole CPUs: qos-guard's own engine finds nothing."""
    deploy = one(default, "Deployment")
    verdict = evaluate(deploy, parse_config(None), Mode.ENFORCE)
    assert verdict.violations == []
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["requests"] == container["resources"]["limits"] == {"cpu": "1", "memory": "768Mi"}


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
    (["--set", "resources.cpu=1500m"], "at '/resources/cpu'"),
    (["--set", "resources.cpu=0"], "at '/resources/cpu'"),
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
    assert granted == WORKLOADS | {("", "pods"), ("", "namespaces")}
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
    assert {o["metadata"]["name"] for o in objects} == {"prod-qos-guard", "prod-qos-guard-tls"}
    hook = webhooks(objects)["validate.qos-guard.io"]
    assert hook["clientConfig"]["service"]["name"] == "prod-qos-guard"


def _value_paths(values: dict[str, Any], prefix: str = "") -> list[str]:
    paths = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and key != "config":
            paths.extend(_value_paths(value, path + "."))
        else:
            paths.append(path)
    return paths


def test_chart_readme_documents_every_value() -> None:
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    documented = set(re.findall(r"^\| `([^`]+)` \|", readme, re.M))
    missing = [p for p in _value_paths(values) if p not in documented]
    assert not missing, f"values missing from charts/qos-guard/README.md: {missing}"
