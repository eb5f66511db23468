"""The training loop: compile, AMP, DDP, gradient accumulation, checkpoints, stats, profiles."""

from __future__ import annotations

import contextlib
import logging
import math
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from statictrain import channel
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from . import checkpoint, dynamo_stats
from .compile_cache import CacheKey, CacheLoad, CompileCache, device_tag, make_key, model_fingerprint
from .distributed import DistContext
from .flops import mfu, peak_tflops
from .optim import adamw
from .precision import autocast_factory, grad_scaler
from .profiling import ProfileService
from .settings import TrainerSettings
from .stats import StatsWriter
from .workload import Workload

log = logging.getLogger(__name__)

CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


class LossModule(nn.Module):
    """model + loss as one module, so the loss compiles into the same graph and DDP sees one forward."""

    def __init__(self, model: nn.Module, loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.loss_fn(self.model(inputs), targets)


@dataclass
class RunResult:
    """What a run did."""

    start_step: int
    """Step of the checkpoint it resumed from (0 for a fresh start)."""
    end_step: int
    """Last completed step."""
    stopped_by: str
    """``max_steps``, ``max_tokens`` or ``signal``."""
    losses: list[float] = field(default_factory=list)
    """Mean loss of each step run in this process."""
    step_seconds: list[float] = field(default_factory=list)
    """Wall seconds of each step run in this process."""
    setup_seconds: float = 0.0
    """From the Trainer's construction to the start of the first step."""
    cache: CacheLoad | None = None
    """Compile cache lookup, when the cache is on."""
    compile_stats: dynamo_stats.CompileStats | None = None
    """Dynamo counters at the end."""
    samples_per_step: int = 0
    """Samples of one optimizer step, all ranks."""
    tokens_per_step: int = 0
    """Tokens of one optimizer step, all ranks."""
    peak_memory_bytes: int = 0
    """Peak allocated device memory on this rank (CUDA only)."""

    def steady_step_seconds(self, skip: int) -> float:
        """Median step time after the first ``skip`` steps (NaN if none)."""
        rest = self.step_seconds[skip:]
        return statistics.median(rest) if rest else math.nan


def graph_settings(settings: TrainerSettings, batch_size: int) -> dict[str, object]:
    """The settings that change the compiled graph (part of the compile-cache key)."""
    return {
        "mode": settings.compile_mode,
        "fullgraph": settings.fullgraph,
        "dynamic": settings.dynamic,
        "precision": settings.precision,
        "batch_size": batch_size,
        "ddp": settings.world_size > 1,
        "bucket_cap_mb": settings.bucket_cap_mb if settings.world_size > 1 else 0,
    }


class _LocalTimer:
    """Seconds from a step's start to ``mark()``, on the GPU's timeline for CUDA (events, read after the step)."""

    def __init__(self, device: torch.device, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._cuda = device.type == "cuda"
        self._t0 = clock()
        self._t1 = math.nan
        if self._cuda:
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)
            self._start.record()

    def mark(self) -> None:
        if self._cuda:
            self._end.record()
        else:
            self._t1 = self._clock()

    def seconds(self) -> float:
        if self._cuda:
            self._end.synchronize()
            return float(self._start.elapsed_time(self._end)) / 1000.0
        return self._t1 - self._t0


class Trainer:
    """Builds the compiled step for one workload and runs it."""

    def __init__(
        self,
        settings: TrainerSettings,
        workload: Workload,
        ctx: DistContext,
        *,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.perf_counter,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.workload = workload
        self.ctx = ctx
        self.stop = stop or threading.Event()
        self.clock = clock
        self.wall_clock = wall_clock
        self._t_setup = clock()
        self.batch_size = settings.batch_size or workload.batch_size
        device = ctx.device
        self.model = workload.model.to(device)
        self.optimizer = adamw(self.model, workload.learning_rate, workload.weight_decay, device)
        self.scaler = grad_scaler(settings.precision, device)
        self.autocast = autocast_factory(settings.precision, device)
        self.start_step = 0
        self.samples_per_step = self.batch_size * settings.grad_accum_steps * ctx.world_size
        self.tokens_per_step = self.samples_per_step * workload.tokens_per_sample
        # What the channel reports: this pod's share (its ranks), so sums over pods are the job's totals.
        pod_ranks = min(settings.local_world_size, ctx.world_size)
        self.pod_samples_per_step = self.batch_size * settings.grad_accum_steps * pod_ranks
        self.pod_tokens_per_step = self.pod_samples_per_step * workload.tokens_per_sample
        self._resume()
        module: nn.Module = LossModule(self.model, workload.loss)
        self.ddp: DistributedDataParallel | None = None
        if ctx.distributed:
            self.ddp = DistributedDataParallel(
                module,
                device_ids=[device.index] if device.type == "cuda" else None,
                bucket_cap_mb=settings.bucket_cap_mb,
                gradient_as_bucket_view=True,
            )
            module = self.ddp
        self.cache: CompileCache | None = None
        self.cache_load: CacheLoad | None = None
        self.cudagraphs = settings.compile_mode in CUDAGRAPH_MODES and device.type == "cuda"
        if settings.compile_mode == "none":
            self.forward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = module
        else:
            self._open_cache()
            mode = None if settings.compile_mode == "default" else settings.compile_mode
            self.forward = torch.compile(module, mode=mode, fullgraph=settings.fullgraph, dynamic=settings.dynamic)
        self.peak = peak_tflops(self._device_name(), settings.precision, settings.peak_tflops)

    def _device_name(self) -> str:
        if self.ctx.device.type == "cuda":
            return torch.cuda.get_device_name(self.ctx.device)
        return "cpu"

    def cache_key(self) -> CacheKey:
        return make_key(
            model_fingerprint(self.model),
            graph_settings(self.settings, self.batch_size),
            torch.__version__,
            device_tag(self.ctx.device),
        )

    def _open_cache(self) -> None:
        s = self.settings
        if not s.compile_cache or s.compile_cache_dir is None:
            return
        self.cache = CompileCache(s.compile_cache_dir, self.cache_key())
        self.cache_load = self.cache.load()

    def _resume(self) -> None:
        directory = self.settings.checkpoint_dir
        if directory is None:
            return
        found = checkpoint.load_latest(directory, map_location=self.ctx.device)
        if found is None:
            log.info("no checkpoint under %s: starting at step 0", directory)
            return
        self.model.load_state_dict(found.state["model"])
        self.optimizer.load_state_dict(found.state["optimizer"])
        if self.scaler is not None and "scaler" in found.state:
            self.scaler.load_state_dict(found.state["scaler"])
        self.start_step = found.step
        log.info("resumed from %s (step %d)", found.path, found.step)

    def _state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "world_size": self.ctx.world_size,
            "batch_size": self.batch_size,
        }
        if self.scaler is not None:
            state["scaler"] = self.scaler.state_dict()
        return state

    def save_checkpoint(self, step: int) -> None:
        directory = self.settings.checkpoint_dir
        if directory is None:
            return
        if self.ctx.is_main:
            path = checkpoint.save(directory, step, self._state(), self.settings.checkpoint_keep)
            log.info("checkpoint written: %s", path)
        if self.ctx.distributed:
            dist.barrier()

    def _batch(self, step_index: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        b, w = self.batch_size, self.ctx.world_size
        start = (step_index * self.settings.grad_accum_steps + micro) * b * w + self.ctx.rank * b
        x, y = self.workload.batch(start, b)
        dev = self.ctx.device
        return x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)

    def _train_step(self, step_index: int) -> tuple[torch.Tensor, Callable[[], float]]:
        """The step's mean loss, and a function giving this rank's local seconds (see StepRecord.rank_seconds)."""
        accum = self.settings.grad_accum_steps
        total = torch.zeros((), device=self.ctx.device)
        local = _LocalTimer(self.ctx.device, self.clock)
        for micro in range(accum):
            x, y = self._batch(step_index, micro)
            skip_sync = self.ddp is not None and micro < accum - 1
            sync_ctx = self.ddp.no_sync() if skip_sync and self.ddp is not None else contextlib.nullcontext()
            with sync_ctx:
                if self.cudagraphs:
                    torch.compiler.cudagraph_mark_step_begin()
                with self.autocast():
                    loss = self.forward(x, y)
                if micro == accum - 1:
                    local.mark()
                scaled = loss / accum
                if self.scaler is not None:
                    self.scaler.scale(scaled).backward()
                else:
                    scaled.backward()
            total = total + loss.detach().float()
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return total / accum, local.seconds

    def _reduce(self, loss: torch.Tensor, local_seconds: float) -> tuple[float, bool, tuple[float, ...]]:
        """Mean loss over ranks, whether any rank was asked to stop, and every rank's local seconds."""
        if not self.ctx.distributed:
            return float(loss.item()), self.stop.is_set(), (local_seconds,)
        flag = torch.ones((), device=loss.device) if self.stop.is_set() else torch.zeros((), device=loss.device)
        mine = torch.zeros(self.ctx.world_size, device=loss.device)
        mine[self.ctx.rank] = local_seconds
        both = torch.cat([torch.stack([loss, flag]), mine])
        dist.all_reduce(both)
        values = both.tolist()
        return values[0] / self.ctx.world_size, values[1] > 0, tuple(values[2:])

    def _done(self, step: int) -> str | None:
        s = self.settings
        if step >= s.max_steps:
            return "max_steps"
        if s.max_tokens and self.tokens_per_step and step * self.tokens_per_step >= s.max_tokens:
            return "max_tokens"
        return None

    def _save_cache_if_new(self, before: dynamo_stats.CompileStats, after: dynamo_stats.CompileStats) -> None:
        """Save artifacts after steps that really compiled, unless they came from the cache."""
        if self.cache is None or not self.ctx.is_main or (self.cache_load is not None and self.cache_load.hit):
            return
        if after.fx_cache_misses == before.fx_cache_misses and after.unique_graphs == before.unique_graphs:
            return
        self.cache.save({"workload": self.workload.name, "torch": torch.__version__})

    def run(
        self,
        stats: StatsWriter | None = None,
        profiler: ProfileService | None = None,
    ) -> RunResult:
        result = RunResult(
            start_step=self.start_step,
            end_step=self.start_step,
            stopped_by="max_steps",
            cache=self.cache_load,
            samples_per_step=self.samples_per_step,
            tokens_per_step=self.tokens_per_step,
        )
        reason = self._done(self.start_step)
        if reason is not None:
            result.stopped_by = reason
            return result
        s = self.settings
        counters = dynamo_stats.read()
        saved_counters = counters
        step = self.start_step
        result.setup_seconds = self.clock() - self._t_setup
        if self.ctx.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.ctx.device)
        while True:
            if profiler is not None:
                profiler.before_step()
            t0 = self.clock()
            loss_t, local_seconds = self._train_step(step)
            loss, stop, rank_seconds = self._reduce(loss_t, local_seconds())
            seconds = self.clock() - t0
            step += 1
            if profiler is not None:
                profiler.after_step()
            now = dynamo_stats.read()
            compiled_now = now.compiled_since(counters)
            counters = now
            result.losses.append(loss)
            result.step_seconds.append(seconds)
            result.end_step = step
            if compiled_now or step == self.start_step + 1:
                self._save_cache_if_new(saved_counters, now)
                saved_counters = now
            if stats is not None:
                stats.write(self._record(step, seconds, loss, now, rank_seconds))
            reason = "signal" if stop else self._done(step)
            if reason is not None:
                result.stopped_by = reason
                self.save_checkpoint(step)
                break
            if s.checkpoint_every and step % s.checkpoint_every == 0:
                self.save_checkpoint(step)
        result.compile_stats = dynamo_stats.read()
        if self.ctx.device.type == "cuda":
            result.peak_memory_bytes = torch.cuda.max_memory_allocated(self.ctx.device)
        return result

    def _record(
        self,
        step: int,
        seconds: float,
        loss: float,
        counts: dynamo_stats.CompileStats,
        rank_seconds: tuple[float, ...] = (),
    ) -> channel.StepRecord:
        samples_per_s = self.samples_per_step / seconds if seconds > 0 else 0.0
        return channel.StepRecord(
            step=step,
            step_seconds=seconds,
            tokens=self.pod_tokens_per_step,
            samples=self.pod_samples_per_step,
            loss=loss,
            compile_seconds=counts.compile_seconds,
            cache_hit=bool(self.cache_load and self.cache_load.hit),
            graph_breaks=counts.graph_breaks,
            recompiles=counts.recompiles,
            mfu=mfu(self.workload.flops_per_sample, samples_per_s, self.peak, self.ctx.world_size),
            rank=self.ctx.rank,
            world_size=self.ctx.world_size,
            time=self.wall_clock(),
            rank_seconds=rank_seconds,
        )
