"""Every quantity string from the grammar, parsed by qos-guard and by ``resource.ParseQuantity`` /
``Quantity.UnmarshalJSON`` (the oracle): the same milli value after the API server's round-up, or both refuse."""

from __future__ import annotations

import json
import random
from typing import Any

from tests.fidelity.conftest import SEED
from tests.fidelity.divergences import (
    QUANTITY_DIVERGENCES,
    TALLY,
    beyond_digit_bound,
    inexact_json_number,
    rounded_to_29_digits,
)
from tests.fidelity.grammar import json_number, quantity_text
from tests.fidelity.oracle import Oracle, RawNumber
from webhook.core.quantity import QuantityError, parse_quantity, quantity_from_value

STRINGS = 50_000
NUMBERS = 2_000
BATCH = 10_000


def _oracle_milli(answer: dict[str, Any]) -> str | None:
    """The oracle's exact milli value as decimal text, ``None`` when it refuses."""
    if "error" in answer:
        return None
    if "milli" in answer:
        return str(answer["milli"])
    return f"{answer['unscaled']}e{answer['exp']}"


def _ours(fn: Any, value: Any) -> str | None:
    try:
        return str(fn(value).milli)
    except QuantityError:
        return None


def _disagreement(text: str, ours: str | None, theirs: str | None, answer: dict[str, Any],
                  minor: int = 0) -> str | None:
    if ours == theirs:
        return None
    if ours is None and beyond_digit_bound(None, answer.get("unscaled") or answer.get("milli"), answer.get("exp", 0)):
        TALLY.excused[QUANTITY_DIVERGENCES[1][0]] += 1
        return None
    if minor >= 38 and rounded_to_29_digits(ours, theirs):
        TALLY.excused[QUANTITY_DIVERGENCES[2][0]] += 1
        return None
    return f"{text[:80]!r}: qos-guard {(ours or 'refuses')[:80]}, Kubernetes {(theirs or 'refuses')[:80]}" \
           f" ({str(answer)[:200]})"


def test_quantity_strings_agree(quantities_oracle: Oracle) -> None:
    rng = random.Random(SEED)
    wrong: list[str] = []
    checked = 0
    for _ in range(STRINGS // BATCH):
        texts = [quantity_text(rng) for _ in range(BATCH)]
        for text, answer in zip(texts, quantities_oracle.ask(texts), strict=True):
            # ParseQuantity(text) against parse_quantity; UnmarshalJSON("text") against quantity_from_value.
            for fn, key in ((parse_quantity, "parse"), (quantity_from_value, "json")):
                problem = _disagreement(text, _ours(fn, text), _oracle_milli(answer[key]), answer[key],
                                        quantities_oracle.kube.minor.minor)
                if problem:
                    wrong.append(f"{key}: {problem}")
            checked += 1
    TALLY.counts["quantity strings compared (ParseQuantity and UnmarshalJSON)"] += checked
    assert checked >= STRINGS
    assert not wrong, f"{len(wrong)} disagreements, first 20:\n" + "\n".join(wrong[:20])


def test_json_numbers_agree(quantities_oracle: Oracle) -> None:
    """A quantity written as a JSON number: the API server parses its text (UnmarshalJSON)."""
    rng = random.Random(SEED + 1)
    texts = [json_number(rng) for _ in range(NUMBERS)]
    wrong: list[str] = []
    for text, answer in zip(texts, quantities_oracle.ask([RawNumber(t) for t in texts]), strict=True):
        ours = _ours(quantity_from_value, json.loads(text))
        problem = _disagreement(text, ours, _oracle_milli(answer["json"]), answer["json"],
                                quantities_oracle.kube.minor.minor)
        if problem and inexact_json_number(text):
            TALLY.excused[QUANTITY_DIVERGENCES[0][0]] += 1
        elif problem:
            wrong.append(problem)
    TALLY.counts["quantity JSON numbers compared"] += len(texts)
    assert not wrong, "\n".join(wrong[:20])
