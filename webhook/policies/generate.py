"""``qos-guard policy``: the rules of SPEC §3 as ValidatingAdmissionPolicy and MutatingAdmissionPolicy (CEL run
inside the API server: no webhook, no TLS, no extra hop), generated from the same ``Config``.

Design, so that there is one source of truth:

* The policy objects are constant text: every configuration value is read at admission time from a ConfigMap
  (``paramKind``), rendered by ``params_configmap`` from the ``Config``. The chart ships the same policy text
  (``charts/qos-guard/templates/policies.yaml``, written by
  ``python -m webhook.policies.generate --write-chart``, checked by a test) and renders
  the ConfigMap from the same ``config`` values.
* The Pod a policy sees on CREATE is already defaulted by the API server (requests copied from limits,
  quantities rounded up to milli, ``status.qosClass`` set by ``PrepareForCreate``); templates are not, so the
  CEL copies a missing request from its limit as the engine does.
* What CEL cannot express is refused with the key named (``PolicyError``): ``policy.numa`` needs the nodes'
  topology and the engine's effective-request arithmetic.

Known differences from the engine are listed in ``KNOWN_DIFFERENCES`` (the README repeats them; the
differential test checks each one is real and the only one).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import yaml

from webhook.core.config import Config
from webhook.core.engine import MODE_LABEL, Mode

API_VERSIONS = ("v1",)
MODES = ("enforce", "mutate", "warn", "all")
GROUP = "admissionregistration.k8s.io"
NAMESPACE = "qos-guard"
NAME = "qos-guard"
WARN_SLOTS = 10  # one warning per violation for the first ten, then "... and N more"
MAX_MESSAGE = 4000  # the API server drops a messageExpression result over 5 KiB

# ConfigMap data keys are the configuration's own dotted keys.
K_FRACTIONAL = "policy.fractionalCPUContainers"
K_POD_LEVEL = "policy.podLevelResources"
K_SMT = "policy.smtAlignment"
K_SET_LIMITS = "mutation.setLimitsFromRequests"
K_ROUNDING = "mutation.cpuRounding"
K_NAMESPACES = "exemptions.namespaces"
K_USERNAMES = "exemptions.usernames"
K_RUNTIME_CLASSES = "exemptions.runtimeClassNames"

KNOWN_DIFFERENCES: dict[str, str] = {
    "cpu-beyond-int64": "a cpu value above 9223372036854775807 CPUs is whole to the engine but not to CEL's "
                        "quantity isInteger() (it does not fit an int64)",
    "template-pod-level-request": "a template with pod-level limits but no pod-level request: the policy takes "
                                  "the request to be the limit, the engine the containers' effective total "
                                  "(the verdict differs only with policy.podLevelResources: allow; with deny "
                                  "both refuse, naming different rules)",
    "pod-level-mutation": "the MutatingAdmissionPolicy patches containers, not the pod-level resources block "
                          "(matters only with policy.podLevelResources: allow; pod-level requests below the "
                          "patched containers' are then refused by API validation, as after the webhook's patch)",
}


class PolicyError(ValueError):
    """Configuration the CEL form cannot express; the message starts with the key."""


def refuse_unsupported(config: Config) -> None:
    """``policy.numa`` needs the node topology and per-Pod effective totals: only the webhook has them."""
    if config.policy.numa is not None:
        raise PolicyError("policy.numa: numa-unfit is not available as an admission policy (the pod scope "
                          "sums exact quantities over init containers and sidecars, which CEL cannot fold); "
                          "use the webhook (enforcement: webhook) or remove policy.numa")


def params_data(config: Config) -> dict[str, str]:
    """The ConfigMap the policies read their configuration from (lists one item a line)."""
    ex = config.exemptions
    return {
        K_FRACTIONAL: "\n".join(sorted(config.policy.fractional_cpu_containers)),
        K_POD_LEVEL: config.policy.pod_level_resources,
        K_SMT: str(config.policy.smt_alignment),
        K_SET_LIMITS: "true" if config.mutation.set_limits_from_requests else "false",
        K_ROUNDING: config.mutation.cpu_rounding,
        K_NAMESPACES: "\n".join(sorted(ex.namespaces)),
        K_USERNAMES: "\n".join(sorted(ex.usernames)),
        K_RUNTIME_CLASSES: "\n".join(sorted(ex.runtime_class_names)),
    }


# --------------------------------------------------------------------------------------------------- CEL

def _param(key: str, default: str) -> str:
    return f"params.?data.orValue({{}})[?'{key}'].orValue('{default}')"


def _param_list(key: str) -> str:
    return f"{_param(key, '')}.split('\\n').filter(s, s != '')"


PARAM_VARIABLES: list[tuple[str, str]] = [
    ("frac", _param_list(K_FRACTIONAL)),
    ("allowPodLevel", f"{_param(K_POD_LEVEL, 'deny')} == 'allow'"),
    ("smt", f"int({_param(K_SMT, '1')})"),
    ("setLimits", f"{_param(K_SET_LIMITS, 'true')} == 'true'"),
    ("roundUp", f"{_param(K_ROUNDING, 'none')} == 'up'"),
]

# Where the pod spec lives in each kind (webhook/core/workloads.py SPEC_PATHS), and its dotted path for messages.
SPEC_VARIABLES: list[tuple[str, str]] = [
    ("path", "request.kind.kind == 'Pod' ? 'spec' : request.kind.kind == 'CronJob' ? "
             "'spec.jobTemplate.spec.template.spec' : request.kind.kind == 'PodTemplate' ? 'template.spec' "
             ": 'spec.template.spec'"),
    ("spec", "request.kind.kind == 'Pod' ? object.?spec.orValue({}) "
             ": request.kind.kind == 'CronJob' ? object.?spec.?jobTemplate.?spec.?template.?spec.orValue({}) "
             ": request.kind.kind == 'PodTemplate' ? object.?template.?spec.orValue({}) "
             ": object.?spec.?template.?spec.orValue({})"),
    ("exempt", f"variables.spec.?runtimeClassName.orValue('') in {_param_list(K_RUNTIME_CLASSES)}"),
]


def _map(fields: dict[str, str]) -> str:
    """A CEL map literal; values wrapped in dyn() because Kubernetes' CEL wants homogeneous literals."""
    return "{" + ", ".join(f"'{k}': dyn({v})" for k, v in fields.items()) + "}"


def _record(group: str) -> str:
    # `containers` has no omitempty: a Pod without containers arrives as null (then API validation refuses it).
    items = f"(variables.spec.?{group}.orValue([]) == null ? [] : variables.spec.?{group}.orValue([]))"
    return (f"{items}.transformList(i, c, " + _map({
        "label": f"'container \"' + c.?name.orValue('<unnamed>') + '\" (' + variables.path + '.{group}[' "
                 "+ string(i) + '])'",
        "name": "c.?name.orValue('')", "group": f"'{group}'", "pod": "false",
        "frac": "c.?name.orValue('') in variables.frac",
        "lim": "c.?resources.?limits.orValue({})", "req": "c.?resources.?requests.orValue({})"}) + ")")


BLOCK_VARIABLES: list[tuple[str, str]] = [
    ("blocks", f"{_record('containers')} + {_record('initContainers')}"),
    ("pod", _map({"label": "'pod (' + variables.path + '.resources)'", "name": "''", "group": "''", "pod": "true",
                  "frac": "false", "lim": "variables.spec.?resources.?limits.orValue({})",
                  "req": "variables.spec.?resources.?requests.orValue({})"})),
    # ComputePodQOS: once spec.resources is there at all (even {}), the pod-level block alone decides the class.
    ("podQos", "has(variables.spec.resources)"),
    # Nothing at all in it (``resources: {}``): the mutation removes such a block, as the engine's does.
    ("podEmpty", "size(variables.pod.lim) == 0 && size(variables.pod.req) == 0"),
    # isPodLevelResourcesSet restricted to cpu/memory: what makes kubelet's CPU and Memory Managers skip the Pod.
    ("podLevel", "['cpu', 'memory'].exists(r, r in variables.pod.lim || r in variables.pod.req)"),
]

_F0 = {k: f"f.{k}" for k in ("b", "r", "l", "q", "lpos", "qpos")}


def fact_variables(units: str) -> list[tuple[str, str]]:
    """Per block (container or pod-level) a [cpu, memory] pair of facts, in three stages so that nothing
    is spelled twice: l/q are the limit and request as written ('' when absent), lpos/qpos whether they are
    positive, base/eff the limit after the mutation ('' when none: kept if positive, else the request when
    setLimitsFromRequests; eff rounds cpu up when cpuRounding is up)."""
    first = _map({"b": "b", "r": "r", "l": "r in b.lim ? b.lim[r] : ''", "q": "r in b.req ? b.req[r] : ''",
                  "lpos": "r in b.lim && quantity(b.lim[r]).isGreaterThan(quantity('0'))",
                  "qpos": "r in b.req && quantity(b.req[r]).isGreaterThan(quantity('0'))"})
    base = "f.lpos ? f.l : (variables.setLimits && f.qpos) ? f.q : ''"
    eff = ("(f.r == 'cpu' && !f.b.frac && variables.roundUp && f.base != '' && !quantity(f.base).isInteger()) "
           "? string(int(quantity(f.base).asApproximateFloat()) + 1) : f.base")
    return [
        ("facts0", f"{units}.map(b, ['cpu', 'memory'].map(r, {first}))"),
        ("facts1", f"variables.facts0.map(fs, fs.map(f, {_map(_F0 | {'base': base})}))"),
        ("facts", f"variables.facts1.map(fs, fs.map(f, {_map(_F0 | {'base': 'f.base', 'eff': eff})}))"),
    ]


LIMITS_MISSING_MSG = (
    "f.b.label + ': ' + (f.l != '' ? f.r + ' limit is 0, which counts as none' : 'no ' + f.r + ' limit') + "
    "', so the Pod is not Guaranteed; ' + (f.qpos ? 'set resources.limits.' + f.r + ' to ' + f.q + "
    "' (its request)' : 'set resources.limits.' + f.r + ' (the request defaults to it)')")
NOT_EQUAL_MSG = ("f.b.label + ': ' + f.r + ' request ' + f.q + ' differs from its limit ' + f.l + "
                 "'; set resources.requests.' + f.r + ' to ' + f.l")


def _cpu_amount(mutated: bool) -> tuple[str, str]:
    """The cpu the CPU Manager sizes by (the limit, else the request) and which it was."""
    if mutated:
        return "(f.eff != '' ? f.eff : f.qpos ? f.q : '')", "(f.eff != '' ? 'limit' : 'request')"
    return "(f.lpos ? f.l : f.qpos ? f.q : '')", "(f.lpos ? 'limit' : 'request')"


def _rule(rule: str, cond: str, msg: str) -> str:
    return f"variables.facts.flatten().filter(f, {cond}).map(f, '{rule}: ' + {msg})"


POD_LEVEL_MSG = ("'pod-level-resources: ' + variables.pod.label + ': pod-level cpu/memory make kubelet\\'s CPU "
                 "and Memory Managers skip the Pod (unless nodes enable PodLevelResourceManagers); set them per "
                 "container, or allow with policy.podLevelResources: allow'")


def violation_variables(mutated: bool) -> list[tuple[str, str]]:
    """The rules, in the engine's order (webhook/core/rules/__init__.py), each a list of 'rule-id: message'.

    ``mutated``: judge what the mutation would leave (templates in ``mutate`` namespaces, which are not
    patched); a ``requests-not-equal-limits`` never survives the mutation.
    """
    judged = "f.b.pod == variables.podQos"  # the pod-level block replaces the containers' QoS checks
    if mutated:
        judged = "f.b.pod == (variables.podQos && !variables.podEmpty)"  # an empty block is removed
        missing = _rule("limits-missing", f"{judged} && f.eff == ''", LIMITS_MISSING_MSG)
        not_equal = "[]"
    else:
        missing = _rule("limits-missing", f"{judged} && !f.lpos", LIMITS_MISSING_MSG)
        not_equal = _rule("requests-not-equal-limits",
                          f"{judged} && f.lpos && f.q != '' && quantity(f.q).compareTo(quantity(f.l)) != 0",
                          NOT_EQUAL_MSG)
    amount, kind = _cpu_amount(mutated)
    low = f"int(quantity({amount}).asApproximateFloat())"
    cpus = f"quantity({amount}).asInteger()"
    down = f"({cpus} - {cpus} % variables.smt)"
    cpu = "f.r == 'cpu' && !f.b.frac"
    return [
        ("limitsMissing", missing),
        ("notEqual", not_equal),
        ("cpuNotInteger", _rule(
            "cpu-not-integer",
            f"{cpu} && (!f.b.pod || variables.podQos) && {amount} != '' && !quantity({amount}).isInteger()",
            f"f.b.label + ': ' + (f.b.pod ? 'pod-level ' : '') + 'cpu ' + {kind} + ' ' + {amount} + "
            f"' is not a whole number of CPUs; ' + "
            f"({low} == 0 ? 'use 1' : 'use ' + string({low}) + ' or ' + string({low} + 1))")),
        ("podLevelResources", f"variables.podLevel && !variables.allowPodLevel ? [{POD_LEVEL_MSG}] : []"),
        ("smtMisaligned", _rule(
            "smt-misaligned",
            f"{cpu} && !f.b.pod && variables.smt > 1 && {amount} != '' && quantity({amount}).isInteger() && "
            f"{cpus} % variables.smt != 0",
            f"f.b.label + ': cpu ' + {kind} + ' ' + string({cpus}) + ' is not a multiple of ' + "
            f"string(variables.smt) + ' (full-pcpus-only fails with SMTAlignmentError); ' + ({down} > 0 ? "
            f"'use ' + string({down}) + ' or ' + string({down} + variables.smt) : 'use ' + "
            f"string({down} + variables.smt))")),
        # PrepareForCreate keeps a client-supplied status.qosClass (GetPodQOS): with nothing else wrong with
        # the spec, a class other than Guaranteed can only have come from the manifest.
        ("statusQosClass", "request.kind.kind == 'Pod' && request.operation == 'CREATE' && "
                           "object.?status.?qosClass.orValue('Guaranteed') != 'Guaranteed' && "
                           "size(variables.limitsMissing) + size(variables.notEqual) == 0 ? "
                           "['status-qos-class: pod (status.qosClass): the manifest sets status.qosClass ' + "
                           "object.status.qosClass + ', which the API server keeps on create, so the Pod is not "
                           "Guaranteed; remove status from the manifest'] : []"),
        ("violations", "variables.exempt ? [] : variables.limitsMissing + variables.notEqual + "
                       "variables.cpuNotInteger + variables.podLevelResources + variables.smtMisaligned + "
                       "variables.statusQosClass"),
    ]


HEAD = ("request.kind.kind + ' \"' + object.metadata.?name.orValue(object.metadata.?generateName.orValue('<unnamed>')) "
        "+ '\" would not get exclusive CPUs (Guaranteed QoS, whole CPUs) from kubelet: '")


def _variables(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": name, "expression": expr} for name, expr in pairs]


def _match_conditions() -> list[dict[str, str]]:
    return [
        {"name": "exempt-namespace", "expression": f"!(request.namespace in {_param_list(K_NAMESPACES)})"},
        {"name": "exempt-username",
         "expression": f"!(request.userInfo.username in {_param_list(K_USERNAMES)})"},
    ]


def _pod_rules(mutating: bool) -> list[dict[str, Any]]:
    def rule(group: str, operations: list[str], resources: list[str]) -> dict[str, Any]:
        # scope spelled out: the API server would default it, and `kubectl apply` would then see a change.
        return {"apiGroups": [group], "apiVersions": ["v1"], "operations": operations, "resources": resources,
                "scope": "Namespaced"}

    pods = rule("", ["CREATE"], ["pods"])
    if mutating:
        return [pods]
    return [
        pods,
        rule("", ["UPDATE"], ["pods/resize"]),
        rule("", ["CREATE", "UPDATE"], ["replicationcontrollers", "podtemplates"]),
        rule("apps", ["CREATE", "UPDATE"], ["deployments", "replicasets", "statefulsets", "daemonsets"]),
        rule("batch", ["CREATE", "UPDATE"], ["jobs", "cronjobs"]),
    ]


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "labels": {"app.kubernetes.io/name": "qos-guard",
                                     "app.kubernetes.io/component": "admission-policy"}}


def _selector(mode: str, namespace: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchExpressions": [
        {"key": MODE_LABEL, "operator": "In", "values": [mode]},
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
         "values": sorted({"kube-system", namespace})},
    ]}}


def _validating(name: str, validations: list[dict[str, str]], mutated: bool, failure: str) -> dict[str, Any]:
    common = (PARAM_VARIABLES + SPEC_VARIABLES + BLOCK_VARIABLES
              + fact_variables("(variables.blocks + [variables.pod])"))
    pairs = common + violation_variables(False)
    if mutated:
        # Pods arrive already patched by the MutatingAdmissionPolicy: judge them as they are; templates are
        # never patched, so judge what the mutation of their Pods would leave.
        plain = dict(violation_variables(False))
        virtual = dict(violation_variables(True))
        pairs = list(common)
        for key, expr in plain.items():
            if key == "violations":
                continue
            pairs.append((key, f"request.kind.kind == 'Pod' ? ({expr}) : ({virtual[key]})"))
        pairs.append(("violations", plain["violations"]))
    pairs.append(("message", f"{HEAD} + variables.violations.join('; ')"))
    return {
        "apiVersion": f"{GROUP}/v1", "kind": "ValidatingAdmissionPolicy", "metadata": _meta(name),
        "spec": {
            "failurePolicy": failure,
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": _pod_rules(False)},
            "matchConditions": _match_conditions(),
            "variables": _variables(pairs),
            "validations": validations,
        },
    }


def _deny_validation() -> list[dict[str, str]]:
    return [{
        "expression": "size(variables.violations) == 0",
        "messageExpression": f"size(variables.message) > {MAX_MESSAGE} ? "
                             f"variables.message.substring(0, {MAX_MESSAGE}) + ' ...' : variables.message",
        "message": "the Pod would not get exclusive CPUs (Guaranteed QoS, whole CPUs) from kubelet; "
                   "run qos-guard check on the manifest for details",
        "reason": "Forbidden",
    }]


def _warn_validations() -> list[dict[str, str]]:
    out = [{"expression": f"size(variables.violations) <= {k}",
            "messageExpression": f"variables.violations[{k}]",
            "message": "qos-guard: the Pod would not get exclusive CPUs from kubelet"}
           for k in range(WARN_SLOTS)]
    out.append({"expression": f"size(variables.violations) <= {WARN_SLOTS}",
                "messageExpression": f"'... and ' + string(size(variables.violations) - {WARN_SLOTS}) + "
                                     "' more (see qos-guard check)'",
                "message": "qos-guard: more violations (see qos-guard check)"})
    return out


def _binding(kind: str, name: str, mode: str, namespace: str, actions: list[str] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "policyName": name,
        "paramRef": {"name": f"{NAME_TOKEN}-policy", "namespace": namespace,
                     "parameterNotFoundAction": "Deny"},
        "matchResources": _selector(mode, namespace),
    }
    if actions is not None:
        spec["validationActions"] = actions
    return {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": _meta(name), "spec": spec}


def _mutation_apply() -> str:
    """ApplyConfiguration merging the fixed requests/limits into each container (by name) that needs it."""
    lc = "(f.eff != '' && f.eff != f.l)"
    rc = "(f.eff != '' && f.q != '' && quantity(f.q).compareTo(quantity(f.eff)) != 0)"

    def entries(change: str) -> str:
        return ", ".join(f"?'{r}': {change.replace('f.', f'fs[{i}].')} ? optional.of(fs[{i}].eff) : optional.none()"
                         for i, r in enumerate(("cpu", "memory")))

    def group(field: str) -> str:
        item = (f"Object.spec.{field}{{name: fs[0].b.name, resources: Object.spec.{field}.resources{{"
                f"?limits: fs.exists(f, {lc}) ? optional.of({{{entries(lc)}}}) : optional.none(), "
                f"?requests: fs.exists(f, {rc}) ? optional.of({{{entries(rc)}}}) : optional.none()}}}}")
        return f"variables.facts.filter(fs, fs[0].b.group == '{field}' && fs.exists(f, {lc} || {rc})).map(fs, {item})"

    return ("Object{spec: Object.spec{"
            f"?containers: size({group('containers')}) > 0 ? optional.of({group('containers')}) : optional.none(), "
            f"?initContainers: size({group('initContainers')}) > 0 ? optional.of({group('initContainers')}) "
            ": optional.none()}}")


def _mutating(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1", "kind": "MutatingAdmissionPolicy", "metadata": _meta(name),
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "IfNeeded",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": _pod_rules(True)},
            "matchConditions": [*_match_conditions(), {
                "name": "exempt-runtime-class",
                "expression": f"!(object.spec.?runtimeClassName.orValue('') in {_param_list(K_RUNTIME_CLASSES)})"}],
            "variables": _variables(PARAM_VARIABLES + SPEC_VARIABLES + BLOCK_VARIABLES
                                    + fact_variables("variables.blocks")),
            "mutations": [
                {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": _mutation_apply()}},
                # The API server keeps a client-supplied status.qosClass on create (GetPodQOS): drop it.
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "object.?status.?qosClass.orValue('Guaranteed') != 'Guaranteed' ? "
                    "[JSONPatch{op: 'remove', path: '/status/qosClass'}] : []"}},
                # ``resources: {}`` makes the Pod BestEffort whatever its containers ask for: drop it.
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "variables.podQos && variables.podEmpty ? [JSONPatch{op: 'remove', path: '/spec/resources'}] "
                    ": []"}},
            ],
        },
    }


def _namespaces(name: str, namespace: str) -> list[dict[str, Any]]:
    """The label's value must name a mode (SPEC §5 /validate-namespace)."""
    label = f"object.metadata.?labels.orValue({{}})[?'{MODE_LABEL}']"
    policy = {
        "apiVersion": f"{GROUP}/v1", "kind": "ValidatingAdmissionPolicy", "metadata": _meta(name),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE", "UPDATE"],
                                                    "resources": ["namespaces"], "scope": "Cluster"}]},
            "validations": [{
                "expression": f"{label}.orValue('enforce') in ['enforce', 'mutate', 'warn']",
                "messageExpression": f"'namespace label {MODE_LABEL}=\"' + {label}.orValue('') + '\" is not one of "
                                     "enforce, mutate, warn; remove the label to opt out'",
                "reason": "Invalid",
            }],
        },
    }
    binding = {
        "apiVersion": f"{GROUP}/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": _meta(name),
        "spec": {"policyName": name, "validationActions": ["Deny"], "matchResources": {
            "objectSelector": {"matchExpressions": [{"key": MODE_LABEL, "operator": "Exists"}]},
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                        "values": sorted({"kube-system", namespace})}]}}},
    }
    return [policy, binding]


NAME_TOKEN = "@NAME@"
NAMESPACE_TOKEN = "@NAMESPACE@"


def policy_objects(modes: Sequence[str], namespace: str = NAMESPACE_TOKEN) -> list[dict[str, Any]]:
    """The policies and bindings for ``modes`` (names carry ``NAME_TOKEN``), without the parameters."""
    out: list[dict[str, Any]] = []
    if "enforce" in modes:
        name = f"{NAME_TOKEN}-enforce"
        out += [_validating(name, _deny_validation(), False, "Fail"),
                _binding("ValidatingAdmissionPolicyBinding", name, "enforce", namespace, ["Deny"])]
    if "mutate" in modes:
        name = f"{NAME_TOKEN}-mutate"
        out += [_mutating(name), _binding("MutatingAdmissionPolicyBinding", name, "mutate", namespace, None),
                _validating(name, _deny_validation(), True, "Fail"),
                _binding("ValidatingAdmissionPolicyBinding", name, "mutate", namespace, ["Deny"])]
    if "warn" in modes:
        name = f"{NAME_TOKEN}-warn"
        out += [_validating(name, _warn_validations(), False, "Ignore"),
                _binding("ValidatingAdmissionPolicyBinding", name, "warn", namespace, ["Warn"])]
    out += _namespaces(f"{NAME_TOKEN}-namespaces", namespace)
    return out


def params_configmap(config: Config, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{NAME_TOKEN}-policy", "namespace": namespace,
                         "labels": {"app.kubernetes.io/name": "qos-guard",
                                    "app.kubernetes.io/component": "admission-policy"}},
            "data": params_data(config)}


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings, long lines kept whole (CEL stays readable)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    block = "\n" in value or (len(value) > 80 and "'" in value)
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if block else None)


_Dumper.add_representer(str, _str)


def dump(docs: Sequence[dict[str, Any]]) -> str:
    return yaml.dump_all(list(docs), Dumper=_Dumper, sort_keys=False, width=10**6, explicit_start=True)


def _substitute(text: str, name: str, namespace: str) -> str:
    return text.replace(NAME_TOKEN, name).replace(NAMESPACE_TOKEN, namespace)


def render(config: Config, mode: str = "all", namespace: str = NAMESPACE, api_version: str = "v1") -> str:
    """``qos-guard policy`` output: the parameters ConfigMap, then the policies and bindings for ``mode``."""
    if api_version not in API_VERSIONS:
        raise PolicyError(f"--api-version: {api_version!r} is not one of {', '.join(API_VERSIONS)}")
    if mode not in MODES:
        raise PolicyError(f"--mode: {mode!r} is not one of {', '.join(MODES)}")
    refuse_unsupported(config)
    modes = [m.value for m in Mode] if mode == "all" else [mode]
    docs = [params_configmap(config, NAMESPACE_TOKEN), *policy_objects(modes)]
    return _substitute(dump(docs), NAME, namespace)


CHART_TEMPLATE = "charts/qos-guard/templates/policies.yaml"


def chart_template() -> str:
    """The chart's policies (all modes), names and namespace left to Helm."""
    body = dump(policy_objects([m.value for m in Mode]))
    body = _substitute(body, '{{ include "qos-guard.fullname" . }}', "{{ .Release.Namespace }}")
    return ("{{- /* Generated by `python -m webhook.policies.generate --write-chart` from "
            "webhook/policies/generate.py; do not edit. tests/chart checks it matches. */ -}}\n"
            '{{- if eq .Values.enforcement "policy" }}\n' + body + "{{- end }}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m webhook.policies.generate --write-chart``: regenerate the chart template."""
    from pathlib import Path

    args = list(sys.argv[1:] if argv is None else argv)
    if args != ["--write-chart"]:
        print("usage: python -m webhook.policies.generate --write-chart", file=sys.stderr)
        return 2
    target = Path(__file__).resolve().parents[2] / CHART_TEMPLATE
    target.write_text(chart_template(), encoding="utf-8")
    print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
