"""status.progress and status.compile from what the workers report (the sidecars' metrics): pure, no I/O."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from statictrain import api, metrics
from statictrain.conditions import timestamp
from statictrain.promql import mean_step_seconds, range_duration, selector


@dataclass(frozen=True)
class Report:
    """The latest training figures of a job (e.g. read from the sidecar's metrics)."""

    step: int
    step_seconds: float
    tokens_per_second: float = 0.0
    total_steps: int | None = None


def progress_status(report: Report, now: datetime) -> api.Progress:
    """status.progress for `report`; rates become integers or decimal strings, never floats.

    Raises ValueError naming the field when a figure is negative or not finite.
    """
    for name, value in (
        ("step", report.step),
        ("step_seconds", report.step_seconds),
        ("tokens_per_second", report.tokens_per_second),
    ):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"progress {name} must be a finite number >= 0, got {value!r}")
    out: api.Progress = {
        "step": report.step,
        "stepSeconds": f"{report.step_seconds:.3f}",
        "tokensPerSecond": round(report.tokens_per_second),
        "updated": timestamp(now),
    }
    if report.total_steps is not None:
        out["totalSteps"] = report.total_steps
        remaining = max(report.total_steps - report.step, 0)
        out["etaSeconds"] = math.ceil(remaining * report.step_seconds)
    return out


# ----------------------------------------------------------------------------- from the sidecars' metrics

JobKey = tuple[str, str]
"""(namespace, job name) as the sidecars label their metrics (namespace, job_name)."""
Figures = Mapping[str, Mapping[JobKey, float]]
"""Query name (a key of :func:`queries`) -> the latest value per job."""

_BY = "by (namespace, job_name)"


def queries(rate_window_s: float) -> dict[str, str]:
    """Name -> PromQL of every figure status.progress and status.compile need, one series per job.

    Selectors come from statictrain.promql; pods of one job are combined: the step
    is the furthest any pod reached, tokens per second add up (each pod reports
    its own share), step time is the mean over all pods' steps in the window.
    """
    w = range_duration(rate_window_s)
    hist_sum = selector(metrics.TRAIN_STEP_SECONDS + "_sum")
    hist_count = selector(metrics.TRAIN_STEP_SECONDS + "_count")
    by = ("namespace", "job_name")
    # The step is read as its highest value over the window, so a job whose
    # sidecars are gone (pods finished, target removed) still reports its final step.
    return {
        "step": f"max {_BY} (max_over_time({selector(metrics.TRAIN_STEP)}[{w}]))",
        "step_seconds": mean_step_seconds(rate_window_s, by=by),
        "step_seconds_mean": f"sum {_BY} ({hist_sum}) / sum {_BY} ({hist_count})",
        "tokens_per_second": f"sum {_BY} ({selector(metrics.TRAIN_TOKENS_PER_SECOND)})",
        "compile_seconds": f"max {_BY} ({selector(metrics.TRAIN_COMPILE_SECONDS)})",
        "compile_cache_hit": f"min {_BY} ({selector(metrics.TRAIN_COMPILE_CACHE_HIT)})",
        "graph_breaks": f"max {_BY} ({selector(metrics.TRAIN_GRAPH_BREAKS)})",
        "recompiles": f"max {_BY} ({selector(metrics.TRAIN_RECOMPILES)})",
    }


def _value(figures: Figures, name: str, key: JobKey) -> float | None:
    v = (figures.get(name) or {}).get(key)
    return v if v is not None and math.isfinite(v) and v >= 0 else None


def report_of(figures: Figures, key: JobKey, total_steps: int | None) -> Report | None:
    """The job's Report from the figures; None until its workers have reported a step."""
    step = _value(figures, "step", key)
    if step is None:
        return None
    step_s = _value(figures, "step_seconds", key)
    if step_s is None:
        step_s = _value(figures, "step_seconds_mean", key) or 0.0
    return Report(
        step=int(step),
        step_seconds=step_s,
        tokens_per_second=_value(figures, "tokens_per_second", key) or 0.0,
        total_steps=total_steps,
    )


def compile_status(figures: Figures, key: JobKey) -> api.CompileStatus | None:
    """status.compile from the figures; None when the workers have not reported a compile yet."""
    seconds = _value(figures, "compile_seconds", key)
    if seconds is None:
        return None
    out: api.CompileStatus = {"seconds": f"{seconds:.3f}"}
    hit = _value(figures, "compile_cache_hit", key)
    if hit is not None:
        out["cacheHit"] = hit >= 1
    for name, field in (("graph_breaks", "graphBreaks"), ("recompiles", "recompiles")):
        v = _value(figures, name, key)
        if v is not None:
            out[field] = int(v)  # type: ignore[literal-required]
    return out


def status_patch(job: Mapping[str, Any], figures: Figures, now: datetime) -> dict[str, Any] | None:
    """{"progress": ..., "compile": ...} for the job, or None when nothing changed (or nothing is known).

    Finished jobs keep the progress they ended with.
    """
    meta, spec = job.get("metadata") or {}, job.get("spec") or {}
    current = job.get("status") or {}
    if current.get("phase") in api.FINISHED_PHASES:
        return None
    key = (meta.get("namespace", ""), meta.get("name", ""))
    total = (spec.get("training") or {}).get("maxSteps")
    report = report_of(figures, key, total if isinstance(total, int) and total > 0 else None)
    patch: dict[str, Any] = {}
    if report is not None:
        new = progress_status(report, now)
        old = {k: v for k, v in (current.get("progress") or {}).items() if k != "updated"}
        if {k: v for k, v in new.items() if k != "updated"} != old:
            patch["progress"] = new
    comp = compile_status(figures, key)
    if comp is not None and comp != current.get("compile"):
        patch["compile"] = comp
    return patch or None
