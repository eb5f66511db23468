"""status.progress and status.compile from what the workers report (the sidecars' metrics): pure, no I/O."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from statictrain import api, channel, metrics
from statictrain.conditions import timestamp
from statictrain.promql import range_duration, selector

from statictrain_operator.workerpods import POD_UID


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
SeriesKey = tuple[str, str, str]
"""(namespace, job_name, pod_uid) of one pod's figure."""
PodFigures = Mapping[str, Mapping[SeriesKey, float]]
"""Query name (a key of :func:`queries`) -> the latest value per pod."""
Figures = Mapping[str, Mapping[JobKey, float]]
"""Figure name (step, step_seconds, step_seconds_mean, tokens_per_second, compile_*...) -> value per job."""

BY = ("namespace", "job_name", POD_UID)
_BY = f"by ({', '.join(BY)})"
_COMBINE: dict[str, Callable[[Iterable[float]], float]] = {
    "step": max,
    "step_rate_sum": sum,
    "step_rate_count": sum,
    "step_hist_sum": sum,
    "step_hist_count": sum,
    "tokens_per_second": sum,
    "compile_seconds": max,
    "compile_cache_hit": min,
    "graph_breaks": max,
    "recompiles": max,
    "autotune_speedup": min,
}
"""How the pods of one job combine: the step is the furthest any pod reached, tokens per second add up
(each pod reports its own share), step time is the sum of the pods' step seconds over the sum of their
steps, compile figures the worst pod's."""


def queries(rate_window_s: float) -> dict[str, str]:
    """Name -> PromQL of every figure status.progress and status.compile need, one series per pod
    (``by (namespace, job_name, pod_uid)``): :func:`job_figures` keeps the job's own pods and combines them.

    Selectors come from statictrain.promql. The step is read as its highest value
    over the window, so a job whose sidecars are gone (pods finished, target
    removed) still reports its final step.
    """
    w = range_duration(rate_window_s)
    hist_sum = selector(metrics.TRAIN_STEP_SECONDS + "_sum")
    hist_count = selector(metrics.TRAIN_STEP_SECONDS + "_count")
    return {
        "step": f"max {_BY} (max_over_time({selector(metrics.TRAIN_STEP)}[{w}]))",
        "step_rate_sum": f"sum {_BY} (rate({hist_sum}[{w}]))",
        "step_rate_count": f"sum {_BY} (rate({hist_count}[{w}]))",
        "step_hist_sum": f"sum {_BY} ({hist_sum})",
        "step_hist_count": f"sum {_BY} ({hist_count})",
        "tokens_per_second": f"sum {_BY} ({selector(metrics.TRAIN_TOKENS_PER_SECOND)})",
        "compile_seconds": f"max {_BY} ({selector(metrics.TRAIN_COMPILE_SECONDS)})",
        "compile_cache_hit": f"min {_BY} ({selector(metrics.TRAIN_COMPILE_CACHE_HIT)})",
        "graph_breaks": f"max {_BY} ({selector(metrics.TRAIN_GRAPH_BREAKS)})",
        "recompiles": f"max {_BY} ({selector(metrics.TRAIN_RECOMPILES)})",
        "autotune_speedup": f"min {_BY} ({selector(metrics.TRAIN_AUTOTUNE_SPEEDUP)})",
    }


SETTINGS_QUERY = f"max by ({', '.join(BY)}, settings, chosen_by) ({selector(metrics.TRAIN_SETTINGS_INFO)})"
"""What each pod's trainer runs with (labels settings and chosen_by): :func:`job_settings` reads it."""
MAX_SETTINGS_CHARS = channel.MAX_STR_CHARS
"""status.compile.settings' maxLength in the CRD: the longest text a trainer can say on the channel."""
Settings = tuple[str, api.ChosenBy]
"""(settings, chosen_by) as the sidecar labels them: ``reduce-overhead@16+fp8``, ``autotune``."""


def job_settings(
    pods: Mapping[SeriesKey, tuple[str, str]], uids: Mapping[JobKey, frozenset[str]]
) -> dict[JobKey, Settings]:
    """The settings each job's own pods run with (as :func:`job_figures`, only its listed pods count).
    Rank 0 chooses for every pod, so they agree; while they do not (pods of two attempts) the
    smallest is shown."""
    out: dict[JobKey, Settings] = {}
    for (ns, job, uid), (label, by) in pods.items():
        key = (ns, job)
        chosen: api.ChosenBy = "spec" if by == "spec" else "autotune" if by == "autotune" else "other"
        value = (label[:MAX_SETTINGS_CHARS], chosen)  # within the CRD's bounds
        if uid in uids.get(key, frozenset()) and (key not in out or value < out[key]):
            out[key] = value
    return out


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def job_figures(
    pods: PodFigures, uids: Mapping[JobKey, frozenset[str]]
) -> tuple[dict[str, dict[JobKey, float]], dict[JobKey, set[str]]]:
    """(figures per job, pod UIDs that claimed a job without being its pods').

    A pod's figure counts for a job only when its series carries the job's
    namespace and job_name AND its pod_uid is one of the job's worker pods in
    ``uids`` (workerpods.worker_uids: why, there); a job without listed pods
    gets no figures. Non-finite or negative values are left out.
    """
    kept: dict[str, dict[JobKey, list[float]]] = {}
    strangers: dict[JobKey, set[str]] = {}
    for name, values in pods.items():
        if name not in _COMBINE:
            continue
        for (ns, job, uid), v in values.items():
            key = (ns, job)
            if uid not in uids.get(key, frozenset()):
                strangers.setdefault(key, set()).add(uid)
            elif math.isfinite(v) and v >= 0:
                kept.setdefault(name, {}).setdefault(key, []).append(v)
    combined = {name: {k: _COMBINE[name](vs) for k, vs in per_job.items()} for name, per_job in kept.items()}
    out: dict[str, dict[JobKey, float]] = {
        n: combined.get(n, {})
        for n in (
            "step",
            "tokens_per_second",
            "compile_seconds",
            "compile_cache_hit",
            "graph_breaks",
            "recompiles",
            "autotune_speedup",
        )
    }
    for target, (num, den) in (
        ("step_seconds", ("step_rate_sum", "step_rate_count")),
        ("step_seconds_mean", ("step_hist_sum", "step_hist_count")),
    ):
        nums, dens = combined.get(num, {}), combined.get(den, {})
        out[target] = {k: r for k in nums if (r := _ratio(nums.get(k), dens.get(k))) is not None}
    return out, strangers


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


def compile_status(figures: Figures, key: JobKey, settings: Settings | None = None) -> api.CompileStatus | None:
    """status.compile from the figures and the settings the pods run with; None when the workers have
    not reported a compile yet."""
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
    if settings is not None:
        out["settings"], out["chosenBy"] = settings
        speedup = _value(figures, "autotune_speedup", key)
        if settings[1] == "autotune" and speedup is not None:
            out["autotuneSpeedup"] = f"{speedup:.3f}"
    return out


def status_patch(
    job: Mapping[str, Any], figures: Figures, now: datetime, settings: Mapping[JobKey, Settings] | None = None
) -> dict[str, Any] | None:
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
    comp = compile_status(figures, key, (settings or {}).get(key))
    if comp is not None and comp != current.get("compile"):
        patch["compile"] = comp
    return patch or None
