"""Cost to finish (pure): cost so far + remaining steps x the job's measured cost per step.

The cost per step is the latest steady window's: the cost of the time the job's
step counters span in that window divided by the steps it executed, i.e. its
current burn rate times its measured step time, free of compile, restarts and
stalls. Before the first steady window, this window's cost per step stands in
(compile time excluded, but not start-up, stalls or restarts), else the mean cost
per step so far (everything included, so it projects high); the basis says which.

Remaining steps: ``spec.training.maxSteps`` minus the job's step; for
``maxTokens``, the steps the remaining tokens need at the measured tokens per
step. With both, the earlier end wins (the trainer stops at whichever it reaches
first). A job with neither has no end, so no projection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from statictrain.money import format_usd, to_decimal

__all__ = ["SOURCES", "PerStep", "Projection", "project", "remaining_steps"]

PerStepKind = Literal["steady", "window", "mean"]
SOURCES: dict[PerStepKind, str] = {
    "steady": "latest steady window",
    "window": "latest window, compile excluded, not steady",
    "mean": "mean so far incl. compile and start-up",
}


@dataclass(frozen=True)
class PerStep:
    """A measured cost per step and where it comes from."""

    usd: Decimal
    kind: PerStepKind


@dataclass(frozen=True)
class Projection:
    usd: Decimal | None
    """The projected total cost; None when it cannot be projected (the basis says why)."""
    basis: str
    """One line: how ``usd`` was found, or why there is none."""
    eta_s: float | None = None
    """Seconds to finish at the measured step time (None: unknown)."""


def remaining_steps(
    step: float, *, max_steps: int | None, max_tokens: int | None, tokens_per_step: float | None
) -> tuple[float, str] | None:
    """(steps left, which limit ends the job) or None when no end is known."""
    ends: list[tuple[float, str]] = []
    if max_steps:
        ends.append((float(max_steps), f"maxSteps {max_steps}"))
    if max_tokens and tokens_per_step:
        ends.append((float(math.ceil(max_tokens / tokens_per_step)), f"maxTokens {max_tokens}"))
    if not ends:
        return None
    total, which = min(ends)
    return max(total - step, 0.0), which


def project(
    usd: Decimal,
    *,
    per_step: PerStep | None,
    step: float,
    max_steps: int | None,
    max_tokens: int | None,
    tokens_per_step: float | None,
    step_seconds: float | None,
    finished: bool,
) -> Projection:
    """The job's projected total cost (see the module's docstring)."""
    if finished:
        return Projection(usd, "finished: the cost so far is the total", 0.0)
    left = remaining_steps(step, max_steps=max_steps, max_tokens=max_tokens, tokens_per_step=tokens_per_step)
    if left is None:
        if max_tokens and not max_steps:
            return Projection(None, "no tokens per step measured yet: the end of maxTokens is unknown")
        return Projection(None, "no maxSteps or maxTokens: the end is unknown")
    steps_left, which = left
    if steps_left == 0:
        return Projection(usd, f"at the end ({which}): the cost so far is the total", 0.0)
    if per_step is None:
        return Projection(None, f"{steps_left:.0f} steps left to {which}; no cost per step measured yet")
    total = usd + to_decimal(steps_left) * per_step.usd
    basis = f"{steps_left:.0f} steps left to {which} x {format_usd(per_step.usd)} USD/step ({SOURCES[per_step.kind]})"
    eta = steps_left * step_seconds if step_seconds else None
    if eta is not None:
        basis += f"; ETA {eta:.0f} s at {step_seconds:.3f} s/step"
    return Projection(total, basis, eta)
