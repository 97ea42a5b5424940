"""Pod spec -> fixed pod spec plus the list of changes (SPEC §5 ``mutate``), and the JSONPatch between.

What can be fixed: a request that differs from its limit is set to the limit; a missing (or zero) limit
is set from its request when ``setLimitsFromRequests``; with ``cpuRounding: up`` a fractional cpu limit
is raised to the next whole CPU. A limit is never lowered and a request is never set above its limit,
so the mutation cannot take resources away from a workload. It is idempotent by construction.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import jsonpatch

from webhook.config import Config
from webhook.podspec import COMPUTE, CPU, Amount, build_pod_spec
from webhook.quantity import Quantity, is_whole_cpu
from webhook.rules.base import clean
from webhook.workloads import Segment, dotted


@dataclass(frozen=True, slots=True)
class Change:
    """One field set by the mutation; ``segments`` run from the document root."""

    segments: tuple[Segment, ...]
    old: object
    new: object
    message: str
    container: str | None

    @property
    def path(self) -> str:
        return dotted(self.segments)


def _set(root: Any, segments: tuple[Segment, ...], value: object) -> None:
    node = root
    for seg in segments[:-1]:
        child = node.get(seg) if isinstance(node, MutableMapping) else node[seg]
        if child is None:
            child = {}
            node[seg] = child
        node = child
    node[segments[-1]] = value


def _fix_block(base: tuple[Segment, ...], label: str, container: str | None,
               requests: Mapping[str, Amount], limits: Mapping[str, Amount], config: Config,
               may_round: bool) -> list[Change]:
    """Fix one ``resources`` block (a container's or the pod-level one) in place."""
    changes: list[Change] = []
    for resource in COMPUTE:
        if not clean(requests, limits, resource):
            continue
        request, limit = requests.get(resource), limits.get(resource)
        real_request = request if request is not None and not request.defaulted else None
        old_limit = limit.raw if limit is not None else None
        new_limit: object = None
        reason = ""
        if limit is not None and limit.positive:
            new_limit, milli = limit.raw, limit.milli
        elif real_request is not None and real_request.positive and config.mutation.set_limits_from_requests:
            new_limit, milli, reason = real_request.raw, real_request.milli, f"{real_request.raw} (its request)"
        else:
            continue  # no positive limit and nothing to take one from: not fixable here
        rounding = resource == CPU and may_round and config.mutation.cpu_rounding == "up"
        if rounding and not is_whole_cpu(Quantity(milli, str(new_limit))):
            new_limit, milli = str(-(-milli // 1000)), -(-milli // 1000) * 1000
            reason = f"{new_limit}, the next whole number of CPUs"
        if reason:
            changes.append(Change((*base, "limits", resource), old_limit, new_limit,
                                  f"{label}: set resources.limits.{resource} to {reason}", container))
        if real_request is not None and real_request.milli != milli:
            changes.append(Change((*base, "requests", resource), real_request.raw, new_limit,
                                  f"{label}: set resources.requests.{resource} to {new_limit} (its limit)",
                                  container))
    return changes


def plan_changes(spec: Mapping[str, Any], segments: tuple[Segment, ...], config: Config) -> list[Change]:
    """The changes that make the pod spec at ``segments`` Guaranteed, as far as that can be done."""
    pod = build_pod_spec(spec, dotted(segments))
    changes: list[Change] = []
    for group, members in (("containers", pod.containers), ("initContainers", pod.init_containers)):
        for index, c in enumerate(members):
            base = (*segments, group, index, "resources")
            may_round = c.name not in config.policy.fractional_cpu_containers
            changes += _fix_block(base, f'container "{c.name}"', c.name, c.requests, c.limits, config,
                                  may_round)
    if pod.pod_level_set:
        real_limits = {k: a for k, a in pod.pod_limits.items() if not a.defaulted}
        changes += _fix_block((*segments, "resources"), "pod", None, pod.pod_requests, real_limits,
                              config, True)
    return changes


def apply_changes(node: Any, changes: list[Change], skip: int = 0) -> Any:
    """A deep copy of ``node`` with ``changes`` applied; ``skip`` leading segments lead to ``node``
    from the document root (0 when ``node`` is the whole document)."""
    fixed = copy.deepcopy(node)
    for change in changes:
        _set(fixed, change.segments[skip:], change.new)
    return fixed


def json_patch(original: Any, mutated: Any) -> list[dict[str, Any]]:
    """RFC 6902 operations turning ``original`` into ``mutated``."""
    return list(jsonpatch.make_patch(original, mutated).patch)


__all__ = ["Change", "apply_changes", "json_patch", "plan_changes"]
