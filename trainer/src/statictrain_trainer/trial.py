"""Run a few steps with the settings in the environment and write what was measured as JSON.

Used by the autotuner (one subprocess per candidate, so a candidate that
crashes the CUDA context takes only its own process down) and by the
benchmark. Runs under torchrun too; rank 0 writes the result.

    python -m statictrain_trainer.trial --result out.json --steps 12 --warmup 4
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from . import distributed, prewarm
from .flops import mfu
from .loop import RunResult, Trainer
from .profiling import StepWindowProfiler
from .settings import TrainerSettings, settings_from_env
from .workload import Workload, load_entrypoint


def summarize(result: RunResult, warmup: int, workload: Workload, peak: float, world_size: int) -> dict[str, Any]:
    """Throughput and compile figures of a finished trial (pure)."""
    steady = result.steady_step_seconds(warmup)
    samples_per_s = result.samples_per_step / steady if steady > 0 else math.nan
    stats = result.compile_stats
    return {
        "steps": len(result.step_seconds),
        "step_seconds": result.step_seconds,
        "steady_step_seconds": steady,
        "samples_per_s": samples_per_s,
        "tokens_per_s": samples_per_s * workload.tokens_per_sample,
        "mfu": mfu(workload.flops_per_sample, samples_per_s, peak, world_size),
        "first_step_seconds": result.step_seconds[0] if result.step_seconds else math.nan,
        "setup_seconds": result.setup_seconds,
        "time_to_first_step_seconds": result.setup_seconds + result.step_seconds[0]
        if result.step_seconds
        else math.nan,
        "cache_hit": bool(result.cache and result.cache.hit),
        "cache_reason": result.cache.reason if result.cache else "",
        "peak_memory_bytes": result.peak_memory_bytes,
        "compile_seconds": stats.compile_seconds if stats else 0.0,
        "graph_breaks": stats.graph_breaks if stats else 0,
        "recompiles": stats.recompiles if stats else 0,
        "loss_first": result.losses[0] if result.losses else math.nan,
        "loss_last": result.losses[-1] if result.losses else math.nan,
        "losses": result.losses,
        "setup_breakdown": result.setup_breakdown,
        "notes": result.notes,
    }


def run_trial(settings: TrainerSettings, steps: int, warmup: int, profile_dir: Path | None = None) -> dict[str, Any]:
    t_main = time.perf_counter()
    prewarm.start(settings.compile_mode)
    torch.manual_seed(settings.seed)
    workload = load_entrypoint(settings.entrypoint)
    t_built = time.perf_counter()
    settings = dataclasses.replace(
        settings, max_steps=steps, checkpoint_dir=None, stats_dir=None, autotune=False, max_tokens=0
    )
    ctx = distributed.init(settings)
    try:
        trainer = Trainer(settings, workload, ctx)
        hooks = None
        if profile_dir is not None and ctx.is_main:
            hooks = StepWindowProfiler(profile_dir, ctx.device, start=warmup, steps=min(3, max(1, steps - warmup)))
        result = trainer.run(profiler=hooks)
        out = summarize(result, warmup, workload, trainer.peak, ctx.world_size)
        if hooks is not None:
            out["profile"] = hooks.result
    finally:
        distributed.shutdown(ctx)
    out.update(
        {
            "ok": True,
            "compile_mode": settings.compile_mode,
            "levers": {
                "attention": trainer.settings.attention,
                "chunked_loss": trainer.settings.chunked_loss,
                "compile_optimizer": trainer.settings.compile_optimizer,
                "fp8": trainer.settings.fp8,
                "fp8_recipe": trainer.settings.fp8_recipe,
            },
            "workload_build_seconds": t_built - t_main,
            "batch_size": trainer.batch_size,
            "bucket_cap_mb": settings.bucket_cap_mb,
            "world_size": ctx.world_size,
            "precision": settings.precision,
            "workload": workload.name,
            "device": torch.cuda.get_device_name(ctx.device) if ctx.device.type == "cuda" else "cpu",
            "torch": torch.__version__,
        }
    )
    return out


def seconds_since_process_start() -> float:
    """Wall seconds since this process started (Linux /proc; NaN elsewhere): interpreter start and imports."""
    try:
        btime = next(
            float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")
        )
        ticks = float(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        return time.time() - (btime + ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, StopIteration):
        return math.nan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--result", type=Path, required=True, help="JSON file to write (rank 0)")
    parser.add_argument("--steps", type=int, default=12, help="steps to run")
    parser.add_argument("--warmup", type=int, default=4, help="steps left out of the throughput median")
    parser.add_argument("--profile", type=Path, default=None, help="profile 3 steps after warm-up into this folder")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s trial %(levelname)s %(name)s: %(message)s")
    settings = settings_from_env(os.environ)
    started = seconds_since_process_start()
    t0 = time.perf_counter()
    out = run_trial(settings, args.steps, args.warmup, args.profile)
    out["process_start_to_main_seconds"] = started
    # The parent's wall time of this process minus this is interpreter start and imports.
    out["main_seconds"] = time.perf_counter() - t0
    if settings.rank == 0:
        tmp = args.result.with_name(args.result.name + ".tmp")
        tmp.write_text(json.dumps(out, indent=1))
        tmp.replace(args.result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
