"""DDP bucket-size tuning: every rank runs a few real DDP steps per bucket size, the fastest is kept.

This part of the autotune needs all ranks (the all-reduce is what it measures),
so it runs in the job's own processes after the single-process search picked
the compile mode and batch. The model's weights are restored afterwards and
the optimizer starts fresh, so the trials leave no trace on training. Ranks
agree on each decision through all-reduces (slowest rank's step time; stop
when any rank's budget is spent), so they never diverge.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .distributed import DistContext
from .loop import Trainer
from .settings import TrainerSettings
from .workload import Workload

log = logging.getLogger(__name__)

SIZES_MB = (25, 50, 100, 200)
"""Bucket sizes tried besides the job's own."""


@dataclass(frozen=True)
class BucketOutcome:
    """One bucket size's slowest-rank steady step time."""

    bucket_cap_mb: int
    """DDP bucket_cap_mb."""
    step_seconds: float
    """Median steady step time on the slowest rank; NaN when skipped."""


def candidates(current: int) -> list[int]:
    """The job's own size first, then the others (pure)."""
    return [current, *(s for s in SIZES_MB if s != current)]


def pick(outcomes: list[BucketOutcome], current: int) -> tuple[int, str]:
    """Fastest measured size and why (pure); the job's own when nothing was measured."""
    measured = sorted((o for o in outcomes if math.isfinite(o.step_seconds)), key=lambda o: o.step_seconds)
    if not measured:
        return current, f"bucket_cap_mb {current} kept: no size was measured"
    best = measured[0]
    table = ", ".join(f"{o.bucket_cap_mb} MB: {o.step_seconds * 1000:.1f} ms" for o in outcomes)
    return best.bucket_cap_mb, f"bucket_cap_mb {best.bucket_cap_mb} is fastest ({table})"


def _all_max(value: float, device: torch.device) -> float:
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def tune_bucket_cap(
    settings: TrainerSettings,
    workload: Workload,
    ctx: DistContext,
    *,
    budget_s: float,
    clock: Callable[[], float] = time.perf_counter,
    stop: threading.Event | None = None,
    steps: int = 10,
    warmup: int = 4,
) -> tuple[int, str, list[BucketOutcome]]:
    """Measure each bucket size with real DDP steps; return the pick, the reason and the table."""
    stop = stop or threading.Event()
    snapshot = copy.deepcopy(workload.model.state_dict())
    t0 = clock()
    outcomes: list[BucketOutcome] = []
    for cap in candidates(settings.bucket_cap_mb):
        over = 1.0 if (clock() - t0 > budget_s or stop.is_set()) else 0.0
        if _all_max(over, ctx.device) > 0:
            outcomes.append(BucketOutcome(cap, math.nan))
            continue
        trial = dataclasses.replace(
            settings, bucket_cap_mb=cap, max_steps=steps, checkpoint_dir=None, compile_cache=False, max_tokens=0
        )
        trainer = Trainer(trial, workload, ctx)
        result = trainer.run()
        # Drop this DDP wrapper (and its autograd hooks) before the next one is built.
        del trainer
        torch._dynamo.reset()
        gc.collect()
        slowest = _all_max(result.steady_step_seconds(warmup), ctx.device)
        outcomes.append(BucketOutcome(cap, slowest))
        log.info("bucket trial %d MB: %.1f ms per step (slowest rank)", cap, slowest * 1000)
    workload.model.load_state_dict(snapshot)
    torch._dynamo.reset()
    chosen, reason = pick(outcomes, settings.bucket_cap_mb)
    return chosen, reason, outcomes
