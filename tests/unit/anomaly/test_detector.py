"""The per-series detector on synthetic series: spikes, level shifts, idle stretches, flapping, bad values."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest
from statictrain_operator.anomaly.detector import (
    DetectorSettings,
    Method,
    Severity,
    append_bounded,
    as_status_item,
    assess,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
SMALL = DetectorSettings(prophet_min_points=10_000)  # force the robust baseline


def _series(values: list[float], step_s: float = 60.0) -> tuple[list[datetime], list[float]]:
    return [T0 + timedelta(seconds=i * step_s) for i in range(len(values))], values


def _noisy(n: int, level: float, sd: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level + rng.gauss(0, sd) for _ in range(n)]


@pytest.mark.parametrize(
    ("name", "tail", "want_severity", "want_sign"),
    [
        ("steady", [1.0] * 5, None, 0),
        ("3x-step-time", [3.0] * 5, Severity.CRITICAL, 1),
        ("idle-drop", [0.0] * 5, Severity.CRITICAL, -1),
        ("one-spike-in-five", [1.0, 1.0, 1.0, 1.0, 1.6], None, 0),
    ],
    ids=["steady", "3x-step-time", "idle-drop", "one-spike-in-five"],
)
def test_robust_baseline_judges_recent_records(
    name: str, tail: list[float], want_severity: Severity | None, want_sign: int
) -> None:
    ts, ys = _series(_noisy(60, 1.0, 0.05, seed=1) + tail)
    a = assess(name, ts, ys, SMALL)
    assert a.method is Method.ROBUST
    assert a.severity == want_severity
    if want_sign:
        assert math.copysign(1, a.z) == want_sign
        assert a.since == ts[-5]


def test_an_episode_longer_than_the_recent_window_keeps_its_start() -> None:
    """A step-time shift that began 8 points ago, judged after 8, 9 and 12 points: the start is the shift's
    first point each time, not the first of the last five (an action id is derived from it)."""
    base = _noisy(60, 1.0, 0.05, seed=1)
    starts = set()
    for n in (8, 9, 12):
        ts, ys = _series(base + [3.0] * n)
        a = assess("s", ts, ys, SMALL)
        assert a.severity is Severity.CRITICAL
        starts.add(a.since)
    assert starts == {T0 + timedelta(seconds=60 * 60)}


def test_too_short_series_is_insufficient_not_anomalous() -> None:
    ts, ys = _series([1.0, 50.0, 1.0])
    a = assess("x", ts, ys, SMALL)
    assert (a.method, a.severity, a.score) == (Method.INSUFFICIENT, None, 0.0)
    assert "too few" in a.message


def test_nan_and_inf_are_dropped_per_series() -> None:
    ts, ys = _series(_noisy(40, 5.0, 0.1, seed=2) + [math.nan, math.inf] + [5.0] * 5)
    a = assess("x", ts, ys, SMALL)
    assert a.points == 45
    assert a.severity is None


def test_flapping_series_is_not_anomalous() -> None:
    # Alternating 1 and 2 forever: the spread absorbs it.
    ts, ys = _series([1.0 + (i % 2) for i in range(80)])
    a = assess("flap", ts, ys, SMALL)
    assert a.severity is None


def test_prophet_learns_daily_seasonality_and_flags_a_level_shift() -> None:
    n = 4 * 288  # four days at 5 min
    base = [10 + 3 * math.sin(2 * math.pi * i / 288) for i in range(n)]
    ts, ys = _series(base, step_s=300)
    seasonal = assess("s", ts, ys, DetectorSettings())
    assert seasonal.method is Method.PROPHET
    assert seasonal.severity is None
    shifted = base[:-5] + [v + 6 for v in base[-5:]]
    a = assess("s", ts, shifted, DetectorSettings())
    assert a.severity is Severity.CRITICAL and a.z > 0


def test_mismatched_lengths_are_rejected() -> None:
    with pytest.raises(ValueError, match="timestamps"):
        assess("x", [T0], [1.0, 2.0], SMALL)


def test_status_items_are_bounded_and_one_per_episode() -> None:
    ts, ys = _series(_noisy(60, 1.0, 0.05, seed=1) + [3.0] * 5)
    a = assess("step_seconds", ts, ys, SMALL)
    assert a.since is not None
    item = as_status_item(a, a.since, "RevertSettings")
    assert item["score"] == f"{a.score:.3f}" and isinstance(item["score"], str)
    items = append_bounded([], [item])
    assert append_bounded(items, [dict(item, score="0.999")]) == [dict(item, score="0.999")]
    many = [dict(item, time=f"2026-03-01T00:{i:02d}:00Z") for i in range(30)]
    assert len(append_bounded(items, many, limit=20)) == 20


def test_settings_reject_bad_values() -> None:
    with pytest.raises(ValueError, match="interval_width"):
        DetectorSettings(interval_width=1.5)
    with pytest.raises(ValueError, match="info_score"):
        DetectorSettings(info_score=0.9, warning_score=0.5)
