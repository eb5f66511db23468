"""Remediation policy: findings + spec + remediation history -> one decision. Pure.

Bounded, reversible actions, one kind per finding kind:

| finding            | action                                                  |
|--------------------|---------------------------------------------------------|
| IdleGPU            | ScaleDown: halve the distance to elastic.minReplicas   |
| ThroughputRegression | RevertSettings: back to the last good compile/precision/distributed settings |
| Stalled            | RestartFromCheckpoint: replace the worker pods          |
| OverBudget         | none: reported only (the cost part is the one budget enforcer, spec.budget.onExceeded) |
| LossDiverged       | Suspend: stop paying for NaN steps (resume from the last checkpoint after a fix) |
| MemoryLeak         | RestartFromCheckpoint before the device fills (the work since the checkpoint is kept by then) |
| Straggler          | ReplaceStraggler: recommended only (which node/GPU is slow is in the message) |
| DataStarvation     | TuneInputPipeline: recommended only (more loader workers, faster storage) |

When several findings hold, ``precedence`` (the one place that orders them) tries first the one whose
action can fix the most: e.g. a regression that starts at a commit or settings change is reverted even when
memory grows with it, and a restart is tried for a silent job only when scaling down cannot help.

Guards, in order: mode Off; missing data (fail closed); an action already in
flight (recorded intent, so an operator restart completes it instead of
repeating it); a user's edit since our last action; the stabilization window
(at most one action per window); the per-kind cooldown.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

__all__ = [
    "CHANGE_TIE_S",
    "PRIORITY",
    "RECOMMEND_ONLY",
    "SETTINGS_FIELDS",
    "UNCORROBORATED_STALL_METRIC",
    "ActionKind",
    "Decision",
    "Finding",
    "FindingKind",
    "History",
    "Intent",
    "JobView",
    "Mode",
    "PolicySettings",
    "decide",
    "intent_id",
    "plan_action",
    "precedence",
]


class FindingKind(StrEnum):
    """What the detector saw (PascalCase: used as Event and condition reasons)."""

    IDLE_GPU = "IdleGPU"
    THROUGHPUT_REGRESSION = "ThroughputRegression"
    STALLED = "Stalled"
    OVER_BUDGET = "OverBudget"
    COST_SPIKE = "CostSpike"
    STRAGGLER = "Straggler"
    MEMORY_LEAK = "MemoryLeak"
    LOSS_DIVERGED = "LossDiverged"
    DATA_STARVATION = "DataStarvation"


class ActionKind(StrEnum):
    """What the operator may do."""

    SCALE_DOWN = "ScaleDown"
    REVERT_SETTINGS = "RevertSettings"
    RESTART_FROM_CHECKPOINT = "RestartFromCheckpoint"
    SUSPEND = "Suspend"
    REPLACE_STRAGGLER = "ReplaceStraggler"
    TUNE_INPUT_PIPELINE = "TuneInputPipeline"


RECOMMEND_ONLY = frozenset({ActionKind.REPLACE_STRAGGLER, ActionKind.TUNE_INPUT_PIPELINE})
"""Actions the operator recommends but never applies (they need a person or the user's code)."""


class Mode(StrEnum):
    """spec.remediation.mode."""

    AUTO = "Auto"
    RECOMMEND = "Recommend"
    OFF = "Off"


PRIORITY: tuple[FindingKind, ...] = (
    FindingKind.OVER_BUDGET,
    FindingKind.LOSS_DIVERGED,
    FindingKind.STALLED,
    FindingKind.MEMORY_LEAK,
    FindingKind.STRAGGLER,
    FindingKind.DATA_STARVATION,
    FindingKind.THROUGHPUT_REGRESSION,
    FindingKind.IDLE_GPU,
)
"""The order of finding kinds; ``precedence`` refines it with what each action can fix."""

CHANGE_TIE_S = 120.0
"""A ThroughputRegression whose episode starts this soon after a commit or settings change is that change's."""

UNCORROBORATED_STALL_METRIC = "seconds_since_last_step"
"""The metric of a Stalled finding resting on the silence alone (``findings.classify``'s fallback)."""


def precedence(finding: Finding, changes: Sequence[datetime] = ()) -> tuple[int, int]:
    """Sort key: the finding whose action can fix the most comes first. The one place that orders findings.

    1. OverBudget (reported only: the cost part enforces budgets), 2. LossDiverged (every further step is
    wasted: suspend), 3. Stalled with corroboration (a hang: nothing trains; restart), 4. ThroughputRegression
    that starts at a commit or settings change (``CHANGE_TIE_S``): revert, even when memory, utilization or
    input speed moved with it, since those may be the change's symptoms and a restart cannot undo a change;
    if there is nothing to revert the next finding is tried), 5. MemoryLeak (restart before the device fills),
    6. Straggler, 7. DataStarvation (recommended only), 8. ThroughputRegression with no change behind it,
    9. IdleGPU (scale down), 10. Stalled on the silence alone (the GPUs may simply be idle: scaling down comes
    first, a restart only when it cannot)."""
    kind_rank = PRIORITY.index(finding.kind) if finding.kind in PRIORITY else len(PRIORITY)
    if finding.kind is FindingKind.THROUGHPUT_REGRESSION and any(
        timedelta(0) <= finding.since - c <= timedelta(seconds=CHANGE_TIE_S) for c in changes
    ):
        return (PRIORITY.index(FindingKind.STALLED), 1)
    if finding.kind is FindingKind.STALLED and finding.metric == UNCORROBORATED_STALL_METRIC:
        return (len(PRIORITY), 0)
    return (kind_rank, 0)


SETTINGS_FIELDS = ("compile", "precision", "distributed")
"""The spec fields a RevertSettings action restores."""


@dataclass(frozen=True)
class Finding:
    """An anomaly that may call for an action."""

    kind: FindingKind
    """What was seen."""
    metric: str
    """The series it was seen on (a metric name or a derived series name)."""
    since: datetime
    """When the episode started (UTC); an action id is derived from it, so one episode gets one action."""
    message: str
    """Human-readable evidence (observed vs expected)."""


@dataclass(frozen=True)
class Intent:
    """An action recorded before it is applied (persisted on the job)."""

    id: str
    """Stable id: kind + finding kind + episode start."""
    action: ActionKind
    """The action."""
    at: datetime
    """When it was decided."""
    target: Mapping[str, Any]
    """The desired end state (e.g. {"replicas": 2} or {"suspend": True}); re-applying it is harmless."""
    reason: str
    """Why (shown in Events and status)."""
    generation_before: int
    """metadata.generation when the action was decided."""
    done: bool = False
    """True once the action was applied."""
    generation_after: int | None = None
    """metadata.generation right after our patch (None for actions that do not change the spec)."""


@dataclass(frozen=True)
class History:
    """What the operator has done to this job before (from the job's annotation)."""

    intents: tuple[Intent, ...] = ()
    """Past and in-flight actions, oldest first (bounded by the caller)."""
    last_good_settings: Mapping[str, Any] | None = None
    """compile/precision/distributed of the last period without a throughput regression."""


@dataclass(frozen=True)
class PolicySettings:
    """Timing of the remediation loop."""

    stabilization_s: float = 300.0
    """At most one action per window of this many seconds (any kind)."""
    cooldown_s: float = 900.0
    """After an action, no action of the same kind for this many seconds."""


@dataclass(frozen=True)
class JobView:
    """The parts of a StaticTrainingJob the policy reads."""

    generation: int
    """metadata.generation."""
    spec: Mapping[str, Any]
    """spec (defaults applied by the API server)."""


@dataclass(frozen=True)
class Decision:
    """The outcome of one evaluation."""

    apply: Intent | None
    """An action to apply now (Auto mode), recorded first as an intent."""
    recommend: Intent | None
    """An action that would be applied in Auto mode (Recommend mode)."""
    condition_status: str
    """'True' when remediation is able to act, 'False' when it is blocked (see reason)."""
    reason: str
    """PascalCase reason for the Remediation condition."""
    message: str
    """What happened or what to fix."""
    complete: Intent | None = None
    """An in-flight intent from before a restart to finish (apply its target, then mark done)."""


def intent_id(action: ActionKind, finding: Finding) -> str:
    """Stable id of the action for a finding's episode."""
    raw = f"{action.value}|{finding.kind.value}|{finding.metric}|{finding.since.isoformat()}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def plan_action(finding: Finding, job: JobView, history: History) -> tuple[ActionKind, dict[str, Any]] | str:
    """The action and its target for a finding, or a message saying why there is none."""
    spec = job.spec
    if finding.kind is FindingKind.OVER_BUDGET:
        return "budgets are enforced by the cost part (spec.budget.onExceeded), not by remediation"
    if finding.kind in (FindingKind.STALLED, FindingKind.MEMORY_LEAK):
        return ActionKind.RESTART_FROM_CHECKPOINT, {"podsCreatedBefore": finding.since.isoformat()}
    if finding.kind is FindingKind.LOSS_DIVERGED:
        return "already suspended" if spec.get("suspend", False) else (ActionKind.SUSPEND, {"suspend": True})
    if finding.kind is FindingKind.STRAGGLER:
        return ActionKind.REPLACE_STRAGGLER, {"series": finding.metric}
    if finding.kind is FindingKind.DATA_STARVATION:
        return ActionKind.TUNE_INPUT_PIPELINE, {}
    if finding.kind is FindingKind.THROUGHPUT_REGRESSION:
        good = history.last_good_settings
        if not good:
            return "no earlier settings are known to be good: nothing to revert to"
        current = {k: spec.get(k) for k in SETTINGS_FIELDS if k in good}
        if current == dict(good):
            return "the settings are already the last good ones: the regression has another cause"
        return ActionKind.REVERT_SETTINGS, dict(good)
    if finding.kind is FindingKind.IDLE_GPU:
        elastic = spec.get("elastic")
        if not elastic:
            return "the job is not elastic (spec.elastic unset): replicas cannot change"
        replicas = int(spec.get("replicas", 1))
        low = int(elastic.get("minReplicas", 1))
        if replicas <= low:
            return f"already at elastic.minReplicas ({low})"
        return ActionKind.SCALE_DOWN, {"replicas": max(low, replicas - max(1, (replicas - low + 1) // 2))}
    return f"{finding.kind.value} is reported only"


def decide(
    *,
    mode: Mode,
    now: datetime,
    findings: Sequence[Finding],
    data_problem: str | None,
    job: JobView,
    history: History,
    settings: PolicySettings,
    changes: Sequence[datetime] = (),
) -> Decision:
    """Decide what to do now. ``data_problem`` says why the metrics cannot be trusted (None: they can);
    ``changes``: when the job's commit or settings changed (see ``precedence``)."""
    if mode is Mode.OFF:
        return Decision(None, None, "False", "RemediationOff", "spec.remediation.mode is Off")
    pending = next((i for i in reversed(history.intents) if not i.done), None)
    if pending is not None and mode is Mode.AUTO:
        return Decision(
            None,
            None,
            "True",
            "CompletingAction",
            f"finishing {pending.action.value} decided at {pending.at.isoformat()}: {pending.reason}",
            complete=pending,
        )
    if data_problem is not None:
        return Decision(
            None, None, "False", "MetricsUnavailable", f"no action while metrics are missing: {data_problem}"
        )
    ranked = sorted(findings, key=lambda f: precedence(f, changes))
    done = [i for i in history.intents if i.done]
    last = done[-1] if done else None
    if last is not None and last.generation_after is not None and job.generation > last.generation_after:
        window_end = last.at + timedelta(seconds=settings.cooldown_s)
        if now < window_end:
            return Decision(
                None,
                None,
                "False",
                "UserEditWins",
                f"the spec changed after {last.action.value} at {last.at.isoformat()}: "
                f"no action before {window_end.isoformat()}",
            )
    blocked: list[str] = []
    for finding in ranked:
        plan = plan_action(finding, job, history)
        if isinstance(plan, str):
            blocked.append(f"{finding.kind.value}: {plan}")
            continue
        action, target = plan
        ident = intent_id(action, finding)
        if any(i.id == ident for i in history.intents):
            blocked.append(f"{finding.kind.value}: {action.value} already applied for this episode")
            continue
        if last is not None and now < last.at + timedelta(seconds=settings.stabilization_s):
            blocked.append(
                f"{finding.kind.value}: one action per {settings.stabilization_s:g} s window "
                f"(last {last.action.value} at {last.at.isoformat()})"
            )
            continue
        same = [i for i in done if i.action is action]
        if same and now < same[-1].at + timedelta(seconds=settings.cooldown_s):
            blocked.append(
                f"{finding.kind.value}: {action.value} cooling down until "
                f"{(same[-1].at + timedelta(seconds=settings.cooldown_s)).isoformat()}"
            )
            continue
        intent = Intent(
            ident,
            action,
            now,
            target,
            f"{finding.kind.value} on {finding.metric}: {finding.message}",
            job.generation,
        )
        if mode is Mode.AUTO and action not in RECOMMEND_ONLY:
            return Decision(intent, None, "True", "ActionApplied", f"{action.value}: {intent.reason}")
        if action in RECOMMEND_ONLY:
            return Decision(None, intent, "True", "ActionRecommended", f"recommend {action.value}: {intent.reason}")
        return Decision(
            None, intent, "True", "ActionRecommended", f"would {action.value} in Auto mode: {intent.reason}"
        )
    if blocked:
        return Decision(None, None, "True", "NoAction", "; ".join(blocked))
    return Decision(None, None, "True", "Healthy", "no anomaly calls for an action")
