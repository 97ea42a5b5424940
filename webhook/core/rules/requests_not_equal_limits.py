"""``requests-not-equal-limits``: a request that differs from its limit makes the Pod Burstable."""

from __future__ import annotations

from webhook.core.config import Policy
from webhook.core.facts import Facts
from webhook.core.podspec import PodSpec
from webhook.core.quantity import is_whole_cpu
from webhook.core.resourceblock import COMPUTE, CPU, Block
from webhook.core.rules import cel
from webhook.core.rules.base import Rule, Text, Violation
from webhook.core.rules.cpu_not_integer import whole_cpu_choices, whole_cpu_choices_cel
from webhook.core.rules.sidecars import mesh_hint, mesh_hint_cel, sized

RULE_ID = "requests-not-equal-limits"

DIFFERS = Text("{label}: {resource} request {request} differs from its limit {limit}; {advice}{mesh}")
TO_LIMIT = Text("set resources.requests.{resource} to {limit}")
# A container's fractional cpu limit is itself refused (cpu-not-integer): "set the request to the limit" would
# lead to the next refusal, so the advice is one that clears both.
BOTH_WHOLE = Text("set resources.requests.cpu and resources.limits.cpu to one whole number of CPUs: {choice}")


def _scan(block: Block, policy: Policy) -> list[Violation]:
    found = []
    for resource in COMPUTE:
        request, limit = block.requests.get(resource), block.limits.get(resource)
        if request is None or limit is None or not limit.positive or not block.clean(resource):
            continue
        if request.milli == limit.milli:
            continue
        whole = resource != CPU or block.container is None or block.container in policy.fractional_cpu_containers \
            or limit.quantity is None or is_whole_cpu(limit.quantity)
        advice = sized(block, resource) or (TO_LIMIT(resource=resource, limit=limit.show()) if whole else
                                            BOTH_WHOLE(choice=whole_cpu_choices(limit.milli)))
        message = DIFFERS(label=block.label, resource=resource, request=request.show(), limit=limit.show(),
                          advice=advice, mesh=mesh_hint(block.container, resource, block.path))
        found.append(Violation(request.path, message, block.container, rule=RULE_ID))
    return found


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    return [v for block in pod.qos_blocks() for v in _scan(block, policy)]


def to_cel(mutated: bool) -> str:
    if mutated:
        return "[]"  # the mutation sets every request to its limit
    return cel.each_fact(
        RULE_ID, f"{cel.qos_judged(False)} && f.lpos && f.q != '' && quantity(f.q).compareTo(quantity(f.l)) != 0",
        DIFFERS.cel(label="f.b.label", resource="f.r", request="f.q", limit="f.l",
                    advice=f"f.r == 'cpu' && !f.b.pod && !f.b.frac && !quantity(f.l).isInteger() ? "
                           f"{BOTH_WHOLE.cel(choice=whole_cpu_choices_cel('f.l'))} : "
                           f"{TO_LIMIT.cel(resource='f.r', limit='f.l')}",
                    mesh=mesh_hint_cel("f.b.name", "f.r")))


RULE = Rule(
    RULE_ID, check=check, cel=to_cel,
    summary="a cpu or memory request differs from its limit (after API-server defaulting)",
)
