"""What Kubernetes does with the minimal manifest of each divergence class the differential tests found
(tests/fidelity): these pin the oracle's answers, so a change in the oracle or its upstream version shows here."""

from __future__ import annotations

from typing import Any

from tests.builders import container, pod
from tests.fidelity.oracle import Oracle


def minimal(spec_extra: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
            status: dict[str, Any] | None = None) -> dict[str, Any]:
    """The minimal manifest of a divergence class: one container's limits (2 CPUs and 1Gi unless ``limits``),
    changed by ``spec_extra`` and ``status``."""
    return pod(container("a", limits=limits or {"cpu": "2", "memory": "1Gi"}, image="x"), namespace=None,
               status=status, **(spec_extra or {}))


def test_minimal_manifests(objects_oracle: Oracle) -> None:
    """Facts of the release the oracle was built against: 1.34-1.36, then 1.37's (PodLevelResourcesFixKubelet-
    QOSClass, PodLevelResourcesFixDefaulting, PrepareForCreate resetting the status), each (class, pinned); on
    1.33 (PodLevelResources off) every pod-level block is dropped, so those Pods are the baseline."""
    hugepages = {"requests": {"hugepages-2Mi": "2Mi"}, "limits": {"hugepages-2Mi": "2Mi"}}
    new = objects_oracle.kube.pod_level_qos_needs_set
    cases = [
        (minimal(), ("Guaranteed", True), ("Guaranteed", True)),                        # the baseline
        (minimal({"resources": {}}), ("BestEffort", False), ("Guaranteed", True)),    # empty pod-level resources
        (minimal({"resources": {"requests": {}}}), ("BestEffort", False), ("Guaranteed", True)),  # empty requests
        (minimal({"resources": hugepages}), ("Burstable", False), ("Guaranteed", False)),  # pod-level hugepages only
        (minimal({"resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}), ("Burstable", False),
         ("Guaranteed", False)),                                                    # pod-level requests
        (minimal(status={"qosClass": "Burstable"}), ("Burstable", False), ("Guaranteed", True)),  # a status.qosClass
        (minimal(limits={"cpu": "2"}, status={"qosClass": "Guaranteed"}), ("Guaranteed", True),
         ("Burstable", False)),                                                     # kept or reset, spec Burstable
        (minimal(limits={"cpu": "9849T", "memory": "1Gi"}), ("Guaranteed", False), ("Guaranteed", False)),  # overflow
    ]
    dropped = not objects_oracle.kube.pod_level_resources
    expected = [(obj, *(("Guaranteed", True) if dropped and "resources" in obj["spec"] else later if new else before))
                for obj, before, later in cases]
    answers = objects_oracle.ask([c[0] for c in expected])
    for (obj, qos, pinned), answer in zip(expected, answers, strict=True):
        assert not answer.get("errors") and not answer.get("decodeError"), answer
        assert answer["qosClass"] == qos, (obj, answer)
        assert all(answer["exclusive"].values()) is pinned, (obj, answer)


def test_quantity_corners(quantities_oracle: Oracle) -> None:
    texts = ["1e4294967296", "Pi", "Gi", "m", "e3", "e-10", " 1", "\t1"]
    got = [a["json"] for a in quantities_oracle.ask(texts)]
    assert [g.get("milli") for g in got] == ["1000", None, "0", "0", "0", None, "1000", None]


def test_files(read_oracle: Oracle) -> None:
    texts = ["kind: X\napiVersion: v1\na: 1:00\nb: 0o10\nc: 010\nb2: 2\nb2: 3\n", '{"a": 1}\n{"a": 2}\n',
             '[{"a": 1}]', "--- a: 1\n"]
    got = read_oracle.ask(texts)
    assert got[0]["documents"] == [{"kind": "X", "apiVersion": "v1", "a": "1:00", "b": 8, "c": 8, "b2": 3}]
    assert got[1]["documentErrors"] == ["Object 'Kind' is missing in '{\"a\": 1}'",
                                        "Object 'Kind' is missing in '{\"a\": 2}'"]  # two documents
    assert got[2].get("error") or got[2].get("documentErrors")
    assert got[3].get("error") or got[3].get("documentErrors")


def test_a_pod_level_value_that_is_not_a_quantity_is_refused_at_every_minor(objects_oracle: Oracle) -> None:
    """1.33 drops spec.resources, but decodes it first: the API server refuses it there too, as qos-guard does."""
    from webhook.core.config import Config
    from webhook.core.engine import Mode, evaluate
    from webhook.core.facts import Facts

    obj = minimal({"resources": {"limits": {"cpu": "E+"}}})
    (answer,) = objects_oracle.ask([obj])
    assert answer.get("decodeError"), answer
    found = evaluate(obj, Config(), Mode.ENFORCE, Facts(kubernetes=objects_oracle.kube)).violations
    assert ("invalid-quantity", ("spec", "resources", "limits", "cpu")) in [(v.rule, v.path) for _, v in found]
