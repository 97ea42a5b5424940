"""Hypothesis strategies for what users and API servers actually send, and for what they should not:
Pod specs with random containers, init containers and sidecars, quantities from a grammar that includes
invalid strings, missing and null fields, and wrong types everywhere."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

SUFFIXES = ["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "E-2", "e+1", "u", "n"]
BAD_SUFFIXES = ["mm", "KiB", "g", "K", "%", "cores", " ", "e", "E+", "i"]

digits = st.text("0123456789", min_size=1, max_size=6)
valid_quantity = st.builds(
    lambda sign, whole, frac, suffix: f"{sign}{whole}{frac}{suffix}",
    st.sampled_from(["", "", "", "+", "-"]), digits,
    st.one_of(st.just(""), digits.map(lambda d: "." + d)), st.sampled_from(SUFFIXES))
invalid_quantity = st.one_of(
    st.builds(lambda d, s: d + s, digits, st.sampled_from(BAD_SUFFIXES)),
    st.sampled_from(["", " 1", "1 ", ".", "-", "1..2", "0x10", "NaN", "inf", "1e999999999999", "٣", "1/2"]),
    st.text(max_size=8))
# A quantity as JSON/YAML can carry it: strings, numbers (ints, floats), and wrong types.
quantity = st.one_of(
    valid_quantity, valid_quantity, invalid_quantity,
    st.integers(min_value=-10**20, max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), st.none(), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                                  st.integers(), max_size=1))
resource_name = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "hugepages-2Mi", "ephemeral-storage",
                                 "example.com/dev"])
resource_list = st.one_of(
    st.dictionaries(resource_name, quantity, max_size=4),
    st.none(), st.just([]), st.text(max_size=4), st.integers())
resources = st.one_of(
    st.fixed_dictionaries({}, optional={"requests": resource_list, "limits": resource_list,
                                        "claims": st.lists(st.dictionaries(st.just("name"), st.text(max_size=4)),
                                                           max_size=1)}),
    st.none(), st.text(max_size=3), st.lists(st.integers(), max_size=2))


def _container(init: bool) -> st.SearchStrategy[Any]:
    optional: dict[str, st.SearchStrategy[Any]] = {
        "name": st.one_of(st.text(min_size=1, max_size=6), st.none(), st.integers()),
        "image": st.just("example/app:1"),
        "resources": resources,
    }
    if init:
        optional["restartPolicy"] = st.one_of(st.just("Always"), st.just("Never"), st.none(), st.integers())
    container = st.fixed_dictionaries({}, optional=optional)
    return st.one_of(container, container, container, st.none(), st.text(max_size=3), st.integers())


containers = st.one_of(st.lists(_container(False), max_size=4), st.none(), st.text(max_size=3),
                       st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
init_containers = st.one_of(st.lists(_container(True), max_size=3), st.none(), st.integers())
pod_spec = st.one_of(
    st.fixed_dictionaries({}, optional={
        "containers": containers, "initContainers": init_containers,
        "ephemeralContainers": st.lists(_container(False), max_size=1),
        "resources": resources, "runtimeClassName": st.one_of(st.text(max_size=5), st.none(), st.integers()),
        "restartPolicy": st.sampled_from(["Always", "OnFailure", "Never"]),
    }),
    st.none(), st.text(max_size=3), st.lists(st.integers(), max_size=2))
metadata = st.one_of(
    st.fixed_dictionaries({}, optional={"name": st.one_of(st.text(max_size=8), st.none(), st.integers()),
                                        "namespace": st.one_of(st.text(max_size=8), st.none(), st.integers()),
                                        "labels": st.dictionaries(st.text(max_size=5), st.text(max_size=5),
                                                                  max_size=2)}),
    st.none(), st.text(max_size=3))

KINDS = ["Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "ReplicationController",
         "PodTemplate", "List", "ConfigMap", "Namespace"]


def _wrap(kind: str, spec: Any, meta: Any) -> dict[str, Any]:
    """Put ``spec`` where ``kind`` keeps its Pod spec."""
    api = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "ReplicaSet": "apps/v1",
           "Job": "batch/v1", "CronJob": "batch/v1"}
    obj: dict[str, Any] = {"apiVersion": api.get(kind, "v1"), "kind": kind, "metadata": meta}
    template = {"metadata": {"labels": {"a": "b"}}, "spec": spec}
    if kind == "Pod":
        obj["spec"] = spec
    elif kind == "CronJob":
        obj["spec"] = {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}
    elif kind == "PodTemplate":
        obj["template"] = template
    elif kind == "List":
        obj["items"] = [{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}]
    elif kind in ("ConfigMap", "Namespace"):
        obj["data"] = {"spec": str(spec)[:20]}
    else:
        obj["spec"] = {"replicas": 1, "template": template}
    return obj


workload = st.builds(_wrap, st.sampled_from(KINDS), pod_spec, metadata)
# Any JSON value at all, for bodies and objects that are not what they claim.
json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=20)
