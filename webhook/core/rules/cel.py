"""The CEL vocabulary the rules' fragments are written in (``Rule.cel``); the policy generator
(``webhook.policies.expressions``) defines these variables, in this order, before the rules' own:

* ``variables.<section><Key>``: each configuration parameter (``webhook.core.config.SCHEMA``, ``param=True``),
  typed (``variables.policySmtAlignment`` is an int, ``variables.policyFractionalCPUContainers`` a list).
* ``variables.templates``: the object's pod specs not exempt, one record each (``path``: the dotted path of
  the pod spec in the object, ``prefix``: what names it among several, as ``Target.template`` followed by
  ``: ``, ``spec``), from ``webhook.core.workloads.KINDS`` (a JobSet has one per replicated job).
* ``BLOCK_VARIABLES``: ``pods`` (per template its pod-level block: label, name, group, sidecar, frac, lim,
  req, and ``qos``: the pod-level block decides the QoS class, ``empty``: it is ``{}``, ``level``: it sets cpu
  or memory), ``blocks`` (one record per container of every template, the same fields, ``qos``/``empty``/
  ``level`` those of its template); ``podQos`` and ``podEmpty`` of the first template (the mutation's Pod).
* ``fact_variables``: ``facts``, per block a [cpu, memory] pair of records ``f``: ``f.b`` the block,
  ``f.r`` the resource, ``f.l``/``f.q`` the limit and request as written ('' when absent), ``f.lpos``/``f.qpos``
  whether they are positive, ``f.eff`` the limit the mutation would leave ('' when none).

The Pod a policy sees on CREATE is already defaulted by the API server (requests copied from limits,
quantities rounded up to milli); templates are not, so ``f.eff`` copies a missing request as the engine does.
"""

from __future__ import annotations

from webhook.core.config import CPU_ROUNDING, FRACTIONAL, KUBERNETES_VERSION, SCHEMA, SET_LIMITS
from webhook.core.rules.base import cel_string
from webhook.core.rules.sidecars import MESH_PROXIES
from webhook.core.settings import Setting


def param_name(key: str) -> str:
    """The CEL variable name of a configuration parameter: ``policy.smtAlignment`` -> ``policySmtAlignment``
    (the section keeps it apart from the rules' variables: ``podLevelResources`` is both a key and a rule)."""
    head, *rest = key.split(".")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def setting(key: Setting) -> str:
    """The CEL variable holding a configuration parameter."""
    return f"variables.{param_name(SCHEMA.key_of(key))}"


def variable(rule_id: str) -> str:
    """The CEL variable name of a rule's violations: ``limits-missing`` -> ``limitsMissing``."""
    head, *rest = rule_id.split("-")
    return head + "".join(part.capitalize() for part in rest)


def cel_map(fields: dict[str, str]) -> str:
    """A CEL map literal; values wrapped in dyn() because Kubernetes' CEL wants homogeneous literals."""
    return "{" + ", ".join(f"'{k}': dyn({v})" for k, v in fields.items()) + "}"


def _level(t: str) -> str:
    """``IsPodLevelResourcesSet``: the pod-level block of template ``t`` names cpu, memory or hugepages."""
    lim, req = f"{t}.spec.?resources.?limits.orValue({{}})", f"{t}.spec.?resources.?requests.orValue({{}})"
    return (f"({lim}.exists(r, r in ['cpu', 'memory'] || r.startsWith('hugepages-')) || "
            f"{req}.exists(r, r in ['cpu', 'memory'] || r.startsWith('hugepages-')))")


def _pod_fields(t: str) -> dict[str, str]:
    lim, req = f"{t}.spec.?resources.?limits.orValue({{}})", f"{t}.spec.?resources.?requests.orValue({{}})"
    return {
        # ComputePodQOS: up to 1.36 once spec.resources is there at all (even {}), the pod-level block alone decides
        # the class; from 1.37 only when it sets a supported resource (``PodSpec.pod_level_decides``).
        "qos": f"(has({t}.spec.resources) && ({setting(KUBERNETES_VERSION)} < 37 || {_level(t)}))",
        # Nothing at all in it (``resources: {}``): the mutation removes such a block, as the engine's does.
        "empty": f"size({lim}) == 0 && size({req}) == 0",
        # IsPodLevelResourcesSet: what makes kubelet's CPU and Memory Managers skip it.
        "level": _level(t),
    }


def _record(group: str) -> str:
    """The records of one container group of the template ``p`` (a ``pods`` record: ``p.spec``, ``p.path``)."""
    # `containers` has no omitempty: a Pod without containers arrives as null (then API validation refuses it).
    items = f"(p.spec.?{group}.orValue([]) == null ? [] : p.spec.?{group}.orValue([]))"
    return (f"{items}.transformList(i, c, " + cel_map({
        "label": f"p.prefix + 'container \"' + c.?name.orValue('<unnamed>') + '\" (' + p.path + '.{group}[' "
                 "+ string(i) + '])'",
        "name": "c.?name.orValue('')", "group": f"'{group}'", "pod": "false", "path": "p.path",
        # not the workload's main container (webhook.core.rules.sidecars.is_sidecar)
        "sidecar": "true" if group == "initContainers" else
                   f"i > 0 || c.?name.orValue('') in [{', '.join(cel_string(n) for n in MESH_PROXIES)}]",
        "frac": f"c.?name.orValue('') in {setting(FRACTIONAL)}",
        "lim": "c.?resources.?limits.orValue({})", "req": "c.?resources.?requests.orValue({})",
        "qos": "p.qos", "empty": "p.empty", "level": "p.level"}) + ")")


BLOCK_VARIABLES: list[tuple[str, str]] = [
    ("pods", "variables.templates.map(t, " + cel_map({
        "label": "t.prefix + 'pod (' + t.path + '.resources)'", "name": "''", "group": "''", "pod": "true",
        "sidecar": "false", "frac": "false", "lim": "t.spec.?resources.?limits.orValue({})",
        "req": "t.spec.?resources.?requests.orValue({})", "path": "t.path", "prefix": "t.prefix", "spec": "t.spec",
        **_pod_fields("t")}) + ")"),
    ("blocks", f"variables.pods.map(p, {_record('containers')} + {_record('initContainers')}).flatten()"),
    ("podQos", "variables.pods.exists(p, p.qos)"),
    ("podEmpty", "variables.pods.exists(p, p.qos && p.empty)"),
]

_F0 = {k: f"f.{k}" for k in ("b", "r", "l", "q", "lpos", "qpos")}


def fact_variables(units: str) -> list[tuple[str, str]]:
    """Per block a [cpu, memory] pair of facts, in three stages so that nothing is spelled twice: l/q are the
    limit and request as written, lpos/qpos whether they are positive, base/eff the limit after the mutation
    ('' when none: kept if positive, else the request when setLimitsFromRequests; eff rounds cpu up when
    cpuRounding is up)."""
    first = cel_map({"b": "b", "r": "r", "l": "r in b.lim ? b.lim[r] : ''", "q": "r in b.req ? b.req[r] : ''",
                     "lpos": "r in b.lim && quantity(b.lim[r]).isGreaterThan(quantity('0'))",
                     "qpos": "r in b.req && quantity(b.req[r]).isGreaterThan(quantity('0'))"})
    base = f"f.lpos ? f.l : ({setting(SET_LIMITS)} && f.qpos) ? f.q : ''"
    eff = (f"(f.r == 'cpu' && !f.b.frac && {setting(CPU_ROUNDING)} == 'up' && f.base != '' && "
           "!quantity(f.base).isInteger()) ? string(int(quantity(f.base).asApproximateFloat()) + 1) : f.base")
    return [
        ("facts0", f"{units}.map(b, ['cpu', 'memory'].map(r, {first}))"),
        ("facts1", f"variables.facts0.map(fs, fs.map(f, {cel_map(_F0 | {'base': base})}))"),
        ("facts", f"variables.facts1.map(fs, fs.map(f, {cel_map(_F0 | {'base': 'f.base', 'eff': eff})}))"),
    ]


def pod_judged(mutated: bool, b: str = "f.b") -> str:
    """The pod-level block of ``b``'s template decides the QoS class (after the mutation, which removes an
    empty one)."""
    return f"({b}.qos && !{b}.empty)" if mutated else f"{b}.qos"


def qos_judged(mutated: bool) -> str:
    """``f`` belongs to a block that decides the QoS class (``PodSpec.qos_blocks``)."""
    return f"f.b.pod == {pod_judged(mutated)}"


def cpu_sizing(mutated: bool) -> tuple[str, str]:
    """The cpu the CPU Manager sizes by (the limit, else the request) and which it was ('limit', 'request')."""
    if mutated:
        return "(f.eff != '' ? f.eff : f.qpos ? f.q : '')", "(f.eff != '' ? 'limit' : 'request')"
    return "(f.lpos ? f.l : f.qpos ? f.q : '')", "(f.lpos ? 'limit' : 'request')"


def each_fact(rule_id: str, condition: str, message: str) -> str:
    """One ``'rule-id: message'`` per fact (block and resource) meeting ``condition``."""
    return f"variables.facts.flatten().filter(f, {condition}).map(f, '{rule_id}: ' + {message})"


def each_pod(rule_id: str, condition: str, message: str) -> str:
    """One ``'rule-id: message'`` per template whose pod-level block ``p`` meets ``condition``."""
    return f"variables.pods.filter(p, {condition}).map(p, '{rule_id}: ' + {message})"


def when(rule_id: str, condition: str, message: str) -> str:
    """One ``'rule-id: message'`` when ``condition`` holds."""
    return f"{condition} ? ['{rule_id}: ' + {message}] : []"
