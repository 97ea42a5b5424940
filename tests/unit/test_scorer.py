"""``webhook.extender.scorer``: the one score, against worked examples and an exact reference (fractions), and what
the Pod holds of a zone (kubelet's reuse of init containers' amounts). Over rows as the fleet calls it and on one
node as ``Judge`` does."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_extender import GPU, nrt, pod
from webhook.core.demands import Demands
from webhook.core.numa import fit_node
from webhook.core.resourceblock import CPU
from webhook.extender.reservations import NodeState, pod_demands, read_nrt
from webhook.extender.scorer import MAX_SCORE, SHARE, score, score_node, scored, usage

GI = 1 << 30


def wanted(obj: dict[str, Any]) -> Demands:
    wants = pod_demands(obj)
    assert wants is not None
    return wants


def node(zones: list[dict[str, str]], available: list[dict[str, str]] | None = None,
         scope: str = "container") -> NodeState:
    state = read_nrt(nrt("n", zones, scope=scope, available=available))
    assert state is not None
    return state


def scored_on(state: NodeState, wants: Demands) -> int:
    fit = fit_node(wants, state.free)
    assert fit.fits
    return score_node(wants, fit, state.empty, state.free)


def test_a_node_scores_one_plus_nine_times_the_mean_share_it_uses() -> None:
    """4 CPUs of 8 free (a half left), 1Gi of 4Gi (three quarters), 1 GPU of 2 (a half): 5/12 used, 9 x 5/12 is
    3.75, score 5. With 6 CPUs free (a quarter left) 9 x 1/2 is 4.5, rounded half to even: 4, score 5 again."""
    wants = wanted(pod(cpu="4", memory="1Gi", gpu=1))
    zone = {"cpu": "8", "memory": "4Gi", GPU: "2"}
    assert scored_on(node([zone]), wants) == 5
    assert scored_on(node([zone], [{"cpu": "6", "memory": "4Gi", GPU: "2"}]), wants) == 5
    assert scored_on(node([zone], [{"cpu": "5", "memory": "4Gi", GPU: "2"}]), wants) == 6  # 9 x 13/24 = 4.875
    assert scored_on(node([zone], [{"cpu": "4", "memory": "1Gi", GPU: "1"}]), wants) == MAX_SCORE  # filled
    # The zone it went to counts, not the other: the first NUMA node that holds it.
    assert scored_on(node([{"cpu": "2", "memory": "4Gi", GPU: "2"}, zone]), wants) == 5


def test_what_init_containers_take_is_reused_by_the_containers_after_them() -> None:
    """Init containers' CPUs (the larger of them, as each runs alone) are reused by the app containers: with init
    containers of 4 and 3 and app containers of 2 + 1 the Pod holds 4 of the zone; with app containers of 3 + 2 it
    holds 5. In ``pod`` scope the Pod's own total (kubelet's: the larger of the two)."""
    def with_init(apps: list[int], inits: list[int]) -> Demands:
        obj = pod(cpu="1", memory="1Gi", gpu=0)
        app = obj["spec"]["containers"][0]

        def container(name: str, cpus: int) -> dict[str, Any]:
            limits = {"cpu": str(cpus), "memory": "1Gi"}
            return dict(app, name=name, resources={"limits": limits, "requests": dict(limits)})

        obj["spec"]["containers"] = [container(f"a{i}", c) for i, c in enumerate(apps)]
        obj["spec"]["initContainers"] = [container(f"i{i}", c) for i, c in enumerate(inits)]
        return wanted(obj)

    for scope in ("container", "pod"):
        state = node([{"cpu": "8", "memory": "8Gi"}], scope=scope)
        for apps, inits, cpus in (([2, 1], [4, 3], 4), ([3, 2], [4, 3], 5), ([3, 2], [6], 6)):
            wants = with_init(apps, inits)
            fit = fit_node(wants, state.free)
            assert fit.fits, (scope, apps)
            assert usage(wants, fit, state.free) == {0: {CPU: cpus * 1000, "memory": 2 * GI * 1000}}, scope


def test_a_request_past_int64_is_fitted_and_scored_exactly_on_one_node() -> None:
    """One node is one row of Python ints: an exabyte of memory (past 2**63 milli-units) compares exactly."""
    wants = wanted(pod(cpu="2", memory="1Ei", gpu=0))
    assert (1 << 60) * 1000 > 1 << 63
    state = node([{"cpu": "4", "memory": "1Ei"}])
    assert scored_on(state, wants) == 8  # CPUs half left, memory none: 1 + 9 x 3/4 = 7.75
    short = node([{"cpu": "4", "memory": "1Ei"}], [{"cpu": "4", "memory": "1023Pi"}])
    assert not fit_node(wants, short.free).fits


@given(st.integers(1, 40), st.data())
def test_the_score_is_one_plus_nine_times_the_share_used_rounded_half_to_even(count: int, data: Any) -> None:
    left = data.draw(st.integers(0, SHARE * count))
    exact = Fraction((MAX_SCORE - 1) * (SHARE * count - left), SHARE * count)
    assert scored(left, count) == 1 + round(exact)
    assert scored(0, 0) == 1
    lefts = data.draw(st.lists(st.integers(0, SHARE * count), min_size=1, max_size=8))
    assert scored(np.array(lefts), np.full(len(lefts), count)).tolist() == [scored(x, count) for x in lefts]


amount = st.integers(0, 1 << 40)


@settings(max_examples=200, deadline=None)
@given(st.data(), st.integers(1, 6), st.integers(1, 4), st.integers(1, 4))
def test_each_row_scores_the_shares_of_what_it_holds_and_only_that(data: Any, rows: int, zones: int,
                                                                   width: int) -> None:
    """Rows of zones and resources: a zone's share left counts where the Pod holds that resource there and the
    zone has some of it, however other rows, zones and resources are filled (the fleet's rows are scored at once)."""
    shape = (rows, zones, width)
    total = np.array(data.draw(st.lists(amount, min_size=rows * zones * width, max_size=rows * zones * width)),
                     np.int64).reshape(shape)
    free = np.array([data.draw(st.integers(0, int(t))) for t in total.reshape(-1)], np.int64).reshape(shape)
    taken = np.array([data.draw(st.integers(0, int(t) + 5)) for t in total.reshape(-1)], np.int64).reshape(shape)
    present = np.array(data.draw(st.lists(st.booleans(), min_size=total.size, max_size=total.size))).reshape(shape)
    got = score(total, free, taken, present).tolist()
    for r in range(rows):
        shares = [Fraction(max(0, int(free[r, z, c] - taken[r, z, c])) * SHARE // int(total[r, z, c]), SHARE)
                  for z in range(zones) for c in range(width) if present[r, z, c] and total[r, z, c] > 0]
        want = 1 + round((MAX_SCORE - 1) * (1 - sum(shares) / len(shares))) if shares else 1
        assert got[r] == want, (r, shares)
