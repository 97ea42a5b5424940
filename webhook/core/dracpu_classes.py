"""The CPUs of a view's claims counted again with DeviceClasses known apart: the webhook's claim cache
(``webhook.cluster.dracache``) projects a claim before its DeviceClasses are known (they come from their own cache,
``policy.deviceClasses``) and keeps the spec of a claim naming a class other than ``dra.cpu`` for this, so that a
class selecting the CPU driver under another name (``dracpu_objects.cpu_class``) counts as ``check`` counts it."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from types import MappingProxyType

from webhook.core.dracpu import CPU_CLASS, DraFacts, claim_cpus


def with_cpu_classes(facts: DraFacts, classes: Collection[str]) -> DraFacts:
    """``facts`` with ``classes`` among its CPU classes, and the CPUs of each claim whose spec it holds counted
    again with them (a claim whose spec it does not hold keeps its count: it names no class but ``dra.cpu``)."""
    every = facts.cpu_classes | (frozenset(classes) - {CPU_CLASS})
    if every == facts.cpu_classes:
        return facts
    claims, specs = facts.cpu_claims, facts.claim_specs
    if claims is not None and specs is not None:
        claims = MappingProxyType({key: cpus if (spec := specs.get(key)) is None
                                   else claim_cpus(spec, facts.devices, classes=every)
                                   for key, cpus in claims.items()})
    return replace(facts, cpu_claims=claims, cpu_classes=every)


__all__ = ["with_cpu_classes"]
