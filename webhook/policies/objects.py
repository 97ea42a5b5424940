"""The policy objects ``qos-guard policy`` and the chart print: ValidatingAdmissionPolicies, the
MutatingAdmissionPolicy, their bindings and the parameters ConfigMap, with their names and namespace as tokens
(``NAME_TOKEN``, ``NAMESPACE_TOKEN``) the caller replaces, and their YAML."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from webhook.core.config import SCHEMA, Config
from webhook.core.engine import MODE_LABEL, Mode
from webhook.core.refusal import POLICY_REFUSED, capped_cel, warn_slots_cel
from webhook.core.rules import cel
from webhook.core.workloads import KINDS, POD, Kind
from webhook.policies.expressions import (
    MESSAGE,
    PARAM_VARIABLES,
    SPEC_VARIABLES,
    cel_kinds,
    match_conditions,
    mutation_apply,
    pod_rules,
    read_param,
    spec_variables,
    variables,
    violation_variables,
)

GROUP = "admissionregistration.k8s.io"
NAME_TOKEN = "@NAME@"
NAMESPACE_TOKEN = "@NAMESPACE@"


def params_data(config: Config) -> dict[str, str]:
    """The ConfigMap the policies read their configuration from: the configuration's own dotted keys, lists
    one item a line."""
    return SCHEMA.params(config)


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
    pairs.append(("message", MESSAGE))
    return {
        "apiVersion": f"{GROUP}/v1", "kind": "ValidatingAdmissionPolicy", "metadata": _meta(name),
        "spec": {
            "failurePolicy": failure,
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": pod_rules(False, cel_kinds(kinds))},
            "matchConditions": match_conditions(),
            "variables": variables(pairs),
            "validations": validations,
        },
    }


def _deny_validation() -> list[dict[str, str]]:
    return [{
        "expression": "size(variables.violations) == 0",
        "messageExpression": capped_cel("variables.message"),
        "message": POLICY_REFUSED,
        "reason": "Forbidden",
    }]


def _warn_validations() -> list[dict[str, str]]:
    return warn_slots_cel("variables.violations")


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


def _mutating(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1", "kind": "MutatingAdmissionPolicy", "metadata": _meta(name),
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "IfNeeded",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": pod_rules(True)},
            "matchConditions": [*match_conditions(), {
                "name": "exempt-runtime-class",
                "expression": f"!(object.spec.?runtimeClassName.orValue('') in "
                              f"{read_param('exemptions.runtimeClassNames')})"}],
            "variables": variables(PARAM_VARIABLES + SPEC_VARIABLES + cel.BLOCK_VARIABLES
                                    + cel.fact_variables("variables.blocks")),
            "mutations": [
                {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": mutation_apply()}},
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


# libyaml's emitter where PyYAML has it: the same text as PyYAML's own, 17 times faster (0.03 s for
# ``policy --mode all``).
_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):  # type: ignore[valid-type,misc]
    """Block style for multi-line strings, long lines kept whole (CEL stays readable)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    block = "\n" in value or (len(value) > 80 and "'" in value)
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if block else None)

_Dumper.add_representer(str, _str)


def dump(docs: Sequence[dict[str, Any]]) -> str:
    return yaml.dump_all(list(docs), Dumper=_Dumper, sort_keys=False, width=10**6, explicit_start=True)


def with_names(obj: Any, name: str, namespace: str) -> Any:
    """``obj`` with the tokens replaced in every string (``qos-guard policy``): serialized afterwards, so a
    value never breaks the YAML, however it is spelled."""
    if isinstance(obj, str):
        return substitute(obj, name, namespace)
    if isinstance(obj, dict):
        return {with_names(k, name, namespace): with_names(v, name, namespace) for k, v in obj.items()}
    if isinstance(obj, list):
        return [with_names(v, name, namespace) for v in obj]
    return obj


def substitute(text: str, name: str, namespace: str) -> str:
    return text.replace(NAME_TOKEN, name).replace(NAMESPACE_TOKEN, namespace)
