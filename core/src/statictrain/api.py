"""Python types of the StaticTrainingJob API (statictrain.io/v1alpha1).

The CRD in ``crds/statictrain.io_statictrainingjobs.yaml`` is the source of
truth; these TypedDicts mirror it field for field (a unit test walks both and
fails on any difference). Bodies are ``TypedDict(total=False)`` because the API
server may omit any optional field; defaults live in the CRD and in
``DEFAULTS`` below for code that reads a body the server has not defaulted.

Money is a decimal string (``Money``), never a float.
"""

from __future__ import annotations

from typing import Final, Literal, TypedDict

from statictrain import labels

Money = str
"""A non-negative decimal string of US dollars, e.g. "1500" or "0.000123"."""
Timestamp = str
"""RFC 3339 UTC time, e.g. "2026-01-02T03:04:05Z"."""

CompileMode = Literal["none", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
Precision = Literal["fp32", "bf16", "fp16"]
OnOff = Literal["Off", "On"]
BudgetAction = Literal["Suspend", "Notify"]
CapacityType = Literal["spot", "on-demand"]
RemediationMode = Literal["Auto", "Recommend", "Off"]
Phase = Literal[
    "Pending", "Created", "Compiling", "Running", "Restarting", "Suspended", "Succeeded", "Failed"
]
ConditionType = Literal[
    "Created", "Running", "Restarting", "Suspended", "Succeeded", "Failed", "Admitted", "PreflightPassed",
    "BudgetExceeded", "BudgetWarning", "Remediation",
]
PreflightPhase = Literal["Running", "Passed", "Failed"]
ConditionStatus = Literal["True", "False", "Unknown"]
Severity = Literal["Info", "Warning", "Critical"]
TolerationOperator = Literal["Exists", "Equal"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]

PHASES: Final[tuple[Phase, ...]] = (
    "Pending",
    "Created",
    "Compiling",
    "Running",
    "Restarting",
    "Suspended",
    "Succeeded",
    "Failed",
)
CONDITION_TYPES: Final[tuple[ConditionType, ...]] = (
    "Created",
    "Running",
    "Restarting",
    "Suspended",
    "Succeeded",
    "Failed",
    "Admitted",
    "PreflightPassed",
    "BudgetExceeded",
    "BudgetWarning",
    "Remediation",
)
"""Lifecycle conditions, Admitted and PreflightPassed (the converger; Admitted only for a job in a Kueue
queue, PreflightPassed only with spec.preflight.enabled), then
BudgetExceeded and BudgetWarning (cost part) and Remediation (anomaly part)."""
FINISHED_PHASES: Final[frozenset[str]] = frozenset({"Succeeded", "Failed"})
MAX_ANOMALIES: Final = 20
"""status.anomalies keeps at most this many entries (the CRD's maxItems)."""

# Pod annotations the operator writes for the scheduler extender (defined in labels.py).
GPU_MODELS_ANNOTATION: Final = labels.GPU_MODELS
"""Comma-separated spec.resources.gpuModels, in order of preference."""
MAX_HOURLY_USD_ANNOTATION: Final = labels.MAX_HOURLY_USD
"""spec.placement.maxHourlyUSD, when set."""
TEMPLATE_HASH_ANNOTATION: Final = "statictrain.io/template-hash"
"""On the worker Job: hash of the pod template it was built from."""


# ----------------------------------------------------------------------------- spec


class Elastic(TypedDict, total=False):
    minReplicas: int
    maxReplicas: int
    maxRestarts: int


class Resources(TypedDict, total=False):
    gpusPerReplica: int
    gpuModels: list[str]
    cpu: str
    memory: str


class Compile(TypedDict, total=False):
    mode: CompileMode
    fullgraph: bool
    dynamic: bool
    cache: bool
    autotune: OnOff
    autotuneBudgetSeconds: int


class Distributed(TypedDict, total=False):
    bucketCapMB: int
    gradientAccumulationSteps: int
    masterPort: int


class Training(TypedDict, total=False):
    maxSteps: int
    maxTokens: int


class Checkpoint(TypedDict, total=False):
    everySteps: int
    path: str
    keep: int
    persistentVolumeClaim: str


class Budget(TypedDict, total=False):
    limitUSD: Money
    onExceeded: BudgetAction


class Toleration(TypedDict, total=False):
    key: str
    operator: TolerationOperator
    value: str
    effect: TaintEffect
    tolerationSeconds: int


class Placement(TypedDict, total=False):
    capacityTypes: list[CapacityType]
    maxHourlyUSD: Money
    nodeSelector: dict[str, str]
    tolerations: list[Toleration]


class Remediation(TypedDict, total=False):
    mode: RemediationMode


class RunPolicy(TypedDict, total=False):
    backoffLimit: int
    activeDeadlineSeconds: int
    ttlSecondsAfterFinished: int
    terminationGracePeriodSeconds: int


class Preflight(TypedDict, total=False):
    enabled: bool
    timeoutSeconds: int


class EnvVar(TypedDict, total=False):
    name: str
    value: str


class Spec(TypedDict, total=False):
    image: str
    entrypoint: str
    replicas: int
    elastic: Elastic
    resources: Resources
    compile: Compile
    precision: Precision
    distributed: Distributed
    training: Training
    checkpoint: Checkpoint
    budget: Budget
    placement: Placement
    remediation: Remediation
    runPolicy: RunPolicy
    suspend: bool
    preflight: Preflight
    env: list[EnvVar]


# ----------------------------------------------------------------------------- status


class Workers(TypedDict, total=False):
    job: str
    service: str


class Condition(TypedDict, total=False):
    type: ConditionType
    status: ConditionStatus
    reason: str
    message: str
    observedGeneration: int
    lastTransitionTime: Timestamp


class Progress(TypedDict, total=False):
    step: int
    totalSteps: int
    tokensPerSecond: int
    stepSeconds: str
    etaSeconds: int
    updated: Timestamp


ChosenBy = Literal["spec", "autotune", "other"]
"""Who chose the settings the workers run with (status.compile.chosenBy)."""


class CompileStatus(TypedDict, total=False):
    seconds: str
    cacheHit: bool
    graphBreaks: int
    recompiles: int
    settings: str
    chosenBy: ChosenBy
    autotuneSpeedup: str


class ReadableCost(TypedDict, total=False):
    """US dollars to 3 significant digits with a ``$`` sign ("" where the figure is "")."""

    usd: str
    projectedUSD: str
    usdPer1MTokens: str


class Cost(TypedDict, total=False):
    usd: Money
    gpuHours: str
    idleUSD: Money
    compileUSD: Money
    lostWorkUSD: Money
    usdPerStep: Money
    usdPer1MTokens: Money
    projectedUSD: Money
    """Projected total cost at the end of the job ("" when no end or no cost per step is known)."""
    projectedBasis: str
    """How projectedUSD was found, or why there is none."""
    steadyUSDPerStep: Money
    """Cost per step in the latest steady window (the projection's cost per step)."""
    tokens: str
    """Tokens (or samples) trained so far, an integer string."""
    steps: str
    """Optimizer steps so far, an integer string."""
    progressSteps: str
    """Optimizer steps so far, unrounded (mean over ranks: DDP progress can be a half step)."""
    gpuUSD: Money
    cpuUSD: Money
    memoryUSD: Money
    stepsExecuted: str
    lostSteps: str
    steadyUSD: Money
    steadySteps: str
    stepMark: str
    gpuEnergyKWh: str
    """GPU energy so far in kWh (the GPUs' energy counters; CPU and memory are not counted)."""
    carbonKgCO2e: str
    """Carbon of that energy, kg CO2e (kWh x PUE x each node's grid intensity)."""
    readable: ReadableCost
    """The money for people (kubectl get stj)."""
    flags: dict[str, str]
    """Problems of the cost data (e.g. utilization-gaps) -> accounting windows that raised them (integer strings)."""
    updated: Timestamp


class Anomaly(TypedDict, total=False):
    time: Timestamp
    metric: str
    severity: Severity
    score: str
    message: str
    action: str


class RemediationStatus(TypedDict, total=False):
    lastActionTime: Timestamp
    lastAction: str
    lastReason: str


class QueueStatus(TypedDict, total=False):
    name: str
    clusterQueue: str
    workload: str
    admitted: bool
    flavors: dict[str, str]
    message: str


class GraphBreak(TypedDict, total=False):
    location: str
    reason: str


class PreflightResult(TypedDict, total=False):
    """What the pre-flight pod reports in its termination message (statictrain.preflight_message)."""

    passed: bool
    message: str
    graphBreaks: int
    breaks: list[GraphBreak]
    recompiles: int
    peakMemoryBytes: int


class PreflightStatus(PreflightResult, total=False):
    phase: PreflightPhase
    pod: str


class Status(TypedDict, total=False):
    phase: Phase
    observedGeneration: int
    replicas: int
    readyReplicas: int
    selector: str
    restarts: int
    startTime: Timestamp
    completionTime: Timestamp
    workers: Workers
    conditions: list[Condition]
    progress: Progress
    compile: CompileStatus
    cost: Cost
    anomalies: list[Anomaly]
    remediation: RemediationStatus
    queue: QueueStatus
    preflight: PreflightStatus


# ----------------------------------------------------------------------------- defaults

DEFAULTS: Final[Spec] = {
    "replicas": 1,
    "resources": {"gpusPerReplica": 1},
    "compile": {
        "mode": "default",
        "fullgraph": False,
        "dynamic": False,
        "cache": True,
        "autotune": "Off",
        "autotuneBudgetSeconds": 600,
    },
    "precision": "bf16",
    "distributed": {"bucketCapMB": 25, "gradientAccumulationSteps": 1, "masterPort": 29500},
    "checkpoint": {"everySteps": 500, "path": "/ckpt", "keep": 3},
    "remediation": {"mode": "Recommend"},
    "runPolicy": {"backoffLimit": 3, "terminationGracePeriodSeconds": 120},
    "suspend": False,
    "preflight": {"enabled": False, "timeoutSeconds": 900},
}
"""The CRD's defaults, for bodies that did not pass through the API server."""
