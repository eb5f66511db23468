"""status.conditions of a StaticTrainingJob: who owns which type, the reasons, and the one ``set_condition``.

Each condition type has exactly one writer (a part of the operator, with its own
server-side-apply field manager); the CRD declares ``conditions`` a list-map
keyed by ``type``, so the API server merges each writer's entries by type and
one writer never erases another's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from .api import CONDITION_TYPES, Condition, ConditionType

__all__ = [
    "ANOMALY_TYPES",
    "BUDGET_EXCEEDED",
    "BUDGET_WARNING",
    "COST_TYPES",
    "LIFECYCLE_TYPES",
    "REMEDIATION",
    "Reason",
    "set_condition",
    "timestamp",
]

BUDGET_EXCEEDED: Final[ConditionType] = "BudgetExceeded"
BUDGET_WARNING: Final[ConditionType] = "BudgetWarning"
"""True while the projected total cost (status.cost.projectedUSD) exceeds spec.budget.limitUSD."""
COST_TYPES: Final[tuple[ConditionType, ...]] = (BUDGET_EXCEEDED, BUDGET_WARNING)
"""Written by the cost part (the one budget enforcer) only."""
REMEDIATION: Final[ConditionType] = "Remediation"
ANOMALY_TYPES: Final[tuple[ConditionType, ...]] = (REMEDIATION,)
"""Written by the anomaly part only."""
LIFECYCLE_TYPES: Final[tuple[ConditionType, ...]] = tuple(
    t for t in CONDITION_TYPES if t not in (*COST_TYPES, *ANOMALY_TYPES)
)
"""Created, Running, Restarting, Suspended, Succeeded, Failed, Admitted, PreflightPassed: the converger's only."""


class Reason:
    """PascalCase reasons the operator writes (a worker Job's own failure reason is passed through as is)."""

    # lifecycle (converger)
    WORKERS_CREATED: Final = "WorkersCreated"
    WORKERS_MISSING: Final = "WorkersMissing"
    WORKERS_STARTING: Final = "WorkersStarting"
    WORKERS_READY: Final = "WorkersReady"
    WORKER_FAILED: Final = "WorkerFailed"
    WORKERS_FAILED: Final = "WorkersFailed"
    COMPILING: Final = "Compiling"
    COMPLETED: Final = "Completed"
    SUSPENDED: Final = "Suspended"
    QUEUED: Final = "Queued"
    PREFLIGHT_RUNNING: Final = "PreflightRunning"
    PREFLIGHT_PASSED: Final = "PreflightPassed"
    PREFLIGHT_FAILED: Final = "PreflightFailed"
    PHASE_CHANGED: Final = "PhaseChanged"
    # budget (cost part)
    WITHIN_BUDGET: Final = "WithinBudget"
    INVALID_BUDGET: Final = "InvalidBudget"
    BUDGET_SUSPENDED: Final = "Suspended"
    ALREADY_SUSPENDED: Final = "AlreadySuspended"
    NOTIFIED: Final = "Notified"
    PROJECTED_OVER_BUDGET: Final = "ProjectedOverBudget"
    PROJECTED_WITHIN_BUDGET: Final = "ProjectedWithinBudget"
    NO_PROJECTION: Final = "NoProjection"
    NO_BUDGET: Final = "NoBudget"
    # remediation (anomaly part)
    REMEDIATION_OFF: Final = "RemediationOff"
    COMPLETING_ACTION: Final = "CompletingAction"
    METRICS_UNAVAILABLE: Final = "MetricsUnavailable"
    USER_EDIT_WINS: Final = "UserEditWins"
    ACTION_APPLIED: Final = "ActionApplied"
    ACTION_RECOMMENDED: Final = "ActionRecommended"
    NO_ACTION: Final = "NoAction"
    HEALTHY: Final = "Healthy"


def timestamp(now: datetime) -> str:
    """RFC 3339 UTC with second precision, as Kubernetes writes times."""
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(conditions: Sequence[Condition], new: Condition, now: datetime) -> list[Condition]:
    """``conditions`` with ``new`` in place of its type (appended when absent).

    lastTransitionTime moves to ``now`` only when the status changes; otherwise the old one is kept.
    """
    out: list[Condition] = []
    found = False
    for cond in conditions:
        if cond.get("type") != new["type"]:
            out.append(cond)
            continue
        found = True
        merged: Condition = {**new}
        changed = cond.get("status") != new["status"]
        merged["lastTransitionTime"] = timestamp(now) if changed else cond.get("lastTransitionTime", timestamp(now))
        out.append(merged)
    if not found:
        out.append({**new, "lastTransitionTime": timestamp(now)})
    return out
