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


KEY = ("team-nlp", "gpt2")
FIGURES = {
    "step": {KEY: 100.0},
    "step_seconds": {KEY: 0.5},
    "step_seconds_mean": {KEY: 0.9},
    "tokens_per_second": {KEY: 2000.4},
    "compile_seconds": {KEY: 41.25},
    "compile_cache_hit": {KEY: 1.0},
    "graph_breaks": {KEY: 2.0},
    "recompiles": {KEY: 0.0},
}


def job(status: dict[str, object] | None = None, max_steps: int | None = 1000) -> dict[str, object]:
    spec = {"training": {"maxSteps": max_steps}} if max_steps else {}
    return {"metadata": {"namespace": KEY[0], "name": KEY[1]}, "spec": spec, "status": status or {}}


def test_queries_name_the_sidecar_metrics_and_group_by_job() -> None:
    q = progress.queries(60)
    # the highest step in the window: a finished job's last step survives its sidecar's removal
    assert q["step"] == "max by (namespace, job_name) (max_over_time(statictrain_train_step[60000ms]))"
    assert "rate(statictrain_train_step_seconds_sum[60000ms])" in q["step_seconds"]
    assert q["tokens_per_second"] == "sum by (namespace, job_name) (statictrain_train_tokens_per_second)"


@pytest.mark.parametrize(
    ("figures", "want"),
    [
        pytest.param(FIGURES, progress.Report(100, 0.5, 2000.4, 1000), id="all-figures"),
        pytest.param(
            {**FIGURES, "step_seconds": {}}, progress.Report(100, 0.9, 2000.4, 1000), id="no-rate-uses-mean"
        ),
        pytest.param({**FIGURES, "tokens_per_second": {KEY: math.nan}}, progress.Report(100, 0.5, 0.0, 1000),
                     id="nan-tokens-are-zero"),
        pytest.param({**FIGURES, "step": {}}, None, id="no-step-yet"),
        pytest.param({**FIGURES, "step": {("other", "gpt2"): 5.0}}, None, id="other-namespace"),
    ],
)
def test_report_of(figures: progress.Figures, want: progress.Report | None) -> None:
    assert progress.report_of(figures, KEY, 1000) == want


def test_compile_status_from_figures() -> None:
    assert progress.compile_status(FIGURES, KEY) == {
        "seconds": "41.250",
        "cacheHit": True,
        "graphBreaks": 2,
        "recompiles": 0,
    }
    assert progress.compile_status({}, KEY) is None


def test_status_patch_writes_progress_and_compile_then_nothing_when_unchanged() -> None:
    patch = progress.status_patch(job(), FIGURES, NOW)
    assert patch is not None
    assert patch["progress"]["step"] == 100 and patch["progress"]["etaSeconds"] == 450
    assert patch["compile"]["cacheHit"] is True
    later = datetime(2026, 1, 2, 3, 5, 0, tzinfo=UTC)
    assert progress.status_patch(job(patch), FIGURES, later) is None


def test_status_patch_leaves_finished_jobs_alone() -> None:
    assert progress.status_patch(job({"phase": "Succeeded"}), FIGURES, NOW) is None


def test_status_patch_without_max_steps_has_no_eta() -> None:
    patch = progress.status_patch(job(max_steps=None), FIGURES, NOW)
    assert patch is not None and "etaSeconds" not in patch["progress"]
