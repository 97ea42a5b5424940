"""The custom resources inference runs as, on a real kube-apiserver with their projects' own CRDs
(tests/fixtures/crds, pinned): ``kubectl apply`` of each built-in kind (LeaderWorkerSet, JobSet, RayCluster,
RayService, RayJob, InferenceService, Argo Rollout, the Kubeflow jobs) with a fractional CPU in one replica
group or template is refused, by the webhook and by the generated admission policies, with that group
named; a compliant one is admitted. Without the CRDs, the webhook rules and policies for them break nothing:
the API server ignores rules for resources it does not serve, ``audit`` does not list them."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import waiting
from tests.binaries import binary
from tests.e2e.conftest import CHART, Cluster, Webhook, compliant_pod, control_plane, violating_pod
from tests.serving import start_server
from webhook.core.config import Config, parse_config
from webhook.core.engine import Mode, evaluate

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "tests" / "fixtures" / "crds"
FIXTURES = ROOT / "tests" / "fixtures" / "workloads"
# Every built-in custom resource kind, by its CRD's name (tests/unit/test_vendored_crds.py holds the vendored CRDs
# to these kinds).
KINDS = {"LeaderWorkerSet": "leaderworkersets.leaderworkerset.x-k8s.io", "JobSet": "jobsets.jobset.x-k8s.io",
         "RayCluster": "rayclusters.ray.io", "RayService": "rayservices.ray.io", "RayJob": "rayjobs.ray.io",
         "InferenceService": "inferenceservices.serving.kserve.io",
         "ServingRuntime": "servingruntimes.serving.kserve.io",
         "ClusterServingRuntime": "clusterservingruntimes.serving.kserve.io", "Rollout": "rollouts.argoproj.io",
         "DisaggregatedSet": "disaggregatedsets.disaggregatedset.x-k8s.io",
         "LLMInferenceService": "llminferenceservices.serving.kserve.io", "NIMService": "nimservices.apps.nvidia.com",
         "VLLMRuntime": "vllmruntimes.production-stack.vllm.ai",
         **{k: f"{k.lower()}s.kubeflow.org" for k in ("PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob",
                                                      "JAXJob")}}


def _fixture(path: Path) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(path.read_text())
    obj["metadata"].pop("namespace", None)
    return obj


def _cases(outcome: str) -> list[Any]:
    """The fixtures applied in a namespace: not the cluster-scoped ClusterServingRuntime (judged by check and
    audit; the webhook judges by the namespace's mode label)."""
    return [pytest.param(path, id=f"{kind}/{path.stem}") for kind in KINDS if kind != "ClusterServingRuntime"
            for path in sorted((FIXTURES / kind / outcome).glob("*.yaml"))]


def _broken(path: Path) -> str:
    """What the refusal names first: the broken template, or (a kind with one template: an InferenceService's
    predictor, a Rollout's template) its container, whose path names the template."""
    found = next(line.split(": ", 1)[1] for line in path.read_text().splitlines() if line.startswith("# broken: "))
    return "container" if found == "(the one template)" else found


def _prefix(broken: str) -> str:
    return f"{broken} " if broken == "container" else f"{broken}: "


_INSTALLED: set[str] = set()  # the API servers (by URL) the CRDs are installed in, so each case costs no request
_STORED: dict[tuple[str, Path], dict[str, Any]] = {}


def install_crds(cluster: Cluster) -> None:
    """The vendored CRDs, once per API server (11 MB: applied again for every case they would cost seconds)."""
    if cluster.url in _INSTALLED:
        return
    served = set(cluster.kubectl("get", "crd", "-o", "name", check=True).stdout.split())
    present = {f"customresourcedefinition.apiextensions.k8s.io/{crd}" for crd in KINDS.values()} & served
    # create when none is there (server-side apply computes managed fields over 11 MB: ~25% slower); server-side
    # otherwise, as a CRD this size is over the client-side last-applied annotation's 256 KiB
    verb = ["create"] if not present else ["apply", "--server-side", "--force-conflicts"]
    # ~19 MB of CRDs in one request: on a loaded machine the API server takes over a minute to store them
    cluster.kubectl(*verb, "-f", str(CRDS), "--request-timeout=240s", check=True)
    for crd in KINDS.values():
        cluster.kubectl("wait", "--for", "condition=Established", f"crd/{crd}", "--timeout=60s", check=True)
    _INSTALLED.add(cluster.url)


def remove_crds(cluster: Cluster) -> None:
    # one request for all of them: the API server finalizes them side by side (one by one: ~4 s each)
    cluster.kubectl("delete", "crd", *KINDS.values(), "--ignore-not-found", "--wait=true", "--timeout=120s")
    _INSTALLED.discard(cluster.url)


def as_stored(cluster: Cluster, path: Path) -> dict[str, Any]:
    """The fixture as the API server stores it (its CRD's defaults and pruning), in namespace default (not opted
    in); all the fail fixtures in one dry-run request per API server."""
    key = (cluster.url, path)
    if key not in _STORED:
        paths = [p.values[0] for p in _cases("fail")]
        proc = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-n", "default", "-f", "-",
                               stdin=[_fixture(p) for p in paths])
        assert proc.returncode == 0, proc.stderr  # each is valid for its CRD's schema
        items, at, decoder = [], 0, json.JSONDecoder()  # kubectl prints one JSON object after another
        while proc.stdout[at:].strip():
            item, at = decoder.raw_decode(proc.stdout, at + len(proc.stdout[at:]) - len(proc.stdout[at:].lstrip()))
            items.append(item)
        assert len(items) == len(paths), proc.stdout[:2000]
        _STORED.update({(cluster.url, p): item for p, item in zip(paths, items, strict=True)})
    return _STORED[key]


def swap_in_mpijob_v1(cluster: Cluster) -> list[tuple[dict[str, Any], list[str]]]:
    """The training-operator's MPIJob CRD (kubeflow.org/v1, tests/fixtures/crds/elsewhere) in place of the
    mpi-operator's (v2beta1; the same CRD name): each MPIJob fixture at v1, with the findings the engine gives
    it as the API server stores it (none for a compliant one)."""
    install_crds(cluster)
    cluster.kubectl("delete", "crd", KINDS["MPIJob"], "--wait=true", check=True)
    _INSTALLED.discard(cluster.url)  # install_crds puts the mpi-operator's back
    cluster.kubectl("create", "-f", str(CRDS / "elsewhere" / "kubeflow.org_mpijobs.yaml"), check=True)
    cluster.kubectl("wait", "--for", "condition=Established", f"crd/{KINDS['MPIJob']}", "--timeout=60s",
                    check=True)
    out = []
    for path in sorted((FIXTURES / "MPIJob").glob("*/*.yaml")):
        obj = {**_fixture(path), "apiVersion": "kubeflow.org/v1"}
        stored = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-n", "default", "-f", "-", stdin=obj)
        assert stored.returncode == 0, stored.stderr  # valid for the v1 schema too
        found = evaluate(json.loads(stored.stdout), Config(), Mode.ENFORCE, cluster.facts()).violations
        assert (path.parent.name == "fail") == bool(found), path
        out.append((obj, [f"{v.rule}: {v.message}" for _, v in found]))
    return out


def _apply(cluster: Cluster, ns: str, obj: dict[str, Any], dry: bool = True) -> subprocess.CompletedProcess[str]:
    args = ["apply", "-n", ns, "-f", "-"] + (["--dry-run=server"] if dry else [])
    return cluster.kubectl(*args, stdin=obj)


def test_0_every_built_in_custom_resource_kind_is_here() -> None:
    from webhook.core.workloads import KINDS as TABLE
    assert set(KINDS) == {k.kind for k in TABLE.values() if not k.core}
    for kind in KINDS:
        assert _cases("fail") and list((FIXTURES / kind / "fail").glob("*.yaml")), kind
        assert list((FIXTURES / kind / "pass").glob("*.yaml")), kind


# ------------------------------------------------------------------------------------------------ webhook

@pytest.fixture(scope="module")
def served(cluster: Cluster, webhook: Webhook) -> Iterator[str]:
    """The chart's webhook configurations (registered by the ``webhook`` fixture) before and after the CRDs are
    installed; yields an enforce namespace. The CRDs are removed afterwards."""
    ns = cluster.namespace("e2e-workloads", "enforce")
    yield ns
    remove_crds(cluster)


def test_1_without_the_crds_nothing_breaks(cluster: Cluster, served: str, tmp_path: Path) -> None:
    """The webhook's rules name resources the API server does not serve: it ignores them; Pods are judged as
    ever, and ``audit`` neither lists nor complains about the kinds it cannot find."""
    remove_crds(cluster)
    rules = [r for hook in cluster.get("validatingwebhookconfiguration", "qos-guard")["webhooks"]
             for r in hook["rules"]]
    assert any("jobsets" in r["resources"] and r["apiGroups"] == ["jobset.x-k8s.io"] for r in rules)
    assert cluster.kubectl("get", "jobsets", "-A").returncode != 0  # not served
    assert _apply(cluster, served, compliant_pod("plain")).returncode == 0
    refused = _apply(cluster, served, violating_pod("frac"))
    assert refused.returncode != 0 and "cpu-not-integer" in refused.stderr
    audit = cluster.qos_guard("audit", "-n", served, "--kubeconfig", str(cluster.kubeconfig), "--format", "json")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert json.loads(audit.stdout)["errors"] == []


@pytest.mark.parametrize("path", _cases("fail"))
def test_2_a_broken_replica_group_is_refused_by_name(cluster: Cluster, served: str, path: Path) -> None:
    install_crds(cluster)
    broken = _broken(path)
    obj = _fixture(path)
    expected = [f"{v.rule}: {v.message}" for _, v in
                evaluate(as_stored(cluster, path), Config(), Mode.ENFORCE, cluster.facts()).violations]
    assert expected and all(line.startswith(f"cpu-not-integer: {_prefix(broken)}") for line in expected), expected
    refused = _apply(cluster, served, obj, dry=False)
    assert refused.returncode != 0, refused.stdout
    assert "admission webhook \"validate.qos-guard.io\" denied the request" in refused.stderr, refused.stderr
    for line in expected:
        assert line in refused.stderr, f"engine: {line}\nAPI server: {refused.stderr}"


@pytest.mark.parametrize("path", _cases("pass"))
def test_3_a_compliant_one_is_admitted(cluster: Cluster, served: str, path: Path) -> None:
    install_crds(cluster)
    obj = _fixture(path)
    created = _apply(cluster, served, obj, dry=False)
    assert created.returncode == 0, created.stderr
    cluster.kubectl("delete", "-n", served, "--wait=false", "-f", "-", stdin=obj)


def _framework_predictor() -> dict[str, Any]:
    """KServe's own tensorflow-gpu sample (tests/corpus) with a fractional CPU limit in the framework's
    resources: KServe's defaulting turns the framework field into spec.predictor.model and merges the model
    container over the ServingRuntime's, whose cpu request it does not set, so what kubelet gets is unknown without
    the runtime (the webhook reads none)."""
    obj = _fixture(ROOT / "tests" / "corpus" / "kserve" / "docs" / "samples" / "accelerators" / "tensorflow-gpu.yaml")
    obj["spec"]["predictor"]["tensorflow"]["resources"]["limits"]["cpu"] = "1500m"
    return obj


def _collocation_sample() -> dict[str, Any]:
    """kserve/website collocation.md's first block (tests/fixtures/kserve): its model's own resources (100m below
    1 CPU) override any runtime's, so the Pod is Burstable whatever the runtime."""
    return _fixture(ROOT / "tests" / "fixtures" / "kserve" / "collocation-model.yaml")


def test_3d_a_model_whose_own_resources_fail_is_refused_naming_template_and_container(cluster: Cluster,
                                                                                      served: str) -> None:
    install_crds(cluster)
    out = _apply(cluster, served, _collocation_sample())
    assert out.returncode != 0 and 'admission webhook "validate.qos-guard.io" denied' in out.stderr, out.stderr
    assert ('requests-not-equal-limits: spec.predictor (predictor, its runtime not known): container '
            '"kserve-container" (spec.predictor.model)') in out.stderr, out.stderr
    # its compliant twin: the model's requests equal to its whole-CPU limits, Standard mode, a pvc:// model
    twin = _collocation_sample()
    twin["metadata"]["annotations"] = {"serving.kserve.io/deploymentMode": "RawDeployment"}
    predictor = twin["spec"]["predictor"]
    predictor["model"]["storageUri"] = "pvc://models/mnist"
    for c in (predictor["model"], predictor["containers"][0]):
        c["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    admitted = _apply(cluster, served, twin)
    assert admitted.returncode == 0, admitted.stderr


def _art_explainer() -> dict[str, Any]:
    """A compliant predictor and transformer, and an ART explainer whose own container asks a fractional CPU:
    KServe builds the explainer's container from its inferenceservice-config, so what kubelet gets is unknown
    here (the explainer's containers judged alone would refuse it)."""
    obj = _fixture(FIXTURES / "InferenceService" / "pass" / "with-transformer-and-explainer.yaml")
    obj["metadata"]["name"] = "art-explainer"
    obj["spec"]["explainer"]["art"] = {"type": "SquareAttack"}
    obj["spec"]["explainer"]["containers"][0]["resources"] = {"limits": {"cpu": "500m", "memory": "2Gi"}}
    return obj


def test_3c_an_art_explainer_is_unknown_so_admitted(cluster: Cluster, served: str) -> None:
    install_crds(cluster)
    obj = _art_explainer()
    stored = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-n", "default", "-f", "-", stdin=obj)
    assert stored.returncode == 0, stored.stderr
    assert evaluate(json.loads(stored.stdout), Config(), Mode.ENFORCE, cluster.facts()).violations == []
    admitted = _apply(cluster, served, obj)
    assert admitted.returncode == 0, admitted.stderr
    # admitted, and said: unknown is its own answer, never a silent pass
    assert "Warning: qos-guard: not judged: spec.explainer.art (its container is built" in admitted.stderr, \
        admitted.stderr


def test_3b_a_framework_predictor_is_unknown_so_admitted(cluster: Cluster, served: str) -> None:
    install_crds(cluster)
    obj = _framework_predictor()
    stored = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-n", "default", "-f", "-", stdin=obj)
    assert stored.returncode == 0, stored.stderr
    assert evaluate(json.loads(stored.stdout), Config(), Mode.ENFORCE, cluster.facts()).violations == []
    admitted = _apply(cluster, served, obj)
    assert admitted.returncode == 0, admitted.stderr
    assert "Warning: qos-guard: not judged: spec.predictor: KServe chooses its runtime" in admitted.stderr, \
        admitted.stderr


def test_4_audit_lists_custom_resources_once_served(cluster: Cluster, served: str) -> None:
    install_crds(cluster)
    obj = copy.deepcopy(_fixture(FIXTURES / "JobSet" / "pass" / "compliant.yaml"))
    plain = cluster.namespace("e2e-workloads-plain")  # not opted in: stored as it is
    obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "1500m", "memory": "8Gi"}}
    assert _apply(cluster, plain, obj, dry=False).returncode == 0
    audit = cluster.qos_guard("audit", "-n", plain, "--kubeconfig", str(cluster.kubeconfig), "--format", "json")
    assert audit.returncode == 1, audit.stdout + audit.stderr
    (found,) = json.loads(audit.stdout)["violations"]
    assert found["kind"] == "JobSet" and "spec.replicatedJobs[1] (workers)" in found["message"]


def test_5_mpijob_at_the_training_operators_v1(cluster: Cluster, served: str) -> None:
    """MPIJob is judged at kubeflow.org/v1 too (the training-operator's CRD): the broken group refused by name,
    the compliant one admitted."""
    for obj, expected in swap_in_mpijob_v1(cluster):
        out = _apply(cluster, served, obj)
        if not expected:
            assert out.returncode == 0, out.stderr
            continue
        assert out.returncode != 0 and 'admission webhook "validate.qos-guard.io" denied' in out.stderr, out.stderr
        for line in expected:
            assert line in out.stderr, f"engine: {line}\nAPI server: {out.stderr}"


# ------------------------------------------------------------------------------------- a declared kind

DECLARED = {"group": "inference.example.com", "version": "v1", "kind": "ModelServer", "plural": "modelservers",
            "templates": ["spec.shards[*].template.spec"]}
MODEL_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "modelservers.inference.example.com"},
    "spec": {"group": "inference.example.com", "scope": "Namespaced",
             "names": {"plural": "modelservers", "singular": "modelserver", "kind": "ModelServer"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def _model(cpu: str) -> dict[str, Any]:
    shard = {"containers": [{"name": "vllm", "image": "registry.invalid/vllm:1",
                             "resources": {"limits": {"cpu": cpu, "memory": "8Gi"}}}]}
    return {"apiVersion": "inference.example.com/v1", "kind": "ModelServer", "metadata": {"name": "llama"},
            "spec": {"shards": [{"name": "s0", "template": {"spec": {"containers": [
                {"name": "vllm", "image": "registry.invalid/vllm:1",
                 "resources": {"limits": {"cpu": "2", "memory": "8Gi"}}}]}}},
                {"name": "s1", "template": {"spec": shard}}]}}


def test_a_declared_kind_from_values_is_judged(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The chart's webhook rules for ``config.workloads`` (helm template of the same values the webhook mounts)
    on a fresh API server, a webhook serving that configuration: the declared kind is refused with its shard
    named, and admitted when whole; before its CRD exists the rules cost nothing."""
    folder = tmp_path_factory.mktemp("declared")
    values = folder / "values.yaml"
    values.write_text(yaml.safe_dump({"config": {"workloads": [DECLARED]}}))
    config_file = folder / "config.yaml"
    config_file.write_text(yaml.safe_dump({"workloads": [DECLARED]}))
    parse_config({"workloads": [DECLARED]})
    with control_plane(folder / "cp") as cluster:
        cluster.namespace("qos-guard")
        ns = cluster.namespace("models", "enforce")
        certs = ["certs", "--service", "qos-guard", "--namespace", "qos-guard", "--extra-san", "127.0.0.1",
                 "--output-dir", str(folder / "pki"), "--days", "1"]
        assert cluster.qos_guard(*certs).returncode == 0
        server = start_server(folder / "serve", "--config", str(config_file), cert_dir=folder / "pki")
        try:
            url = f"https://127.0.0.1:{server.port}"
            proc = subprocess.run([binary("helm"), "template", "qos-guard", str(CHART), "--namespace", "qos-guard",
                                   "-f", str(values), "--set", f"webhook.url={url}", "--show-only",
                                   "templates/webhooks.yaml"], capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, proc.stderr
            hooks = [d for d in yaml.safe_load_all(proc.stdout) if d and d["kind"].endswith("Configuration")]
            cluster.kubectl("apply", "-f", "-", stdin=hooks, check=True)
            # the same CA (--renew: certs keeps an existing CA), patched into the applied webhooks' caBundle
            patched = cluster.qos_guard(*certs, "--renew", "--patch-webhooks", "qos-guard", "--kubeconfig",
                                        str(cluster.kubeconfig))
            assert patched.returncode == 0, patched.stderr
            waiting.eventually("the webhook", lambda: _apply(cluster, ns, violating_pod("p")).returncode != 0, 30,
                               every=0.5)
            assert _apply(cluster, ns, compliant_pod("p")).returncode == 0  # no CRD yet: nothing breaks
            cluster.kubectl("apply", "-f", "-", stdin=MODEL_CRD, check=True)
            cluster.kubectl("wait", "--for", "condition=Established", "crd/modelservers.inference.example.com",
                            "--timeout=60s", check=True)
            refused: list[str] = []

            def judged() -> bool:
                out = _apply(cluster, ns, _model("1500m"))
                refused[:] = [out.stderr]
                return out.returncode != 0

            waiting.eventually("the declared kind judged", judged, 30, every=0.5)
            assert 'cpu-not-integer: spec.shards[1] (s1): container "vllm"' in refused[0], refused[0]
            assert _apply(cluster, ns, _model("4"), dry=False).returncode == 0
        finally:
            server.stop()


# ------------------------------------------------------------------------------------ generated policies

@pytest.fixture(scope="module")
def policy_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A control plane with only the generated admission policies (``qos-guard policy``) and the CRDs."""
    with control_plane(tmp_path_factory.mktemp("workload-policies")) as c:
        c.require("admissionregistration.k8s.io/v1", "mutatingadmissionpolicies",
                  "the generated admission policies (qos-guard policy: MutatingAdmissionPolicy v1)")
        c.namespace("qos-guard")
        ns = c.namespace("wl-enforce", "enforce")
        out = c.qos_guard("policy", "--kubernetes-version", c.version())
        assert out.returncode == 0, out.stderr
        applied = c.kubectl("apply", "-f", "-", stdin=out.stdout)
        assert applied.returncode == 0, applied.stderr
        waiting.eventually("the enforce policy", lambda: _apply(c, ns, violating_pod("probe")).returncode != 0,
                           60, every=0.3)
        install_crds(c)
        yield c


def _cel_cases(outcome: str) -> list[Any]:
    """The cases of the kinds the generated policies judge: not those whose Pods an operator builds
    (InferenceService: the policies cannot read its ServingRuntime, and leave it to the webhook)."""
    from webhook.core.workloads import BUILTIN
    built = {k.kind for k in BUILTIN if k.build is not None}
    return [c for c in _cases(outcome) if c.id.split("/")[0] not in built]


@pytest.mark.parametrize("path", _cel_cases("fail"))
def test_the_generated_cel_refuses_the_broken_group_by_name(policy_cluster: Cluster, path: Path) -> None:
    broken = _broken(path)
    obj = _fixture(path)
    expected = [f"{v.rule}: {v.message}" for _, v in
                evaluate(as_stored(policy_cluster, path), Config(), Mode.ENFORCE, policy_cluster.facts()).violations]
    refused: list[str] = []

    def judged() -> bool:
        out = _apply(policy_cluster, "wl-enforce", obj)
        refused[:] = [out.stderr]
        return out.returncode != 0

    waiting.eventually(f"{path.name} refused", judged, 60, every=0.5)
    assert "ValidatingAdmissionPolicy 'qos-guard-enforce'" in refused[0], refused[0]
    assert expected and all(line.startswith(f"cpu-not-integer: {_prefix(broken)}") for line in expected)
    for line in expected:
        assert line in refused[0], f"engine: {line}\nAPI server: {refused[0]}"


@pytest.mark.parametrize("path", _cel_cases("pass"))
def test_the_generated_cel_admits_a_compliant_one(policy_cluster: Cluster, path: Path) -> None:
    out = _apply(policy_cluster, "wl-enforce", _fixture(path))
    assert out.returncode == 0, out.stderr


def test_the_generated_cel_admits_a_framework_predictor_as_the_engine_does(policy_cluster: Cluster) -> None:
    out = _apply(policy_cluster, "wl-enforce", _framework_predictor())
    assert out.returncode == 0, out.stderr


def test_the_generated_cel_admits_an_art_explainer_as_the_engine_does(policy_cluster: Cluster) -> None:
    out = _apply(policy_cluster, "wl-enforce", _art_explainer())
    assert out.returncode == 0, out.stderr


def _answer_once_judged(cluster: Cluster, ns: str, obj: dict[str, Any], refused: bool) -> str:
    """The API server's answer once it refuses (or admits) ``obj`` (policies take effect within seconds)."""
    seen: list[str] = []

    def answered() -> bool:
        proc = _apply(cluster, ns, obj)
        seen[:] = [proc.stderr]
        return (proc.returncode != 0) == refused

    waiting.eventually(f"{obj['metadata']['name']} judged", answered, 60, every=0.5)
    return seen[0]


def test_the_generated_cel_judges_mpijob_at_v1(policy_cluster: Cluster) -> None:
    for obj, expected in swap_in_mpijob_v1(policy_cluster):
        answer = _answer_once_judged(policy_cluster, "wl-enforce", obj, bool(expected))
        for line in expected:
            assert line in answer, f"engine: {line}\nAPI server: {answer}"


def test_z_a_declared_kind_through_the_generated_cel(policy_cluster: Cluster) -> None:
    """``qos-guard policy --config`` with a declared kind: its resource in the policies' match, CEL over its
    list of templates; refused with the shard named, admitted when whole."""
    config_file = policy_cluster.folder / "declared.yaml"
    config_file.write_text(yaml.safe_dump({"workloads": [DECLARED]}))
    out = policy_cluster.qos_guard("policy", "--config", str(config_file), "--kubernetes-version",
                                 policy_cluster.version())
    assert out.returncode == 0, out.stderr
    assert policy_cluster.kubectl("apply", "-f", "-", stdin=out.stdout).returncode == 0
    policy_cluster.kubectl("apply", "-f", "-", stdin=MODEL_CRD, check=True)
    policy_cluster.kubectl("wait", "--for", "condition=Established", "crd/modelservers.inference.example.com",
                           "--timeout=60s", check=True)
    stored = policy_cluster.kubectl("create", "--dry-run=server", "-o", "json", "-n", "default", "-f", "-",
                                    stdin=_model("1500m"))
    assert stored.returncode == 0, stored.stderr
    (found,) = evaluate(json.loads(stored.stdout), parse_config({"workloads": [DECLARED]}), Mode.ENFORCE,
                        policy_cluster.facts()).violations
    refused: list[str] = []

    def judged() -> bool:
        proc = _apply(policy_cluster, "wl-enforce", _model("1500m"))
        refused[:] = [proc.stderr]
        return proc.returncode != 0

    waiting.eventually("the declared kind refused", judged, 60, every=0.5)
    assert f"{found[1].rule}: {found[1].message}" in refused[0], refused[0]
    assert "spec.shards[1] (s1)" in refused[0]
    assert _apply(policy_cluster, "wl-enforce", _model("4")).returncode == 0
