"""The sample the three-way differential test judges, and the three judges.

Objects: every pod spec in the manifests the other tests use, rebuilt as a valid object of its kind (and of
every other workload kind), plus hypothesis-generated Pods and workloads. Judges: the Python engine
(``webhook.core.engine.evaluate``), the webhook (its Flask app, over AdmissionReview), and a real API server that
has only the generated admission policies (server-side dry-run create, many at once).
"""

from __future__ import annotations

import base64
import copy
import json
import re
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonpatch
import requests
import yaml
from hypothesis import strategies as st

from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.kubeversion import Semantics
from webhook.core.mutation import apply_changes
from webhook.core.podspec import build_pod_spec
from webhook.core.quantity import QuantityError, quantity_from_value
from webhook.core.resourceblock import ManifestError
from webhook.core.rules import RULE_IDS
from webhook.core.workloads import find_targets
from webhook.serving.app import create_app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "manifests"
IMAGE = "registry.invalid/app:1"

# kind -> (apiVersion, REST collection)
KINDS: dict[str, tuple[str, str]] = {
    "Pod": ("v1", "pods"),
    "PodTemplate": ("v1", "podtemplates"),
    "ReplicationController": ("v1", "replicationcontrollers"),
    "Deployment": ("apps/v1", "deployments"),
    "ReplicaSet": ("apps/v1", "replicasets"),
    "StatefulSet": ("apps/v1", "statefulsets"),
    "DaemonSet": ("apps/v1", "daemonsets"),
    "Job": ("batch/v1", "jobs"),
    "CronJob": ("batch/v1", "cronjobs"),
}
RULES_IN_MESSAGE = re.compile(r"(?:kubelet: |; )(" + "|".join(map(re.escape, (*RULE_IDS, "status-qos-class")))
                              + r"): ")


def build(kind: str, name: str, spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    """A valid object of ``kind`` whose pod spec is ``spec`` (selectors, labels and restart policies filled in
    as the API server requires; the resources untouched)."""
    api_version = KINDS[kind][0]
    spec = copy.deepcopy(spec)
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        c.setdefault("image", IMAGE)
    labels = {"app": name}
    meta: dict[str, Any] = {"name": name}
    if kind == "Pod":
        obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}
        if status is not None:
            obj["status"] = status
        return obj
    template = {"metadata": {"labels": labels}, "spec": spec}
    if kind in ("Job", "CronJob"):
        spec["restartPolicy"] = "Never"
    elif "restartPolicy" in spec:
        spec["restartPolicy"] = "Always"
    if kind == "PodTemplate":
        return {"apiVersion": api_version, "kind": kind, "metadata": meta, "template": template}
    if kind == "Job":
        body: dict[str, Any] = {"template": template}
    elif kind == "CronJob":
        body = {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template}}}
    elif kind == "ReplicationController":
        body = {"selector": labels, "template": template}
    else:
        body = {"selector": {"matchLabels": labels}, "template": template}
        if kind == "StatefulSet":
            body["serviceName"] = name
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": body}


def _well_formed(spec: dict[str, Any]) -> bool:
    """Shapes the engine refuses as malformed (ManifestError) the API server refuses too: not compared."""
    try:
        build_pod_spec(spec, ("spec",))
    except ManifestError:
        return False
    return True


def fixture_objects() -> list[dict[str, Any]]:
    """Every pod spec in tests/fixtures/manifests (the readable documents), as every kind."""
    specs: list[dict[str, Any]] = []
    for path in sorted(FIXTURES.rglob("*")):
        if path.suffix not in (".yaml", ".yml", ".json"):
            continue
        try:
            docs = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue  # the deliberately broken fixtures
        for doc in docs:
            try:
                specs += [dict(t.spec) for t in find_targets(doc)]
            except ValueError:
                continue
    from tests.e2e.conftest import compliant_pod, violating_pod
    specs += [violating_pod("x")["spec"], compliant_pod("x")["spec"], violating_pod("x", "2500m")["spec"]]
    specs = [spec for spec in specs if _well_formed(spec)]
    return [build(kind, f"fx-{i}-{kind.lower()}", spec) for i, spec in enumerate(specs) for kind in KINDS]


# ------------------------------------------------------------------------------------------ hypothesis

CPUS = ["1", "2", "4", "16", "500m", "1500m", "2000m", "4000m", "0", "1.5", "4e0", "40e-1", "1.0001", "0.5",
        "100m", "3", "2.0"]
MEMORY = ["1Gi", "1024Mi", "2Gi", "512Mi", "0", "1G", "1e9", "1.5Gi", "128974848", "129e6", "123Mi"]
RARE = ["1K", "2e3m", "-1", "abc", " 2"]  # refused by the API server (decoding, validation); " 2" is 2
NAMES = ["app", "istio-proxy", "sidecar", "worker", "vllm", "init", "proxy"]


def sometimes(one_in: int) -> st.SearchStrategy[bool]:
    """True about once in ``one_in`` draws (hypothesis favours small integers, so not integers(0, n) == 0)."""
    return st.sampled_from([False] * (one_in - 1) + [True])


@st.composite
def quantities(draw: st.DrawFn, values: list[str]) -> str:
    if draw(sometimes(40)):
        return draw(st.sampled_from(RARE))
    return draw(st.sampled_from(values))


@st.composite
def resource_lists(draw: st.DrawFn) -> dict[str, str]:
    out: dict[str, str] = {}
    if draw(st.booleans()):
        out["cpu"] = draw(quantities(CPUS))
    if draw(st.booleans()):
        out["memory"] = draw(quantities(MEMORY))
    return out


@st.composite
def containers(draw: st.DrawFn, name: str, init: bool) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": IMAGE}
    shape = draw(st.sampled_from(range(1, 11)))
    if shape == 10:
        return c
    resources: dict[str, Any] = {}
    # Mostly the realistic shape (limits, sometimes requests); sometimes anything.
    if shape <= 6:
        resources["limits"] = {"cpu": draw(quantities(CPUS)), "memory": draw(quantities(MEMORY))}
        if draw(st.booleans()):
            resources["requests"] = draw(resource_lists())
    else:
        for kind in ("limits", "requests"):
            if draw(st.booleans()):
                resources[kind] = draw(resource_lists())
    if draw(sometimes(12)):  # an extended resource: requests == limits by API validation
        resources.setdefault("limits", {})["example.com/fpga"] = "1"
        resources.setdefault("requests", {})["example.com/fpga"] = "1"
    c["resources"] = resources
    if init and draw(st.booleans()):
        c["restartPolicy"] = "Always"  # a sidecar
    return c


@st.composite
def pod_specs(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    n_init = draw(st.integers(0, min(2, len(names) - 1)))
    spec: dict[str, Any] = {
        "containers": [draw(containers(n, False)) for n in names[n_init:]],
    }
    if n_init:
        spec["initContainers"] = [draw(containers(n, True)) for n in names[:n_init]]
    if draw(sometimes(10)):
        spec["resources"] = draw(st.fixed_dictionaries({}, optional={
            "limits": resource_lists(), "requests": resource_lists()}))
    if draw(sometimes(15)):
        spec["runtimeClassName"] = draw(st.sampled_from(["kata", "gvisor"]))
    if draw(sometimes(15)):  # DRA devices (dra-unaligned)
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    return spec


@st.composite
def objects(draw: st.DrawFn, index: int) -> dict[str, Any]:
    spec = draw(pod_specs())
    kind = draw(st.sampled_from(["Pod"] * 3 + sorted(KINDS)))
    status = None
    if kind == "Pod" and draw(sometimes(15)):
        status = {"qosClass": draw(st.sampled_from(["Burstable", "BestEffort", "Guaranteed"]))}
    return build(kind, f"hy-{index}", spec, status)


# ------------------------------------------------------------------------------------------ the judges

@dataclass(frozen=True)
class Verdict:
    """One judge's answer: admitted, refused by the rules, or refused by the API server's own validation
    (``invalid``); the rule ids named; for an admitted Pod the cpu/memory of every container in milli."""

    outcome: str  # "admit" | "deny" | "invalid"
    rules: frozenset[str] = frozenset()
    resources: tuple[tuple[str, str, str, int | None], ...] = ()
    qos: str | None = None
    detail: str = ""


def milli(value: Any) -> int | None:
    try:
        return quantity_from_value(value).milli
    except QuantityError:
        return None


def pod_resources(spec: dict[str, Any], default: bool) -> tuple[tuple[str, str, str, int | None], ...]:
    """(container, kind, resource, milli) for cpu and memory; ``default`` copies missing requests from limits
    as the API server does for a Pod."""
    out = []
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        res = c.get("resources") or {}
        limits, requests_ = dict(res.get("limits") or {}), dict(res.get("requests") or {})
        if default:
            for k, v in limits.items():
                requests_.setdefault(k, v)
        for kind, values in (("limits", limits), ("requests", requests_)):
            for r in ("cpu", "memory"):
                if r in values:
                    out.append((c["name"], kind, r, milli(values[r])))
    return tuple(sorted(out))


def engine_verdict(obj: dict[str, Any], config: Config, mode: Mode, namespace: str, facts: Facts) -> Verdict:
    """The engine's verdict at ``facts``' minor (the API server's: ``Cluster.facts``)."""
    verdict = evaluate(obj, config, mode, facts, namespace=namespace, username="e2e-admin")
    rules = frozenset(v.rule for _, v in verdict.violations)
    if not verdict.allowed:
        return Verdict("invalid" if "invalid-quantity" in rules else "deny", rules)
    if obj["kind"] == "Pod" and mode is Mode.MUTATE:
        fixed = apply_changes(obj, list(verdict.changes))
        return Verdict("admit", rules, pod_resources(fixed["spec"], True))
    if obj["kind"] == "Pod":
        return Verdict("admit", rules, pod_resources(obj["spec"], True))
    return Verdict("admit", rules)


class WebhookJudge:
    """The webhook's Flask app, called as the API server calls it (AdmissionReview v1)."""

    def __init__(self, config: Config, kubernetes: Semantics) -> None:
        """``kubernetes``: the API server's minor, which ``serve`` reads from /version at start."""
        self.client = create_app(config, kubernetes=kubernetes).test_client()

    def _review(self, path: str, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
        group, _, version = KINDS[obj["kind"]][0].rpartition("/")
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": group, "version": version, "kind": obj["kind"]},
            "operation": "CREATE", "namespace": namespace, "name": obj["metadata"]["name"], "object": obj,
            "userInfo": {"username": "e2e-admin"}}}
        resp = self.client.post(path, json=body)
        assert resp.status_code == 200, resp.get_data(as_text=True)
        out: dict[str, Any] = resp.get_json()["response"]
        return out

    def judge(self, obj: dict[str, Any], mode: Mode, namespace: str) -> Verdict:
        if mode is Mode.MUTATE:
            patched = self._review("/mutate", obj, namespace)
            if patched.get("patch"):
                ops = json.loads(base64.b64decode(patched["patch"]))
                obj = jsonpatch.apply_patch(obj, ops)
            answer = self._review("/validate/mutate", obj, namespace)
        else:
            answer = self._review("/validate", obj, namespace)
        if answer["allowed"]:
            res = pod_resources(obj["spec"], True) if obj["kind"] == "Pod" else ()
            return Verdict("admit", resources=res)
        message = answer["status"]["message"]
        rules = frozenset(m.group(1) for m in re.finditer(r"^([a-z-]+): ", message, re.M))
        return Verdict("invalid" if "invalid-quantity" in rules else "deny", rules, detail=message)


class ServerJudge:
    """Server-side dry-run creates against a real API server, in parallel (one session per thread)."""

    def __init__(self, url: str, token: str, ca: str, workers: int = 8) -> None:
        self.url, self.token, self.ca, self.workers = url, token, ca, workers
        self.local = threading.local()

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self.local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers["Authorization"] = f"Bearer {self.token}"
            self.local.session = session
        return session

    def create(self, obj: dict[str, Any], namespace: str) -> requests.Response:
        api_version, collection = KINDS[obj["kind"]]
        base = "api/v1" if api_version == "v1" else f"apis/{api_version}"
        # verify= on the call: a REQUESTS_CA_BUNDLE in the environment would override the session's.
        return self._session().post(f"{self.url}/{base}/namespaces/{namespace}/{collection}",
                                    params={"dryRun": "All"}, json=obj, timeout=60, verify=self.ca)

    def judge(self, obj: dict[str, Any], namespace: str) -> Verdict:
        resp = self.create(obj, namespace)
        if resp.status_code in (200, 201):
            body = resp.json()
            if body["kind"] == "Pod":
                return Verdict("admit", resources=pod_resources(body["spec"], False),
                               qos=body.get("status", {}).get("qosClass"))
            return Verdict("admit")
        status = resp.json() if resp.headers.get("content-type", "").startswith("application/json") else {}
        message = str(status.get("message", resp.text))
        if resp.status_code == 403 and "ValidatingAdmissionPolicy" in message:
            rules = frozenset(m.group(1) for m in RULES_IN_MESSAGE.finditer(message))
            return Verdict("deny", rules, detail=message)
        if resp.status_code in (400, 422):
            return Verdict("invalid", detail=message)
        raise AssertionError(f"unexpected answer {resp.status_code} for {obj['kind']} "
                             f"{obj['metadata']['name']}: {message}")

    def judge_all(self, objs: Iterable[dict[str, Any]], namespace: str) -> list[Verdict]:
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(lambda o: self.judge(o, namespace), objs))


@dataclass
class Tally:
    """Counts printed at the end of the differential test."""

    objects: int = 0
    compared: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    known: dict[str, int] = field(default_factory=dict)
    agreed: int = 0

    def add(self, key: str, into: dict[str, int]) -> None:
        into[key] = into.get(key, 0) + 1
