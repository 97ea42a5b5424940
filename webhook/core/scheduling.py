"""Which nodes a Pod can land on, as far as its own spec says: ``spec.nodeName``, ``spec.nodeSelector`` and
required node affinity, evaluated as the scheduler does (``GetRequiredNodeAffinity`` in
k8s.io/component-helpers/scheduling/corev1/nodeaffinity, over k8s.io/apimachinery/pkg/labels requirements), and
the node's ``NoSchedule``/``NoExecute`` taints against the Pod's tolerations, as the scheduler's TaintToleration
filter does (``FindMatchingUntoleratedTaint`` in k8s.io/component-helpers/scheduling/corev1, with
``Toleration.ToleratesTaint`` of k8s.io/api/core/v1; ``Lt``/``Gt`` compared as integers from 1.35, as the API
server only accepts them where ``TaintTolerationComparisonOperators`` is on, and unknown operators before).

Which taints count is the caller's choice (``webhook.cluster.nrt`` leaves out those that say how a node is
now, not what it is for). Preferred affinity and resources are not considered: they decide where among these
nodes the Pod goes, or whether it waits.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

INT64 = re.compile(r"[+-]?[0-9]+")  # strconv.ParseInt(s, 10, 64): an optional sign, then digits only
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# k8s.io/apimachinery/pkg/api/validate/content kube.go and dns.go: what labels.NewRequirement accepts.
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# content.IsDecimalInteger: an optional minus, then 0 alone or digits without a leading zero (no plus sign).
_DECIMAL = re.compile(r"0|-?[1-9][0-9]*")
# helper.DoNotScheduleTaintsFilterFunc: the effects the scheduler's filter reads (PreferNoSchedule only scores).
_HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
_NODE_NAMED_EFFECTS = frozenset({"NoExecute"})  # kubelet's own check for a Pod bound by spec.nodeName


def label_key_valid(key: str) -> bool:
    """``content.IsLabelKey``: an optional DNS subdomain prefix and ``/``, then a name of at most 63."""
    parts = key.split("/")
    if len(parts) > 2:
        return False
    if len(parts) == 2 and not (parts[0] and len(parts[0]) <= 253 and _DNS_SUBDOMAIN.fullmatch(parts[0])):
        return False
    name = parts[-1]
    return 0 < len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None


def label_value_valid(value: str) -> bool:
    """``content.IsLabelValue``: empty, or a label name of at most 63."""
    return value == "" or (len(value) <= 63 and _LABEL_NAME.fullmatch(value) is not None)


def _int64(text: str) -> int | None:
    if not INT64.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``NodeSelectorRequirement``; ``valid`` is False where ``labels.NewRequirement`` (or the field
    selector) refuses it, which makes its whole term match nothing."""

    key: str
    operator: str
    values: tuple[str, ...]
    valid: bool

    def matches(self, labels: Mapping[str, str]) -> bool:
        """``labels.Requirement.Matches``."""
        value = labels.get(self.key)
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt") and value is not None:
            have, want = _int64(value), _int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == "Gt" else have < want
        return False


def _requirement(raw: Any, fields: bool) -> Requirement:
    if not isinstance(raw, Mapping):
        return Requirement("", "", (), False)
    key, op, values = raw.get("key"), raw.get("operator"), raw.get("values") or []
    if not isinstance(key, str) or not isinstance(op, str) or not isinstance(values, list) \
            or not all(isinstance(v, str) for v in values):
        return Requirement("", "", (), False)
    vals = tuple(values)
    if fields:  # nodeSelectorRequirementsAsFieldSelector: In or NotIn with exactly one value, nothing else checked
        return Requirement(key, op, vals, op in ("In", "NotIn") and len(vals) == 1)
    if not label_key_valid(key) or not all(label_value_valid(v) for v in vals):
        valid = False
    elif op in ("In", "NotIn"):
        valid = len(vals) > 0
    elif op in ("Exists", "DoesNotExist"):
        valid = len(vals) == 0
    elif op in ("Gt", "Lt"):
        valid = len(vals) == 1 and _int64(vals[0]) is not None
    else:
        valid = False
    return Requirement(key, op, vals, valid)


@dataclass(frozen=True, slots=True)
class Term:
    """One ``NodeSelectorTerm``: every expression (on labels) and every field requirement must match."""

    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        if not all(r.valid for r in self.expressions + self.fields):
            return False
        if not all(r.matches(labels) for r in self.expressions):
            return False
        # extractNodeFields: the only field is metadata.name; a field selector on another key sees "".
        node_fields = {"metadata.name": name} if name else {}
        return not node_fields or all(r.matches({r.key: node_fields.get(r.key, "")}) for r in self.fields)


@dataclass(frozen=True, slots=True)
class Taint:
    """One of a node's ``spec.taints``."""

    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    """One of a Pod's ``spec.tolerations`` (absent fields are empty, as Go reads them)."""

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    compares: bool = True  # Lt/Gt compare (from 1.35); before, they are unknown operators

    def tolerates(self, taint: Taint) -> bool:
        """``Toleration.ToleratesTaint``: an empty effect or key matches any; an unknown operator nothing."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        if self.operator == "Exists":
            return True
        if self.operator in ("Lt", "Gt") and self.compares:
            want, have = _decimal(self.value), _decimal(taint.value)
            if want is None or have is None:
                return False
            return have < want if self.operator == "Lt" else have > want
        return False


def _decimal(text: str) -> int | None:
    """``compareNumericValues``: IsDecimalInteger, then strconv.ParseInt(s, 10, 64)."""
    return _int64(text) if _DECIMAL.fullmatch(text) else None


def untolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...],
                effects: frozenset[str] = _HARD_EFFECTS) -> Taint | None:
    """``FindMatchingUntoleratedTaint``: the first taint of ``effects`` that no toleration tolerates."""
    for taint in taints:
        if taint.effect in effects and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


@dataclass(frozen=True, slots=True)
class NodeConstraints:
    """Where the Pod may land, from its spec alone: nodeName, nodeSelector, required node affinity, tolerations."""

    node_name: str | None = None
    node_selector: Mapping[str, str] | None = None
    # None: no required node affinity; otherwise its non-empty terms (an empty tuple matches no node).
    terms: tuple[Term, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()

    @property
    def key(self) -> tuple[Any, ...]:
        """Equal for equal constraints (hashable): what matched them can be remembered."""
        selector = tuple(sorted(self.node_selector.items())) if self.node_selector is not None else None
        return (self.node_name, selector, self.terms, self.tolerations)

    @property
    def constrained(self) -> bool:
        return self.node_name is not None or self.node_selector is not None or self.terms is not None

    def allows(self, name: str, labels: Mapping[str, str], taints: tuple[Taint, ...] = ()) -> bool:
        """``RequiredNodeAffinity.Match`` and the scheduler's TaintToleration filter. ``spec.nodeName`` skips the
        scheduler; kubelet's admission (lifecycle's predicate handler) then still checks the node affinity, and of
        the taints only ``NoExecute``."""
        if self.node_name is not None and name != self.node_name:
            return False
        effects = _HARD_EFFECTS if self.node_name is None else _NODE_NAMED_EFFECTS
        if taints and untolerated(taints, self.tolerations, effects) is not None:
            return False
        if self.node_selector is not None and any(labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        if self.terms is not None:
            return any(term.matches(name, labels) for term in self.terms)
        return True

    def describe(self) -> str:
        """The constraints in words, for messages."""
        parts = []
        if self.node_name is not None:
            parts.append(f"nodeName {self.node_name}")
        if self.node_selector is not None:
            parts.append("nodeSelector " + ",".join(f"{k}={v}" for k, v in sorted(self.node_selector.items())))
        if self.terms is not None:
            parts.append("required node affinity")
        return " and ".join(parts) or "no node constraint"


def node_constraints(spec: Mapping[str, Any], compares: bool = True) -> NodeConstraints:
    """The Pod's node constraints; malformed parts (the API server refuses them) constrain nothing.
    ``compares``: the release's ``Lt``/``Gt`` tolerations compare values (``Semantics``; 1.35 on)."""
    name = spec.get("nodeName")
    selector = spec.get("nodeSelector")
    sel: Mapping[str, str] | None = None
    if isinstance(selector, Mapping) and selector:
        sel = {str(k): str(v) for k, v in selector.items() if isinstance(v, str)}
    terms: tuple[Term, ...] | None = None
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = (node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
                if isinstance(node_affinity, Mapping) else None)
    if isinstance(required, Mapping):
        raw_terms = required.get("nodeSelectorTerms")
        parsed = []
        for raw in raw_terms if isinstance(raw_terms, list) else []:
            if not isinstance(raw, Mapping):
                continue
            exprs = raw.get("matchExpressions") or []
            flds = raw.get("matchFields") or []
            if not exprs and not flds:  # isEmptyNodeSelectorTerm: skipped
                continue
            parsed.append(Term(tuple(_requirement(r, False) for r in (exprs if isinstance(exprs, list) else [None])),
                               tuple(_requirement(r, True) for r in (flds if isinstance(flds, list) else [None]))))
        terms = tuple(parsed)
    return NodeConstraints(node_name=name if isinstance(name, str) and name else None, node_selector=sel, terms=terms,
                     tolerations=tolerations(spec.get("tolerations"), compares))


def tolerations(raw: Any, compares: bool = True) -> tuple[Toleration, ...]:
    """``spec.tolerations``; an entry that is not an object, or a field that is not a string, tolerates nothing
    (the API server refuses both). ``compares``: the release's ``Lt``/``Gt`` compare values (1.35 on)."""
    found = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping):
            continue
        fields = [item.get(k) for k in ("key", "operator", "value", "effect")]
        if all(f is None or isinstance(f, str) for f in fields):
            key, operator, value, effect = (f or "" for f in fields)
            found.append(Toleration(key, operator, value, effect, compares))
    return tuple(found)


def taints(raw: Any) -> tuple[Taint, ...]:
    """A Node's ``spec.taints`` (malformed entries, which the API server refuses, are left out)."""
    found = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping):
            continue
        key, value, effect = item.get("key"), item.get("value") or "", item.get("effect")
        if isinstance(key, str) and isinstance(value, str) and isinstance(effect, str):
            found.append(Taint(key, value, effect))
    return tuple(found)
