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


def test_queries_name_the_sidecar_metrics_and_group_by_pod() -> None:
    q = progress.queries(60)
    # the highest step in the window: a finished job's last step survives its sidecar's removal
    assert q["step"] == "max by (namespace, job_name, pod_uid) (max_over_time(statictrain_train_step[60000ms]))"
    assert q["step_rate_sum"] == (
        "sum by (namespace, job_name, pod_uid) (rate(statictrain_train_step_seconds_sum[60000ms]))"
    )
    assert q["tokens_per_second"] == "sum by (namespace, job_name, pod_uid) (statictrain_train_tokens_per_second)"
    assert all("by (namespace, job_name, pod_uid)" in v for v in q.values())


NS, JOB = KEY
OWN = {KEY: frozenset({"p1", "p2"})}


def test_job_figures_combine_the_jobs_own_pods_only() -> None:
    pods = {
        "step": {(NS, JOB, "p1"): 100.0, (NS, JOB, "p2"): 98.0, (NS, JOB, "evil"): 1e9, ("x", JOB, "p1"): 5e8},
        "step_rate_sum": {(NS, JOB, "p1"): 1.0, (NS, JOB, "p2"): 2.0, (NS, JOB, "evil"): 1e6},
        "step_rate_count": {(NS, JOB, "p1"): 2.0, (NS, JOB, "p2"): 4.0, (NS, JOB, "evil"): 1.0},
        "step_hist_sum": {(NS, JOB, "p1"): 9.0},
        "step_hist_count": {(NS, JOB, "p1"): 10.0},
        "tokens_per_second": {(NS, JOB, "p1"): 1000.0, (NS, JOB, "p2"): 1000.4, (NS, JOB, "p3"): 1e12},
        "compile_seconds": {(NS, JOB, "p1"): 41.25, (NS, JOB, "p2"): 3.0},
        "compile_cache_hit": {(NS, JOB, "p1"): 1.0, (NS, JOB, "p2"): 0.0, (NS, JOB, "evil"): 1.0},
        "graph_breaks": {(NS, JOB, "p2"): math.nan},
    }
    figures, strangers = progress.job_figures(pods, OWN)
    assert figures["step"] == {KEY: 100.0}
    assert figures["step_seconds"] == {KEY: 0.5}  # (1 + 2) s over (2 + 4) steps; evil's 10^6 s left out
    assert figures["step_seconds_mean"] == {KEY: 0.9}
    assert figures["tokens_per_second"] == {KEY: 2000.4}
    assert figures["compile_seconds"] == {KEY: 41.25} and figures["compile_cache_hit"] == {KEY: 0.0}
    assert figures["graph_breaks"] == {}  # NaN left out
    assert strangers == {KEY: {"evil", "p3"}, ("x", JOB): {"p1"}}  # p1 claiming namespace x is not x's pod
    assert progress.report_of(figures, KEY, 1000) == progress.Report(100, 0.5, 2000.4, 1000)


def test_a_job_without_listed_pods_gets_no_figures() -> None:
    pods = {"step": {(NS, JOB, "p1"): 100.0}, "tokens_per_second": {(NS, JOB, "p1"): 5.0}}
    figures, strangers = progress.job_figures(pods, {})
    assert progress.report_of(figures, KEY, None) is None and strangers == {KEY: {"p1"}}
    assert progress.status_patch(job(), figures, NOW) is None


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


def test_compile_status_says_what_runs_and_who_chose_it() -> None:
    tuned = {**FIGURES, "autotune_speedup": {KEY: 1.2423}}
    got = progress.compile_status(tuned, KEY, ("reduce-overhead@16+fp8", "autotune"))
    assert got is not None
    assert (got["settings"], got["chosenBy"], got["autotuneSpeedup"]) == ("reduce-overhead@16+fp8", "autotune", "1.242")
    spec = progress.compile_status(tuned, KEY, ("default@8", "spec"))  # a speedup without the tuner is not shown
    assert spec is not None and "autotuneSpeedup" not in spec and spec["chosenBy"] == "spec"


def test_job_settings_keep_the_jobs_own_pods_and_the_crds_bounds() -> None:
    pods = {
        (*KEY, "p1"): ("default@16", "autotune"),
        (*KEY, "p2"): ("x" * 500, "hacker"),
        (*KEY, "evil"): ("aaa", "spec"),
    }
    got = progress.job_settings(pods, {KEY: frozenset({"p1", "p2"})})
    assert got == {KEY: ("default@16", "autotune")}  # pods that disagree: the smallest, here the sane one
    (label, by), = progress.job_settings({(*KEY, "p2"): ("x" * 500, "hacker")}, {KEY: frozenset({"p2"})}).values()
    assert len(label) == progress.MAX_SETTINGS_CHARS and by == "other"


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
