"""``limits-missing``: without a positive cpu and memory limit in every block that decides the QoS class
the Pod is not Guaranteed (``ComputePodQOS``: a zero limit is ignored, so it counts as missing)."""

from __future__ import annotations

from webhook.core.config import KUBERNETES_VERSION, Policy
from webhook.core.facts import Facts
from webhook.core.kubeversion import Semantics
from webhook.core.podspec import PodSpec
from webhook.core.quantity import is_whole_cpu
from webhook.core.resourceblock import COMPUTE, CPU, Block
from webhook.core.rules import cel
from webhook.core.rules.base import Rule, Text, Violation
from webhook.core.rules.cpu_not_integer import whole_cpu_choices, whole_cpu_choices_cel
from webhook.core.rules.sidecars import mesh_hint, mesh_hint_cel, sized

RULE_ID = "limits-missing"

EMPTY_POD_BLOCK = Text("{label}: a pod-level resources block without cpu and memory limits decides the QoS class "
                       "alone on Kubernetes {minor}, so the Pod is not Guaranteed; remove it or set its cpu and "
                       "memory limits")
MISSING = Text("{label}: {what}, so the Pod is not Guaranteed; {fix}{mesh}")
ZERO = Text("{resource} limit is 0, which counts as none")
NONE = Text("no {resource} limit")
FROM_REQUEST = Text("set resources.limits.{resource} to {request} (its request)")
DEFAULTS = Text("set resources.limits.{resource} (the request defaults to it)")
# A fractional cpu request copied into the limit would only trade this finding for cpu-not-integer's: say what
# that rule says (the same whole numbers), unless the container may share CPUs (policy.fractionalCPUContainers).
WHOLE_CPU = Text("set resources.requests.cpu and resources.limits.cpu to one whole number of CPUs ({request} is "
                 "not one): {choice}")


def _scan(block: Block, fractional: frozenset[str], kube: Semantics) -> list[Violation]:
    if block.container is None and not block.requests and not block.limits:
        # ``resources: {}`` up to 1.36: present at all, the pod-level block decides the class alone (from 1.37 it
        # decides only when it sets something: ``PodSpec.pod_level_decides``).
        return [Violation(block.path, EMPTY_POD_BLOCK(label=block.label, minor=kube.minor), rule=RULE_ID)]
    found = []
    for resource in COMPUTE:
        if not block.clean(resource):
            continue
        limit = block.limits.get(resource)
        if limit is not None and limit.positive:
            continue
        request = block.requests.get(resource)
        what = ZERO(resource=resource) if limit is not None else NONE(resource=resource)
        fix = sized(block, resource)  # an operator's container sized by another field, or by none
        if fix is None and request is not None and request.positive and not request.defaulted:
            whole = (resource != CPU or block.container in fractional or request.quantity is None
                     or is_whole_cpu(request.quantity))
            fix = (FROM_REQUEST(resource=resource, request=request.show()) if whole
                   else WHOLE_CPU(request=request.show(), choice=whole_cpu_choices(request.milli)))
        fix = fix or DEFAULTS(resource=resource)
        mesh = mesh_hint(block.container, resource, block.path)
        found.append(Violation(block.at("limits", resource),
                               MISSING(label=block.label, what=what, fix=fix, mesh=mesh), block.container,
                               rule=RULE_ID))
    return found


def check(pod: PodSpec, policy: Policy, facts: Facts) -> list[Violation]:
    return [v for block in pod.qos_blocks() for v in _scan(block, policy.fractional_cpu_containers, pod.kube)]


def to_cel(mutated: bool) -> str:
    # A pod-level block without cpu and memory is reported once, as a whole.
    empty = f"{cel.pod_judged(mutated, 'p')} && !p.level"
    limited = "(f.eff != '')" if mutated else "f.lpos"
    what = f"f.l != '' ? {ZERO.cel(resource='f.r')} : {NONE.cel(resource='f.r')}"
    whole = "f.r != 'cpu' || f.b.frac || quantity(f.q).isInteger()"
    choice = f"({whole_cpu_choices_cel('f.q')})"
    from_request = (f"({whole}) ? {FROM_REQUEST.cel(resource='f.r', request='f.q')} : "
                    f"{WHOLE_CPU.cel(request='f.q', choice=choice)}")
    fix = f"f.qpos ? ({from_request}) : {DEFAULTS.cel(resource='f.r')}"
    minor = f"'1.' + string({cel.setting(KUBERNETES_VERSION)})"
    return (f"({cel.each_pod(RULE_ID, empty, EMPTY_POD_BLOCK.cel(label='p.label', minor=minor))}) + "
            + cel.each_fact(RULE_ID, f"{cel.qos_judged(mutated)} && !{limited} && !(f.b.pod && !f.b.level)",
                            MISSING.cel(label="f.b.label", what=what, fix=fix,
                                        mesh=mesh_hint_cel("f.b.name", "f.r"))))


RULE = Rule(
    RULE_ID, check=check, cel=to_cel,
    summary="a container (init, sidecar or regular), or the pod-level block when present (even `{}`), has no "
            "positive cpu or memory limit (zero counts as none)",
)
