"""``Facts``: what the cluster says is an input of the judgement, never part of the configuration, and what is
learnt from it is remembered in the caller's ``Memo``, never written into the snapshot."""

from __future__ import annotations

import copy
import dataclasses
from unittest import mock

from tests.unit.test_numa import cluster, llm
from webhook.core.config import AUTO, Config, Policy, parse_config
from webhook.core.engine import Mode, evaluate
from webhook.core.facts import NO_FACTS, Facts, Memo
from webhook.core.memo import remember
from webhook.core.numatopology import Topology
from webhook.core.podspec import PodSpec
from webhook.core.rules import BY_ID, Violation

AUTO_CONFIG = parse_config({"policy": {"numa": "auto"}})


def messages(facts: Facts, cpu: str = "48") -> list[str]:
    return [v.message for _, v in evaluate(llm(cpu), AUTO_CONFIG, Mode.ENFORCE, facts).violations
            if v.rule == "numa-unfit"]


def test_the_configuration_holds_no_cluster_state() -> None:
    assert Config(policy=Policy(numa=AUTO)) == AUTO_CONFIG
    assert not [f.name for f in dataclasses.fields(type(AUTO))]
    assert not hasattr(Config, "with_topology")


def test_without_facts_numa_auto_says_nothing_and_with_them_it_judges() -> None:
    assert messages(NO_FACTS) == []
    assert messages(Facts(topology=Topology())) == []  # the node list not known: unknown, not unfit
    found = messages(Facts(topology=cluster()))
    assert len(found) == 1 and "single-numa-node refuses it" in found[0]


def test_judging_leaves_the_snapshot_as_it_was() -> None:
    topology = cluster()
    before = copy.deepcopy(topology)
    memo = Memo()
    facts = Facts(topology=topology, memo=memo)
    for cpu in ("48", "48", "64"):
        assert messages(facts, cpu)
    assert topology == before and vars(topology) == vars(before)  # nothing cached on the snapshot
    assert memo.size("numa-unfit.verdicts") == 2  # the caller's memo: one verdict per demand
    assert messages(Facts(topology=topology, memo=memo))
    assert memo.size("numa-unfit.verdicts") == 1  # other facts: it forgot before it learnt


def test_a_memo_handed_to_other_facts_forgets_the_old_answers() -> None:
    memo = Memo()
    facts = Facts(topology=cluster(), memo=memo)
    refused = messages(facts)
    assert refused
    spread = dataclasses.replace(facts, topology=cluster(**{"gpu-1": "best-effort", "small-1": "best-effort"}))
    assert spread.memo is memo
    assert messages(spread) == []  # advisories now: a remembered refusal would have been wrong
    assert messages(facts) == refused


def test_the_same_answer_with_and_without_a_memo() -> None:
    topology = cluster()
    for cpu in ("8", "32", "48", "64"):
        assert messages(Facts(topology=topology, memo=Memo()), cpu) == messages(Facts(topology=topology), cpu)


def test_a_memo_table_is_bounded() -> None:
    memo = Memo()
    for i in range(10):
        assert memo.get("t", i, lambda i=i: i * 2, limit=4) == i * 2  # type: ignore[misc]
    assert memo.size("t") <= 4
    assert remember(None, "t", 1, lambda: "computed") == "computed"


def test_evaluate_hands_its_facts_to_every_rule_and_to_what_the_mutation_leaves() -> None:
    seen: list[Facts] = []

    def spy(pod_spec: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
        seen.append(facts)
        return [Violation(("spec",), "always", rule="spy")]

    facts = Facts(topology=cluster())
    rule = dataclasses.replace(BY_ID["limits-missing"], check=spy)
    with mock.patch("webhook.core.rules.RULES", (rule,)):
        unlimited = llm("2")
        unlimited["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2", "memory": "1Gi"}}
        verdict = evaluate(unlimited, Config(), Mode.MUTATE, facts)
        assert verdict.changes
        assert verdict.violations  # what the mutation leaves: judged again, against the same facts
    assert len(seen) >= 2 and all(f is facts for f in seen)
