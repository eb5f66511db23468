"""Entry point of the worker container: ``python -m statictrain_trainer.main`` or under torchrun.

Reads TrainerSettings from the environment, imports the user's entrypoint,
optionally autotunes, trains, and exits with a code from exitcodes.ExitCode.
On SIGTERM it finishes the current step, writes a checkpoint and exits with
PREEMPTED. The reason for a failure also goes to /dev/termination-log (or
STATICTRAIN_TERMINATION_LOG) so Kubernetes shows it in the pod status.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

import torch
import torch.distributed as dist
from statictrain import envvars

from . import distributed, levers, prewarm
from .autotune import Candidate, record_key, tune_settings
from .bucket_tune import tune_bucket_cap
from .compile_cache import device_tag
from .errors import classify
from .exitcodes import ExitCode
from .loop import Trainer
from .profiling import ProfileService
from .settings import TrainerSettings, settings_from_env
from .stats import StatsWriter, gpu_uuid, publish_gpu
from .workload import Workload, load_entrypoint

log = logging.getLogger("statictrain_trainer")

DEFAULT_TERMINATION_LOG = Path("/dev/termination-log")


def _autotune(
    settings: TrainerSettings, workload: Workload, ctx: distributed.DistContext, stop: threading.Event
) -> TrainerSettings:
    """Rank 0 searches mode and batch on its device; with DDP all ranks then measure bucket sizes."""
    t0 = time.perf_counter()
    choice: list[object] = [None, math.nan]
    report_json: dict[str, object] = {}
    if ctx.is_main:
        support = levers.probe(ctx.device, workload.hidden_and_head is not None)
        fp8_why = levers.fp8_unsupported(support, "tensorwise", settings.precision)
        report = tune_settings(
            settings,
            workload_batch=workload.batch_size,
            workload_max_batch=workload.max_batch_size,
            gpu=ctx.device.type == "cuda",
            clock=time.perf_counter,
            stop=stop,
            record_key=record_key(workload.name, torch.__version__, device_tag(ctx.device)),
            fp8_available=fp8_why is None,
            fp8_reason=fp8_why or "",
        )
        log.info("autotune: %s", report.reason)
        report_json = report.to_json()
        choice = [report.chosen, report.speedup]
    if ctx.distributed:
        dist.broadcast_object_list(choice, src=0)
    picked, speedup = choice
    assert isinstance(picked, Candidate) and isinstance(speedup, float)
    settings = dataclasses.replace(
        settings,
        compile_mode=picked.compile_mode,
        batch_size=picked.batch_size,
        chunked_loss=picked.chunked_loss,
        compile_optimizer=picked.compile_optimizer,
        fp8=picked.fp8,
        fp8_recipe=picked.fp8_recipe,
        autotune_speedup=speedup,
    )
    if ctx.distributed:
        left = settings.autotune_budget_s - (time.perf_counter() - t0)
        cap, reason, outcomes = tune_bucket_cap(settings, workload, ctx, budget_s=left, stop=stop)
        log.info("autotune: %s", reason)
        report_json["bucket"] = {
            "chosen": cap,
            "reason": reason,
            "outcomes": [
                {
                    "bucket_cap_mb": o.bucket_cap_mb,
                    "step_seconds": o.step_seconds if math.isfinite(o.step_seconds) else None,
                }
                for o in outcomes
            ],
        }
        settings = dataclasses.replace(settings, bucket_cap_mb=cap)
    if ctx.is_main and settings.stats_dir is not None:
        settings.stats_dir.mkdir(parents=True, exist_ok=True)
        (settings.stats_dir / "autotune.json").write_text(json.dumps(report_json, indent=1))
    return settings


def train(settings: TrainerSettings, stop: threading.Event) -> ExitCode:
    prewarm.start("default" if settings.autotune else settings.compile_mode)
    torch.manual_seed(settings.seed)
    workload = load_entrypoint(settings.entrypoint)
    timeout = 600.0 + (settings.autotune_budget_s if settings.autotune else 0.0)
    ctx = distributed.init(settings, timeout_s=timeout)
    stats: StatsWriter | None = None
    profiler: ProfileService | None = None
    if settings.stats_dir is not None and ctx.device.type == "cuda":
        uuid = gpu_uuid(ctx.device)
        publish_gpu(settings.stats_dir, ctx.local_rank, uuid)
        log.info("published GPU %s for the sidecar", uuid)
    try:
        if settings.autotune:
            settings = _autotune(settings, workload, ctx, stop)
        trainer = Trainer(settings, workload, ctx, stop=stop)
        if settings.stats_dir is not None and ctx.local_rank == 0:
            stats = StatsWriter(settings.stats_dir)
            profiler = ProfileService(settings.stats_dir, ctx.device)
        log.info(
            "training %s from step %d to %d: mode=%s batch=%d precision=%s world=%d device=%s",
            workload.name, trainer.start_step, settings.max_steps, settings.compile_mode,
            trainer.batch_size, settings.precision, ctx.world_size, ctx.device,
        )  # fmt: skip
        result = trainer.run(stats, profiler)
        log.info("stopped by %s at step %d", result.stopped_by, result.end_step)
    finally:
        if profiler is not None:
            profiler.close()
        if stats is not None:
            stats.close()
        distributed.shutdown(ctx)
    return ExitCode.PREEMPTED if result.stopped_by == "signal" else ExitCode.OK


def _termination_log(env: Mapping[str, str]) -> Path | None:
    raw = env.get(envvars.TERMINATION_LOG)
    if raw:
        return Path(raw)
    return DEFAULT_TERMINATION_LOG if DEFAULT_TERMINATION_LOG.exists() else None


def parse_args(argv: list[str] | None) -> None:
    """--help; the runtime is configured only through environment variables."""
    names = sorted(v for k, v in vars(envvars).items() if k.isupper() and isinstance(v, str) and v.isupper())
    argparse.ArgumentParser(
        prog="statictrain-train",
        description="statictrain training runtime: run directly (one process) or under torchrun. "
        "The user's model comes from STATICTRAIN_ENTRYPOINT (module:function, see trainer/README.md).",
        epilog="Settings (environment variables): " + ", ".join(names),
    ).parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        log.warning("SIGTERM: checkpointing after the current step, then exiting")
        stop.set()

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        code = train(settings_from_env(os.environ), stop)
    except Exception as e:
        code, reason = classify(e)
        log.error("%s: %s", code.name, reason, exc_info=code == ExitCode.UNKNOWN_ERROR)
        path = _termination_log(os.environ)
        if path is not None:
            try:
                path.write_text(json.dumps({"exit_code": int(code), "kind": code.name, "message": reason}))
            except OSError as werr:
                log.warning("could not write %s: %s", path, werr)
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
