"""Which nodes a Pod can land on, qos-guard (webhook/core/scheduling.py) against the scheduler's own code
(the oracle's ``placement`` mode: nodeaffinity.GetRequiredNodeAffinity, the TaintToleration filter, and
spec.nodeName with kubelet's own taint check).

The grammar covers nodeSelector, every operator (and unknown ones), wrong value counts, integers and
non-integers for Gt/Lt, empty terms, matchFields on metadata.name and on other keys, nodeName, and taints of
every effect against tolerations of every operator (Equal, Exists, empty, Lt/Gt, unknown), with and without
key, value and effect.
"""

from __future__ import annotations

import json
import random
from typing import Any

from tests.fidelity.conftest import SEED
from tests.fidelity.divergences import TALLY
from tests.fidelity.oracle import Oracle
from webhook.core.scheduling import node_constraints, taints

CASES = 4_000
KEYS = ["zone", "pool", "gpu", "example.com/tier", "cores"]
VALUES = ["a", "b", "gpu", "", "1", "8", "16", "-3", "+4", "007", "x1", "9223372036854775808"]
OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gt", "Lt", "Equals", ""]
NAMES = ["n0", "n1", "n2", "gpu-a"]
TAINT_KEYS = ["nvidia.com/gpu", "dedicated", "example.com/generation"]
TAINT_VALUES = ["", "present", "inference", "5", "-2", "12"]
EFFECTS = ["NoSchedule", "NoExecute", "PreferNoSchedule"]
TOLERATION_OPERATORS = ["Equal", "Exists", "", "Lt", "Gt", "Exist"]
TOLERATION_VALUES = [*TAINT_VALUES, "+5", "05", "x", "9223372036854775808"]


def _toleration(rng: random.Random) -> dict[str, Any]:
    style = rng.random()
    if style < 0.5:  # as users write them: a key and Exists, or a key, a value and an effect
        out: dict[str, Any] = {"key": rng.choice(TAINT_KEYS), "operator": "Exists"}
        if rng.random() < 0.5:
            out = {"key": out["key"], "value": rng.choice(TAINT_VALUES), "effect": rng.choice(EFFECTS)}
        return out
    out = {}
    if rng.random() < 0.85:
        out["key"] = rng.choice(TAINT_KEYS)
    if rng.random() < 0.8:
        out["operator"] = rng.choice(TOLERATION_OPERATORS)
    if rng.random() < 0.7:
        out["value"] = rng.choice(TOLERATION_VALUES)
    if rng.random() < 0.6:
        out["effect"] = rng.choice(EFFECTS)
    return out


def _taints(rng: random.Random) -> list[dict[str, Any]]:
    if rng.random() < 0.4:
        return []
    return [{"key": rng.choice(TAINT_KEYS), "value": rng.choice(TAINT_VALUES), "effect": rng.choice(EFFECTS)}
            for _ in range(rng.choice([1, 1, 2]))]


def _values(rng: random.Random, op: str) -> list[str]:
    if op in ("Gt", "Lt") and rng.random() < 0.7:
        return [rng.choice(["1", "8", "-3", "+4", "16", "x", "1.5"])]
    return rng.sample(VALUES, rng.choice([0, 1, 1, 2, 3]))


def _requirement(rng: random.Random, fields: bool) -> dict[str, Any]:
    if fields:
        op = rng.choice(["In", "NotIn", "In", "Exists"])
        key = "metadata.name" if rng.random() < 0.85 else "metadata.namespace"
        return {"key": key, "operator": op, "values": rng.sample(NAMES, rng.choice([0, 1, 1, 1, 2]))}
    op = rng.choice(OPERATORS)
    return {"key": rng.choice(KEYS), "operator": op, "values": _values(rng, op)}


def spec(rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if rng.random() < 0.4:
        out["nodeSelector"] = {k: rng.choice(VALUES) for k in rng.sample(KEYS, rng.choice([1, 1, 2]))}
    if rng.random() < 0.7:
        terms = []
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            term: dict[str, Any] = {}
            if rng.random() < 0.8:
                term["matchExpressions"] = [_requirement(rng, False) for _ in range(rng.choice([0, 1, 1, 2]))]
            if rng.random() < 0.3:
                term["matchFields"] = [_requirement(rng, True) for _ in range(rng.choice([0, 1, 1, 2]))]
            terms.append(term)
        out["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                            {"nodeSelectorTerms": terms}}}
    if rng.random() < 0.1:
        out["nodeName"] = rng.choice(NAMES)
    if rng.random() < 0.7:
        out["tolerations"] = [_toleration(rng) for _ in range(rng.choice([1, 2, 3, 4]))]
    return out


def nodes(rng: random.Random) -> list[dict[str, Any]]:
    return [{"name": name, "labels": {k: rng.choice(VALUES) for k in rng.sample(KEYS, rng.randint(0, len(KEYS)))},
             "taints": _taints(rng)} for name in NAMES]


def test_placement_agrees_with_the_scheduler(placement_oracle: Oracle) -> None:
    rng = random.Random(SEED)
    cases: list[dict[str, Any]] = [{"spec": spec(rng), "nodes": nodes(rng)} for _ in range(CASES)]
    answers = placement_oracle.ask(cases)
    failures = []
    matched = kept_out = tolerated = 0
    for case, answer in zip(cases, answers, strict=True):
        assert not answer.get("error"), answer
        pod = node_constraints(case["spec"], placement_oracle.kube.toleration_comparison_operators)
        ours = [pod.allows(n["name"], n["labels"], taints(n["taints"])) for n in case["nodes"]]
        matched += sum(answer["matches"])
        for n, allowed in zip(case["nodes"], ours, strict=True):
            if pod.allows(n["name"], n["labels"]):  # where the taints decide: kept out, or tolerated
                hard = [t for t in n["taints"] if t["effect"] != "PreferNoSchedule"]
                kept_out += not allowed
                tolerated += allowed and bool(hard)
        if ours != answer["matches"]:
            failures.append(f"qos-guard {ours}, scheduler {answer['matches']}: {json.dumps(case)}")
    TALLY.counts["placement: (Pod, node) pairs compared"] += CASES * len(NAMES)
    TALLY.counts["placement: pairs where the Pod may land"] += matched
    TALLY.counts["placement: pairs a taint keeps out"] += kept_out
    TALLY.counts["placement: pairs with hard taints all tolerated"] += tolerated
    print(f"\nfidelity: placement against {placement_oracle.release}: {CASES * len(NAMES)} pairs, {matched} matching, "
          f"{kept_out} kept out by a taint, "
          f"{tolerated} with every hard taint tolerated")
    assert kept_out > 500 and tolerated > 100  # the grammar reaches both sides of the taint filter
    assert not failures, f"{len(failures)} disagreements; the first:\n" + "\n".join(failures[:5])
