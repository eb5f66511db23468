"""Remediation history (annotation JSON, last-good settings) and findings from judged series."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from statictrain_operator.anomaly import history as hist
from statictrain_operator.anomaly.detector import Assessment, Method, Severity
from statictrain_operator.anomaly.findings import FindingSettings, classify
from statictrain_operator.anomaly.remediation import ActionKind, FindingKind, History, Intent

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SETTLE = timedelta(minutes=10)


def test_history_round_trips_and_is_bounded() -> None:
    intents = tuple(
        Intent(f"id{i}", ActionKind.SCALE_DOWN, NOW, {"replicas": 2}, "why", 1, done=True, generation_after=2)
        for i in range(15)
    )
    rec = hist.Record(History(intents, {"precision": "bf16"}), ("a",), {"precision": "fp32"}, NOW)
    back = hist.loads(hist.dumps(rec))
    assert len(back.history.intents) == hist.MAX_INTENTS
    assert back.history.intents[-1] == intents[-1]
    assert back.history.last_good_settings == {"precision": "bf16"}
    assert (back.recommended, back.candidate, back.candidate_since) == (("a",), {"precision": "fp32"}, NOW)


def test_unreadable_history_says_how_to_reset() -> None:
    with pytest.raises(ValueError, match="delete the annotation"):
        hist.loads("{not json")
    assert hist.loads(None).history.intents == ()


def test_with_intent_replaces_same_id() -> None:
    i = Intent("x", ActionKind.SUSPEND, NOW, {"suspend": True}, "r", 1)
    rec = hist.with_intent(hist.with_intent(hist.Record(History()), i), Intent(**{**i.__dict__, "done": True}))
    assert [x.done for x in rec.history.intents] == [True]


def test_settings_become_good_only_after_settling_healthy() -> None:
    a = {"precision": "bf16"}
    rec = hist.track_good_settings(hist.Record(History()), a, True, NOW, SETTLE)
    assert rec.history.last_good_settings is None and rec.candidate == a
    rec = hist.track_good_settings(rec, a, True, NOW + timedelta(minutes=5), SETTLE)
    assert rec.history.last_good_settings is None
    rec = hist.track_good_settings(rec, a, True, NOW + timedelta(minutes=10), SETTLE)
    assert rec.history.last_good_settings == a and rec.candidate is None
    # New settings that regress never replace the good ones.
    b = {"precision": "fp32"}
    rec = hist.track_good_settings(rec, b, True, NOW + timedelta(minutes=11), SETTLE)
    rec = hist.track_good_settings(rec, b, False, NOW + timedelta(minutes=30), SETTLE)
    assert rec.history.last_good_settings == a and rec.candidate is None


def _a(name: str, sev: Severity | None, z: float, observed: float = 1.0, expected: float = 1.0) -> Assessment:
    return Assessment(name, Method.ROBUST, 0.95 if sev else 0.1, sev, observed, expected, z, NOW if sev else None, 100)


@pytest.mark.parametrize(
    ("name", "assessments", "since_last_step", "cost", "want"),
    [
        ("nothing", {"step_seconds": _a("step_seconds", None, 0.3)}, 1.0, None, []),
        (
            "slower-steps",
            {"step_seconds": _a("step_seconds", Severity.CRITICAL, 8.0)},
            1.0,
            None,
            [FindingKind.THROUGHPUT_REGRESSION],
        ),
        (
            "faster-steps-are-fine",
            {"step_seconds": _a("step_seconds", Severity.CRITICAL, -8.0)},
            1.0,
            None,
            [],
        ),
        (
            "longer-steps-of-a-larger-batch-with-the-same-tokens-per-second-are-fine",
            {
                "step_seconds": _a("step_seconds", Severity.CRITICAL, 8.0),
                "tokens_per_second": _a("tokens_per_second", None, 0.2),
            },
            1.0,
            None,
            [],
        ),
        (
            "fewer-tokens",
            {"tokens_per_second": _a("tokens_per_second", Severity.WARNING, -5.0)},
            None,
            None,
            [FindingKind.THROUGHPUT_REGRESSION],
        ),
        (
            "low-utilization-alone-is-left-to-faults-idle",  # which also needs steps before and memory held
            {"gpu_utilization": _a("gpu_utilization", None, 0.0, observed=0.01)},
            None,
            None,
            [],
        ),
        (
            "stalled",
            {"step_seconds": _a("step_seconds", None, 0.0, expected=2.0)},
            400.0,
            None,
            [FindingKind.STALLED],
        ),
        (
            "slow-but-not-stalled",
            {"step_seconds": _a("step_seconds", None, 0.0, expected=30.0)},
            400.0,
            None,
            [],
        ),
        ("over-budget", {}, None, "100.000001", [FindingKind.OVER_BUDGET]),
        ("under-budget", {}, None, "99.999999", []),
        (
            "cost-spike",
            {"cost_usd_per_hour": _a("cost_usd_per_hour", Severity.WARNING, 6.0)},
            None,
            None,
            [FindingKind.COST_SPIKE],
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and not v[0].isdigit() else "",
)
def test_classify(
    name: str,
    assessments: dict[str, Assessment],
    since_last_step: float | None,
    cost: str | None,
    want: list[FindingKind],
) -> None:
    got = classify(
        assessments,
        now=NOW,
        commit=None,
        seconds_since_last_step=since_last_step,
        cost_usd=cost,
        budget_usd="100" if cost else None,
        settings=FindingSettings(),
    )
    assert [f.kind for f in got] == want
