"""``qos-guard policy``: the rules (docs/contract.md#rules) as ValidatingAdmissionPolicy and
MutatingAdmissionPolicy (CEL run inside the API server: no webhook, no TLS, no extra hop), assembled from each
rule's own CEL (``Rule.cel``) over ``workloads.KINDS`` and the configuration schema.

Design, so that there is one source of truth:

* The policy objects are constant text: every configuration value is read at admission time from a ConfigMap
  (``paramKind``), rendered by ``params_configmap`` from the ``Config``. The chart ships the same policy text
  (``charts/qos-guard/templates/policies.yaml``) and renders the ConfigMap from the same ``config`` values
  (``policy-params.yaml``): ``chart_template`` and ``chart_params`` return their text, ``python hack/generate.py``
  writes it (nothing inside the installed package writes into the repository), a test checks both.
* The Pod a policy sees on CREATE is already defaulted by the API server (requests copied from limits,
  quantities rounded up to milli, ``status.qosClass`` set by ``PrepareForCreate``); templates are not, so the
  CEL copies a missing request from its limit as the engine does.
* A rule without CEL that the configuration turns on is refused with the key named (``PolicyError``,
  ``Rule.policy_refusal``): ``policy.numa`` needs the engine's effective-request arithmetic.

Known differences from the engine are listed in ``KNOWN_DIFFERENCES`` (the README repeats them; the
differential test checks each one is real and the only one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from webhook.core.config import RUNTIME_CLASSES, SCHEMA, Config
from webhook.core.engine import MODE_LABEL, Mode
from webhook.core.rules import MORE, REFUSED, RULES, cel
from webhook.core.rules.base import cel_string
from webhook.core.rules.dra_unaligned import DEVICE_CLASSES_REFUSAL
from webhook.core.settings import Setting
from webhook.core.workloads import KINDS, LIST, MAP, POD, Kind, Template, table, template_label
from webhook.policies.schema import helm

API_VERSIONS = ("v1",)
MODES = ("enforce", "mutate", "warn", "all")
GROUP = "admissionregistration.k8s.io"
NAMESPACE = "qos-guard"
NAME = "qos-guard"
WARN_SLOTS = 10  # one warning per violation for the first ten, then "... and N more"
MAX_MESSAGE = 4000  # the API server drops a messageExpression result over 5 KiB

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


# placement.schedulerName is the webhook's /place: the generated policies judge the rules, they set no scheduler.
PLACEMENT_REFUSAL = ("placement.schedulerName: the admission policies judge the rules and set no spec.schedulerName "
                     "(the webhook's place.qos-guard.io does); use enforcement: webhook, or set schedulerName in "
                     "the workloads' Pod templates yourself")


def refuse_unsupported(config: Config) -> None:
    """A rule without CEL that the configuration turns on (``policy.numa``), or cluster state the CEL cannot read
    (``policy.deviceClasses``): only the webhook has it."""
    for rule in RULES:
        if rule.cel is None and rule.policy_refusal is not None and rule.enabled(config.policy):
            raise PolicyError(str(rule.policy_refusal))
    if config.policy.device_classes:
        raise PolicyError(str(DEVICE_CLASSES_REFUSAL))
    if config.placement.scheduler_name is not None:
        raise PolicyError(PLACEMENT_REFUSAL)


def params_data(config: Config) -> dict[str, str]:
    """The ConfigMap the policies read their configuration from: the configuration's own dotted keys, lists
    one item a line."""
    return SCHEMA.params(config)


# --------------------------------------------------------------------------------------------------- CEL

def _read(key: str) -> str:
    """CEL reading the parameter ``key`` (typed; its default when the ConfigMap lacks it)."""
    setting = SCHEMA.find(key)
    assert isinstance(setting, Setting)
    text = f"params.?data.orValue({{}})[?'{key}'].orValue({cel_string(setting.kind.text(setting.default))})"
    return setting.kind.cel(text)


PARAM_VARIABLES: list[tuple[str, str]] = [(cel.param_name(key), _read(key)) for key, s in SCHEMA.settings()
                                          if s.param]


def _literal(text: str) -> str:
    return cel_string(text)


def _template_cel(kind: Kind, template: Template) -> str:
    """CEL for the list of ``{path, prefix, spec}`` records of ``template`` in ``object``, the path and the
    template's name (``prefix``) spelled as the engine spells them (``workloads.template_label``)."""
    segments = template.segments
    wild = [i for i, s in enumerate(segments) if s in (LIST, MAP)]
    last = wild[-1] if wild else -1

    def build(i: int, node: str, path: str, label: str, depth: int) -> str:
        # node: CEL of an optional value (after ``.?key``) or a plain one (a list item / map value)
        if i == len(segments):
            if not template.wild:
                fixed = template_label(template, tuple(segments), None, kind.single)
                label = _literal(f"{fixed}: ") if fixed else "''"
            return "[" + cel.cel_map({"path": path, "prefix": label, "spec": f"{node}.orValue({{}})"}) + "]"
        seg = segments[i]
        x, n = f"x{depth}", f"i{depth}"
        if seg == LIST:
            item_path = f"{path} + '[' + string({n}) + ']'"
            item_label = label
            if i == last:
                name = f"({x}.?name.orValue('') != '' ? {x}.?name.orValue('') : {x}.?groupName.orValue(''))"
                item_label = f"{item_path} + ({name} != '' ? ' (' + {name} + ')' : '') + ': '"
            inner = build(i + 1, x, item_path, item_label, depth + 1)
            return f"{node}.orValue([]).transformList({n}, {x}, {inner}).flatten()"
        if seg == MAP:
            item_path = f"{path} + '.' + {n}"
            item_label = f"{item_path} + ': '" if i == last else label
            inner = build(i + 1, x, item_path, item_label, depth + 1)
            return f"{node}.orValue({{}}).transformList({n}, {x}, {x} != null, {inner}).flatten()"
        step = f"{node}.?{seg}" if i else f"object.?{seg}"
        longer = f"{path[:-1]}.{seg}'" if path.endswith("'") else f"{path} + '.{seg}'"
        return build(i + 1, step, longer if i else f"'{seg}'", label, depth)

    return build(0, "object", "''", "''", 0)


def _kind_templates(kind: Kind) -> str:
    parts = []
    for t in kind.templates:
        records = _template_cel(kind, t)
        if t.unknown_if:  # built from what the object does not show: not judged (as the engine)
            hidden = " || ".join("object" + "".join(f".?{k}" for k in f.split(".")) + ".orValue(null) != null"
                                 for f in t.unknown_if)
            records = f"({hidden} ? [] : {records})"
        parts.append(records)
    return " + ".join(parts)


def spec_variables(kinds: Mapping[tuple[str, str], Kind] = KINDS) -> list[tuple[str, str]]:
    """Where the pod specs live in each kind (``KINDS`` and the configuration's ``workloads``): the records of
    ``variables.templates`` (``webhook.core.rules.cel``); the templates most kinds share are the fallback."""
    groups: dict[tuple[Template, ...], list[Kind]] = {}
    for kind in kinds.values():
        groups.setdefault(kind.templates, []).append(kind)
    *special, (_, common) = sorted(groups.items(), key=lambda group: len(group[1]))
    expr = _kind_templates(common[0])
    for _, members in reversed(special):
        cond = " || ".join(f"(request.kind.group == '{k.group}' && request.kind.kind == '{k.kind}')"
                           for k in members)
        expr = f"({cond}) ? {_kind_templates(members[0])} : {expr}"
    return [("templates0", expr),
            ("templates", "variables.templates0.filter(t, "
                          f"!(t.spec.?runtimeClassName.orValue('') in {cel.setting(RUNTIME_CLASSES)}))"),
            ("exempt", "size(variables.templates) == 0")]


SPEC_VARIABLES = spec_variables()


def violation_variables(mutated: bool) -> list[tuple[str, str]]:
    """The rules' CEL, in the engine's order (``RULES``), each a list of 'rule-id: message', then all of them.

    ``mutated``: judge what the mutation would leave (templates in ``mutate`` namespaces, which are not
    patched).
    """
    pairs = [(cel.variable(rule.id), rule.cel(mutated)) for rule in RULES if rule.cel is not None]
    every = " + ".join(f"variables.{name}" for name, _ in pairs)
    return [*pairs, ("violations", f"variables.exempt ? [] : {every}")]


HEAD = REFUSED.cel(kind="request.kind.kind",
                   name="object.metadata.?name.orValue(object.metadata.?generateName.orValue('<unnamed>'))")


def _variables(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    names = [name for name, _ in pairs]
    # A variable defined twice refers to itself: kube-apiserver v1.36 then recurses until its stack overflows.
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"CEL variables defined twice: {twice}"
    return [{"name": name, "expression": expr} for name, expr in pairs]


def _match_conditions() -> list[dict[str, str]]:
    return [
        {"name": "exempt-namespace", "expression": f"!(request.namespace in {_read('exemptions.namespaces')})"},
        {"name": "exempt-username",
         "expression": f"!(request.userInfo.username in {_read('exemptions.usernames')})"},
    ]


def pod_rules(mutating: bool, kinds: Mapping[tuple[str, str], Kind] = KINDS) -> list[dict[str, Any]]:
    """The requests judged (``KINDS``), one rule per API group, versions and operations; the mutation patches
    Pods only. A rule for a resource the API server does not serve (a CRD not installed) matches nothing."""
    merged: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for kind in kinds.values():
        if mutating and kind.key != ("", POD):
            continue
        ops = ("CREATE",) if mutating else kind.operations
        merged.setdefault((kind.group, ops, kind.versions), []).append(kind.plural)
        for sub, op in () if mutating else kind.subresources:
            merged.setdefault((kind.group, (op,), kind.versions), []).append(f"{kind.plural}/{sub}")
    # scope spelled out: the API server would default it, and `kubectl apply` would then see a change.
    return [{"apiGroups": [group], "apiVersions": list(versions), "operations": list(ops), "resources": resources,
             "scope": "Namespaced"} for (group, ops, versions), resources in merged.items()]


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "labels": {"app.kubernetes.io/name": "qos-guard",
                                     "app.kubernetes.io/component": "admission-policy"}}


def _selector(mode: str, namespace: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchExpressions": [
        {"key": MODE_LABEL, "operator": "In", "values": [mode]},
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
         "values": sorted({"kube-system", namespace})},
    ]}}


def _validating(name: str, validations: list[dict[str, str]], mutated: bool, failure: str,
                kinds: Mapping[tuple[str, str], Kind] = KINDS) -> dict[str, Any]:
    common = (PARAM_VARIABLES + spec_variables(kinds) + cel.BLOCK_VARIABLES
              + cel.fact_variables("(variables.blocks + variables.pods)"))
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
            pairs.append((key, f"request.kind.group == '' && request.kind.kind == '{POD}' ? ({expr}) : "
                               f"({virtual[key]})"))
        pairs.append(("violations", plain["violations"]))
    pairs.append(("message", f"{HEAD} + ' ' + variables.violations.join('; ')"))
    return {
        "apiVersion": f"{GROUP}/v1", "kind": "ValidatingAdmissionPolicy", "metadata": _meta(name),
        "spec": {
            "failurePolicy": failure,
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": pod_rules(False, kinds)},
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
                "messageExpression": MORE.cel(count=f"string(size(variables.violations) - {WARN_SLOTS})"),
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
            "matchConstraints": {"resourceRules": pod_rules(True)},
            "matchConditions": [*_match_conditions(), {
                "name": "exempt-runtime-class",
                "expression": f"!(object.spec.?runtimeClassName.orValue('') in "
                              f"{_read('exemptions.runtimeClassNames')})"}],
            "variables": _variables(PARAM_VARIABLES + SPEC_VARIABLES + cel.BLOCK_VARIABLES
                                    + cel.fact_variables("variables.blocks")),
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
    """The label's value must name a mode (docs/contract.md#modes-per-namespace-by-label)."""
    label = f"object.metadata.?labels.orValue({{}})[?'{MODE_LABEL}']"
    policy = {
        "apiVersion": f"{GROUP}/v1", "kind": "ValidatingAdmissionPolicy", "metadata": _meta(name),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE", "UPDATE"],
                                                    "resources": ["namespaces"], "scope": "Cluster"}]},
            "validations": [{
                "expression": f"{label}.orValue('{Mode.ENFORCE}') in [{', '.join(repr(m.value) for m in Mode)}]",
                "messageExpression": f"'namespace label {MODE_LABEL}=\"' + {label}.orValue('') + '\" is not one of "
                                     f"{', '.join(Mode)}; remove the label to opt out'",
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


def policy_objects(modes: Sequence[str], namespace: str = NAMESPACE_TOKEN,
                   kinds: Mapping[tuple[str, str], Kind] = KINDS) -> list[dict[str, Any]]:
    """The policies and bindings for ``modes`` (names carry ``NAME_TOKEN``), without the parameters; ``kinds``:
    the built-in ones and the configuration's ``workloads``."""
    out: list[dict[str, Any]] = []
    if "enforce" in modes:
        name = f"{NAME_TOKEN}-enforce"
        out += [_validating(name, _deny_validation(), False, "Fail", kinds),
                _binding("ValidatingAdmissionPolicyBinding", name, "enforce", namespace, ["Deny"])]
    if "mutate" in modes:
        name = f"{NAME_TOKEN}-mutate"
        out += [_mutating(name), _binding("MutatingAdmissionPolicyBinding", name, "mutate", namespace, None),
                _validating(name, _deny_validation(), True, "Fail", kinds),
                _binding("ValidatingAdmissionPolicyBinding", name, "mutate", namespace, ["Deny"])]
    if "warn" in modes:
        name = f"{NAME_TOKEN}-warn"
        out += [_validating(name, _warn_validations(), False, "Ignore", kinds),
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
    docs = [params_configmap(config, NAMESPACE_TOKEN),
            *policy_objects(modes, kinds=table(config.workloads))]
    return _substitute(dump(docs), NAME, namespace)


CHART_TEMPLATE = "charts/qos-guard/templates/policies.yaml"
CHART_PARAMS = "charts/qos-guard/templates/policy-params.yaml"
_GENERATED = ("{{{{- /* Generated by `python hack/generate.py` from {source}; do not "
              "edit. tests/chart checks it matches. */ -}}}}\n")


def chart_template() -> str:
    """The chart's policies (all modes), names and namespace left to Helm."""
    body = dump(policy_objects([m.value for m in Mode]))
    body = _substitute(body, '{{ include "qos-guard.fullname" . }}', "{{ .Release.Namespace }}")
    return (_GENERATED.format(source="webhook/policies/generate.py")
            + '{{- if eq .Values.enforcement "policy" }}\n' + body + "{{- end }}\n")


def chart_params() -> str:
    """The chart's parameters ConfigMap: ``params_data`` as Helm pipelines over the same ``config`` values the
    webhook mounts, with the refusals of ``qos-guard policy`` (a rule without CEL turned on)."""
    lines = [_GENERATED.format(source="webhook.core.config.SCHEMA").rstrip("\n"),
             '{{- if eq .Values.enforcement "policy" }}', "{{- $c := .Values.config }}"]
    for rule in RULES:
        if rule.cel is None and rule.policy_refusal is not None:
            key = rule.policy_refusal.key  # the key that turns the rule on
            lines += [f"{{{{- if $c.{key} }}}}", f"{{{{- fail {json.dumps(f'config.{rule.policy_refusal}')} }}}}",
                      "{{- end }}"]
    lines += ["{{- if $c.workloads }}",
              '{{- fail "config.workloads: the chart\'s policies are fixed text over the built-in kinds; with '
              'enforcement: policy render them for declared kinds with qos-guard policy --config, or use '
              'enforcement: webhook" }}', "{{- end }}"]
    lines += [f"{{{{- if $c.{DEVICE_CLASSES_REFUSAL.key} }}}}",
              f"{{{{- fail {json.dumps(f'config.{DEVICE_CLASSES_REFUSAL}')} }}}}",
              "{{- end }}"]
    lines += ["{{- if ($c.placement | default dict).schedulerName }}",
              f"{{{{- fail {json.dumps(f'config.{PLACEMENT_REFUSAL}')} }}}}", "{{- end }}"]
    lines += ["{{- if .Values.webhook.excludeNamespaces }}",
              '{{- fail "webhook.excludeNamespaces applies to the webhook only; with enforcement: policy list the '
              'namespaces in config.exemptions.namespaces" }}', "{{- end }}"]
    head = params_configmap(Config(), NAMESPACE_TOKEN)
    head.pop("data")
    body = _substitute(dump([head]), '{{ include "qos-guard.fullname" . }}', "{{ .Release.Namespace }}")
    lines.append(body.rstrip("\n"))
    lines.append("data:")
    lines += [f"  {key}: {{{{ {helm(s.kind, '$c.' + key, s.default)} }}}}"
              for key, s in SCHEMA.settings() if s.param]
    return "\n".join(lines) + "\n{{- end }}\n"
