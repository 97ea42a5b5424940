"""The builder mechanism (``webhook.core.operators``): a kind whose Pods its operator builds is judged as the Pod
built, its findings naming the object's field, and what a builder cannot know is a reason, never a verdict."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tests.builders import container, rl
from webhook.core.config import Config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import Facts
from webhook.core.fieldpath import dotted
from webhook.core.operators import CLUSTER, INPUT, NO_RELATED, Built, Related, collect, merge
from webhook.core.target import Target
from webhook.core.workloads import KINDS, Kind, Template, find_targets, related_kinds, walk

RUNTIME = ("example.com", "Runtime")


def toy_build(obj: Mapping[str, Any], related: Related) -> Iterator[Built | str]:
    """An operator that runs ``spec.model`` over the container of the Runtime named by ``spec.runtime``."""
    spec = obj["spec"]
    runtime = related.named(*RUNTIME, spec["runtime"], obj["metadata"].get("namespace"))
    if runtime is None:
        yield f"Toy: Runtime {spec['runtime']!r} not in {related.where()}"
        return
    merged = {**runtime["spec"]["containers"][0], **spec["model"]}
    yield Built(("spec",), {"containers": [merged, *runtime["spec"]["containers"][1:]]}, "spec (model)",
                ((("containers", 0), ("spec", "model")),))


TOY = Kind("Toy", "example.com", ("v1",), "toys", (Template("spec.model"),), controller=False, build=toy_build,
           related=(RUNTIME,))
TABLE = {**KINDS, TOY.key: TOY}


def toy(model: dict[str, Any], namespace: str = "ns") -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Toy", "metadata": {"name": "t", "namespace": namespace},
            "spec": {"runtime": "rt", "model": model}}


def runtime(*containers: dict[str, Any], namespace: str | None = "ns") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "rt"}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "example.com/v1", "kind": "Runtime", "metadata": meta,
            "spec": {"containers": list(containers)}}


GOOD = container("server", rl("2", "1Gi"), rl("2", "1Gi"))
BURSTY = {"resources": {"requests": rl("1", "1Gi"), "limits": rl("2", "1Gi")}}


def test_a_runtime_not_known_is_a_reason_never_a_target() -> None:
    assert list(walk(toy(BURSTY), kinds=TABLE)) == ["Toy: Runtime 'rt' not in the input"]
    assert list(find_targets(toy(BURSTY), kinds=TABLE)) == []


def test_the_built_spec_is_judged_and_named_by_the_objects_field() -> None:
    related = collect([runtime(GOOD)], related_kinds(TABLE))
    [target] = find_targets(toy(BURSTY), kinds=TABLE, related=related)
    assert isinstance(target, Target) and target.built and target.template == "spec (model)"
    pod = target.pod_spec()
    assert dotted(pod.containers[0].path) == "spec.model"
    assert dotted(pod.containers[0].resources.path) == "spec.model.resources"
    # the model's resources override the runtime's: requests 1 below the limit 2, whatever the runtime says
    assert pod.containers[0].resources.requests["cpu"].milli == 1000


def test_the_engine_refuses_the_built_pod_and_the_mutation_changes_only_the_objects_fields() -> None:
    facts = Facts(related=collect([runtime(GOOD)], related_kinds(TABLE)))
    config = Config(workloads=(TOY,))  # the configuration's table is what the engine reads: the toy is declared
    refused = evaluate(toy(BURSTY), config, Mode.ENFORCE, facts)
    assert not refused.allowed
    [violation] = [v for _, v in refused.violations if v.rule == "requests-not-equal-limits"]
    assert dotted(violation.subject).startswith("spec.model.resources")
    # the mutation sets the object's field (the model's resources override the runtime's), judged again built
    mutated = evaluate(toy(BURSTY), config, Mode.MUTATE, facts)
    assert mutated.allowed
    assert [dotted(c.path) for c in mutated.changes] == ["spec.model.resources.requests.cpu"]
    # a runtime's own sidecar is made by no field of the object: found, never "fixed"
    bursty_sidecar = container("agent", rl("100m", "64Mi"), rl("1", "64Mi"))
    facts = Facts(related=collect([runtime(GOOD, bursty_sidecar)], related_kinds(TABLE)))
    left = evaluate(toy({}), config, Mode.MUTATE, facts)
    assert left.changes == ()
    [result] = left.results
    assert [dotted(v.subject).startswith("spec.containers[1]") for v in result.left_by_fix] == [True]
    # in the Pods, patched at creation, it is fixed: mutate mode admits
    assert left.allowed and result.remaining == ()
    good = evaluate(toy({"resources": {"requests": rl("2", "1Gi"), "limits": rl("2", "1Gi")}}), config,
                    Mode.ENFORCE, Facts(related=collect([runtime(GOOD)], related_kinds(TABLE))))
    assert good.allowed and len(good.results) == 1
    # without the runtime nothing is judged: no result, never a verdict of compliance
    assert evaluate(toy(BURSTY), config, Mode.ENFORCE).results == ()


def test_related_by_namespace_and_merge_input_over_cluster() -> None:
    cluster = Related({RUNTIME: (runtime(GOOD, namespace="other"), runtime(GOOD))}, CLUSTER, frozenset({RUNTIME}))
    assert cluster.complete(*RUNTIME) and not NO_RELATED.complete(*RUNTIME)
    assert len(cluster.of(*RUNTIME, namespace="ns")) == 1
    assert len(cluster.of(*RUNTIME, cluster_scoped=True)) == 2
    mine = runtime(container("server", rl("1"), rl("1")), namespace=None)  # applied to the namespace asked
    given = collect([{"kind": "List", "apiVersion": "v1", "items": [mine]}], {RUNTIME})
    assert given.source == INPUT and given.named(*RUNTIME, "rt", "ns") is mine
    both = merge(given, cluster)
    assert both.source == CLUSTER and both.named(*RUNTIME, "rt", "ns") is mine
    assert both.named(*RUNTIME, "rt", "other") is not None
