"""QoS class as kubelet computes it: the cases of pkg/apis/core/v1/helper/qos/qos_test.go
(``TestComputePodQOS``), with the PodLevelResources feature on, plus sidecars and ephemeral containers."""

from __future__ import annotations

import pytest

from tests.builders import container, pod, rl
from webhook.core.podspec import BEST_EFFORT, BURSTABLE, GUARANTEED, build_pod_spec
from webhook.core.qos import qos_class


def c(name: str, req: dict[str, str], lim: dict[str, str]) -> dict[str, object]:
    return container(name, req, lim)


def res(req: dict[str, str], lim: dict[str, str]) -> dict[str, object]:
    return {"requests": req, "limits": lim}


CASES = [
    ("guaranteed", pod(c("g", rl("100m", "100Mi"), rl("100m", "100Mi"))), GUARANTEED),
    ("guaranteed-guaranteed", pod(c("g", rl("100m", "100Mi"), rl("100m", "100Mi")),
                                  c("g", rl("100m", "100Mi"), rl("100m", "100Mi"))), GUARANTEED),
    ("best-effort-best-effort", pod(c("b", rl(), rl()), c("b", rl(), rl())), BEST_EFFORT),
    ("best-effort", pod(c("b", rl(), rl())), BEST_EFFORT),
    ("best-effort-burstable", pod(c("b", rl(), rl()), c("u", rl("1"), rl("2"))), BURSTABLE),
    ("best-effort-guaranteed", pod(c("b", rl(), rl()), c("g", rl("10m", "100Mi"), rl("10m", "100Mi"))),
     BURSTABLE),
    ("burstable-cpu-guaranteed-memory", pod(c("u", rl("", "100Mi"), rl("", "100Mi"))), BURSTABLE),
    ("burstable-no-limits", pod(c("u", rl("100m", "100Mi"), rl())), BURSTABLE),
    ("burstable-guaranteed", pod(c("u", rl("1", "100Mi"), rl("2", "100Mi")),
                                 c("g", rl("100m", "100Mi"), rl("100m", "100Mi"))), BURSTABLE),
    ("burstable-unbounded-but-requests-match-limits",
     pod(c("u", rl("100m", "100Mi"), rl("200m", "200Mi")), c("x", rl("100m", "100Mi"), rl())), BURSTABLE),
    ("burstable-1", pod(c("u", rl("10m", "100Mi"), rl("100m", "200Mi"))), BURSTABLE),
    ("burstable-2", pod(c("u", rl("0", "0"), rl("100m", "200Mi"))), BURSTABLE),
    ("best-effort-hugepages", pod(c("b", {"cpu": "0", "memory": "0", "hugepages-2Mi": "1Gi"},
                                    {"cpu": "0", "memory": "0", "hugepages-2Mi": "1Gi"})), BEST_EFFORT),
    ("init-container", pod(c("b", rl(), rl()), init=[c("u", rl("10m", "100Mi"), rl("100m", "200Mi"))]),
     BURSTABLE),
    ("guaranteed-with-pod-level-resources",
     pod(c("b", rl(), rl()), resources=res(rl("10m", "100Mi"), rl("10m", "100Mi"))), GUARANTEED),
    ("guaranteed-with-pod-and-container-level-resources",
     pod(c("u", rl("3m", "10Mi"), rl("5m", "20Mi")), resources=res(rl("10m", "100Mi"), rl("10m", "100Mi"))),
     GUARANTEED),
    ("burstable-with-pod-level-resources",
     pod(c("b", rl(), rl()), resources=res(rl("10m", "10Mi"), rl("20m", "50Mi"))), BURSTABLE),
    ("burstable-with-pod-and-container-level-resources",
     pod(c("u", rl("5m", "10Mi"), rl("5m", "10Mi")), resources=res(rl("10m", "10Mi"), rl("20m", "50Mi"))),
     BURSTABLE),
    ("burstable-with-pod-and-container-level-requests",
     pod(c("u", rl("5m", "10Mi"), rl()), resources=res(rl("10m", "10Mi"), rl())), BURSTABLE),
    ("burstable-with-pod-and-container-level-resources-2",
     pod(c("u", rl("5m", "10Mi"), rl()), c("g", rl("5m", "10Mi"), rl("5m", "10Mi")),
         resources=res(rl("10m", "10Mi"), rl("5m"))), BURSTABLE),
    # Beyond upstream's table: API-server defaulting, sidecars and ephemeral containers.
    ("limits-only-defaults-requests", pod(c("g", rl(), rl("2", "1Gi"))), GUARANTEED),
    ("sidecar-burstable", pod(c("g", rl("1", "1Gi"), rl("1", "1Gi")),
                              init=[c("s", rl("100m", "64Mi"), rl()) | {"restartPolicy": "Always"}]), BURSTABLE),
    ("ephemeral-ignored", pod(c("g", rl("1", "1Gi"), rl("1", "1Gi")),
                              ephemeralContainers=[{"name": "debug", "image": "busybox"}]), GUARANTEED),
    ("pod-level-limits-only-defaults-requests", pod(c("b", rl(), rl()), resources=res(rl(), rl("2", "1Gi"))),
     GUARANTEED),
    ("memory-units-compare-numerically", pod(c("g", rl("1", "1Gi"), rl("1000m", "1024Mi"))), GUARANTEED),
    ("extended-resources-do-not-count", pod(c("g", rl("1", "1Gi") | {"nvidia.com/gpu": "1"},
                                              rl("1", "1Gi") | {"nvidia.com/gpu": "1"})), GUARANTEED),
]


@pytest.mark.parametrize(("name", "manifest", "expected"), CASES, ids=[case[0] for case in CASES])
def test_compute_pod_qos(name: str, manifest: dict[str, object], expected: str) -> None:
    assert qos_class(build_pod_spec(manifest["spec"], ("spec",))) == expected


def test_pod_level_requests_default_to_container_aggregate() -> None:
    spec = pod(c("a", rl("1", "1Gi"), rl()), c("b", rl("2", "1Gi"), rl()),
               resources={"limits": rl("4", "4Gi")})["spec"]
    parsed = build_pod_spec(spec, ("spec",))
    assert parsed.pod_level is not None
    assert parsed.pod_level.requests["cpu"].milli == 3000
    assert parsed.pod_level.requests["memory"].milli == 2 * 2**30 * 1000
    assert qos_class(parsed) == BURSTABLE
