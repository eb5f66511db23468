"""status.progress from what the workers report: pure, no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from statictrain import api

from .status import timestamp


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
