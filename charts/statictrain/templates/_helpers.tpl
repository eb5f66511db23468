{{/* Chart name. */}}
{{- define "statictrain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart unless the release already holds the chart name. */}}
{{- define "statictrain.fullname" -}}
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

{{/* Labels on every object. */}}
{{- define "statictrain.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "statictrain.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: statictrain
{{- end }}

{{/* Selector labels (stable across upgrades). */}}
{{- define "statictrain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "statictrain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Operator component names and labels. */}}
{{- define "statictrain.operator.fullname" -}}
{{- printf "%s-operator" (include "statictrain.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- define "statictrain.operator.selectorLabels" -}}
{{ include "statictrain.selectorLabels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "statictrain.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create }}
{{- default (include "statictrain.operator.fullname" .) .Values.operator.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.operator.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Pod Security Standards "restricted" container security context. */}}
{{- define "statictrain.restrictedContainer" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}
