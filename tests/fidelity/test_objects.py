"""Pods and every workload kind from the grammar, judged by qos-guard (``enforce``, default config) and by
Kubernetes' own code (the oracle: API server decoding, defaulting, ``PrepareForCreate``, validation, the
stored QoS class, the static CPU manager's allocation).

What must agree, for every object the API server accepts: qos-guard allows it exactly when its stored QoS
class is Guaranteed and every container (init containers and sidecars included) gets exclusive CPUs. For an
object the API server refuses because of a cpu or memory value, qos-guard reports ``invalid-quantity``. And
whatever ``mutate`` mode fixes comes out of the oracle valid, Guaranteed and pinned. qos-guard judges each
object as the webhook does, after the AdmissionReview decoder kept only the judged fields; its changes are
applied to the whole object.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tests.fidelity.conftest import SEED
from tests.fidelity.divergences import KNOWN_DIVERGENCES, TALLY
from tests.fidelity.grammar import ObjectGrammar, shrink
from tests.fidelity.oracle import Oracle
from tests.helpers import as_decoded
from webhook.core.config import Config, parse_config
from webhook.core.engine import Mode, ObjectVerdict, evaluate
from webhook.core.kubeversion import Semantics
from webhook.core.mutation import apply_changes

OBJECTS = 20_000
BATCH = 2_000
CONFIG = parse_config({})  # judged at the oracle's own minor (``at``)
QUANTITY_MESSAGES = ("quantities must match", "unable to parse quantity", "unable to parse numeric part")


def _results(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-object answers (a List's items one by one)."""
    if answer.get("kind") == "List" and not answer.get("decodeError"):
        return [r for item in answer.get("items", []) for r in _results(item)]
    return [answer]


def valid(answer: dict[str, Any]) -> bool:
    return all(not (r.get("decodeError") or r.get("errors") or r.get("podErrors")) for r in _results(answer))


def unsized(answer: dict[str, Any]) -> bool:
    """The oracle's node (256 CPUs) could not host the Pod: whether each container is exclusive is still
    known (``exclusive``), only the CPU count is not."""
    return any(r.get("allocationError") for r in _results(answer))


def guaranteed_and_pinned(answer: dict[str, Any]) -> bool:
    """Stored Guaranteed, and the static policy gives every container exclusive CPUs."""
    return all(r.get("qosClass") == "Guaranteed" and r.get("exclusive") and all(r["exclusive"].values())
               for r in _results(answer))


def consistent(answer: dict[str, Any]) -> bool:
    """Where the oracle's node could host the Pod, Allocate pinned exactly the containers it said it would."""
    return all(r.get("allocationError") or {n: c > 0 for n, c in (r.get("cpus") or {}).items()} == r.get("exclusive")
               for r in _results(answer) if r.get("exclusive") is not None)


def compute_value_refused(answer: dict[str, Any]) -> list[str]:
    """The cpu/memory fields the API server refuses for their value (unparsable, or negative)."""
    found = []
    for r in _results(answer):
        found += [q["path"] for q in r.get("badQuantities", []) if q["path"].rsplit(".", 1)[-1] in ("cpu", "memory")]
        for e in r.get("errors", []) + r.get("podErrors", []):
            if e["field"].endswith(("[cpu]", "[memory]")) and "must be greater than or equal to 0" in e["message"]:
                found.append(e["field"])
    return found


def at(kube: Semantics) -> Config:
    """The configuration judging with ``kube``'s semantics: the oracle's release's minor."""
    return replace(CONFIG, kubernetes_version=kube)


KUBE: list[Semantics] = []  # the minor being compared (set by the test from its oracle)


def judge(obj: Any, mode: Mode = Mode.ENFORCE) -> ObjectVerdict | str:
    """qos-guard's verdict on ``obj`` as the webhook reaches it: through the AdmissionReview decoder, with the
    minor of the oracle it is compared with."""
    try:
        return evaluate(as_decoded(obj), at(KUBE[-1]) if KUBE else CONFIG, mode)
    except Exception as exc:  # a crash is a disagreement of its own, reported with the object
        return f"{type(exc).__name__}: {exc}"


def _rules(verdict: ObjectVerdict | str) -> set[str]:
    return set() if isinstance(verdict, str) else {v.rule for _, v in verdict.violations}


def disagreement(obj: Any, answer: dict[str, Any]) -> str | None:
    """Why qos-guard and Kubernetes disagree about ``obj``, or ``None``."""
    verdict = judge(obj)
    if isinstance(verdict, str):
        return f"qos-guard crashed: {verdict}"
    if valid(answer):
        if not consistent(answer):
            return f"oracle: Allocate and GetTopologyHints disagree: {_results(answer)}"
        expected = guaranteed_and_pinned(answer)
        if verdict.allowed != expected:
            seen = [(r.get("qosClass"), r.get("exclusive"), r.get("podLevelResourcesSet", False))
                    for r in _results(answer)]
            return (f"qos-guard {'allows' if verdict.allowed else 'denies'} ({sorted(_rules(verdict))}), "
                    f"Kubernetes: {'Guaranteed and pinned' if expected else 'not Guaranteed-and-pinned'} {seen}")
        return None
    refused = compute_value_refused(answer)
    if refused and "invalid-quantity" not in _rules(verdict):
        return f"Kubernetes refuses {refused}; qos-guard reports {sorted(_rules(verdict))}, not invalid-quantity"
    return None


def mutation_disagreement(obj: Any, answer: dict[str, Any], ask: Callable[[Any], dict[str, Any]]) -> str | None:
    """What ``mutate`` mode fixes (no violation left) must be valid, Guaranteed and pinned upstream."""
    if not valid(answer):
        return None
    verdict = judge(obj, Mode.MUTATE)
    if isinstance(verdict, str):
        return f"qos-guard crashed in mutate mode: {verdict}"
    if not verdict.changes or not verdict.allowed:
        return None
    fixed = apply_changes(obj, list(verdict.changes))
    after = ask(fixed)
    if not valid(after) or not guaranteed_and_pinned(after):
        return f"mutation leaves {json.dumps(fixed)}; Kubernetes: {json.dumps(_results(after))}"
    return None


def _known(obj: Any, problem: str | None) -> str | None:
    """The known divergence that excuses ``problem`` about ``obj``: one that matches the object and shows that
    disagreement (an entry once excused any disagreement about a matching object, crashes included). ``None``:
    any entry about the object (bench/peers.py counts a peer's misses it cannot describe)."""
    for d in KNOWN_DIVERGENCES:
        if d.applies(obj) and (problem is None or d.shows(problem)):
            return f"{d.item}: {d.name}"
    return None


def test_objects_agree(objects_oracle: Oracle) -> None:
    KUBE[:] = [objects_oracle.kube]
    minor = objects_oracle.kube.minor
    rng = random.Random(SEED)
    grammar = ObjectGrammar(rng)

    def ask(o: Any) -> dict[str, Any]:
        return objects_oracle.ask([o])[0]

    failures: list[str] = []
    checked = valid_count = mutated = 0
    for _ in range(OBJECTS // BATCH):
        batch = [grammar.manifest() for _ in range(BATCH)]
        answers = objects_oracle.ask(batch)
        fixed_batch: list[tuple[Any, Any]] = []
        for obj, answer in zip(batch, answers, strict=True):
            checked += 1
            valid_count += valid(answer)
            TALLY.counts["objects: oracle refused (decode/validation)"] += not valid(answer)
            TALLY.counts["objects: oracle node too small to count CPUs (exclusivity still compared)"] += \
                valid(answer) and unsized(answer)
            problem = disagreement(obj, answer)
            if problem is None and valid(answer):
                verdict = judge(obj, Mode.MUTATE)
                if not isinstance(verdict, str) and verdict.changes and verdict.allowed:
                    fixed_batch.append((obj, apply_changes(obj, list(verdict.changes))))
            if problem is None:
                continue
            why = _known(obj, problem)
            if why is not None:
                TALLY.excused[why] += 1
                continue
            if len(failures) < 8:
                def still(o: Any) -> bool:
                    found = disagreement(o, ask(o))
                    return found is not None and _known(o, found) is None

                small = shrink(obj, still)
                failures.append(f"{disagreement(small, ask(small))}\nminimal manifest: {json.dumps(small)}")
            else:
                failures.append(problem)
        # Mutation: everything it fixed, in one batch.
        fixed_answers = objects_oracle.ask([f for _, f in fixed_batch])
        for (obj, _fixed), after in zip(fixed_batch, fixed_answers, strict=True):
            mutated += 1
            if valid(after) and guaranteed_and_pinned(after):
                continue
            why = _known(obj, f"mutation leaves {json.dumps(_fixed)}")
            if why is not None:
                TALLY.excused["mutation, " + why] += 1
                continue
            if len(failures) < 10:
                def still_mutated(o: Any) -> bool:
                    found = mutation_disagreement(o, ask(o), ask)
                    return found is not None and _known(o, found) is None

                small = shrink(obj, still_mutated)
                failures.append(f"{mutation_disagreement(small, ask(small), ask)}\n"
                                f"minimal manifest: {json.dumps(small)}")
            else:
                failures.append(f"mutation of {json.dumps(obj)} is not Guaranteed and pinned upstream")
    TALLY.counts["objects compared (Pods and every workload kind)"] += checked
    TALLY.counts["objects: oracle accepted"] += valid_count
    TALLY.counts["objects fixed by mutate mode and re-checked"] += mutated
    TALLY.counts[f"objects against k8s.io/kubernetes {objects_oracle.release} (Kubernetes {minor}): "
                 f"{checked} cases, {checked - len(failures)} agree, {len(failures)} disagree"] += 1
    print(f"\nfidelity at {objects_oracle.release}: {checked} objects, {valid_count} valid upstream, {mutated} "
          f"mutated and re-checked, {len(failures)} disagreements")
    assert checked >= OBJECTS
    assert not failures, f"{len(failures)} disagreements; the first:\n" + "\n\n".join(failures[:10])
