"""Environment variables of worker pods: the contract operator -> trainer and sidecar.

The operator sets them; the trainer and the sidecar read them. One place, so
the names cannot drift apart.
"""

from __future__ import annotations

# Identity (downward API / operator)
JOB_NAME = "STATICTRAIN_JOB"
JOB_NAMESPACE = "STATICTRAIN_NAMESPACE"
COMMIT = "STATICTRAIN_COMMIT"
TEAM = "STATICTRAIN_TEAM"
POD_NAME = "STATICTRAIN_POD"
POD_UID = "STATICTRAIN_POD_UID"
NODE_NAME = "STATICTRAIN_NODE"

# Trainer settings
ENTRYPOINT = "STATICTRAIN_ENTRYPOINT"  # module:function
# none | default | reduce-overhead | max-autotune | max-autotune-no-cudagraphs
COMPILE_MODE = "STATICTRAIN_COMPILE_MODE"
COMPILE_FULLGRAPH = "STATICTRAIN_COMPILE_FULLGRAPH"  # "true" | "false"
COMPILE_DYNAMIC = "STATICTRAIN_COMPILE_DYNAMIC"  # "true" | "false"
COMPILE_CACHE = "STATICTRAIN_COMPILE_CACHE"  # "true" | "false"
COMPILE_CACHE_DIR = "STATICTRAIN_COMPILE_CACHE_DIR"
COMPILE_CACHE_SHARED_DIR = "STATICTRAIN_COMPILE_CACHE_SHARED_DIR"  # read-only artifacts tried after the own
PRECISION = "STATICTRAIN_PRECISION"  # fp32 | bf16 | fp16
BUCKET_CAP_MB = "STATICTRAIN_BUCKET_CAP_MB"
GRAD_ACCUM_STEPS = "STATICTRAIN_GRAD_ACCUM_STEPS"
MAX_STEPS = "STATICTRAIN_MAX_STEPS"
MAX_TOKENS = "STATICTRAIN_MAX_TOKENS"
CHECKPOINT_DIR = "STATICTRAIN_CHECKPOINT_DIR"
CHECKPOINT_EVERY = "STATICTRAIN_CHECKPOINT_EVERY"
CHECKPOINT_KEEP = "STATICTRAIN_CHECKPOINT_KEEP"
AUTOTUNE = "STATICTRAIN_AUTOTUNE"  # "off" | "on"
AUTOTUNE_BUDGET_S = "STATICTRAIN_AUTOTUNE_BUDGET_S"
BATCH_SIZE = "STATICTRAIN_BATCH_SIZE"  # per-rank micro-batch; 0 or unset keeps the workload's own
SEED = "STATICTRAIN_SEED"
PEAK_TFLOPS = "STATICTRAIN_PEAK_TFLOPS"  # peak dense TFLOP/s of one device, for MFU; unset: looked up
TERMINATION_LOG = "STATICTRAIN_TERMINATION_LOG"  # trainer failure reason; default /dev/termination-log
# Throughput levers (the autotuner explores them; each is skipped with a note where unsupported)
ATTENTION = "STATICTRAIN_ATTENTION"  # auto | cudnn | flash: SDPA backend tried first
CHUNKED_LOSS = "STATICTRAIN_CHUNKED_LOSS"  # "true" | "false": fused chunked linear + cross-entropy
COMPILE_OPTIMIZER = "STATICTRAIN_COMPILE_OPTIMIZER"  # "true" | "false": torch.compile the AdamW step
FP8 = "STATICTRAIN_FP8"  # "true" | "false": torchao float8 training on Hopper or newer
FP8_RECIPE = "STATICTRAIN_FP8_RECIPE"  # tensorwise | rowwise: torchao float8 scaling recipe
AUTOTUNE_RECORD_DIR = "STATICTRAIN_AUTOTUNE_RECORD_DIR"  # failed/timed-out candidates kept here

# trainer -> sidecar channel (a directory on a shared emptyDir)
STATS_DIR = "STATICTRAIN_STATS_DIR"

# Sidecar
METRICS_PORT = "STATICTRAIN_METRICS_PORT"
SAMPLE_INTERVAL_S = "STATICTRAIN_SAMPLE_INTERVAL_S"
METRICS_BIND = "STATICTRAIN_METRICS_BIND"  # listen address, default 0.0.0.0
SIDECAR_GPUS = "STATICTRAIN_SIDECAR_GPUS"  # comma-separated NVML indices or UUIDs; unset: all visible
SIDECAR_NVML = "STATICTRAIN_SIDECAR_NVML"  # "true" | "false" (false: never load NVML)
SIDECAR_DCGM = "STATICTRAIN_SIDECAR_DCGM"  # "true" | "false": also export DCGM-exporter-compatible series
PROFILE_MAX_STEPS = "STATICTRAIN_PROFILE_MAX_STEPS"
PROFILE_TIMEOUT_S = "STATICTRAIN_PROFILE_TIMEOUT_S"
PROFILE_MAX_BYTES = "STATICTRAIN_PROFILE_MAX_BYTES"
# file holding the bearer token of /profile and /profiles (a mounted Secret); unset: profiling is off
PROFILE_TOKEN_FILE = "STATICTRAIN_PROFILE_TOKEN_FILE"

# torchrun (set by the operator, read by torchrun and torch.distributed)
MASTER_ADDR = "MASTER_ADDR"
MASTER_PORT = "MASTER_PORT"
WORLD_SIZE = "WORLD_SIZE"
NODE_RANK = "NODE_RANK"
