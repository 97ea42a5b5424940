"""``qos-guard policy``: the rules (docs/contract.md#rules) as ValidatingAdmissionPolicy and
MutatingAdmissionPolicy (CEL run inside the API server: no webhook, no TLS, no extra hop), assembled from each
rule's own CEL (``Rule.cel``) over ``workloads.KINDS`` and the configuration schema.

Design, so that there is one source of truth:

* The policy objects are constant text: every configuration value is read at admission time from a ConfigMap
  (``paramKind``), rendered by ``params_configmap`` from the ``Config``. The chart ships the same policy text
  (``charts/qos-guard/templates/policies.yaml``) and renders the ConfigMap from the same ``config`` values
  (``policy-params.yaml``): ``chart.chart_template`` and ``chart.chart_params`` return their text, ``python
  hack/generate.py`` writes it (nothing inside the installed package writes into the repository), a test checks
  both. The CEL is assembled in ``expressions.py``, the objects in ``objects.py``.
* The Pod a policy sees on CREATE is already defaulted by the API server (requests copied from limits,
  quantities rounded up to milli, ``status.qosClass`` set by ``PrepareForCreate``); templates are not, so the
  CEL copies a missing request from its limit as the engine does.
* A rule without CEL that the configuration turns on is refused with the key named (``PolicyError``,
  ``Rule.policy_refusal``): ``policy.numa`` needs the engine's effective-request arithmetic.

Known differences from the engine are listed in ``KNOWN_DIFFERENCES`` (docs/howto/admission-policies.md
repeats them; the differential test checks each one is real and the only one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.config import Config
from webhook.core.engine import Mode
from webhook.core.kubeversion import parse_minor
from webhook.core.names import namespace_problem
from webhook.core.rules import RULES
from webhook.core.rules.dra_unaligned import DEVICE_CLASSES_REFUSAL
from webhook.core.workloads import Kind, table
from webhook.policies.expressions import not_in_policies
from webhook.policies.objects import GROUP, NAMESPACE_TOKEN, dump, params_configmap, policy_objects, with_names

API_VERSIONS = ("v1",)
MODES = ("enforce", "mutate", "warn", "all")
NAMESPACE = "qos-guard"
NAME = "qos-guard"

KNOWN_DIFFERENCES: dict[str, str] = {
    "cpu-beyond-int64": "a cpu value above 9223372036854775807 CPUs is whole to the engine but not to CEL's "
                        "quantity isInteger() (it does not fit an int64)",
    "template-pod-level-request": "a template with pod-level limits but no pod-level request: the policy takes "
                                  "the request to be the limit, the engine the containers' effective total "
                                  "(the verdict differs only with policy.podLevelResources: allow; with deny "
                                  "both refuse, naming different rules)",
    "template-pod-level-limit": "from 1.37 a template with pod-level requests but no pod-level limit: the engine "
                                "judges it as the Pod it becomes, its limit defaulted from the containers' "
                                "(DefaultPodLevelResources), the policy as written (the verdict differs only with "
                                "policy.podLevelResources: allow; with deny both refuse, naming different rules)",
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


# The oldest Kubernetes minor each part runs on. MutatingAdmissionPolicy v1 is served from 1.36 (k8s.io/api
# admissionregistration/v1 types.go, prerelease-lifecycle-gen:introduced=1.36); ValidatingAdmissionPolicy v1 from
# 1.30, but the CEL's flatten() is the lists library, in the base CEL environment from 1.34
# (k8s.io/apiserver pkg/cel/environment/base.go), which new expressions may use one release later (the API
# server compiles them at its compatibility version, N-1). The tests run on 1.36.
MUTATING_SINCE, VALIDATING_SINCE = "1.36", "1.35"



def refuse_unserved(config: Config, modes: list[str]) -> None:
    """With ``--kubernetes-version`` (``kubernetesVersion``) below what the objects need: refused, naming what
    that minor lacks, instead of a partial install (kubectl apply creates what is served, then fails)."""
    kube = config.kubernetes_version
    if kube is None:
        return
    needs = MUTATING_SINCE if "mutate" in modes else VALIDATING_SINCE
    if kube.minor < parse_minor(needs):
        lacking = ("MutatingAdmissionPolicy v1 (served from 1.36; beta and off in 1.34 and 1.35, alpha in 1.33)"
                   if needs == MUTATING_SINCE else
                   "the CEL lists library (flatten()) in new ValidatingAdmissionPolicy expressions (from 1.35)")
        hint = " (--mode enforce or warn needs 1.35)" if needs == MUTATING_SINCE else ""
        raise PolicyError(f"--kubernetes-version {kube}: these policies need Kubernetes {needs} or later, for "
                          f"{lacking}{hint}; on {kube} use the webhook (enforcement: webhook)")


def version_note(docs: list[dict[str, Any]]) -> str:
    """The YAML comment heading ``qos-guard policy``'s output: the Kubernetes version its objects need, so that
    an older cluster is not left half installed (kubectl apply creates what it serves, then fails)."""
    if any(d.get("kind") == "MutatingAdmissionPolicy" for d in docs):
        return (f"# qos-guard policy: {GROUP}/v1 objects for Kubernetes {MUTATING_SINCE} or later: "
                f"MutatingAdmissionPolicy v1 is served from {MUTATING_SINCE}; on an older cluster kubectl apply "
                "creates the ValidatingAdmissionPolicies, then fails on it (use --mode enforce or warn there).\n")
    return (f"# qos-guard policy: {GROUP}/v1 ValidatingAdmissionPolicies for Kubernetes {VALIDATING_SINCE} or later "
            f"(their CEL uses the lists library's flatten(), accepted in new expressions from {VALIDATING_SINCE}; "
            f"tested on {MUTATING_SINCE}).\n")


def render(config: Config, mode: str = "all", namespace: str = NAMESPACE, api_version: str = "v1") -> str:
    """``qos-guard policy`` output: the parameters ConfigMap, then the policies and bindings for ``mode``."""
    if api_version not in API_VERSIONS:
        raise PolicyError(f"--api-version: {api_version!r} is not one of {', '.join(API_VERSIONS)}")
    if mode not in MODES:
        raise PolicyError(f"--mode: {mode!r} is not one of {', '.join(MODES)}")
    problem = namespace_problem(namespace)
    if problem is not None:  # the API server would refuse every object that names it
        raise PolicyError(f"--namespace {problem}")
    refuse_unsupported(config)
    modes = [m.value for m in Mode] if mode == "all" else [mode]
    refuse_unserved(config, modes)
    docs = [params_configmap(config, NAMESPACE_TOKEN),
            *policy_objects(modes, kinds=table(config.workloads))]
    return version_note(docs) + built_note(table(config.workloads)) + dump(with_names(docs, NAME, namespace))


def built_note(kinds: Mapping[tuple[str, str], Kind]) -> str:
    """The YAML comment naming the kinds the policies leave to the webhook (``expressions.cel_kinds``)."""
    left = not_in_policies(kinds)
    if not left:
        return ""
    return (f"# Not judged by these policies: {', '.join(left)}: their Pods are built by an operator from other "
            "objects (a ServingRuntime, its defaults) that CEL cannot read; the webhook judges them "
            "(enforcement: webhook).\n")
