{{/* Chart name, overridable. */}}
{{- define "distgnn.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's resources: "<release>-<chart>", or the release alone when it already holds the chart name. */}}
{{- define "distgnn.fullname" -}}
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

{{/* Name of the operator's cluster-scoped objects: the full name qualified by the release namespace, so that two releases never share one. */}}
{{- define "distgnn.clusterName" -}}
{{- printf "%s-%s" (include "distgnn.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "distgnn.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object of the chart. */}}
{{- define "distgnn.labels" -}}
helm.sh/chart: {{ include "distgnn.chart" . }}
app.kubernetes.io/name: {{ include "distgnn.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: distgnn
{{- end }}

{{/* Labels of the operator's own objects (Deployment, ServiceAccount, RBAC, metrics Service). */}}
{{- define "distgnn.operatorLabels" -}}
{{ include "distgnn.labels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{/* Labels that select the operator pods. */}}
{{- define "distgnn.selectorLabels" -}}
app.kubernetes.io/name: {{ include "distgnn.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "distgnn.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "distgnn.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "distgnn.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Name of the kopf peering object. */}}
{{- define "distgnn.peeringName" -}}
{{- default (include "distgnn.clusterName" .) .Values.operator.peering.name }}
{{- end }}

{{/* Whether the operator serves the whole cluster (no watchNamespaces). */}}
{{- define "distgnn.clusterwide" -}}
{{- if not .Values.operator.watchNamespaces }}true{{- end }}
{{- end }}

{{/* Label keys that the operator puts on every DistGNNJob pod (kept equal to the operator's label constants; a test checks). */}}
{{- define "distgnn.jobPodJobLabel" -}}
distgnn.io/job-name
{{- end }}
{{- define "distgnn.jobPodRoleLabel" -}}
distgnn.io/role
{{- end }}
{{- define "distgnn.jobPodMatchLabels" -}}
app.kubernetes.io/managed-by: distgnn-operator
{{- end }}

{{- define "distgnn.healthPort" -}}
{{- .Values.operator.healthPort }}
{{- end }}

{{/* The operator's settings: distgnn_operator.settings.OperatorSettings reads DISTGNN_OPERATOR_* variables. */}}
{{- define "distgnn.operatorEnv" -}}
- name: DISTGNN_OPERATOR_NAMESPACES
  value: {{ join "," .Values.operator.watchNamespaces | quote }}
- name: DISTGNN_OPERATOR_PEERING
  value: {{ if gt (int .Values.operator.replicas) 1 }}{{ include "distgnn.peeringName" . | quote }}{{ else }}""{{ end }}
- name: DISTGNN_OPERATOR_METRICS_PORT
  value: {{ .Values.metrics.port | quote }}
- name: DISTGNN_OPERATOR_HEALTH_PORT
  value: {{ .Values.operator.healthPort | quote }}
- name: DISTGNN_OPERATOR_LOG_LEVEL
  value: {{ .Values.operator.logLevel | quote }}
- name: DISTGNN_OPERATOR_CAPACITY_POLICY
  value: {{ .Values.operator.capacity.policy | quote }}
- name: DISTGNN_OPERATOR_GPU_MEMORY_GIB
  value: {{ .Values.operator.capacity.gpuMemoryGiB | quote }}
- name: DISTGNN_OPERATOR_KUEUE
  value: {{ .Values.kueue.enabled | quote }}
- name: DISTGNN_OPERATOR_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: DISTGNN_OPERATOR_POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
# Job NetworkPolicies admit pods with these labels from the operator's namespace to the
# metrics port, where the operator reads trainer 0's /progress.
- name: DISTGNN_OPERATOR_POD_LABELS
  value: {{ include "distgnn.selectorLabels" . | fromYaml | toJson | quote }}
{{- end }}
