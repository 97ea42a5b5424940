"""Two ``DraFacts`` in one (``check --kubeconfig``: the cluster's and its input's), and claims said unknown with
their reason (``DraFacts.unknown_why``). A name both hold is compared as the rules read it (``comparable``): the
cluster's spec is stored (defaulted by the API server, its CEL selectors dropped by the cache) and the input's is
as written, so the same claim applied is the same claim; held differently it is unknown and said so (``differ``),
never judged with either side's answer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from webhook.core.dracpu import DraFacts, claim_cpus
from webhook.core.quantity import QuantityError, parse_quantity_nano

Key = tuple[str, str]  # (kind, name) of a claim or template
DIFFER = "the two sources read hold it differently"


def _kept(one: Mapping[str, Any], *drop: str) -> dict[str, Any]:
    """``one`` as the API server serialises it: every list and pointer in a claim's requests and constraints is
    ``omitempty`` (k8s.io/api ``resource/v1/types.go``), so ``null`` and ``[]`` are dropped; ``drop`` too."""
    return {k: v for k, v in one.items() if k not in drop and v is not None and not (isinstance(v, list) and not v)}


def _toleration(one: Any) -> Any:
    """A toleration as stored: its ``omitempty`` strings dropped when empty, ``operator`` defaulted to Equal
    (``+default="Equal"``, types.go:1563; ``pkg/apis/resource/v1/zz_generated.defaults.go``:51-55, 61-66)."""
    if not isinstance(one, Mapping):
        return one
    out = {k: v for k, v in _kept(one).items() if v != ""}
    out["operator"] = one.get("operator") or "Equal"
    return out


def _amount(value: Any) -> Any:
    """A quantity as its value (nano units: ``resource.ParseQuantity``'s precision): the API server stores it in
    canonical form (``2000m`` and ``2`` are both ``"2"``); one that does not parse stays as written."""
    try:
        return parse_quantity_nano(str(value)) if isinstance(value, (str, int, float)) else value
    except QuantityError:
        return value


def _request(raw: Any) -> Any:
    """A request as the API server stores it in ``resource.k8s.io/v1``, without its CEL selectors (the webhook's
    cache drops them: ``dracache.keep_claim``): a v1beta1 request's fields are its ``exactly``, and an exact
    request or sub-request is defaulted as ``pkg/apis/resource/v1/defaults.go`` does (``SetDefaults_ExactDevice
    Request``, ``SetDefaults_DeviceSubRequest``: allocationMode ExactCount, then a count of 0 or none is 1; a count
    of 0 otherwise is ``omitempty``, dropped), its tolerations as ``_toleration``, its empty fields as ``_kept``,
    its capacity requests' quantities as their values (``_amount``)."""
    if not isinstance(raw, Mapping):
        return raw
    if "deviceClassName" in raw:  # the v1beta1 shape
        raw = {"name": raw.get("name"),
               "exactly": {k: v for k, v in raw.items() if k not in ("name", "firstAvailable")}}

    def exact(one: Any) -> Any:
        if not isinstance(one, Mapping):
            return one
        out = _kept(one, "selectors")
        out["allocationMode"] = out.get("allocationMode") or "ExactCount"
        if out["allocationMode"] == "ExactCount" and not out.get("count"):
            out["count"] = 1
        elif out.get("count") == 0:
            del out["count"]
        if isinstance(out.get("tolerations"), list):
            out["tolerations"] = [_toleration(t) for t in out["tolerations"]]
        capacity = out.get("capacity")
        if isinstance(capacity, Mapping) and capacity.get("requests") == {}:  # a map, omitempty; the pointer stays
            out["capacity"] = {k: v for k, v in capacity.items() if k != "requests"}
        elif isinstance(capacity, Mapping) and isinstance(capacity.get("requests"), Mapping):
            out["capacity"] = {**capacity, "requests": {k: _amount(v) for k, v in capacity["requests"].items()}}
        return out
    kept = _kept(raw, "selectors", "exactly", "firstAvailable")
    if raw.get("exactly") is not None:
        kept["exactly"] = exact(raw["exactly"])
    if isinstance(raw.get("firstAvailable"), list) and raw["firstAvailable"]:
        kept["firstAvailable"] = [exact(a) for a in raw["firstAvailable"]]
    return kept


def comparable(spec: Mapping[str, Any]) -> Any:
    """A claim spec as the rules read it: its requests (``_request``) and constraints (``_kept``), nothing else
    kept (its ``config`` is not read)."""
    devices = spec.get("devices")
    devices = devices if isinstance(devices, Mapping) else {}
    requests, constraints = devices.get("requests"), devices.get("constraints")
    return ([_request(r) for r in requests] if isinstance(requests, list) else [],
            [_kept(c) if isinstance(c, Mapping) else c for c in constraints] if isinstance(constraints, list) else [])


def said_unknown(facts: DraFacts, why: Mapping[Key, str]) -> DraFacts:
    """``facts`` with the claims of ``why`` not known (no count, no spec), each said with its reason."""
    if not why:
        return facts
    claims = {**(facts.cpu_claims or {}), **{key: None for key in why}}
    specs = {**(facts.claim_specs or {}), **{key: None for key in why}}
    return replace(facts, cpu_claims=MappingProxyType(claims), claim_specs=MappingProxyType(specs),
                   unknown_why=MappingProxyType({**facts.unknown_why, **why}))


def merge(first: DraFacts | None, second: DraFacts | None,
          differ: Callable[[Key], str] | None = None) -> DraFacts | None:
    """Both indexes in one (a side not known in one is taken from the other). A claim both hold differently (its
    spec as ``comparable`` reads it, or its CPUs where a side keeps no spec) is not known, said with ``differ``'s
    reason; one held alike is counted again with both sides' slices and CPU classes."""
    if first is None or second is None:
        return first or second
    devices = None if first.devices is None and second.devices is None else \
        (*(first.devices or ()), *(second.devices or ()))
    classes = first.cpu_classes | second.cpu_classes
    why = {**first.unknown_why, **second.unknown_why}
    claims: dict[Key, int | None] | None = None
    specs: dict[Key, Mapping[str, Any] | None] | None = None
    if first.cpu_claims is not None or second.cpu_claims is not None:
        claims, specs = dict(first.cpu_claims or {}), dict(first.claim_specs or {})
        theirs = second.claim_specs or {}
        for key, cpus in (second.cpu_claims or {}).items():
            spec = theirs.get(key)
            if key not in claims:
                claims[key] = cpus
                if key in theirs:
                    specs[key] = spec
                continue
            mine = specs.get(key)
            same = comparable(mine) == comparable(spec) if mine is not None and spec is not None \
                else claims[key] == cpus  # a side keeps no spec (the cluster's claim asking no CPUs)
            if not same and key not in why:
                why[key] = differ(key) if differ is not None else DIFFER
            specs[key] = mine if mine is not None else spec
        for key, spec in specs.items():
            if spec is not None and key in claims and key not in why:
                claims[key] = claim_cpus(spec, devices, classes=classes)  # both sides' slices and classes
        for key in why:
            claims[key] = specs[key] = None
    if first.claim_specs is None and second.claim_specs is None:
        specs = None
    managing = first if first.cpu_managers is not None else second
    stored = specs is not None and all(f.specs_stored for f in (first, second) if f.claim_specs is not None)
    return DraFacts(devices, MappingProxyType(claims) if claims is not None else None, managing.cpu_managers,
                    MappingProxyType(specs) if specs is not None else None,
                    first.claims_whole or second.claims_whole, first.claims_unknown or second.claims_unknown,
                    managing.cpu_managers_whole, stored, classes, MappingProxyType(why))


__all__ = ["DIFFER", "comparable", "merge", "said_unknown"]
