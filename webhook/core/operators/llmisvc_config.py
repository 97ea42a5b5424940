"""What KServe v0.20.0 reads of the ``inferenceservice-config`` ConfigMap (in KServe's namespace) before it builds
any Pod of an LLMInferenceService, read at commit 1fb781055dd1567164358233e1125142ca6ef1fe, and where it stops:

- its defaulter (``pkg/webhook/admission/llminferenceservice/defaulter.go:144-152``, ``failurePolicy: Fail``)
  reads ``localModel`` (``NewLocalModelConfig``): an error refuses the object, null is a nil config it reads;
- its controller's ``loadConfig`` (``Reconcile`` → ``reconcile``, ``controller.go:264``, before the baseRefs and
  any workload) calls ``toConfig`` (``pkg/controller/v1alpha2/llmisvc/config_loader.go:208-240``), which reads, in
  order, ``ingress`` (``NewIngressConfig``), ``storageInitializer`` (``GetStorageInitializerConfigs``),
  ``credentials`` (``GetCredentialConfig``), ``scheduler`` (``NewSchedulerConfig``) and
  ``autoscaling-wva-controller-config``; the first error fails every reconcile.

Each section is read by the one reader (``kserve_config.read_section``, ``kserve_ingress``), shared with the
InferenceService builder. Absent, a section is not read (Go's zero values or defaults)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.core.gojson import GoJSONError, TooDeep
from webhook.core.operators import Related
from webhook.core.operators.kserve_config import (
    CREDENTIALS_TYPES,
    ISVC_CONFIG,
    config_refusal,
    config_unknown,
    given_config_map,
    read_section,
)
from webhook.core.operators.kserve_ingress import SHIPPED_INGRESS, ingress_unreadable
from webhook.core.operators.llmisvc_base import KIND, Unknown
from webhook.core.operators.llmisvc_storage import STORAGE_DEFAULTS

NO_CONFIG = ("so KServe's llmisvc controller cannot load its config (toConfig, before any workload) and builds no "
             "Pods until it is mended")
# The sections toConfig reads after storageInitializer: Go's reader, and the way out.
_AFTER_STORAGE = (
    ("credentials", "GetCredentialConfig fails", CREDENTIALS_TYPES),
    ("scheduler", "NewSchedulerConfig fails", "give expirationAnnotations a list of strings, or remove the key "
     "(KServe ships none: its default is [\"certificates.kserve.io/expiration\"])"),
    ("autoscaling-wva-controller-config", "json.Unmarshal fails", "give prometheus an object of strings (url, "
     "authModes, triggerAuthName, triggerAuthKind) with tlsInsecureSkipVerify true or false, or remove the key "
     "(KServe ships none)"),
)


def _local_model(cm: Mapping[str, Any]) -> str | None:
    """``NewLocalModelConfig`` in the defaulter: an error, or a nil config (null) it reads, refuses the object."""
    where = f"the {ISVC_CONFIG} ConfigMap's localModel"
    try:
        section = read_section(cm, "localModel")
    except GoJSONError as error:
        why = f"is not what KServe's Go code reads ({error}): NewLocalModelConfig fails"
    else:
        if section is not None:
            return None
        why = "is null: NewLocalModelConfig leaves a nil config the defaulter then reads (a panic)"
    return (f"{where} {why}, so KServe's LLMInferenceService defaulter (failurePolicy Fail) refuses the object: "
            "KServe builds no Pods until it is mended; give enabled and disableVolumeManagement true or false, "
            "fsGroup, jobTTLSecondsAfterFinished and reconcilationFrequencyInSecs integers, strings else (KServe ships "
            "enabled false, fsGroup 1000, jobTTLSecondsAfterFinished 3600, reconcilationFrequencyInSecs 60)")


def _refusal(cm: Mapping[str, Any], related: Related) -> str | None:
    """Why KServe builds no Pods from this ConfigMap, in the order KServe reads it; None where it loads."""
    if (why := _local_model(cm)) is not None:
        return why
    if (why := ingress_unreadable(cm)) is not None:
        return f"{why}, {NO_CONFIG} ({SHIPPED_INGRESS})"
    if (why := config_refusal(related, False, ("storageInitializer",), cm)) is not None:
        return why
    for key, reader, way_out in _AFTER_STORAGE:
        try:
            read_section(cm, key)  # null leaves the struct value (no pointer): read
        except GoJSONError as error:
            return (f"the {ISVC_CONFIG} ConfigMap's {key} is not what KServe's Go code reads ({error}): {reader}, "
                    f"{NO_CONFIG}; {way_out}")
    return None


def config_or_no_pods(related: Related) -> Mapping[str, Any]:
    """The ``storageInitializer`` KServe's llmisvc controller loads (the ConfigMap given, else KServe's shipped
    values); raises ``Unknown`` where KServe builds no Pods at all, saying why (the section, Go's error, the way
    out), or where qos-guard cannot read a section (nested too deeply: not judged)."""
    if (unread := config_unknown(related)) is not None:
        raise Unknown(f"{KIND}: {unread}")
    found = given_config_map(related)
    if found is None:
        return STORAGE_DEFAULTS
    try:
        why = _refusal(found, related)
    except TooDeep as deep:  # not known: said, not judged
        raise Unknown(f"{KIND}: {deep}") from None
    if why is not None:
        raise Unknown(f"{KIND}: {why}")
    return read_section(found, "storageInitializer") or {}


__all__ = ["NO_CONFIG", "config_or_no_pods"]
