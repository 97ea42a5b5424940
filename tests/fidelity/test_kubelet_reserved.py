"""The CPUs kubelet's static CPU Manager reserves, from generated ``reservedSystemCPUs`` lists and
``systemReserved``/``kubeReserved`` cpu quantities, by qos-guard (``qos-guard nodes``) and by kubelet's own
functions (the oracle): the same count and the same printed list, or both refuse.

Generated values stay within what a node can hold: upstream's ``cpuset.Parse`` loops over every CPU of a range
(so a range is at most 4,096 wide), and ``NewManager`` divides a float64 (exact below 2^53 milli-CPUs; larger
sums are left out and counted, as are quantities beyond qos-guard's 4,000-digit bound, a known divergence).
qos-guard keeps ranges merged and sums exactly, so it has neither of upstream's limits.
"""

from __future__ import annotations

import json
import random
from typing import Any

from tests.fidelity.conftest import SEED
from tests.fidelity.divergences import QUANTITY_DIVERGENCES, TALLY
from tests.fidelity.grammar import quantity_text
from tests.fidelity.oracle import Oracle
from webhook.core.kubeletpinning import ConfigzError, read_configz
from webhook.core.quantity import QuantityError, parse_quantity_nano

CASES = 20_000
FLOAT_EXACT_NANO = (1 << 53) * 10**6  # 2^53 milli-CPUs


def _cpu_number(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.85:
        return str(rng.randint(0, 300))
    return rng.choice(["", "+1", "-0", "-1", "007", " 1", "1 ", "x", "1_0", "٣", "9223372036854775808", "+"])


def cpu_list(rng: random.Random) -> str:
    """A reservedSystemCPUs value: mostly well-formed lists, with upstream's corners."""
    parts = []
    for _ in range(rng.randint(1, 4)):
        lo = _cpu_number(rng)
        if rng.random() < 0.4:
            hi = str(int(lo) + rng.randint(-2, 4096)) if lo.isdigit() and rng.random() < 0.9 else _cpu_number(rng)
            parts.append(f"{lo}-{hi}")
        else:
            parts.append(lo)
    text = ",".join(parts)
    return text + "," if rng.random() < 0.03 else text


def reservation(rng: random.Random) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    if rng.random() < 0.3:
        settings["reservedSystemCPUs"] = cpu_list(rng)
    for key in ("systemReserved", "kubeReserved"):
        if rng.random() < 0.7:
            settings[key] = {"cpu": quantity_text(rng)} if rng.random() < 0.9 else {"memory": "1Gi"}
    return settings


def _ours(settings: dict[str, Any]) -> dict[str, Any]:
    try:
        reserved = read_configz(json.dumps({"kubeletconfig": {"cpuManagerPolicy": "static", **settings}})).reserved
    except ConfigzError:
        return {"error": True}
    return {"count": reserved.count, "cpus": None if reserved.cpus is None else str(reserved.cpus)}


def _left_out(settings: dict[str, Any]) -> str | None:
    """Why a case is not compared, or None: beyond NewManager's float64, or beyond qos-guard's digit bound."""
    if settings.get("reservedSystemCPUs"):
        return None
    total = 0
    for key in ("systemReserved", "kubeReserved"):
        try:
            total += abs(parse_quantity_nano(settings.get(key, {}).get("cpu", "0")))
        except QuantityError as exc:
            if "too large" in str(exc) or "significant digits" in str(exc):
                return QUANTITY_DIVERGENCES[1][0]
            return None
    return "beyond float64's exact range in NewManager (2^53 milli-CPUs)" if total >= FLOAT_EXACT_NANO else None


def test_reserved_cpus_agree(reserved_oracle: Oracle) -> None:
    rng = random.Random(SEED)
    cases = [reservation(rng) for _ in range(CASES)]
    kept = []
    for case in cases:
        why = _left_out(case)
        if why is None:
            kept.append(case)
        else:
            TALLY.excused[why] += 1
    wrong = []
    for settings, answer in zip(kept, reserved_oracle.ask(kept), strict=True):
        ours = _ours(settings)
        if "error" in answer or "error" in ours:
            if ("error" in answer) != ("error" in ours):
                wrong.append(f"{settings}: qos-guard {ours}, kubelet {answer}")
            continue
        if ours != {"count": answer["count"], "cpus": answer.get("cpus")}:
            wrong.append(f"{settings}: qos-guard {ours}, kubelet {answer}")
    TALLY.counts["kubelet reserved-CPU settings compared (cpuset.Parse, ParseQuantity, NewManager)"] += len(kept)
    assert not wrong, f"{len(wrong)} disagreements, first ones:\n" + "\n".join(wrong[:10])
