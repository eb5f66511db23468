"""Remediation decisions as tables: mode, missing data, in-flight intents, user edits, windows, cooldowns."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from statictrain_operator.anomaly import actions
from statictrain_operator.anomaly.remediation import (
    RECOMMEND_ONLY,
    ActionKind,
    Finding,
    FindingKind,
    History,
    Intent,
    JobView,
    Mode,
    PolicySettings,
    decide,
    intent_id,
)

from tests.fakes.kube import FakeKube

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
POLICY = PolicySettings(stabilization_s=300, cooldown_s=900)
GOOD = {"compile": {"mode": "default"}, "precision": "bf16"}
SPEC: dict[str, Any] = {
    "replicas": 8,
    "elastic": {"minReplicas": 2, "maxReplicas": 8},
    "compile": {"mode": "max-autotune"},
    "precision": "bf16",
    "budget": {"limitUSD": "100", "onExceeded": "Suspend"},
    "suspend": False,
}


def finding(kind: FindingKind, minutes_ago: int = 5) -> Finding:
    return Finding(kind, "m", NOW - timedelta(minutes=minutes_ago), "evidence")


def done(action: ActionKind, minutes_ago: int, gen_after: int | None = 3) -> Intent:
    return Intent(
        f"old-{action.value}-{minutes_ago}",
        action,
        NOW - timedelta(minutes=minutes_ago),
        {},
        "r",
        2,
        done=True,
        generation_after=gen_after,
    )


@dataclass
class Case:
    mode: Mode = Mode.AUTO
    findings: list[Finding] = field(default_factory=list)
    problem: str | None = None
    spec: dict[str, Any] = field(default_factory=lambda: dict(SPEC))
    generation: int = 3
    intents: tuple[Intent, ...] = ()
    good: dict[str, Any] | None = None
    want_reason: str = ""
    want_apply: ActionKind | None = None
    want_recommend: ActionKind | None = None
    want_target: dict[str, Any] | None = None
    want_complete: bool = False


CASES = {
    "off-does-nothing": Case(mode=Mode.OFF, findings=[finding(FindingKind.IDLE_GPU)], want_reason="RemediationOff"),
    "healthy": Case(want_reason="Healthy"),
    "missing-data-fails-closed": Case(
        findings=[finding(FindingKind.IDLE_GPU)], problem="Prometheus down", want_reason="MetricsUnavailable"
    ),
    "idle-shrinks-halfway-to-min": Case(
        findings=[finding(FindingKind.IDLE_GPU)],
        want_reason="ActionApplied",
        want_apply=ActionKind.SCALE_DOWN,
        want_target={"replicas": 5},
    ),
    "idle-at-min-no-action": Case(
        findings=[finding(FindingKind.IDLE_GPU)], spec={**SPEC, "replicas": 2}, want_reason="NoAction"
    ),
    "idle-not-elastic-no-action": Case(
        findings=[finding(FindingKind.IDLE_GPU)],
        spec={k: v for k, v in SPEC.items() if k != "elastic"},
        want_reason="NoAction",
    ),
    "regression-reverts-to-last-good": Case(
        findings=[finding(FindingKind.THROUGHPUT_REGRESSION)],
        good=GOOD,
        want_reason="ActionApplied",
        want_apply=ActionKind.REVERT_SETTINGS,
        want_target=GOOD,
    ),
    "regression-without-good-settings": Case(
        findings=[finding(FindingKind.THROUGHPUT_REGRESSION)], want_reason="NoAction"
    ),
    "regression-already-on-good-settings": Case(
        findings=[finding(FindingKind.THROUGHPUT_REGRESSION)],
        good={"compile": {"mode": "max-autotune"}, "precision": "bf16"},
        want_reason="NoAction",
    ),
    "stalled-restarts": Case(
        findings=[finding(FindingKind.STALLED)],
        want_reason="ActionApplied",
        want_apply=ActionKind.RESTART_FROM_CHECKPOINT,
    ),
    "over-budget-is-the-cost-parts-to-enforce": Case(
        findings=[finding(FindingKind.OVER_BUDGET)],
        spec={**SPEC, "budget": {"limitUSD": "1", "onExceeded": "Suspend"}},
        want_reason="NoAction",
    ),
    "over-budget-does-not-block-other-actions": Case(
        findings=[finding(FindingKind.IDLE_GPU), finding(FindingKind.OVER_BUDGET)],
        want_reason="ActionApplied",
        want_apply=ActionKind.SCALE_DOWN,
    ),
    "cost-spike-reported-only": Case(findings=[finding(FindingKind.COST_SPIKE)], want_reason="NoAction"),
    "recommend-mode-does-not-apply": Case(
        mode=Mode.RECOMMEND,
        findings=[finding(FindingKind.IDLE_GPU)],
        want_reason="ActionRecommended",
        want_recommend=ActionKind.SCALE_DOWN,
    ),
    "one-action-per-window": Case(
        findings=[finding(FindingKind.STALLED)],
        intents=(done(ActionKind.SCALE_DOWN, 2),),
        want_reason="NoAction",
    ),
    "after-window-other-kind-ok": Case(
        findings=[finding(FindingKind.STALLED)],
        intents=(done(ActionKind.SCALE_DOWN, 6),),
        want_reason="ActionApplied",
        want_apply=ActionKind.RESTART_FROM_CHECKPOINT,
    ),
    "same-kind-cooling-down": Case(
        findings=[finding(FindingKind.IDLE_GPU)],
        intents=(done(ActionKind.SCALE_DOWN, 10),),
        want_reason="NoAction",
    ),
    "same-kind-after-cooldown": Case(
        findings=[finding(FindingKind.IDLE_GPU)],
        intents=(done(ActionKind.SCALE_DOWN, 16),),
        want_reason="ActionApplied",
        want_apply=ActionKind.SCALE_DOWN,
    ),
    "user-edit-wins": Case(
        findings=[finding(FindingKind.IDLE_GPU)],
        generation=4,
        intents=(done(ActionKind.SCALE_DOWN, 6),),
        want_reason="UserEditWins",
    ),
    "user-edit-after-cooldown-is-old-news": Case(
        findings=[finding(FindingKind.IDLE_GPU)],
        generation=4,
        intents=(done(ActionKind.SCALE_DOWN, 16),),
        want_reason="ActionApplied",
        want_apply=ActionKind.SCALE_DOWN,
    ),
    "in-flight-intent-is-completed-not-redecided": Case(
        findings=[finding(FindingKind.STALLED)],
        intents=(Intent("x", ActionKind.SCALE_DOWN, NOW - timedelta(minutes=1), {"replicas": 5}, "r", 3),),
        want_reason="CompletingAction",
        want_complete=True,
    ),
    "in-flight-intent-completed-even-without-data": Case(
        problem="Prometheus down",
        intents=(Intent("x", ActionKind.SUSPEND, NOW - timedelta(minutes=1), {"suspend": True}, "r", 3),),
        want_reason="CompletingAction",
        want_complete=True,
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_decide(case: Case) -> None:
    d = decide(
        mode=case.mode,
        now=NOW,
        findings=case.findings,
        data_problem=case.problem,
        job=JobView(case.generation, case.spec),
        history=History(case.intents, case.good),
        settings=POLICY,
    )
    assert d.reason == case.want_reason, d.message
    assert (d.apply.action if d.apply else None) == case.want_apply
    assert (d.recommend.action if d.recommend else None) == case.want_recommend
    assert (d.complete is not None) == case.want_complete
    if case.want_target is not None:
        assert d.apply is not None and dict(d.apply.target) == case.want_target
    if d.apply is not None:
        assert d.apply.at == NOW and not d.apply.done and d.apply.generation_before == case.generation


def test_the_same_episode_is_never_acted_on_twice() -> None:
    f = finding(FindingKind.STALLED)
    first = decide(
        mode=Mode.AUTO,
        now=NOW,
        findings=[f],
        data_problem=None,
        job=JobView(3, SPEC),
        history=History(),
        settings=POLICY,
    )
    assert first.apply is not None
    applied = Intent(
        first.apply.id,
        first.apply.action,
        NOW - timedelta(hours=2),
        first.apply.target,
        "r",
        3,
        done=True,
        generation_after=None,
    )
    again = decide(
        mode=Mode.AUTO,
        now=NOW,
        findings=[f],
        data_problem=None,
        job=JobView(3, SPEC),
        history=History((applied,)),
        settings=POLICY,
    )
    assert again.apply is None and "already applied" in again.message
    assert first.apply.id == intent_id(ActionKind.RESTART_FROM_CHECKPOINT, f)


@pytest.mark.parametrize("action", sorted(RECOMMEND_ONLY))
def test_recommend_only_actions_are_never_written(action: ActionKind) -> None:
    """actions.apply refuses a recommend-only intent (its target is a hint, not a spec), writing nothing."""
    kube = FakeKube()
    intent = Intent("i", action, NOW, {"series": "rank=1"}, "slow rank", 1)
    with pytest.raises(ValueError, match="recommended only"):
        asyncio.run(actions.apply(kube, "ns", "job", intent))
    assert kube.writes == []


@pytest.mark.parametrize(
    ("present", "changed_minutes_ago", "want"),
    [
        # a regression that starts at a commit/settings change is reverted even when memory grows with it
        ([FindingKind.MEMORY_LEAK, FindingKind.THROUGHPUT_REGRESSION], 6, ActionKind.REVERT_SETTINGS),
        # ... but a regression with no change behind it leaves the leak its restart
        ([FindingKind.MEMORY_LEAK, FindingKind.THROUGHPUT_REGRESSION], None, ActionKind.RESTART_FROM_CHECKPOINT),
        # a change long before the regression started is not its cause
        ([FindingKind.MEMORY_LEAK, FindingKind.THROUGHPUT_REGRESSION], 60, ActionKind.RESTART_FROM_CHECKPOINT),
        # a hang still comes first: nothing trains
        ([FindingKind.STALLED, FindingKind.THROUGHPUT_REGRESSION], 6, ActionKind.RESTART_FROM_CHECKPOINT),
        ([FindingKind.DATA_STARVATION, FindingKind.THROUGHPUT_REGRESSION], 6, ActionKind.REVERT_SETTINGS),
        ([FindingKind.IDLE_GPU, FindingKind.THROUGHPUT_REGRESSION], 6, ActionKind.REVERT_SETTINGS),
    ],
    ids=[
        "regression-at-a-change-over-leak",
        "leak-over-regression-without-change",
        "change-too-early-to-be-the-cause",
        "hang-over-regression-at-a-change",
        "regression-at-a-change-over-starvation",
        "regression-at-a-change-over-idle",
    ],
)
def test_precedence_follows_what_each_action_can_fix(
    present: list[FindingKind], changed_minutes_ago: int | None, want: ActionKind
) -> None:
    changes = [] if changed_minutes_ago is None else [NOW - timedelta(minutes=changed_minutes_ago)]
    d = decide(
        mode=Mode.AUTO,
        now=NOW,
        findings=[finding(k) for k in present],
        data_problem=None,
        job=JobView(2, SPEC),
        history=History((), GOOD),
        settings=POLICY,
        changes=changes,
    )
    assert d.apply is not None and d.apply.action is want


@pytest.mark.parametrize(
    ("elastic", "want"),
    [(True, ActionKind.SCALE_DOWN), (False, ActionKind.RESTART_FROM_CHECKPOINT)],
    ids=["idle-gpus-scale-down-first", "at-min-replicas-the-silence-gets-its-restart"],
)
def test_a_silent_job_is_scaled_down_before_a_restart_is_tried(elastic: bool, want: ActionKind) -> None:
    silent = Finding(FindingKind.STALLED, "seconds_since_last_step", NOW - timedelta(minutes=6), "no step")
    spec = SPEC if elastic else {**SPEC, "replicas": 2}
    d = decide(
        mode=Mode.AUTO,
        now=NOW,
        findings=[silent, finding(FindingKind.IDLE_GPU)],
        data_problem=None,
        job=JobView(2, spec),
        history=History(),
        settings=POLICY,
    )
    assert d.apply is not None and d.apply.action is want
