{{/* Name of the chart, overridable. */}}
{{- define "qos-guard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of every resource name: the release name, unless it already contains the chart name. */}}
{{- define "qos-guard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "qos-guard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "qos-guard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "qos-guard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "qos-guard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "qos-guard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "qos-guard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "qos-guard.tlsSecretName" -}}
{{- .Values.existingSecret | default (printf "%s-tls" (include "qos-guard.fullname" .)) }}
{{- end }}

{{/* The serving certificate's DNS names: the Service's four forms (qos-guard certs writes the same). */}}
{{- define "qos-guard.certificateSANs" -}}
{{- $fullname := include "qos-guard.fullname" . -}}
{{- $svc := printf "%s.%s.svc" $fullname .Release.Namespace -}}
{{- toJson (list $fullname (printf "%s.%s" $fullname .Release.Namespace) $svc (printf "%s.cluster.local" $svc)) -}}
{{- end }}

{{/* The container's resources: requests must equal limits, so the webhook is Guaranteed as it asks of others. */}}
{{- define "qos-guard.resources" -}}
{{- $r := .Values.resources -}}
{{- range $name := list "cpu" "memory" }}
{{- if ne (toString (index $r.requests $name)) (toString (index $r.limits $name)) }}
{{- fail (printf "resources.requests.%s (%v) must equal resources.limits.%s (%v): the webhook is Guaranteed, as it asks of others" $name (index $r.requests $name) $name (index $r.limits $name)) }}
{{- end }}
{{- end }}
{{- toYaml $r }}
{{- end }}

{{/* The image reference: registry/repository, then @digest or :tag. */}}
{{- define "qos-guard.image" -}}
{{- $repo := .Values.image.repository -}}
{{- with .Values.image.registry }}{{ $repo = printf "%s/%s" (trimSuffix "/" .) $repo }}{{ end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end }}

{{/*
clientConfig of one webhook: the Service (or .Values.webhook.url) plus a path.
Call with (dict "root" $ "path" "/validate" "caBundle" $caBundle).
*/}}
{{- define "qos-guard.clientConfig" -}}
{{- $root := .root }}
{{- if $root.Values.webhook.url }}
url: {{ printf "%s%s" (trimSuffix "/" $root.Values.webhook.url) .path | quote }}
{{- else }}
service:
  name: {{ include "qos-guard.fullname" $root }}
  namespace: {{ $root.Release.Namespace }}
  path: {{ .path | quote }}
  port: {{ $root.Values.service.port }}
{{- end }}
{{- if .caBundle }}
caBundle: {{ .caBundle }}
{{- end }}
{{- end }}

{{/*
namespaceSelector for one mode: the label value, and never kube-system, the release namespace or an excluded
namespace (docs/contract.md#modes-per-namespace-by-label: no deadlock when the webhook itself is down).
*/}}
{{- define "qos-guard.namespaceSelector" -}}
{{- $root := .root }}
matchExpressions:
  - key: qos-guard.io/mode
    operator: In
    values: {{ toJson .values }}
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: {{ include "qos-guard.excludedNamespaces" $root }}
{{- with $root.Values.webhook.namespaceSelector.matchExpressions }}
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Namespaces no webhook ever selects, as JSON: kube-system, the release namespace and the excluded ones. */}}
{{- define "qos-guard.excludedNamespaces" -}}
{{- toJson (concat (list "kube-system" .Release.Namespace) .Values.webhook.excludeNamespaces | uniq) -}}
{{- end }}

{{/* objectSelector of the Pod and workload webhooks: only when values add requirements. */}}
{{- define "qos-guard.objectSelector" -}}
{{- with .Values.webhook.objectSelector.matchExpressions }}
objectSelector:
  matchExpressions:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- end }}

{{/* Rules for Pods and every workload kind judged by its Pod template (docs/contract.md#modes-per-namespace-by-label). */}}
{{- /* qos-guard.podRules, qos-guard.workloadRules, qos-guard.claimRules (DRA's claims, judged whole by dra-claim-spread, CREATE only) and qos-guard.kindRBAC: _kinds.tpl (generated). */ -}}

{{/* Settings shared by every webhook of the chart. */}}
{{- define "qos-guard.webhookCommon" -}}
admissionReviewVersions: ["v1"]
sideEffects: None
matchPolicy: Equivalent
timeoutSeconds: {{ .Values.webhook.timeoutSeconds }}
{{- end }}

{{/*
The schedulerName the webhook sets on new Pods that need one NUMA node (`place.qos-guard.io`):
config.placement.schedulerName, else the chart's own scheduler's name with scheduler.enabled; empty: off.
*/}}
{{- define "qos-guard.placementScheduler" -}}
{{- $placement := .Values.config.placement | default dict -}}
{{- $placement.schedulerName | default (ternary .Values.scheduler.name "" (.Values.scheduler.enabled | default false)) -}}
{{- end }}
