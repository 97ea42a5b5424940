"""Where the Pod spec lives in every workload kind; other kinds are ignored."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import container, rl
from webhook.core.fieldpath import dotted, pointer
from webhook.core.podspec import ManifestError
from webhook.core.workloads import KINDS, find_targets

SPEC = {"containers": [container("a", rl("1", "1Gi"), rl("1", "1Gi"))]}
TEMPLATE = {"template": {"spec": SPEC}}


def obj(kind: str, **body: Any) -> dict[str, Any]:
    return {"apiVersion": "x", "kind": kind, "metadata": {"name": kind.lower(), "namespace": "ns"}, **body}


WORKLOADS = [
    (obj("Pod", spec=SPEC), "spec"),
    (obj("Deployment", spec=TEMPLATE), "spec.template.spec"),
    (obj("ReplicaSet", spec=TEMPLATE), "spec.template.spec"),
    (obj("StatefulSet", spec=TEMPLATE), "spec.template.spec"),
    (obj("DaemonSet", spec=TEMPLATE), "spec.template.spec"),
    (obj("Job", spec=TEMPLATE), "spec.template.spec"),
    (obj("ReplicationController", spec=TEMPLATE), "spec.template.spec"),
    (obj("CronJob", spec={"schedule": "* * * * *", "jobTemplate": {"spec": TEMPLATE}}),
     "spec.jobTemplate.spec.template.spec"),
    (obj("PodTemplate", template={"spec": SPEC}), "template.spec"),
]


@pytest.mark.parametrize(("manifest", "path"), WORKLOADS, ids=[w[0]["kind"] for w in WORKLOADS])
def test_every_workload_kind(manifest: dict[str, Any], path: str) -> None:
    (target,) = find_targets(manifest)
    assert dotted(target.path) == path and target.spec is not None
    assert target.kind == manifest["kind"] and target.name == manifest["kind"].lower()
    assert target.namespace == "ns"


def test_list_items() -> None:
    lst = {"apiVersion": "v1", "kind": "List", "items": [w[0] for w in WORKLOADS] + [obj("Service")]}
    targets = list(find_targets(lst))
    assert [dotted(t.path) for t in targets][:2] == ["items[0].spec", "items[1].spec.template.spec"]
    assert len(targets) == len(WORKLOADS)


@pytest.mark.parametrize("manifest", [obj("Service", spec={}), obj("ConfigMap"), {"kind": 3}, "text", None,
                                      obj("Deployment", spec={"replicas": 2})])
def test_ignored(manifest: Any) -> None:
    assert list(find_targets(manifest)) == []


def test_wrong_shape_is_named() -> None:
    with pytest.raises(ManifestError) as err:
        list(find_targets(obj("Deployment", spec={"template": "nope"})))
    assert err.value.path == ("spec", "template")


def test_every_kind_in_the_table_is_found() -> None:
    assert {w[0]["kind"] for w in WORKLOADS} == set(KINDS)


def test_printed_forms() -> None:
    path = ("items", 3, "spec", "containers", 0, "resources", "a/b~c")
    assert dotted(path) == "items[3].spec.containers[0].resources.a/b~c"
    assert pointer(path) == "/items/3/spec/containers/0/resources/a~1b~0c"
