"""``invalid-quantity``: a cpu or memory value the API server would refuse to decode or validate.

No CEL: the API server refuses such an object before any admission policy sees it."""

from __future__ import annotations

import json

from webhook.core.config import Policy
from webhook.core.facts import Facts
from webhook.core.podspec import PodSpec
from webhook.core.resourceblock import COMPUTE, CPU, Amount, Block, spelled
from webhook.core.rules.base import Rule, Text, Violation

RULE_ID = "invalid-quantity"

INVALID = Text("{label}: {resource} {kind} {raw} {problem}; use e.g. {example}")
NOT_A_QUANTITY = Text("is not a valid Kubernetes quantity ({error})")
NEGATIVE = Text("is negative; requests and limits must be >= 0")
ABOVE = Text("{label}: {resource} request {request} is above its limit {limit}, which the API server refuses "
             "(kubectl apply fails); raise resources.limits.{resource} to {request}, or lower the request to {limit}")


def _quoted(raw: object) -> str:
    """A string in double quotes (its spaces and emptiness show), anything else as YAML spells it (``true``)."""
    return json.dumps(raw, ensure_ascii=False) if isinstance(raw, str) else spelled(raw)


def _problem(amount: Amount) -> str:
    if amount.error is not None or amount.quantity is None:
        return NOT_A_QUANTITY(error=amount.error)
    return NEGATIVE()


def _scan(block: Block, decoded_only: bool = False) -> list[Violation]:
    """``decoded_only``: only what does not decode (a block dropped before validation, where a negative value
    is never seen)."""
    found = []
    for kind, source in (("limit", block.limits), ("request", block.requests)):
        for resource in COMPUTE:
            amount = source.get(resource)
            if amount is None or amount.defaulted or not amount.invalid:
                continue  # a defaulted request is a copy of its limit: report the limit once
            if decoded_only and amount.error is None and amount.quantity is not None:
                continue
            example = "2 or 2000m" if resource == CPU else "4Gi or 4096Mi"
            found.append(Violation(amount.path, INVALID(
                label=block.label, resource=resource, kind=kind, raw=_quoted(amount.raw), problem=_problem(amount),
                example=example), block.container, rule=RULE_ID))
    for resource in COMPUTE if not decoded_only else ():
        if block.above_limit(resource):
            request, limit = block.requests[resource], block.limits[resource]
            found.append(Violation(request.path, ABOVE(label=block.label, resource=resource, request=request.show(),
                                                       limit=limit.show()), block.container, rule=RULE_ID))
    return found


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    found = [v for block in pod.blocks() for v in _scan(block)]
    # 1.33 decodes spec.resources, drops it (PrepareForCreate), then validates what is left.
    return found + (_scan(pod.dropped, decoded_only=True) if pod.dropped is not None else [])


RULE = Rule(
    RULE_ID, check=check, cel=None,
    summary="a cpu or memory value is not a Kubernetes quantity, is negative, or a request is above its limit (the "
            "API server would refuse the object)",
)
