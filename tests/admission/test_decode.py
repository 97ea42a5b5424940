"""The AdmissionReview decoder (webhook/admission/decode.py): it keeps exactly what the engine and the mutation
read, so every verdict and patch is the one the whole object gets; it builds nothing else; it keeps each
quantity's JSON type; and it names the field of a malformed body."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.bodies import bodies, inference_pod
from bench.corpus import corpus_objects
from tests.helpers import admission_review, container, guaranteed, pod, rl
from tests.reliability.strategies import pod_spec, quantity, workload
from webhook.admission.decode import CORE_GROUPS, TYPED_GROUPS, BadReview, decode, decode_object, plain
from webhook.admission.review import ENDPOINTS, parse_review
from webhook.core.config import Config, parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import NO_FACTS, Facts
from webhook.core.mutation import json_patch
from webhook.core.numatopology import Topology, parse_nrt
from webhook.core.resourceblock import ManifestError

# policy.numa: auto against one small node whose NUMA zone holds little: the rule reads every Pod's placement.
_ZONE = [{"name": r, "capacity": v, "allocatable": v, "available": v} for r, v in (("cpu", "4"), ("memory", "8Gi"))]
_TOPOLOGY = Topology(nodes={"n": {"a": "b"}}, topologies={"n": parse_nrt({
    "metadata": {"name": "n"}, "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
    "zones": [{"name": "node-0", "type": "Node", "resources": _ZONE}]})})
CONFIGS: list[tuple[Config, Facts]] = [(parse_config(None), NO_FACTS), (parse_config({
    "mutation": {"cpuRounding": "up", "setLimitsFromRequests": False},
    "policy": {"smtAlignment": 2, "podLevelResources": "allow", "numa": {"cpus": 8, "memory": "16Gi"}},
    "exemptions": {"runtimeClassNames": ["kata"]}}), NO_FACTS),
    (parse_config({"policy": {"numa": "auto"}}), Facts(topology=_TOPOLOGY))]


# DRA's claims (resource.k8s.io, typed like the core kinds): the dra-claim-spread fixtures, judged with dra: deny.
_CLAIM_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rules" / "dra-claim-spread"
CLAIMS: list[dict[str, Any]] = [yaml.safe_load(p.read_text()) for p in sorted(_CLAIM_FIXTURES.glob("*/*.yaml"))]
CONFIGS.append((parse_config({"policy": {"dra": "deny"}}), NO_FACTS))


def verdict_of(obj: Any, config: tuple[Config, Facts], mode: Mode) -> Any:
    """Everything a verdict answers with: exemption, violations (rule, path, message), changes and the patch."""
    try:
        verdict = evaluate(obj, config[0], mode, config[1])
    except ManifestError as exc:
        return ("ManifestError", str(exc))
    return (verdict.exempt, [(v.rule, v.path, v.message) for _, v in verdict.violations],
            [(c.path, c.new, c.message) for c in verdict.changes],
            json_patch(obj, verdict.changes) if verdict.changes else None)


def decoded(obj: Any, kind: str = "Pod") -> Any:
    return parse_review(json.dumps(admission_review(obj, kind=kind)).encode()).obj


def assert_same_verdicts(obj: Any, kind: str) -> None:
    try:
        json.dumps(obj, allow_nan=False)
    except ValueError:
        # NaN or an infinity (hypothesis makes them): Python writes them, JSON has none, so the body is refused.
        with pytest.raises(BadReview, match="not JSON"):
            decoded(obj, kind)
        return
    whole = json.loads(json.dumps(obj))
    try:
        kept = decoded(obj, kind)
    except BadReview as exc:
        # Refused only for a field of the wrong JSON type, which the API server (it sends typed objects)
        # never sends; the engine names most of these too.
        assert "expected" in str(exc) or "number" in str(exc), str(exc)
        return
    for config in CONFIGS:
        for mode in Mode:
            assert verdict_of(kept, config, mode) == verdict_of(whole, config, mode)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(workload)
def test_decoded_object_gets_the_whole_objects_verdict(obj: dict[str, Any]) -> None:
    """Generated Pods and workloads with wrong types and nulls everywhere: same verdict, changes and patch."""
    if obj["kind"] == "List":  # the API server never sends a List: judged item by item
        for item in obj["items"]:
            assert_same_verdicts(item, item["kind"])
        return
    assert_same_verdicts(obj, obj["kind"])


def test_corpus_objects_get_the_same_verdicts() -> None:
    """Every Pod and workload of the vendored corpus (real charts and manifests)."""
    objects = corpus_objects()
    assert len(objects) > 100
    for obj in objects:
        assert_same_verdicts(obj, obj["kind"])


def test_typed_groups_are_the_core_ones_and_dras() -> None:
    assert {"", "apps", "batch"} == CORE_GROUPS
    assert CORE_GROUPS | {"resource.k8s.io"} == TYPED_GROUPS


@pytest.mark.parametrize("group", sorted(TYPED_GROUPS))
def test_typed_groups_keep_only_the_judged_fields(group: str) -> None:
    """An object of a typed group loses what no rule reads (here ``spec.colour``); any other group's object
    (a custom resource, whose templates are wherever its kind says) is kept whole."""
    api_version = f"{group}/v1" if group else "v1"
    obj = {"apiVersion": api_version, "kind": "X", "metadata": {"name": "x", "uid": "u"},
           "spec": {"colour": "red", "containers": []}}
    kept = decode_object(msgspec.Raw(json.dumps(obj).encode()), group)
    assert kept["apiVersion"] == api_version and kept["metadata"] == {"name": "x"}
    assert "colour" not in kept["spec"]
    whole = decode_object(msgspec.Raw(json.dumps(obj).encode()), "jobset.x-k8s.io")
    assert whole == obj


def test_claims_keep_their_claim_spec_and_get_the_same_verdicts() -> None:
    """DRA's claims are typed (resource.k8s.io): the decoded claim keeps its device requests, and every
    fixture gets the verdict its whole object gets, a refusal included."""
    assert len(CLAIMS) == 7 and {c["kind"] for c in CLAIMS} <= {"ResourceClaim", "ResourceClaimTemplate"}
    for claim in CLAIMS:
        kept = decoded(claim, claim["kind"])
        requests = (kept["spec"]["spec"] if claim["kind"] == "ResourceClaimTemplate" else kept["spec"])["devices"]
        assert [r["name"] for r in requests["requests"]] == [
            r["name"] for r in (claim["spec"]["spec"] if claim["kind"] == "ResourceClaimTemplate"
                                else claim["spec"])["devices"]["requests"]]
        assert_same_verdicts(claim, claim["kind"])
    refused = [c for c in CLAIMS if evaluate(decoded(c, c["kind"]), CONFIGS[-1][0], Mode.ENFORCE,
                                             NO_FACTS).violations]
    assert len(refused) == 3  # the fail/ fixtures: the test can fail when claims decode to nothing


def test_kept_fields_only() -> None:
    """The inference Pod keeps its judged fields (and what ``numa: auto`` will read), nothing else."""
    obj = decoded(inference_pod())
    assert set(obj) == {"apiVersion", "kind", "metadata", "spec"}  # apiVersion: its group picks the kind
    assert set(obj["metadata"]) == {"name", "namespace"}
    # schedulerName: /place leaves a scheduler the user chose alone
    assert set(obj["spec"]) == {"containers", "runtimeClassName", "schedulerName", "nodeSelector", "tolerations"}
    assert set(obj["spec"]["containers"][0]) == {"name", "resources"}
    assert obj["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "8", "memory": "64Gi",
                                                                  "nvidia.com/gpu": "1"}
    affinity: dict[str, Any] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule",
                    "tolerationSeconds": 30}, {"operator": "Exists"}]
    assert decoded(pod(guaranteed(), tolerations=tolerations))["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"operator": "Exists"}]
    spec = decoded(pod(guaranteed(), affinity=affinity))["spec"]
    assert spec["affinity"] == {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                 affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]}}


@settings(max_examples=300, deadline=None)
@given(quantity)
def test_quantities_keep_their_json_type(value: Any) -> None:
    """A string stays a string, an integer an exact integer (beyond 64 bits too), a float the float
    ``json.loads`` reads; any other value is kept for the engine to name (``invalid-quantity``)."""
    body = json.dumps(admission_review(pod(container("a", limits={"cpu": value})))).encode()
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        with pytest.raises(BadReview, match="body is not JSON"):  # json.dumps writes NaN, but it is not JSON
            parse_review(body)
        return
    expected = json.loads(body)["request"]["object"]["spec"]["containers"][0]["resources"]["limits"]["cpu"]
    kept = parse_review(body).obj["spec"]["containers"][0]["resources"]["limits"]["cpu"]
    assert type(kept) is type(expected) and kept == expected


@pytest.mark.parametrize("text, value", [("123456789012345678901234567890", 123456789012345678901234567890),
                                         ("1e3", 1000.0), ("1e400", float("inf")), ("2.50", 2.5)])
def test_json_numbers_as_json_loads_reads_them(text: str, value: Any) -> None:
    body = json.dumps(admission_review(pod(container("a", limits={"cpu": "@"})))).encode().replace(b'"@"',
                                                                                                    text.encode())
    assert parse_review(body).obj["spec"]["containers"][0]["resources"]["limits"]["cpu"] == value


@pytest.mark.parametrize("obj, reason", [
    ({"kind": "Pod", "spec": {"containers": "nope"}}, "request.object: spec.containers: expected a list, got a string"),
    ({"kind": "Pod", "spec": {"containers": [{"name": 5}]}},
     "request.object: spec.containers[0].name: expected a string, got a number"),
    ({"kind": "Pod", "spec": {"containers": [{"resources": {"limits": ["1"]}}]}},
     "request.object: spec.containers[0].resources.limits: expected a mapping, got a list"),
    ({"kind": "Deployment", "spec": {"template": {"spec": {"initContainers": {}}}}},
     "request.object: spec.template.spec.initContainers: expected a list, got a mapping"),
    ("pod", "request.object is not an object"),
])
def test_wrong_types_name_the_field(obj: Any, reason: str) -> None:
    with pytest.raises(BadReview) as err:
        parse_review(json.dumps(admission_review(obj, kind="Pod")).encode())
    assert str(err.value) == reason


@pytest.mark.parametrize("body, reason", [
    (b"not json", "body is not JSON"), (b'{"a": 1', "body is not JSON"), (b"\xff\xfe\x00", "not UTF-8 (byte 0)"),
    (b"[1, 2]", "body is not an AdmissionReview object"), (b"[" * 100_000, "body is not an AdmissionReview object"),
    (b'{"request": {"x": ' + b"[" * 100_000, "nested too deeply"),
    (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"uid": "u", "kind": {"kind": '
     b'"Pod"}, "object": {"spec": {"containers": [{"resources": {"limits": {"cpu": ' + b"9" * 5001 + b"}}}]}}}}",
     "number"),
    (b'{"kind": "AdmissionReview", "apiVersion": 1}', "apiVersion: expected a string, got a number"),
    (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"uid": "u"}}',
     "request.kind.kind is missing"),
])
def test_malformed_bodies_name_what_is_wrong(body: bytes, reason: str) -> None:
    with pytest.raises(BadReview) as err:
        parse_review(body)
    assert reason in str(err.value)


def test_unknown_fields_are_skipped_not_built() -> None:
    """A 5,001-digit integer or a list 800 deep in a field nobody reads is skipped as Go's decoder skips it;
    one in a judged field is refused (above)."""
    base = admission_review(pod(guaranteed()))
    for extra in (b"9" * 5001, b"[" * 800 + b"]" * 800, json.dumps({"k" * 10: list(range(1000))}).encode()):
        body = json.dumps(base).encode().replace(b'"object": {', b'"object": {"extra": ' + extra + b", ", 1)
        assert parse_review(body).obj == json.loads(json.dumps(decoded(pod(guaranteed()))))


@pytest.mark.parametrize("name", ["inference", "1 MB", "3 MiB"])
def test_decoding_builds_a_small_fraction_of_the_body(name: str) -> None:
    """The footprint goal's decoding part: the decoded review of a realistic Pod holds under 0.1x its body
    (``json.loads`` built about 5x: tests/bench and docs/performance have the whole request's figures)."""
    body = bodies()[name]
    parse_review(body)
    tracemalloc.start()
    try:
        review = parse_review(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert review.obj is not None
    assert peak < 0.1 * len(body), (peak, len(body))


def test_namespace_labels_only_for_the_namespace_endpoint() -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "labels": {"qos-guard.io/mode": "x"}}}
    body = json.dumps(admission_review(ns, kind="Namespace")).encode()
    assert "labels" not in parse_review(body).obj["metadata"]
    assert parse_review(body, ENDPOINTS["/validate-namespace"]).obj["metadata"]["labels"] == {"qos-guard.io/mode": "x"}


def test_no_object() -> None:
    """A DELETE has no object: nothing is decoded for the engine."""
    assert plain(None) is None
    review = decode(json.dumps(admission_review(None)).encode())
    assert review.request is not None and bytes(review.request.object) in (b"", b"null")  # left raw
    assert parse_review(json.dumps(admission_review(None)).encode()).obj is None


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(pod_spec, st.sampled_from(["Pod", "Deployment", "CronJob", "PodTemplate"]))
def test_any_spec_in_any_kind(spec: Any, kind: str) -> None:
    from tests.reliability.strategies import _wrap
    assert_same_verdicts(_wrap(kind, spec, {"name": "x"}), kind)


def kept_paths() -> set[tuple[str, ...]]:
    """Every field path the decoder keeps in an object (``*`` for a list item or a map entry)."""
    import msgspec

    from webhook.admission.decode import Manifest
    out: set[tuple[str, ...]] = set()

    def walk(info: Any, prefix: tuple[str, ...]) -> None:
        if isinstance(info, msgspec.inspect.UnionType):
            for t in info.types:
                walk(t, prefix)
        elif isinstance(info, msgspec.inspect.StructType):
            for f in info.fields:
                out.add((*prefix, f.encode_name))
                walk(f.type, (*prefix, f.encode_name))
        elif isinstance(info, msgspec.inspect.ListType):
            walk(info.item_type, (*prefix, "*"))
        elif isinstance(info, msgspec.inspect.DictType):
            out.add((*prefix, "*"))
            walk(info.value_type, (*prefix, "*"))

    walk(msgspec.inspect.type_info(Manifest), ())
    return out


class Tracked(dict):  # type: ignore[type-arg]
    """A mapping that records every key the engine reads from it (and from what it holds)."""

    def __init__(self, data: dict[str, Any], path: tuple[str, ...], seen: set[tuple[str, ...]]) -> None:
        super().__init__({k: track(v, (*path, k), seen) for k, v in data.items()})
        self.path, self.seen = path, seen

    def _read(self, key: Any) -> None:
        self.seen.add((*self.path, str(key)))

    def __getitem__(self, key: Any) -> Any:
        self._read(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._read(key)
        return super().get(key, default)

    def __contains__(self, key: Any) -> bool:
        self._read(key)
        return super().__contains__(key)

    def items(self) -> Any:
        self.seen.add((*self.path, "*"))
        return super().items()

    def __iter__(self) -> Any:
        self.seen.add((*self.path, "*"))
        return super().__iter__()

    def __copy__(self) -> Tracked:
        """The mutation copies mappings along a changed path (whole, unread): not a read of their keys."""
        copied = Tracked({}, self.path, self.seen)
        dict.update(copied, dict.items(self))
        return copied


def track(value: Any, path: tuple[str, ...], seen: set[tuple[str, ...]]) -> Any:
    if isinstance(value, dict):
        return Tracked(value, path, seen)
    if isinstance(value, list):
        return [track(v, (*path, "*"), seen) for v in value]
    return value


def _general(path: tuple[str, ...]) -> tuple[str, ...]:
    """A read path with the keys of open maps (``requests.cpu``, ``nodeSelector.zone``) as ``*``."""
    out: list[str] = []
    for seg in path:
        out.append("*" if out and out[-1] in ("requests", "limits", "nodeSelector", "labels") else seg)
    return tuple(out)


def test_the_engine_reads_only_what_the_decoder_keeps() -> None:
    """Every field the engine and the mutation read, over the corpus and generated objects in every mode and
    configuration, is one the decoder keeps: a rule that starts reading a new field fails here until the field
    is added to webhook/admission/decode.py (one line in its Struct)."""
    kept = kept_paths()
    objects: list[Any] = corpus_objects()
    objects += [*CLAIMS, inference_pod(), pod(guaranteed(), affinity={"nodeAffinity": {}}, nodeSelector={"a": "b"}),
                pod(guaranteed(), nodeName="n"),
                pod(guaranteed(), tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule",
                                                "tolerationSeconds": 30}]),
                pod(container("a", rl("1500m", "1Gi"), rl("2", "2Gi")), resources={"limits": {"cpu": "2"}},
                    init=[container("s", limits=rl("1", "1Gi"), restartPolicy="Always")], runtimeClassName="x"),
                {**pod(guaranteed()), "status": {"qosClass": "Burstable"}}]
    read: set[tuple[str, ...]] = set()
    for obj in objects:
        if not isinstance(obj, dict) or obj.get("kind") == "List":
            continue
        if str(obj.get("apiVersion", "")).rpartition("/")[0] not in TYPED_GROUPS:
            continue  # a custom resource is kept whole (decode_object): only core kinds and DRA's claims are typed
        for config in CONFIGS:
            for mode in (Mode.ENFORCE, Mode.MUTATE):
                tracked = track(json.loads(json.dumps(obj)), (), read)
                try:
                    verdict = evaluate(tracked, config[0], mode, config[1])
                except ManifestError:
                    continue
                for result in verdict.results:
                    _ = result.findings  # plans the mutation and judges what it leaves
                if verdict.changes:
                    json_patch(tracked, verdict.changes)
    unkept = {p for p in map(_general, read) if p not in kept and p[:1] != ("apiVersion",)}
    assert not unkept, sorted(unkept)
