"""Which scheduler places a new Pod (``placement.schedulerName``):
the Pods that must fit one NUMA node go to the scheduler that knows the NUMA nodes (the chart's second
kube-scheduler with ``qos-guard extender``, or any topology-aware one), the others stay with theirs.

A Pod needs single-NUMA alignment when kubelet's static CPU Manager gives a container exclusive CPUs (Guaranteed,
a whole CPU request) and the Pod also takes devices (a device plugin's extended resources, DRA claims or a
DRA-served extended resource), so that ``single-numa-node`` must find CPUs and devices on one NUMA node; with
``placement.memoryManager`` (nodes with the Memory Manager ``Static``), exclusive CPUs alone, for their memory.

One scheduler per device: a Pod that takes devices through DRA (``spec.resourceClaims``, or an extended resource
DRA serves) stays with the scheduler that allocates the rest of the pool (the default scheduler), with a warning
saying why. Each kube-scheduler keeps the DRA allocations it has decided but not yet written to the claims in its
own memory (the DRA plugin's assume cache), so two schedulers allocating from the same ResourceSlices can give
one device to two claims; and the extender fits only what NodeResourceTopology publishes, which has no DRA
devices (kubelet does not align them either: ``webhook.core.dra_requests``).

Pure: the decision and the recorded ``Change`` (the patch is built from it as ``webhook.core.mutation`` builds
its own). A ``schedulerName`` the user set to anything but ``default-scheduler`` is never overridden (a warning
says so), and a Pod with ``spec.nodeName`` never meets a scheduler, so it keeps what it has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.config import Config
from webhook.core.demands import demands, dra_use, is_device, may_align
from webhook.core.dra_requests import DeviceClasses
from webhook.core.engine import exemption, kube_of
from webhook.core.facts import NO_FACTS, Facts
from webhook.core.mutation import Change
from webhook.core.podspec import PodSpec
from webhook.core.workloads import POD, find_targets, table

DEFAULT_SCHEDULER = "default-scheduler"  # what the API server defaults spec.schedulerName to


@dataclass(frozen=True)
class SchedulerChoice:
    """What the webhook does to one Pod's ``spec.schedulerName``: ``changes`` (none or one), the ``warnings``
    when it leaves a user's choice alone, and ``need`` (why the Pod must fit one NUMA node; '' when it need not)."""

    changes: tuple[Change, ...] = ()
    warnings: tuple[str, ...] = ()
    need: str = ""


NOTHING = SchedulerChoice()


def alignment_need(pod: PodSpec, config: Config, classes: DeviceClasses | None = None) -> str:
    """Why ``single-numa-node`` must put this Pod's exclusive CPUs on one NUMA node with something else
    (``exclusive CPUs with example.com/gpu``), or '' when it need not."""
    if not may_align(pod) or not any(d.cpus for d in demands(pod).containers):
        return ""
    parts = sorted({name for c in pod.all_containers for name in c.devices if is_device(name)})
    use = dra_use(pod, classes)
    if use.claims:
        parts.append(f"DRA claims ({', '.join(use.claims)})")
    if parts:
        return f"exclusive CPUs with {', '.join(parts)}"
    if config.placement.memory_manager:
        return "exclusive CPUs and their memory (placement.memoryManager)"
    return ""


def dra_devices(claims: tuple[str, ...], resources: Mapping[str, str]) -> str:
    """The DRA devices a Pod takes (its claims, the extended resources DRA serves it), short (an admission warning
    is cut at 120 characters): ``claim gpu``, ``claims a, b``, ``deviceclass.resource.kubernetes.io/gpu``."""
    parts = [f"claim{'s' if len(claims) > 1 else ''} {', '.join(claims)}"] if claims else []
    return ", ".join(parts + sorted(resources))


def dra_kept(wanted: str, claims: tuple[str, ...], resources: Mapping[str, str], *, own: bool = False) -> str:
    """Why a Pod with DRA devices is not sent to ``wanted`` (``own``: the user sent it there; the first 120
    characters say it)."""
    lead = f"{wanted} left as set, but" if own else f"{DEFAULT_SCHEDULER} kept, not {wanted}:"
    devices = dra_devices(claims, resources)
    return (f"qos-guard: {lead} two schedulers can give one DRA device to two claims, as each keeps its in-flight "
            f"DRA allocations in its own memory, so the Pod's DRA devices ({devices}) are left to the "
            f"scheduler that allocates the rest of their pool; {wanted}'s extender cannot fit DRA devices either "
            "(NodeResourceTopology does not publish them); "
            f"to have the Pod placed on one NUMA node by {wanted}, serve the device with its device plugin")


def choose(spec: Mapping[str, Any], pod: PodSpec, config: Config, classes: DeviceClasses | None = None
           ) -> SchedulerChoice:
    """The change to ``spec.schedulerName`` of the pod spec ``spec`` (``pod`` built from it), if any."""
    wanted = config.placement.scheduler_name
    if wanted is None or spec.get("nodeName"):
        return NOTHING
    need = alignment_need(pod, config, classes)
    if not need:
        return NOTHING
    current = spec.get("schedulerName")
    use = dra_use(pod, classes)
    if use:
        if current in (None, "", DEFAULT_SCHEDULER):
            return SchedulerChoice(warnings=(dra_kept(wanted, use.claims, use.resources),), need=need)
        if current == wanted:  # the user's own choice (the webhook never sets it on such a Pod): left, warned
            return SchedulerChoice(warnings=(dra_kept(wanted, use.claims, use.resources, own=True),), need=need)
        return SchedulerChoice(need=need)  # a scheduler of the user's own: theirs to pair with DRA
    if current == wanted:
        return SchedulerChoice(need=need)  # already there (a reinvocation, or the user's own choice)
    path = (*pod.path, "schedulerName")
    if current in (None, "", DEFAULT_SCHEDULER):
        return SchedulerChoice((Change(path, f"set spec.schedulerName to {wanted}: {need} must fit one NUMA node",
                                       new=wanted),), need=need)
    shown = str(current)[:63]
    return SchedulerChoice(warnings=(f"qos-guard: spec.schedulerName {shown} left as set (not {DEFAULT_SCHEDULER}); "
                                     f"{need} must fit one NUMA node, which {wanted} checks",), need=need)


def choose_for(obj: Any, config: Config, facts: Facts = NO_FACTS, *, namespace: str | None = None,
               username: str | None = None) -> SchedulerChoice:
    """``choose`` for a Pod manifest ``obj`` (anything else: nothing), with the exemptions of the configuration
    (namespaces, users, runtimeClassNames) as the rules have them. Raises ``ManifestError`` for a wrong shape."""
    if config.placement.scheduler_name is None:
        return NOTHING
    for target in find_targets(obj, kinds=table(config.workloads)):
        if target.kind != POD or exemption(config, target, namespace, username) is not None:
            continue
        return choose(target.spec, target.pod_spec(kube_of(config, facts)), config, facts.device_classes)
    return NOTHING


__all__ = ["DEFAULT_SCHEDULER", "NOTHING", "SchedulerChoice", "alignment_need", "choose", "choose_for", "dra_devices",
           "dra_kept"]
