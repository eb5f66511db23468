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

{{/* The operator's namespaced rules: in its ClusterRole (cluster-wide) or a Role per watched namespace. */}}
{{- define "statictrain.operator.namespacedRules" }}
# Framework (kopf), cost (BudgetExceeded) and anomaly (anomalies, remediations): post Events
# about jobs, and (anomaly) about Namespaces for findings no single job owns.
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
# Application: watch StaticTrainingJobs; delete finished ones after ttlSecondsAfterFinished.
# Cost: suspend over budget, price notes and budget annotations. Anomaly: remediation history
# annotation, replicas within elastic bounds, last good compile/DDP settings.
- apiGroups: [statictrain.io]
  resources: [statictrainingjobs]
  verbs: [get, list, watch, patch, delete]
# Application: phase, conditions, progress, cost and anomalies.
- apiGroups: [statictrain.io]
  resources: [statictrainingjobs/status]
  verbs: [get, patch]
# Application: the worker Indexed Jobs (create, scale, suspend, replace).
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, patch, delete]
# Application: a job in a Kueue queue shows its LocalQueue and Kueue's Workload (admission, flavor);
# spec.suspend of the job sets the Workload's spec.active.
- apiGroups: [kueue.x-k8s.io]
  resources: [localqueues]
  verbs: [list]
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads]
  verbs: [list, patch]
# Application: the headless Service of each job's workers (watched, label-selected, to recreate it).
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, create]
# Application: the per-job checkpoint claim (made with the worker Job, deleted with the job).
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [create]
{{- if .Values.workers.sidecar.profilingToken }}
# Application: the per-job profiling token Secret (made with the worker Job; never read back).
- apiGroups: [""]
  resources: [secrets]
  verbs: [create]
{{- end }}
# Cost accounting: worker pods are priced by UID on the nodes they ran on.
# Anomaly: restart-from-checkpoint deletes a job's worker pods created before the decision.
# Application: the optional pre-flight pod of a job (spec.preflight; created, watched label-selected).
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete]
# Framework (kopf): the heartbeat Lease is watched (label-selected) where the operator watches.
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [list, watch]
{{- end }}

{{/* Node annotations the price annotator writes (statictrain.labels), as a CEL list. */}}
{{- define "statictrain.nodePriceAnnotations" -}}
['statictrain.io/hourly-cost-usd', 'statictrain.io/gpu-hourly-cost-usd', 'statictrain.io/capacity-type', 'statictrain.io/price-source', 'statictrain.io/price-updated', 'statictrain.io/price-notes']
{{- end }}
