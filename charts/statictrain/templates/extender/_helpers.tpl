{{/* Extender and statictrain kube-scheduler: names, labels, URLs. */}}
{{- define "statictrain.extender.fullname" -}}
{{- printf "%s-extender" (include "statictrain.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- define "statictrain.extender.selectorLabels" -}}
{{ include "statictrain.selectorLabels" . }}
app.kubernetes.io/component: extender
{{- end }}
{{- define "statictrain.scheduler.fullname" -}}
{{- printf "%s-scheduler" (include "statictrain.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- define "statictrain.scheduler.selectorLabels" -}}
{{ include "statictrain.selectorLabels" . }}
app.kubernetes.io/component: scheduler
{{- end }}
{{/* The scheduler profile the extender serves: extender.scheduler.schedulerName, else workers.schedulerName. */}}
{{- define "statictrain.scheduler.name" -}}
{{- .Values.extender.scheduler.schedulerName | default .Values.workers.schedulerName }}
{{- end }}
{{/* The kube-scheduler's secure port (/healthz, /livez, /readyz, /metrics). */}}
{{- define "statictrain.scheduler.port" -}}
10259
{{- end }}
{{/* URL prefix kube-scheduler posts to: {prefix}/filter and {prefix}/prioritize. */}}
{{- define "statictrain.extender.urlPrefix" -}}
{{- $scheme := ternary "https" "http" (ne .Values.extender.tls.secretName "") -}}
{{- printf "%s://%s.%s.svc:%d/scheduler" $scheme (include "statictrain.extender.fullname" .) .Release.Namespace (int .Values.extender.port) -}}
{{- end }}
{{/* The extender's health endpoint the operator probes (STATICTRAIN_OPERATOR_EXTENDER_HEALTH_URL). */}}
{{- define "statictrain.extender.healthUrl" -}}
{{- $scheme := ternary "https" "http" (ne .Values.extender.tls.secretName "") -}}
{{- printf "%s://%s.%s.svc:%d/healthz" $scheme (include "statictrain.extender.fullname" .) .Release.Namespace (int .Values.extender.port) -}}
{{- end }}
{{/* The KubeSchedulerConfiguration of the statictrain kube-scheduler. */}}
{{- define "statictrain.scheduler.config" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
# No /debug/pprof on the scheduler's port (on by default in kube-scheduler).
enableProfiling: false
enableContentionProfiling: false
leaderElection:
  leaderElect: {{ gt (int $.Values.extender.scheduler.replicas) 1 }}
  resourceNamespace: {{ .Release.Namespace }}
  resourceName: {{ include "statictrain.scheduler.fullname" . }}
profiles:
- schedulerName: {{ include "statictrain.scheduler.name" . }}
  # Score every feasible node so packing sees the partly used ones.
  percentageOfNodesToScore: 100
  plugins:
    score:
      disabled:
      - name: NodeResourcesBalancedAllocation
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - {name: nvidia.com/gpu, weight: 5}
        - {name: statictrain.io/gpu-milli, weight: 5}
        - {name: cpu, weight: 1}
        - {name: memory, weight: 1}
extenders:
- urlPrefix: {{ include "statictrain.extender.urlPrefix" . | quote }}
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: {{ $.Values.extender.scheduler.extenderWeight }}
  nodeCacheCapable: true
  httpTimeout: {{ $.Values.extender.scheduler.httpTimeout }}
  ignorable: {{ $.Values.extender.scheduler.ignorable }}
  managedResources:
  - {name: nvidia.com/gpu, ignoredByScheduler: false}
  - {name: statictrain.io/gpu-milli, ignoredByScheduler: false}
  {{- if $.Values.extender.tls.secretName }}
  tlsConfig:
    caFile: /etc/statictrain-extender-tls/ca.crt
    {{- if $.Values.extender.tls.clientSecretName }}
    certFile: /etc/statictrain-extender-client/tls.crt
    keyFile: /etc/statictrain-extender-client/tls.key
    {{- end }}
    serverName: {{ printf "%s.%s.svc" (include "statictrain.extender.fullname" .) .Release.Namespace }}
  {{- end }}
{{- end }}
