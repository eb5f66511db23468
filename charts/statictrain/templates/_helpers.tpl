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

{{/* An image reference: repository:tag, the tag defaulting to the chart's appVersion (every statictrain image).
Call with (dict "image" .Values.x.image "root" $). */}}
{{- define "statictrain.image" -}}
{{- printf "%s:%s" .image.repository (.image.tag | default .root.Chart.AppVersion) }}
{{- end }}

{{/* The security contexts of every pod and container of the chart (podSecurityContext, containerSecurityContext). */}}
{{- define "statictrain.podSecurityContext" -}}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- define "statictrain.containerSecurityContext" -}}
{{- with .Values.containerSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Where a component's pods run: nodeSelector, tolerations, affinity, priorityClassName and
topologySpreadConstraints of its values; a constraint without a labelSelector gets the component's pods.
Call with (dict "values" .Values.operator "selector" (include "statictrain.operator.selectorLabels" .)). */}}
{{- define "statictrain.placement" -}}
{{- $v := .values }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.topologySpreadConstraints }}
topologySpreadConstraints:
{{- range . }}
{{- $c := deepCopy . }}
{{- if not $c.labelSelector }}{{ $_ := set $c "labelSelector" (dict "matchLabels" ($.selector | fromYaml)) }}{{ end }}
- {{- toYaml $c | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}

{{/* A PodDisruptionBudget for a component's Deployment when its podDisruptionBudget.enabled.
Call with (dict "root" $ "values" .Values.operator "name" NAME "component" COMPONENT "selector" LABELS). */}}
{{- define "statictrain.pdb" -}}
{{- with .values.podDisruptionBudget }}
{{- if .enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $.name }}
  namespace: {{ $.root.Release.Namespace }}
  labels:
    {{- include "statictrain.labels" $.root | nindent 4 }}
    app.kubernetes.io/component: {{ $.component }}
spec:
  maxUnavailable: {{ .maxUnavailable }}
  selector:
    matchLabels:
      {{- $.selector | nindent 6 }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Prometheus that scrapes /metrics: its base URL and the NetworkPolicy peer that admits it. */}}
{{- define "statictrain.prometheusUrl" -}}
{{- .Values.prometheus.url | default (printf "http://prometheus-operated.%s.svc:9090" .Values.prometheus.namespace) }}
{{- end }}
{{- define "statictrain.prometheusPeer" -}}
{{- $np := .Values.networkPolicy.prometheus }}
{{- $ns := $np.namespaceSelector }}
{{- if kindIs "invalid" $ns }}
{{- $ns = dict "matchLabels" (dict "kubernetes.io/metadata.name" .Values.prometheus.namespace) }}
{{- end }}
{{- toYaml (dict "namespaceSelector" $ns "podSelector" $np.podSelector) }}
{{- end }}

{{/* Namespaces the worker pods run in: networkPolicy.workerNamespaces, else operator.watchNamespaces (empty:
cluster-wide, not known to the chart). */}}
{{- define "statictrain.workerNamespaces" -}}
{{- toJson (default .Values.operator.watchNamespaces .Values.networkPolicy.workerNamespaces) }}
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

{{/* The `helm test` pod's labels (the NetworkPolicies admit it to the operator's /metrics and the extender). */}}
{{- define "statictrain.test.selectorLabels" -}}
{{ include "statictrain.selectorLabels" . }}
app.kubernetes.io/component: test
{{- end }}

{{/* Whether the worker pods' PodMonitor is made: podMonitor.enabled, or serviceMonitor.enabled when that is null. */}}
{{- define "statictrain.podMonitor.enabled" -}}
{{- if kindIs "invalid" .Values.podMonitor.enabled }}{{ .Values.serviceMonitor.enabled }}{{ else }}{{ .Values.podMonitor.enabled }}{{ end }}
{{- end }}
