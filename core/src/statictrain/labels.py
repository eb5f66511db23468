"""Label and annotation keys shared by the operator, extender, sidecar and reports.

Every child object of a StaticTrainingJob carries JOB, NAMESPACE, COMMIT and TEAM;
metrics carry the same values under the Prometheus label names in METRIC_LABELS.
"""

from __future__ import annotations

GROUP = "statictrain.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "StaticTrainingJob"
PLURAL = "statictrainingjobs"

# Labels on the StaticTrainingJob (set by users) and on every child (set by the operator).
JOB = f"{GROUP}/job"
NAMESPACE = f"{GROUP}/namespace"
COMMIT = f"{GROUP}/commit"
TEAM = f"{GROUP}/team"
ROLE = f"{GROUP}/role"  # "worker" on worker pods
# Jobs that do the same work per step (same model, per-GPU batch): the extender learns their speed
# per GPU family together (set by users on the job's pods).
WORKLOAD_CLASS = f"{GROUP}/workload-class"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "statictrain"

# Kueue's labels (sigs.k8s.io/kueue pkg/controller/constants): on a StaticTrainingJob, the queue and
# priority class are copied to its worker Job; Kueue puts the Job's uid on the Workload it makes for it.
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"

# Node labels that real clusters carry (read by the annotator and the extender).
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
REGION = "topology.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
CAPACITY_TYPE = "karpenter.sh/capacity-type"  # spot | on-demand
GPU_RESOURCE = "nvidia.com/gpu"

# Node annotations written by the price annotator.
HOURLY_COST = f"{GROUP}/hourly-cost-usd"
GPU_HOURLY_COST = f"{GROUP}/gpu-hourly-cost-usd"
PRICE_CAPACITY_TYPE = f"{GROUP}/capacity-type"
PRICE_SOURCE = f"{GROUP}/price-source"  # catalog | custom | live:<provider> | fallback
PRICE_UPDATED = f"{GROUP}/price-updated"

# Worker pod annotations the operator writes for the scheduler extender.
GPU_MODELS = f"{GROUP}/gpu-models"  # comma-separated spec.resources.gpuModels, in order of preference
MAX_HOURLY_USD = f"{GROUP}/max-hourly-usd"  # spec.placement.maxHourlyUSD, when set

# StaticTrainingJob annotations written by the operator's parts.
REMEDIATION_HISTORY = f"{GROUP}/remediation-history"  # anomaly: intents and recommendations (JSON)
BUDGET_EXCEEDED = f"{GROUP}/budget-exceeded"  # cost: the budget limit already acted upon

# Node annotation written by the price annotator: why a price is what it is (fallback, stale quotes...).
PRICE_NOTES = f"{GROUP}/price-notes"

# Pod annotations read by the local cluster's kwok stages: a Go duration ("20s") until the pod
# completes, and the phase it completes with (Succeeded or Failed).
KWOK_COMPLETE_AFTER = f"{GROUP}/kwok-complete-after"
KWOK_COMPLETE_PHASE = f"{GROUP}/kwok-complete-phase"

# Prometheus label names carried by every statictrain metric about a job.
METRIC_LABELS = ("job_name", "namespace", "commit", "team")

# Node annotation (or label) with the carbon intensity of the node's electricity, gCO2e per kWh (statictrain.carbon).
GRID_INTENSITY = f"{GROUP}/grid-intensity-gco2e-per-kwh"
