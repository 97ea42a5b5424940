"""What the webhook cannot judge it admits, and says: each reason an operator's builder gives instead of a Pod
(KServe builds none, a runtime not in the cluster, a config KServe cannot load) and each part of a Pod that passed
where the rest is not known (``Built.partial``) is a warning, ``qos-guard: not judged: <reason>``, on /validate
(allowed or denied), /warn and /mutate. Before, such an object was admitted in silence: a pass it never earned."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.helpers import admission_review
from webhook.admission.review import ENDPOINTS, NOT_READ, SHIPPED, parse_review, review_decision
from webhook.core.config import parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.operators import CLUSTER, NoPodHere, Related, Unjudged, collect
from webhook.core.operators.kserve import RELATED
from webhook.core.operators.llmisvc import CONFIG as LLM_CONFIG
from webhook.core.refusal import WARNING_CHARS
from webhook.core.workloads import walk
from webhook.serving.app import create_app

ON = parse_config({"policy": {"operatorObjects": True}, "exemptions": {"namespaces": ["exempt-ns"]}})
WHOLE = RELATED  # every kind the KServe builder reads, listed from the cluster: an object absent does not exist
GUARANTEED = {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}
FRACTIONAL = {"requests": {"cpu": "1500m", "memory": "1Gi"}, "limits": {"cpu": "1500m", "memory": "1Gi"}}
MISSING = "qos-guard: not judged: spec.predictor: no ServingRuntime or ClusterServingRuntime named 'missing-rt'"


def runtime(resources: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
            "metadata": {"name": "rt", "namespace": "ml"},
            "spec": {"supportedModelFormats": [{"name": "sklearn", "autoSelect": True}],
                     "containers": [{"name": "kserve-container", "resources": resources}]}}


def isvc(runtime_name: str, resources: dict[str, Any] | None = None, **predictor: Any) -> dict[str, Any]:
    model: dict[str, Any] = {"modelFormat": {"name": "sklearn"}, "runtime": runtime_name,
                             "storageUri": "pvc://models/iris"}
    if resources is not None:
        model["resources"] = resources
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "iris", "namespace": "ml",
                         "annotations": {"serving.kserve.io/deploymentMode": "RawDeployment"}},
            "spec": {"predictor": {"model": model, **predictor}}}


def cluster(*objects: dict[str, Any], read: bool = True) -> Related:
    """The webhook's cache: ``read`` every kind the builders need (listed whole), or none yet (unknown)."""
    kinds = (*RELATED, LLM_CONFIG)
    return collect(objects, kinds, source=CLUSTER, read=kinds if read else ())


def client(related: Related | None, config: Any = ON) -> FlaskClient:
    return create_app(config, related=None if related is None else (lambda: related)).test_client()


def post(flask: FlaskClient, path: str, obj: dict[str, Any], namespace: str = "ml") -> dict[str, Any]:
    r = flask.post(path, data=json.dumps(admission_review(obj, namespace=namespace)),
                   content_type="application/json")
    assert r.status_code == 200, r.get_data(as_text=True)
    return r.get_json()["response"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("path", ["/validate", "/validate/mutate", "/warn", "/mutate"])
def test_a_runtime_not_in_the_cluster_is_admitted_with_a_warning_naming_it(path: str) -> None:
    out = post(client(cluster()), path, isvc("missing-rt"))
    assert out["allowed"] is True and "status" not in out and "patch" not in out
    (said,) = out["warnings"]
    assert said.startswith(MISSING) and len(said) < WARNING_CHARS, said


def test_a_compliant_inference_service_says_nothing() -> None:
    flask = client(cluster(runtime(GUARANTEED)))
    for path in ("/validate", "/warn", "/mutate"):
        assert post(flask, path, isvc("rt")) == {"uid": "uid-1", "allowed": True}


def test_a_partial_pod_that_passes_is_not_judged_and_says_why() -> None:
    """The runtime not read yet: the model container, its own resources fixing every request and limit, is known
    and Guaranteed; the rest of the Pod is the runtime's. A pass of that part is no pass: said."""
    out = post(client(cluster(read=False)), "/validate", isvc("rt", GUARANTEED))
    assert out["allowed"] is True
    (said,) = out["warnings"]
    assert said.startswith("qos-guard: not judged: spec.predictor: its ServingRuntime 'rt' is not in the cluster")


def test_a_denied_object_also_says_what_it_could_not_judge() -> None:
    """A multi-node predictor whose runtime is not read yet: its model container fails on its own (a refusal);
    its workers' Pod is the runtime's alone, not known (a warning beside the refusal)."""
    out = post(client(cluster(read=False)), "/validate", isvc("rt", FRACTIONAL, workerSpec={}))
    assert out["allowed"] is False and out["status"]["code"] == 403
    assert "cpu-not-integer: spec.predictor (predictor, its runtime not known)" in out["status"]["message"]
    (said,) = out["warnings"]
    assert said.startswith("qos-guard: not judged: spec.predictor.workerSpec: its ServingRuntime 'rt' is not in the "
                           "cluster: give the") and len(said) < WARNING_CHARS, said
    warned = post(client(cluster(read=False)), "/warn", isvc("rt", FRACTIONAL, workerSpec={}))["warnings"]
    assert warned[0].startswith("cpu-not-integer: ") and warned[-1] == said


def test_an_llm_inference_service_whose_config_kserve_cannot_load_is_said() -> None:
    obj = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService",
           "metadata": {"name": "m", "namespace": "ml"},
           "spec": {"model": {"uri": "pvc://models/m"}, "baseRefs": [{"name": "mine"}],
                    "template": {"containers": [{"name": "main", "resources": GUARANTEED}]}}}
    (said,) = post(client(cluster()), "/validate", obj)["warnings"]
    assert said.startswith('qos-guard: not judged: spec.baseRefs[0]: LLMInferenceServiceConfig "mine" is in neither')


def test_without_operator_objects_the_warning_says_how_to_read_them() -> None:
    off = parse_config({})
    out = post(client(None, off), "/validate", isvc("rt", GUARANTEED))
    assert out["allowed"] is True
    assert out["warnings"][0].startswith("qos-guard: not judged: spec.predictor: its ServingRuntime 'rt' is not in")
    assert out["warnings"][1] == f"({NOT_READ})"


NO_POD_HERE = [
    # its Pods are the InferenceService's the operator writes, judged when that is admitted
    {"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMService", "metadata": {"name": "n", "namespace": "ml"},
     "spec": {"inferencePlatform": "kserve", "image": {"repository": "nim", "tag": "1"}}},
    # none of its Pods runs
    {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService",
     "metadata": {"name": "m", "namespace": "ml", "annotations": {"serving.kserve.io/stop": "true"}},
     "spec": {"model": {"uri": "pvc://models/m"}}},
    # its Pods are the Deployment ModelMesh makes, judged when that is admitted
    {**isvc("rt", FRACTIONAL), "metadata": {"name": "mm", "namespace": "ml",
                                            "annotations": {"serving.kserve.io/deploymentMode": "ModelMesh"}}},
    # the same with an explainer: without a transformer KServe's controller skips it whole (controller.go:159-176)
    {**isvc("rt", FRACTIONAL), "metadata": {"name": "mm", "namespace": "ml",
                                            "annotations": {"serving.kserve.io/deploymentMode": "ModelMesh"}},
     "spec": {**isvc("rt", FRACTIONAL)["spec"], "explainer": {"containers": [{"name": "e", "resources": FRACTIONAL}]}}},
]


@pytest.mark.parametrize("obj", NO_POD_HERE, ids=lambda o: str(o["kind"]))
def test_an_object_with_no_pod_of_its_own_is_not_warned_about(obj: dict[str, Any]) -> None:
    """Nothing is unknown there (``NoPodHere``): the webhook admits it saying nothing; ``check`` counts it
    skipped with the reason."""
    for path in ("/validate", "/warn", "/mutate"):
        assert post(client(None, parse_config({})), path, obj) == {"uid": "uid-1", "allowed": True}, path
    verdict = evaluate(obj, parse_config({}), Mode.ENFORCE)
    assert verdict.unknown == () and verdict.results == ()
    (reason,) = [r for r in walk(obj) if isinstance(r, str)]
    assert isinstance(reason, NoPodHere) and not isinstance(reason, Unjudged)


def test_a_modelmesh_transformer_is_judged_its_predictor_not_warned_about() -> None:
    """In ModelMesh mode KServe still builds the transformer, as a Knative Service (controller.go:283-291,
    transformer.go:125-176): its 1500m is refused (it was admitted in silence); the predictor, modelmesh-serving's,
    is not warned about. The twin at 2 CPUs is admitted saying only that it was judged with the shipped config
    (``policy.operatorObjects`` is false here)."""
    whole_queue = {f"queue.sidecar.serving.knative.dev/{r}-resource-{k}": v
                   for r, v in (("cpu", "1"), ("memory", "1Gi")) for k in ("request", "limit")}
    meta = {"name": "mm", "namespace": "ml", "annotations": {"serving.kserve.io/deploymentMode": "ModelMesh",
                                                             **whole_queue}}
    for resources, allowed in ((FRACTIONAL, False), (GUARANTEED, True)):
        obj = {**isvc("rt", FRACTIONAL), "metadata": meta}
        obj["spec"]["transformer"] = {"containers": [{"name": "t", "image": "t", "resources": resources}]}
        out = post(client(None, parse_config({})), "/validate", obj)
        assert out["allowed"] is allowed and out["warnings"] == [f"({SHIPPED})"], out
        if not allowed:
            assert "cpu-not-integer: spec.transformer (transformer)" in out["status"]["message"]


def test_an_exempt_namespace_and_a_namespace_never_judged_say_nothing() -> None:
    flask = client(cluster())
    assert post(flask, "/validate", isvc("missing-rt"), namespace="exempt-ns") == {"uid": "uid-1", "allowed": True}
    assert post(flask, "/validate", isvc("missing-rt"), namespace="kube-system") == {"uid": "uid-1",
                                                                                    "allowed": True}


def test_the_decision_is_warned_and_counts_what_was_not_judged() -> None:
    """Metrics: an admission that says what it could not judge is ``warned`` (it says something), a refusal
    ``denied``; the decision log line counts the parts not judged (``notJudged``)."""
    endpoint = ENDPOINTS["/validate"]
    facts = Facts(related=cluster())
    decision = review_decision(parse_review(json.dumps(admission_review(isvc("missing-rt"), namespace="ml")).encode(),
                                            endpoint), endpoint, ON, facts)
    assert decision.label == "warned" and decision.rules == () and decision.not_judged == 1
    compliant = review_decision(parse_review(json.dumps(admission_review(isvc("rt"), namespace="ml")).encode(),
                                             endpoint), endpoint, ON, Facts(related=cluster(runtime(GUARANTEED))))
    assert compliant.label == "allowed" and compliant.not_judged == 0


def test_an_object_whose_every_pod_spec_is_exempt_is_skipped_whole() -> None:
    """Formerly only an object of one pod spec was: a JobSet of two in an exempt namespace was judged as nothing
    (``check`` counted no object; the webhook logged ``allowed``), and what it could not know would have been said
    in a namespace the webhook must not judge."""
    template = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x",
                                                               "resources": {"limits": {"cpu": "1500m"}}}]}}}}
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
              "spec": {"replicatedJobs": [{"name": "a", "template": template}, {"name": "b", "template": template}]}}
    endpoint = ENDPOINTS["/validate"]
    body = json.dumps(admission_review(jobset, namespace="exempt-ns")).encode()
    decision = review_decision(parse_review(body, endpoint), endpoint, ON)
    assert decision.label == "skipped" and decision.skipped == "namespace exempt-ns is exempt"


def test_a_pod_spec_exempt_by_runtime_class_does_not_hide_what_is_not_known() -> None:
    """``runtimeClassName`` exempts the pod spec that names it, not the object: with the predictor exempt and the
    explainer not known (KServe builds an ART explainer, which qos-guard does not), the explainer is said."""
    config = parse_config({"policy": {"operatorObjects": True}, "exemptions": {"runtimeClassNames": ["kata"]}})
    obj = isvc("rt", GUARANTEED, runtimeClassName="kata")
    obj["spec"]["explainer"] = {"art": {"type": "SquareAttack"}}
    flask = client(cluster(runtime(GUARANTEED)), config)
    for path in ("/validate", "/warn"):
        (said,) = post(flask, path, obj)["warnings"]
        assert said.startswith("qos-guard: not judged: spec.explainer"), said
    # with nothing unknown, the object whose every pod spec is exempt is skipped whole, as before
    del obj["spec"]["explainer"]
    assert post(flask, "/validate", obj) == {"uid": "uid-1", "allowed": True}


def test_a_reason_with_control_characters_is_warned_escaped() -> None:
    """The API server drops a warning with a control character (apimachinery NewWarningHeader: unicode.IsControl)
    without a word: a reason quoting the user's text is shown escaped, so the warning reaches the user."""
    obj = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService",
           "metadata": {"name": "m", "namespace": "ml"},
           "spec": {"model": {"uri": "pvc://models/m"}, "baseRefs": [{"name": "bad\nname\x1b\x85"}],
                    "template": {"containers": [{"name": "main", "resources": GUARANTEED}]}}}
    (said,) = post(client(cluster()), "/validate", obj)["warnings"]
    assert said.startswith("qos-guard: not judged: ") and "bad\\nname\\x1b\\x85" in said, said
    assert not any(c in said for c in "\n\x1b\x85"), said


def test_a_list_of_objects_in_an_exempt_namespace_is_exempt_with_what_it_leaves_unknown() -> None:
    """A ``kind: List`` has no namespace of its own: its items' namespaces exempt them, so the List is exempt as
    each item alone is (``check`` counts it so), never left neither exempt nor judged."""
    obj = isvc("rt", GUARANTEED)
    obj["metadata"]["namespace"] = "exempt-ns"
    obj["spec"]["explainer"] = {"art": {"type": "SquareAttack"}}
    known = runtime(GUARANTEED)
    known["metadata"]["namespace"] = "exempt-ns"
    for facts in (Facts(related=cluster(known)), Facts(related=cluster())):  # the predictor known, or not
        alone = evaluate(obj, ON, Mode.ENFORCE, facts)
        listed = evaluate({"apiVersion": "v1", "kind": "List", "items": [obj]}, ON, Mode.ENFORCE, facts)
        assert alone.exempt == listed.exempt == "namespace exempt-ns is exempt" and listed.results == (), listed


def test_a_custom_container_judged_without_the_cluster_s_config_says_so() -> None:
    """``policy.operatorObjects: false``: KServe's inferenceservice-config is not read, so a custom container is
    judged with KServe's shipped values (its defaults, storage initializer, agent). That was said nowhere: a
    refusal after the cluster's config was changed gave no reason why. Admitted or refused, it is said now, on
    every endpoint; with the objects read (``operatorObjects: true``, the cache synced) it is not."""
    custom = isvc("rt")
    custom["spec"]["predictor"] = {"containers": [{"name": "kserve-container", "image": "i",
                                                   "resources": GUARANTEED}]}
    off = client(None, parse_config({}))
    for path in ("/validate", "/warn", "/mutate"):
        assert post(off, path, custom) == {"uid": "uid-1", "allowed": True, "warnings": [f"({SHIPPED})"]}, path
    custom["spec"]["predictor"]["containers"][0]["resources"] = FRACTIONAL
    refused = post(off, "/validate", custom)
    assert refused["allowed"] is False and refused["warnings"] == [f"({SHIPPED})"], refused
    assert len(f"({SHIPPED})") < WARNING_CHARS
    custom["spec"]["predictor"]["containers"][0]["resources"] = GUARANTEED
    assert post(client(cluster()), "/validate", custom) == {"uid": "uid-1", "allowed": True}
