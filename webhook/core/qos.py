"""The QoS class of a pod spec as ``ComputePodQOS`` computes it at the spec's minor (``PodSpec.kube``): the
class the API server stores on create and kubelet reads back (``GetPodQOS``)."""

from __future__ import annotations

from webhook.core.podspec import BEST_EFFORT, BURSTABLE, GUARANTEED, PodSpec
from webhook.core.resourceblock import COMPUTE, Block


def qos_class(pod: PodSpec) -> str:
    """``ComputePodQOS`` (pkg/apis/core/helper/qos/qos.go) of ``pod.kube``'s release: only cpu and memory
    count, ephemeral containers never do, and the pod-level block decides alone when it does
    (``PodSpec.pod_level_decides``). The class computed from the spec; ``declared_qos`` may override it on
    create (up to 1.36)."""
    if pod.kube.pod_level_qos_needs_set:
        return _qos_by_block(pod)
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for block in pod.qos_blocks():
        found = set()
        for name, amount in block.requests.items():
            if amount.positive:
                requests[name] = requests.get(name, 0) + amount.milli
        for name, amount in block.limits.items():
            if amount.positive:
                limits[name] = limits.get(name, 0) + amount.milli
                found.add(name)
        if found < set(COMPUTE):
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and requests.keys() == limits.keys() and all(limits[k] == v for k, v in requests.items()):
        return GUARANTEED
    return BURSTABLE


def _qos_by_block(pod: PodSpec) -> str:
    """1.37's ``ComputePodQOS``: each block's class (``requirementsQOS``), then Burstable if any block is or
    if they differ. A pod without containers is BestEffort."""
    found = None
    for block in pod.qos_blocks():
        cls = _block_qos(block)
        if cls == BURSTABLE or (found is not None and found != cls):
            return BURSTABLE
        found = cls
    return found or BEST_EFFORT


def _block_qos(block: Block) -> str:
    """``requirementsQOS``: BestEffort when nothing at all is set; per cpu and memory, ``resourceQOS`` (request
    != limit: Burstable; both zero: BestEffort; else Guaranteed), Burstable when they differ."""
    if block.empty and not block.requests and not block.limits:
        return BEST_EFFORT
    classes = set()
    for name in COMPUTE:
        request, limit = block.requests.get(name), block.limits.get(name)
        req = request.milli if request is not None and not request.invalid else 0
        lim = limit.milli if limit is not None and not limit.invalid else 0
        classes.add(BURSTABLE if req != lim else BEST_EFFORT if req == 0 else GUARANTEED)
    return classes.pop() if len(classes) == 1 else BURSTABLE
