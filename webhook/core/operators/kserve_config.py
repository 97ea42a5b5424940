"""KServe's ``inferenceservice-config`` ConfigMap as KServe v0.20.0 reads it (kserve/kserve commit
1fb781055dd1567164358233e1125142ca6ef1fe; ``pkg/types/config.go``, ``pkg/apis/serving/v1beta1/configmap.go``): each
JSON section unmarshalled into the Go struct KServe reads it into (``webhook.core.gojson``), KServe's shipped values
where the ConfigMap is not given, and why KServe builds no Pod from one it cannot read (``config_refusal``). Read
by the InferenceService's injected containers (``kserve_pod``), the ingress and canary readers and the
LLMInferenceService builder."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, cast

from webhook.core.gojson import GoJSONError, GoType, Struct, TooDeep, copied, unmarshal
from webhook.core.operators import Related, mapping_at
from webhook.core.quantity import QuantityError, parse_quantity

CONFIG_MAP = ("", "ConfigMap")
ISVC_CONFIG = "inferenceservice-config"
# inferenceservice-config as KServe v0.20.0 installs it (config/configmap/inferenceservice.yaml).
DEFAULT_RESOURCE = {"cpuRequest": "1", "cpuLimit": "1", "memoryRequest": "2Gi", "memoryLimit": "2Gi"}
DEFAULT_STORAGE = {"cpuRequest": "100m", "cpuLimit": "1", "memoryRequest": "100Mi", "memoryLimit": "1Gi"}
# storageInitializer as KServe v0.20.0 installs it (config/configmap's data, not its _example): enableModelcar true,
# no ociModelMode (ResolveOciModelMode: "modelcar"); the modelcar's cpu and memory (request and limit) default to
# constants.CpuModelcarDefault and MemoryModelcarDefault. Shared with webhook.core.operators.llmisvc.
SHIPPED_STORAGE: Mapping[str, Any] = {**DEFAULT_STORAGE, "enableModelcar": True, "cpuModelcar": "10m",
                                      "memoryModelcar": "15Mi"}
_RESOURCE_KEYS = ("cpuRequest", "cpuLimit", "memoryRequest", "memoryLimit")
_RESOURCES: Mapping[str, GoType] = {k: "string" for k in _RESOURCE_KEYS}
# The Go structs KServe v0.20.0 unmarshals each JSON value of the ConfigMap into (through a pointer), and read
# here as Go reads them (webhook.core.gojson): pkg/types/config.go StorageInitializerConfig, pod/agent_injector.go
# AgentConfig and LoggerConfig (its storage v1beta1.LoggerStorageSpec, inference_service.go: StorageSpec embedded,
# its fields promoted), pod/batcher_injector.go BatcherConfig, v1beta1/configmap.go DeployConfig (with
# DeploymentRolloutStrategy and RolloutSpec), InferenceServicesConfig, ExplainersConfig, LocalModelConfig,
# SecurityConfig. Each int kind with its range: a number out of it is an error, as in Go.
_EXPLAINERS = Struct({"art": Struct({"image": "string", "defaultImageVersion": "string"})})
_LOGGER_STORAGE = Struct({"path": "*string", "parameters": "*map[string]string", "key": "*string",
                          "serviceAccountName": "*string"}, pointer=True)
_ROLLOUT = Struct({"defaultRollout": Struct({"maxSurge": "string", "maxUnavailable": "string"}, pointer=True)},
                  pointer=True)
CONFIG_STRUCTS: Mapping[str, Struct] = {
    "storageInitializer": Struct({
        **{k: "string" for k in ("image", "cpuRequest", "cpuLimit", "cpuModelcar", "memoryRequest", "memoryLimit",
                                 "caBundleConfigMapName", "caBundleVolumeMountPath", "memoryModelcar",
                                 "ociModelMode")},
        "enableModelcar": "bool", "enableOciModelSupport": "bool", "uidModelcar": "*int64"}, pointer=True),
    "agent": Struct({"image": "string", **_RESOURCES}, pointer=True),
    "logger": Struct({"image": "string", **_RESOURCES, "defaultUrl": "string", "caBundle": "string",
                      "caCertFile": "string", "tlsSkipVerify": "bool", "storage": _LOGGER_STORAGE,
                      "marshallerUrl": "string", "batchSize": "int", "batchInterval": "string"}, pointer=True),
    "batcher": Struct({"image": "string", **_RESOURCES, "maxBatchSize": "string", "maxLatency": "string"},
                      pointer=True),
    "deploy": Struct({"defaultDeploymentMode": "string", "deploymentRolloutStrategy": _ROLLOUT}, pointer=True),
    "inferenceService": Struct({"explainers": _EXPLAINERS, "serviceAnnotationDisallowedList": "[]string",
                                "serviceLabelDisallowedList": "[]string", "resource": Struct(_RESOURCES)},
                               pointer=True),
    "explainers": _EXPLAINERS,
    "localModel": Struct({"enabled": "bool", "jobNamespace": "string", "defaultJobImage": "string",
                          "fsGroup": "*int64", "jobTTLSecondsAfterFinished": "*int32",
                          "reconcilationFrequencyInSecs": "*int64", "disableVolumeManagement": "bool"}, pointer=True),
    "security": Struct({"autoMountServiceAccountToken": "bool"}, pointer=True),
    # v1beta1/configmap.go IngressConfig (NewIngressConfig passes &ingressConfig, a pointer to a pointer)
    "ingress": Struct({**{k: "string" for k in (
        "kserveIngressGateway", "ingressGateway", "knativeLocalGatewayService", "localGateway", "localGatewayService",
        "ingressDomain", "domainTemplate", "urlScheme", "pathTemplate", "modelBasedRoutingHeaderName",
        "modelBasedRoutingMode")}, **{k: "bool" for k in (
            "enableGatewayApi", "enableLLMInferenceServiceTLS", "disableIstioVirtualHost", "disableIngressCreation",
            "disableHTTPRouteTimeout")}, "ingressClassName": "*string", "additionalIngressDomains": "*[]string"},
        pointer=True),
    # credentials/service_account_credentials.go CredentialConfig (a struct value: null leaves it), s3.S3Config,
    # gcs.GCSConfig
    "credentials": Struct({"s3": Struct({k: "string" for k in (
        "s3AccessKeyIDName", "s3SecretAccessKeyName", "s3Endpoint", "s3UseHttps", "s3Region", "s3VerifySSL",
        "s3UseVirtualBucket", "s3UseAccelerate", "s3UseAnonymousCredential", "s3CABundleConfigMap", "s3CABundle")}),
        "gcs": Struct({"gcsCredentialFileName": "string"}), "storageSpecSecretName": "string",
        "storageSecretNameAnnotation": "string"}),
    # Read by the llmisvc controller only (llmisvc/config_loader.go SchedulerConfig, WVAAutoscalingConfig with its
    # PrometheusConfig): unmarshalled into a struct value, so null leaves it.
    "scheduler": Struct({"expirationAnnotations": "[]string"}),
    "autoscaling-wva-controller-config": Struct({"prometheus": Struct({
        "url": "string", "tlsInsecureSkipVerify": "bool", "authModes": "string", "triggerAuthName": "string",
        "triggerAuthKind": "string"})}),
}
# What KServe's shipped ConfigMap holds for the sections read here (config/configmap/inferenceservice.yaml).
SHIPPED_SECTIONS: Mapping[str, Mapping[str, Any]] = {
    "storageInitializer": SHIPPED_STORAGE, "agent": DEFAULT_STORAGE, "logger": DEFAULT_STORAGE,
    "batcher": {"cpuRequest": "1", "cpuLimit": "1", "memoryRequest": "1Gi", "memoryLimit": "1Gi"},
    "deploy": {"defaultDeploymentMode": "Serverless"}, "inferenceService": {"resource": DEFAULT_RESOURCE},
}
# The sections whose resource keys KServe parses as quantities, failing on an empty or bad one
# (GetStorageInitializerConfigs, getAgentConfigs, getLoggerConfigs, getBatcherConfigs), and who fails.
_QUANTITIES = {"storageInitializer": "its controller and its pod webhook fail (GetStorageInitializerConfigs)",
               "logger": "its pod webhook fails (getLoggerConfigs)",
               "batcher": "its pod webhook fails (getBatcherConfigs)",
               "agent": "its pod webhook fails (getAgentConfigs)"}
# Unmarshalled by KServe's InferenceService defaulter and controller before any Pod: an error refuses the object;
# credentials by NewCredentialBuilder, which panics on an error (the controller's predictor.go:779 and :855, before
# the Deployment or Knative Service; the pod webhook's mutator.go:94, for every KServe Pod).
_READ_FIRST = ("explainers", "inferenceService", "deploy", "localModel", "security", "credentials")
_OCI_MODES = ("modelcar", "native", "fetch")
CREDENTIALS_TYPES = "give its keys their Go types (s3 and gcs objects of strings, strings else)"
MEMO_SIZE = 64  # section texts whose reading is kept (read_section): a cluster holds one ConfigMap, with 16 keys


def storage_unreadable(error: GoJSONError) -> str:
    """Why KServe builds no Pod from a ``storageInitializer`` its Go code cannot unmarshal: Go's error (the key
    and the type it wanted), and the way out, KServe's shipped values."""
    return (f"the {ISVC_CONFIG} ConfigMap's storageInitializer is not what KServe's Go code reads ({error}): "
            "GetStorageInitializerConfigs panics on it, so KServe's controller builds no Pods until it is mended; "
            "give each key its Go type (strings; enableModelcar, enableOciModelSupport true or false; uidModelcar "
            f"an int64), as KServe ships {json.dumps(SHIPPED_STORAGE, separators=(',', ':'))}")


def given_config_map(related: Related) -> Mapping[str, Any] | None:
    """``inferenceservice-config`` when it was given (input or cluster), in the namespace KServe reads it from
    (``Related.kserve_namespace``, its controller's POD_NAMESPACE): one of that name elsewhere is any other
    ConfigMap."""
    return related.named(*CONFIG_MAP, ISVC_CONFIG, related.kserve_namespace)


# Why what KServe builds from ``inferenceservice-config`` is not judged (``Related.config_unknown``): the cluster's
# watch of it has not synced or is refused (webhook/cluster/relatedcache.py), or the cluster has none in KServe's
# namespace, which KServe refuses to work without (its defaulters answer the error, inference_service_defaults.go
# and llminferenceservice/defaulter.go, failurePolicy Fail; the pod mutator 500s; the manager exits at start): the
# namespace named is then most likely not KServe's. The way out first, so the 120-character warning cut
# (refusal.WARNING_CHARS) keeps it for the longest namespace KServe is installed in (redhat-ods-applications).
CONFIG_NOT_READ = f"grant list, watch on {{namespace}}/{ISVC_CONFIG}: not read yet (or refused)"
CONFIG_ABSENT = f"set policy.kserveNamespace: no {{namespace}}/{ISVC_CONFIG} (KServe's own)"
# Read once (check --kubeconfig, audit) and not had: refused, failed, or no cluster to ask ({out}: what to do).
CONFIG_UNREAD = f"ConfigMap {{namespace}}/{ISVC_CONFIG} not read ({{why}}): {{out}}"
# The webhook's cache could not be made (no usable kubeconfig): the log says why.
CONFIG_NO_CACHE = f"see the webhook's log: {{namespace}}/{ISVC_CONFIG} not read"


def config_unknown(related: Related) -> str | None:
    """Why ``inferenceservice-config`` is not known where it is not given either (the cluster's not read, or
    absent from KServe's namespace: ``CONFIG_NOT_READ``, ``CONFIG_ABSENT``); None where it is (given, read, or no
    cluster asked: KServe's shipped values judge a file checked alone)."""
    if related.config_unknown and given_config_map(related) is None:
        return related.config_unknown
    return None


@lru_cache(maxsize=MEMO_SIZE)
def _unmarshalled(key: str, raw: str) -> tuple[dict[str, Any] | None, type[Exception] | None, str]:
    """Go's reading of a section's text, kept: a request reads each section many times, every request the same
    text. The value, or the error's type and message (raised anew: a kept exception's traceback would grow)."""
    try:
        return unmarshal(raw, CONFIG_STRUCTS[key]), None, ""
    except (GoJSONError, TooDeep) as error:
        return None, type(error), str(error)


def read_section(cm: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    """The one reader of a section of a given ``inferenceservice-config`` as KServe unmarshals it: {} when
    absent (nothing set), None for null (the pointer cleared); a copy of the kept reading, the caller's own.
    Raises GoJSONError where KServe's json.Unmarshal fails, TooDeep (naming the section) where qos-guard cannot
    read it."""
    raw = mapping_at(cm.get("data"), ("data",)).get(key)
    if raw is None:
        return {}
    if not isinstance(raw, str):
        raise GoJSONError("not a string")
    value, error, message = _unmarshalled(key, raw)
    if error is TooDeep:
        raise TooDeep(f"the {ISVC_CONFIG} ConfigMap's {key} is {message}, so what KServe makes of it is not known")
    if error is not None:
        raise GoJSONError(message)
    return cast("dict[str, Any] | None", copied(value))


def config_section(related: Related, key: str) -> tuple[dict[str, Any] | None, str]:
    """A JSON section of ``inferenceservice-config`` read as KServe reads it (keys matched as Go matches them)
    when the ConfigMap was given ({} when it leaves the section out), else KServe's shipped one; and where from.
    None where KServe cannot read it (``config_refusal`` says so before any Pod)."""
    cm = given_config_map(related)
    if cm is None:
        return dict(SHIPPED_SECTIONS.get(key, {})), f"KServe's default {ISVC_CONFIG} {key}"
    try:
        return read_section(cm, key), f"{ISVC_CONFIG} {key}"
    except GoJSONError:
        return None, f"{ISVC_CONFIG} {key}"


def _bad_quantity(value: Any) -> bool:
    try:
        parse_quantity(value if isinstance(value, str) else "")
    except QuantityError:
        return True
    return False


def config_refusal(related: Related, custom: bool, keys: tuple[str, ...] | None = None,
                   config_map: Mapping[str, Any] | None = None) -> str | None:
    """Why KServe builds no Pod from the given ``inferenceservice-config`` (None: it can): a section of ``keys``
    (all read for an InferenceService when None) its Go code cannot unmarshal, or a null one it dereferences
    (it panics); ``deploy`` without a mode KServe knows (NewDeployConfig); a resource key of the storage
    initializer, logger, batcher or agent missing or not a quantity (their readers fail, the pod webhook refuses
    every KServe Pod); an unknown ``ociModelMode``; with a ``custom`` component, an ``inferenceService.resource``
    value that is not a quantity (the defaulter's MustParse panics: the InferenceService is refused). The
    ConfigMap: ``config_map``, else the one given by that name."""
    cm = config_map if config_map is not None else given_config_map(related)
    if cm is None:
        return None
    where = f"the {ISVC_CONFIG} ConfigMap's"
    for key in keys if keys is not None else (*_READ_FIRST, *_QUANTITIES):
        try:
            section = read_section(cm, key)
        except GoJSONError as error:
            if key == "storageInitializer":
                return storage_unreadable(error)
            if key == "credentials":
                return (f"{where} credentials is not what KServe's Go code reads ({error}): NewCredentialBuilder "
                        "panics on it, in KServe's controller before any Deployment or Knative Service and in its pod "
                        f"webhook, so KServe builds no Pods until it is mended; {CREDENTIALS_TYPES}")
            return (f"{where} {key} is not what KServe's Go code reads ({error}): json.Unmarshal fails, so KServe "
                    "builds no Pods until it is mended")
        if section is None:
            if key == "security":
                continue  # NewSecurityConfig's nil is checked before use
            return (f"{where} {key} is null: KServe's reader is left a nil config it then reads (a panic), so "
                    "KServe builds no Pods until it is mended")
        if key == "deploy" and "deploy" in mapping_at(cm.get("data"), ("data",)):
            mode = section.get("defaultDeploymentMode") or ""
            if mode not in ("Knative", "Standard", "ModelMesh", "Serverless", "RawDeployment"):
                return (f"{where} deploy.defaultDeploymentMode is {mode!r}: NewDeployConfig refuses it (it is "
                        "required, one of Knative, Standard, ModelMesh), so KServe's defaulter refuses the "
                        "InferenceService: KServe builds no Pod")
        if key == "inferenceService" and custom:
            resource = section.get("resource") or {}
            bad = [k for k in _RESOURCE_KEYS if resource.get(k) and _bad_quantity(resource[k])]
            if bad:
                return (f"{where} inferenceService.resource.{bad[0]} {resource[bad[0]]!r} is not a quantity: "
                        "KServe's defaulter panics on it (resource.MustParse) for a custom container, so it refuses "
                        "the InferenceService: KServe builds no Pod")
        if key in _QUANTITIES:
            keys_read = [*_RESOURCE_KEYS, *(k for k in ("cpuModelcar", "memoryModelcar")
                                            if key == "storageInitializer" and section.get(k))]
            bad = [k for k in keys_read if _bad_quantity(section.get(k))]
            if bad:
                value = section.get(bad[0])
                what = "is missing" if not value else f"is {value!r}, not a quantity"
                shipped = ", ".join(f"{k} {SHIPPED_SECTIONS[key][k]}" for k in _RESOURCE_KEYS)
                return (f"{where} {key}.{bad[0]} {what}: {_QUANTITIES[key]} on it, so KServe builds no Pod; give "
                        f"{key} quantities for cpuRequest, cpuLimit, memoryRequest and memoryLimit (KServe ships "
                        f"{shipped})")
            mode = section.get("ociModelMode")
            if key == "storageInitializer" and mode and mode not in _OCI_MODES:
                return (f"{where} storageInitializer.ociModelMode {mode!r} is not one of modelcar, native, fetch: "
                        "GetStorageInitializerConfigs fails, so KServe builds no Pod")
    return None


def resolve_oci_mode(storage: Mapping[str, Any]) -> str:
    """``ResolveOciModelMode`` (``pkg/types/config.go``): ``ociModelMode``, else "modelcar" when ``enableModelcar``
    (the Go field ``EnableOciImageSource``) or ``enableOciModelSupport``, else "" (OCI models off)."""
    mode = storage.get("ociModelMode")
    if isinstance(mode, str) and mode:
        return mode
    return "modelcar" if storage.get("enableModelcar") is True or storage.get("enableOciModelSupport") is True else ""


__all__ = [
    "CONFIG_ABSENT",
    "CONFIG_MAP",
    "CONFIG_NOT_READ",
    "CONFIG_NO_CACHE",
    "CONFIG_STRUCTS",
    "CONFIG_UNREAD",
    "CREDENTIALS_TYPES",
    "DEFAULT_RESOURCE",
    "DEFAULT_STORAGE",
    "ISVC_CONFIG",
    "MEMO_SIZE",
    "SHIPPED_SECTIONS",
    "SHIPPED_STORAGE",
    "config_refusal",
    "config_section",
    "config_unknown",
    "given_config_map",
    "read_section",
    "resolve_oci_mode",
    "storage_unreadable",
]
