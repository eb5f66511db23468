"""status.progress from worker reports."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from statictrain_operator import progress

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_progress_with_total_has_an_eta() -> None:
    got = progress.progress_status(
        progress.Report(step=100, step_seconds=0.25, tokens_per_second=491234.6, total_steps=1000), NOW
    )
    assert got == {
        "step": 100,
        "stepSeconds": "0.250",
        "tokensPerSecond": 491235,
        "totalSteps": 1000,
        "etaSeconds": 225,
        "updated": "2026-01-02T03:04:05Z",
    }


def test_progress_without_total_has_no_eta() -> None:
    got = progress.progress_status(progress.Report(step=5, step_seconds=1.0), NOW)
    assert "etaSeconds" not in got and "totalSteps" not in got


@pytest.mark.parametrize(
    ("report", "field"),
    [
        pytest.param(progress.Report(step=-1, step_seconds=1.0), "step", id="negative-step"),
        pytest.param(progress.Report(step=1, step_seconds=math.nan), "step_seconds", id="nan"),
        pytest.param(
            progress.Report(step=1, step_seconds=1.0, tokens_per_second=math.inf),
            "tokens_per_second",
            id="inf",
        ),
    ],
)
def test_bad_reports_are_refused_with_the_field_name(report: progress.Report, field: str) -> None:
    with pytest.raises(ValueError, match=f"progress {field} must be"):
        progress.progress_status(report, NOW)
