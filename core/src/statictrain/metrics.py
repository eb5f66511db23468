"""Every Prometheus metric name statictrain exports: the contract with the
operator, the anomaly detector, reports and dashboards. Documented in README.md
(section "Metrics"); a test checks the two agree.

Labels on every per-pod metric: job_name, namespace, commit, team, pod, pod_uid.
GPU metrics add gpu (index), gpu_uuid and gpu_model.
"""

from __future__ import annotations

PREFIX = "statictrain_"

# --- sidecar: identity and health
SIDECAR_INFO = "statictrain_sidecar_info"
GPU_AVAILABLE = "statictrain_gpu_available"  # 1 when NVML works, 0 otherwise (with a reason label)
CHANNEL_MALFORMED_TOTAL = "statictrain_channel_malformed_records_total"
CHANNEL_UP = "statictrain_channel_up"  # 1 when the trainer channel reads well, 0 otherwise (with a reason label)
PROFILE_REQUESTS_TOTAL = "statictrain_profile_requests_total"  # label outcome

# --- sidecar: GPU (NVML)
GPU_UTILIZATION_RATIO = "statictrain_gpu_utilization_ratio"
GPU_MEMORY_UTILIZATION_RATIO = "statictrain_gpu_memory_utilization_ratio"
GPU_MEMORY_USED_BYTES = "statictrain_gpu_memory_used_bytes"
GPU_MEMORY_TOTAL_BYTES = "statictrain_gpu_memory_total_bytes"
GPU_POWER_WATTS = "statictrain_gpu_power_watts"
GPU_ENERGY_JOULES_TOTAL = "statictrain_gpu_energy_joules_total"
GPU_TEMPERATURE_CELSIUS = "statictrain_gpu_temperature_celsius"
GPU_SM_CLOCK_HERTZ = "statictrain_gpu_sm_clock_hertz"
GPU_PCIE_BYTES_TOTAL = "statictrain_gpu_pcie_bytes_total"  # label direction: tx | rx
GPU_NVLINK_BYTES_TOTAL = "statictrain_gpu_nvlink_bytes_total"  # label direction: tx | rx
GPU_XID_ERRORS_TOTAL = "statictrain_gpu_xid_errors_total"
GPU_ECC_ERRORS_TOTAL = "statictrain_gpu_ecc_errors_total"  # label type: corrected | uncorrected
GPU_BUSY_SECONDS_TOTAL = "statictrain_gpu_busy_seconds_total"  # utilization integrated over time
# per pod (no GPU labels), label below: GPU-seconds, summed over the pod's GPUs, whose sampled utilization was
# below that ratio (statictrain.cost.IDLE_THRESHOLD); cost accounting prices idle time from its increase
GPU_IDLE_SECONDS_TOTAL = "statictrain_gpu_idle_seconds_total"
GPU_QUERY_ERRORS_TOTAL = "statictrain_gpu_query_errors_total"  # label query

# --- sidecar: training (from the trainer channel)
TRAIN_STEP = "statictrain_train_step"
TRAIN_STEPS_TOTAL = "statictrain_train_steps_total"
TRAIN_STEP_SECONDS = "statictrain_train_step_seconds"  # histogram
TRAIN_TOKENS_TOTAL = "statictrain_train_tokens_total"
TRAIN_SAMPLES_TOTAL = "statictrain_train_samples_total"
TRAIN_TOKENS_PER_SECOND = "statictrain_train_tokens_per_second"
TRAIN_LOSS = "statictrain_train_loss"
TRAIN_COMPILE_SECONDS = "statictrain_train_compile_seconds"
TRAIN_COMPILE_CACHE_HIT = "statictrain_train_compile_cache_hit"
TRAIN_COMPILE_CACHE_STATUS = "statictrain_train_compile_cache_status"  # label status: hit | miss_empty | ...
TRAIN_GRAPH_BREAKS = "statictrain_train_graph_breaks"
TRAIN_RECOMPILES = "statictrain_train_recompiles"
TRAIN_MFU_RATIO = "statictrain_train_mfu_ratio"
TRAIN_SETTINGS_INFO = "statictrain_train_settings_info"  # 1, labels settings (mode@batch+levers), chosen_by
TRAIN_AUTOTUNE_SPEEDUP = "statictrain_train_autotune_speedup"  # the tuner's pick over its first trial
TRAIN_SECONDS_SINCE_LAST_STEP = "statictrain_train_seconds_since_last_step"
TRAIN_RANK_STEP_SECONDS = "statictrain_train_rank_step_seconds"  # label rank: local seconds of the last step

# DCGM-exporter-compatible series (sidecar, optional: STATICTRAIN_SIDECAR_DCGM), named and scaled
# as dcgm-exporter does, so its dashboards work. DCGM_FI_PROF_GR_ENGINE_ACTIVE is not exported:
# NVML gives it only through GPM, which the sidecar does not read (never approximated).
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent 0-100
DCGM_POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"  # watts
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB

# --- operator: cost (labels job_name, namespace, commit, team)
JOB_COST_USD_TOTAL = "statictrain_job_cost_usd_total"
JOB_IDLE_COST_USD_TOTAL = "statictrain_job_idle_cost_usd_total"
JOB_GPU_SECONDS_TOTAL = "statictrain_job_gpu_seconds_total"
JOB_USD_PER_1M_TOKENS = "statictrain_job_usd_per_1m_tokens"
JOB_BUDGET_USD = "statictrain_job_budget_usd"
JOB_PROJECTED_COST_USD = "statictrain_job_projected_cost_usd"  # status.cost.projectedUSD: cost to finish
NODE_HOURLY_COST_USD = "statictrain_node_hourly_cost_usd"
JOB_COMPILE_COST_USD_TOTAL = "statictrain_job_compile_cost_usd_total"
JOB_LOST_WORK_COST_USD_TOTAL = "statictrain_job_lost_work_cost_usd_total"
JOB_TOKENS_TOTAL = "statictrain_job_tokens_total"  # tokens the accounting attributed to the job
JOB_STEPS_TOTAL = "statictrain_job_steps_total"  # executed (mean over ranks); useful = this - lost steps
NODE_COST_USD_TOTAL = "statictrain_node_cost_usd_total"  # label node
NODE_IDLE_COST_USD_TOTAL = "statictrain_node_idle_cost_usd_total"  # label node: cost no pod was allocated
JOB_GPU_COST_USD_TOTAL = "statictrain_job_gpu_cost_usd_total"  # the GPU part of the job cost
JOB_CPU_COST_USD_TOTAL = "statictrain_job_cpu_cost_usd_total"
JOB_MEMORY_COST_USD_TOTAL = "statictrain_job_memory_cost_usd_total"
JOB_LOST_STEPS_TOTAL = "statictrain_job_lost_steps_total"
COST_INVARIANT_OK = "statictrain_cost_invariant_ok"  # label invariant: 1 when the last window held it
COST_INVARIANT_FAILURES_TOTAL = "statictrain_cost_invariant_failures_total"  # label invariant: windows failing
COST_UNPRICED_PODS = "statictrain_cost_unpriced_pods"  # labels namespace, pod: 1 while a running pod is unpriced
JOB_COST_FLAGS_TOTAL = "statictrain_job_cost_flags_total"  # label flag: utilization-gaps | counter-reset | ...
COST_ACCOUNTING_RUNS_TOTAL = "statictrain_cost_accounting_runs_total"  # label outcome: ok | error
# the GPU energy of the job's pods (the sidecars' energy counters; CPU and memory are not counted) and its carbon
JOB_GPU_ENERGY_JOULES_TOTAL = "statictrain_job_gpu_energy_joules_total"
JOB_CARBON_GRAMS_TOTAL = "statictrain_job_carbon_grams_total"  # energy x PUE x the node's grid intensity, gCO2e
NODE_ALLOCATED_COST_USD_TOTAL = "statictrain_node_allocated_cost_usd_total"  # label node: the node's pods' cost
# label reason (statictrain.dcgm.IGNORED_REASONS): dcgm-exporter series left out of an accounting window, one per
# series and window (GPUs of no pod, of pods that are not workers, without a GPU label, outside the pod's life)
DCGM_SERIES_IGNORED_TOTAL = "statictrain_dcgm_series_ignored_total"

# --- operator: anomaly and remediation
ANOMALY_SCORE = "statictrain_anomaly_score"
ANOMALIES_TOTAL = "statictrain_anomalies_total"
REMEDIATIONS_TOTAL = "statictrain_remediations_total"
IGNORED_SERIES_TOTAL = "statictrain_ignored_series_total"  # pods whose series claimed a job they are not of
# labels job_name, namespace, reason (statictrain.dcgm.IGNORED_REASONS): dcgm-exporter series naming a job's pods
# that the detector could not attribute (no GPU label, an earlier pod of the same name); once per series
ANOMALY_DCGM_SERIES_IGNORED_TOTAL = "statictrain_anomaly_dcgm_series_ignored_total"

# --- extender
EXTENDER_REQUESTS_TOTAL = "statictrain_extender_requests_total"
EXTENDER_REQUEST_SECONDS = "statictrain_extender_request_seconds"
EXTENDER_NODES_CACHED = "statictrain_extender_nodes_cached"
# operator: worker pods per verdict (from_discovery | from_exporter | missing) of how Prometheus scraped their
# sidecars in the last progress pass (workerpods.ScrapeCheck); anything but from_discovery breaks the tenancy of metrics
SCRAPE_TENANCY_PODS = "statictrain_scrape_tenancy_pods"
EXTENDER_UP = "statictrain_extender_up"  # operator: 1 when the extender answers its health probe, 0 when down
EXTENDER_THROUGHPUT_ESTIMATES_TOTAL = "statictrain_extender_throughput_estimates_total"  # label: source
# Learned relative throughput (A100 = 1 units) per workload class and GPU family, the table's figure
# beside it, the step-time samples behind it, and samples never learned from (label: reason).
EXTENDER_LEARNED_THROUGHPUT = "statictrain_extender_learned_throughput"  # labels: workload_class, gpu_family
EXTENDER_TABLE_THROUGHPUT = "statictrain_extender_table_throughput"  # labels: workload_class, gpu_family
EXTENDER_LEARNED_SAMPLES = "statictrain_extender_learned_samples"  # labels: workload_class, gpu_family
EXTENDER_THROUGHPUT_SOURCE = "statictrain_extender_throughput_source"  # labels: workload_class, gpu_family, source
EXTENDER_STEP_SAMPLES_REJECTED_TOTAL = "statictrain_extender_step_samples_rejected_total"  # label: reason
