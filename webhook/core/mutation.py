"""Pod spec -> the changes that make it Guaranteed (``mutate``, docs/contract.md#modes-per-namespace-by-label),
and the RFC 6902 patch built from those changes (never by diffing documents, as kopf builds its patches from
recorded changes).

What can be fixed: a request that differs from its limit is set to the limit; a missing (or zero) limit
is set from its request when ``setLimitsFromRequests``; with ``cpuRounding: up`` a fractional cpu limit
is raised to the next whole CPU; a Pod's ``status.qosClass`` other than Guaranteed is removed (the API
server would keep it); an empty pod-level ``resources`` block is removed. A limit is never lowered and a
request is never set above its limit, so the mutation cannot take resources away from a workload. It is
idempotent by construction.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from webhook.core.config import Config
from webhook.core.fieldpath import FieldPath, Remark, pointer
from webhook.core.podspec import GUARANTEED, PodSpec
from webhook.core.qos import qos_class
from webhook.core.quantity import Quantity, is_whole_cpu
from webhook.core.resourceblock import COMPUTE, CPU, Block, effective_requests


class _Removed:
    def __repr__(self) -> str:
        return "REMOVED"


REMOVED: Final = _Removed()  # ``Change.new`` of a field the mutation deletes


@dataclass(frozen=True, slots=True)
class Change(Remark):
    """One field set (or removed, ``new`` is ``REMOVED``) by the mutation."""

    new: object = field(kw_only=True)
    cost: str = field(default="", kw_only=True)  # what a raised request takes from the node, also in ``message``


def _cpus(milli: int) -> str:
    whole, rest = divmod(milli, 1000)
    return str(whole) if not rest else f"{whole}.{rest:03d}".rstrip("0")


def _bytes(milli: int) -> str:
    value = -(-milli // 1000)
    for suffix, size in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if value >= size and value % size == 0:
            return f"{value // size}{suffix}"
    return f"{value} bytes"


def raise_cost(resource: str, before: int, after: int, pinned: bool) -> str:
    """What raising a request from ``before`` to ``after`` (milli-units) takes from the node, said with the
    change: the scheduler reserves the difference, and a whole number of CPUs in a container of a Guaranteed
    Pod leaves the shared pool to that container alone (static CPU Manager). Empty when nothing is raised."""
    if after <= before:
        return ""
    if resource == CPU:
        alone = " exclusively" if pinned and after % 1000 == 0 else ""
        return f": +{_cpus(after - before)} CPU reserved{alone}"
    return f": +{_bytes(after - before)} {resource} reserved"


def pod_requests(pod: PodSpec) -> dict[str, int]:
    """What the scheduler reserves for ``pod``, in milli-units: ``PodRequests`` (k8s.io/component-helpers
    resource): the pod-level requests where they decide, else max(the app containers' and sidecars' sum, each
    init container with the sidecars before it) (``podspec.effective_requests``)."""
    total = effective_requests(pod.containers, pod.init_containers)
    level = pod.pod_level if pod.pod_level_decides else None
    if level is not None:
        total.update({k: a.milli for k, a in level.requests.items() if not a.invalid})
    return total


def _amount(resource: str, milli: int) -> str:
    return f"{_cpus(milli)} CPU" if resource == CPU else f"{_bytes(milli)} {resource}"


def price(changes: Sequence[Change], pod_after: Callable[[Sequence[Change]], PodSpec]) -> list[Change]:
    """``changes`` with what each raise costs said from the Pod's effective request (``pod_requests``),
    never a container's alone: an init container's raise below the app containers' sum reserves nothing, and
    each raise is priced after the ones before it, so the costs add up to the Pod's. CPUs are said to be
    reserved exclusively only where the fixed Pod is Guaranteed and the container's request whole (the static
    CPU Manager pins nothing in a Burstable Pod). ``pod_after(changes)``: the pod spec with ``changes`` made."""
    if not any(c.cost for c in changes):
        return list(changes)
    final = pod_after(changes)
    guaranteed = qos_class(final) == GUARANTEED
    before = pod_requests(pod_after([]))
    priced: list[Change] = []
    for i, change in enumerate(changes):
        if not change.cost:
            priced.append(change)
            continue
        after = pod_requests(pod_after(changes[:i + 1]))
        resource = str(change.path[-1])
        cost = raise_text(resource, before.get(resource, 0), after.get(resource, 0), final,
                          change.container if guaranteed else None, burstable=not guaranteed)
        before = after
        priced.append(replace(change, message=change.message.replace(change.cost, cost), cost=cost))
    return priced


def raise_text(resource: str, before: int, after: int, pod: PodSpec, pinned: str | None,
               burstable: bool = False) -> str:
    """``: +0.5 CPU reserved exclusively`` for a Pod whose effective request goes from ``before`` to ``after``
    (``pinned``: the container that would then hold whole CPUs alone, if the Pod is Guaranteed)."""
    if after < before:
        return ""
    if after == before:
        return (f": nothing more reserved (the Pod still requests {_amount(resource, after)}: the larger of its "
                "app containers' sum and each init container)")
    if resource != CPU:
        return f": +{_amount(resource, after - before)} reserved"
    container = next((c for c in pod.all_containers if c.name == pinned), None) if pinned is not None else None
    request = container.resources.requests.get(CPU) if container is not None else None
    if request is not None and not request.invalid and request.milli % 1000 == 0:
        return f": +{_cpus(after - before)} CPU reserved exclusively"
    return f": +{_cpus(after - before)} CPU reserved" + (" (shared: the Pod stays Burstable)" if burstable else "")


def _fix_block(block: Block, config: Config, may_round: bool) -> list[Change]:
    """The changes that make one ``resources`` block (a container's or the pod-level one) Guaranteed."""
    changes: list[Change] = []
    who = "pod" if block.container is None else f'container "{block.container}"'
    for resource in COMPUTE:
        if not block.clean(resource):
            continue
        request, limit = block.requests.get(resource), block.limits.get(resource)
        real_request = request if request is not None and not request.defaulted else None
        reason = ""
        if limit is not None and limit.positive:
            new_limit, milli = limit.raw, limit.milli
        elif real_request is not None and real_request.positive and config.mutation.set_limits_from_requests:
            new_limit, milli, reason = real_request.raw, real_request.milli, f"{real_request.raw} (its request)"
        else:
            continue  # no positive limit and nothing to take one from: not fixable here
        if resource == CPU and may_round and config.mutation.cpu_rounding == "up" \
                and not is_whole_cpu(Quantity(milli, str(new_limit))):
            new_limit, milli = str(-(-milli // 1000)), -(-milli // 1000) * 1000
            reason = f"{new_limit}, the next whole number of CPUs"
        # A defaulted request that differs from the limit is the pod-level aggregate the API server fills in. A
        # container's request left out defaults to its limit (the limit just set, too): nothing to write, but
        # the raise is still reserved, which the limit's change says.
        follows_limit = request is not None and request.defaulted and block.container is not None
        if reason:
            cost = raise_cost(resource, request.milli, milli, pinned=True) \
                if follows_limit and request is not None and request.milli != milli else ""
            follows = " (the request defaults to it)" if cost else ""
            changes.append(Change((*block.path, "limits", resource),
                                  f"{who}: set resources.limits.{resource} to {reason}{cost}{follows}",
                                  block.container, new=new_limit, cost=cost))
        if request is not None and request.milli != milli and not follows_limit:
            cost = raise_cost(resource, request.milli, milli, pinned=block.container is not None)
            changes.append(Change((*block.path, "requests", resource),
                                  f"{who}: set resources.requests.{resource} to {new_limit} (its limit){cost}",
                                  block.container, new=new_limit, cost=cost))
    return changes


def plan_changes(pod: PodSpec, config: Config) -> list[Change]:
    """The changes that make ``pod`` Guaranteed, as far as that can be done."""
    changes: list[Change] = []
    if pod.declared_qos is not None and pod.declared_qos != GUARANTEED:
        changes.append(Change((*pod.path[:-1], "status", "qosClass"),
                              f"removed status.qosClass {pod.declared_qos} (the API server would keep it)",
                              new=REMOVED))
    level = pod.pod_level if pod.pod_level_decides else None
    if level is not None and level.empty:
        # Up to 1.36, ``resources: {}`` makes the Pod BestEffort whatever its containers ask for: removing it
        # lets the containers' resources decide again (from 1.37 they do anyway: nothing to remove).
        changes.append(Change(level.path, "pod: removed the empty pod-level resources block (it makes the Pod "
                              f"BestEffort on Kubernetes {pod.kube})", new=REMOVED))
        level = None
    if level is None:
        for c in pod.all_containers:
            changes += _fix_block(c.resources, config, c.name not in config.policy.fractional_cpu_containers)
    else:
        # With a pod-level block the containers' resources no longer decide the QoS class: container limits
        # would only throttle them.
        changes += _fix_block(level, config, True)
    return changes


def _child(node: Any, seg: str | int) -> Any:
    if isinstance(node, Mapping):
        return node.get(seg)
    if isinstance(node, list) and isinstance(seg, int) and 0 <= seg < len(node):
        return node[seg]
    return None


def apply_changes(doc: Any, changes: Iterable[Change], skip: int = 0) -> Any:
    """``doc`` with ``changes`` applied, copying only the mappings and lists along their paths;
    ``skip`` leading segments lead from the document root to ``doc``."""
    root: Any = _copy(doc)
    copied = {id(root)}
    for change in changes:
        path = change.path[skip:]
        node = root
        for seg in path[:-1]:
            child = _child(node, seg)
            if child is None:
                child = {}
            elif id(child) not in copied:
                child = _copy(child)
            copied.add(id(child))
            node[seg] = child
            node = child
        if change.new is REMOVED:
            if isinstance(node, MutableMapping):
                node.pop(path[-1], None)
        else:
            node[path[-1]] = change.new
    return root


def _copy(node: Any) -> Any:
    """A shallow copy of the same type (ruamel's commented maps stay commented for ``fix``)."""
    return copy.copy(node) if isinstance(node, Mapping | list) else node


def json_patch(doc: Any, changes: Iterable[Change]) -> list[dict[str, Any]]:
    """RFC 6902 operations for ``changes`` on ``doc``: missing (or null) parents are added as empty objects
    first, an existing field is replaced, a removed one removed."""
    ops: list[dict[str, Any]] = []
    created: set[FieldPath] = set()
    for change in changes:
        node = doc
        for depth in range(1, len(change.path)):
            prefix = change.path[:depth]
            node = None if prefix in created else _child(node, prefix[-1])
            if node is None and prefix not in created:
                ops.append({"op": "add", "path": pointer(prefix), "value": {}})
                created.add(prefix)
        leaf_exists = (node is not None and isinstance(node, Mapping) and change.path[-1] in node)
        if change.new is REMOVED:
            if leaf_exists:
                ops.append({"op": "remove", "path": pointer(change.path)})
        else:
            ops.append({"op": "replace" if leaf_exists else "add", "path": pointer(change.path),
                        "value": change.new})
            created.add(change.path)
    return ops


__all__ = ["REMOVED", "Change", "apply_changes", "json_patch", "plan_changes", "pod_requests", "price",
           "raise_text"]
