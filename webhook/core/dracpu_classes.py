"""The CPUs of a view's claims counted again with DeviceClasses known apart: the webhook's claim cache
(``webhook.cluster.dracache``) projects a claim before its DeviceClasses are known (they come from their own cache,
``policy.deviceClasses``) and keeps the spec of a claim naming a class other than ``dra.cpu`` for this, so that a
class selecting the CPU driver under another name (``dracpu_objects.cpu_class``) counts as ``check`` counts it; while
the DeviceClasses are not listed (``classes_unknown``) such a claim is unknown, said so, never 0 CPUs."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from webhook.core.dracpu import CPU_CLASS, DraFacts, claim_cpus, claim_requests, request_classes
from webhook.core.dracpu_merge import said_unknown

# Why a claim naming a class other than ``dra.cpu`` is not known while the webhook's DeviceClasses are not.
CLASS_NOT_LISTED = ("DeviceClasses not listed (not synced yet, or refused: see the log): {name} may select dra.cpu; "
                    "grant list, watch on deviceclasses")


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


def classes_named(requests: Iterable[Any]) -> set[Any]:
    """The DeviceClass names a claim's requests name (``dracpu.request_classes``; a request that is not a mapping
    names none)."""
    return {name for request in requests if isinstance(request, Mapping) for name in request_classes(request)}


def classes_unknown(facts: DraFacts, reason: str = CLASS_NOT_LISTED) -> DraFacts:
    """``facts`` while the DeviceClasses are not known (the webhook's cache not synced, its list refused): a claim
    whose spec it holds and that names a class other than ``dra.cpu`` may ask CPUs through it, so its CPUs are not
    known, said with the class (``reason``: the webhook's, ``CLASS_NOT_LISTED``), never 0; a claim of ``dra.cpu``
    alone keeps its count."""
    why = {}
    for key, spec in (facts.claim_specs or {}).items():
        others = sorted(str(c) for c in classes_named(claim_requests(spec)) - {CPU_CLASS, *facts.cpu_classes}) \
            if spec is not None else []
        if others:
            why[key] = reason.format(name=others[0])
    return said_unknown(facts, why)


__all__ = ["CLASS_NOT_LISTED", "classes_named", "classes_unknown", "with_cpu_classes"]
