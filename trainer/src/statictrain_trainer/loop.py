"""The training loop: compile, AMP, DDP, gradient accumulation, checkpoints, stats, profiles."""

from __future__ import annotations

import contextlib
import dataclasses
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

from . import checkpoint, dynamo_stats, levers, resume
from .compile_cache import CacheKey, CacheLoad, CompileCache, device_tag, make_key, model_fingerprint
from .distributed import DistContext
from .flops import mfu, peak_tflops
from .fused_loss import chunked_linear_cross_entropy
from .optim import adamw
from .precision import DTYPES, autocast_factory, grad_scaler
from .profiling import ProfileService, StepWindowProfiler
from .settings import TrainerSettings
from .stats import StatsWriter
from .workload import HiddenAndHeadFn, Workload

log = logging.getLogger(__name__)

CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


class LossModule(nn.Module):
    """model + loss as one module, so the loss compiles into the same graph and DDP sees one forward.

    With ``hidden_and_head`` (the chunked-loss lever) the model's last Linear and the loss are
    replaced by fused_loss.chunked_linear_cross_entropy in ``dtype``.
    """

    def __init__(
        self,
        model: nn.Module,
        loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        hidden_and_head: HiddenAndHeadFn | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss
        self.hidden_and_head = hidden_and_head
        self.dtype = dtype

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if self.hidden_and_head is not None:
            hidden, weight = self.hidden_and_head(self.model, inputs)
            return chunked_linear_cross_entropy(hidden, weight, targets, dtype=self.dtype)
        return self.loss_fn(self.model(inputs), targets)


@dataclass
class _InFlight:
    """A launched step whose loss is on its way to the host."""

    step: int
    """Step number once it completes."""
    host: torch.Tensor
    """[mean loss, stop flag, each rank's local seconds] (pinned on CUDA, filled by an async copy)."""
    done: torch.cuda.Event | None
    """Recorded after the copy (None on CPU: the copy was synchronous)."""
    launched_at: float
    """Clock when the step was launched."""
    local_seconds: Callable[[], float]
    """This rank's local seconds of the step (read once it has completed)."""

    def wait(self) -> tuple[float, bool, tuple[float, ...]]:
        """Mean loss, stop flag, and each rank's local seconds carried by this step."""
        if self.done is not None:
            self.done.synchronize()
        values = self.host.tolist()
        return values[0], values[1] > 0, tuple(values[2:])


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
    setup_breakdown: dict[str, float] = field(default_factory=dict)
    """Seconds of each part of setup (model to device, optimizer, cache load, compile wrapper)."""
    notes: list[str] = field(default_factory=list)
    """Levers switched off because this device, torch or workload cannot use them."""

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
        "attention": settings.attention,
        "chunked_loss": settings.chunked_loss,
        "compile_optimizer": settings.compile_optimizer,
        "fp8": settings.fp8,
        "fp8_recipe": settings.fp8_recipe if settings.fp8 else "",
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


def unused_load(before: dynamo_stats.CompileStats, after: dynamo_stats.CompileStats) -> bool:
    """Graphs were compiled from scratch and none came from the FX graph cache (pure)."""
    return after.fx_cache_misses > before.fx_cache_misses and after.fx_cache_hits == before.fx_cache_hits


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
        self.workload = workload
        self.ctx = ctx
        self.stop = stop or threading.Event()
        self.clock = clock
        self.wall_clock = wall_clock
        self._t_setup = clock()
        self.setup_breakdown: dict[str, float] = {}
        device = ctx.device
        support = levers.probe(device, workload.hidden_and_head is not None)
        settings, self.notes = levers.resolve(settings, support)
        self.settings = settings
        self.batch_size = settings.batch_size or workload.batch_size
        self.model = workload.model.to(device)
        if settings.fp8:
            self.model, fp8_note = levers.apply_fp8(self.model, settings.fp8_recipe)
            if fp8_note is not None:
                self.notes.append(fp8_note)
                settings = dataclasses.replace(settings, fp8=False)
                self.settings = settings
        self._lap("model_to_device")
        self.optimizer = adamw(
            self.model, workload.learning_rate, workload.weight_decay, device, fused=not settings.compile_optimizer
        )
        self.scaler = grad_scaler(settings.precision, device)
        self.autocast = autocast_factory(settings.precision, device)
        self.attention = levers.attention_context(settings.attention)
        self.start_step = 0
        self.samples_per_step = self.batch_size * settings.grad_accum_steps * ctx.world_size
        self.tokens_per_step = self.samples_per_step * workload.tokens_per_sample
        # What the channel reports: this pod's share (its ranks), so sums over pods are the job's totals.
        pod_ranks = min(settings.local_world_size, ctx.world_size)
        self.pod_samples_per_step = self.batch_size * settings.grad_accum_steps * pod_ranks
        self.pod_tokens_per_step = self.pod_samples_per_step * workload.tokens_per_sample
        self._resume()
        self._lap("optimizer_and_resume")
        module: nn.Module = LossModule(
            self.model,
            workload.loss,
            workload.hidden_and_head if settings.chunked_loss else None,
            DTYPES.get(settings.precision),
        )
        self.ddp: DistributedDataParallel | None = None
        if ctx.distributed:
            self.ddp = DistributedDataParallel(
                module,
                device_ids=[device.index] if device.type == "cuda" else None,
                bucket_cap_mb=settings.bucket_cap_mb,
                gradient_as_bucket_view=True,
                # Same parameters used every step; left off under torch.compile, whose DDPOptimizer
                # splits the graph at bucket boundaries itself.
                static_graph=settings.compile_mode == "none",
            )
            module = self.ddp
        self._lap("ddp")
        self.cache: CompileCache | None = None
        self.cache_load: CacheLoad | None = None
        self.cudagraphs = settings.compile_mode in CUDAGRAPH_MODES and device.type == "cuda"
        self.opt_step: Callable[[], object] = self.optimizer.step
        if settings.compile_mode == "none":
            self.forward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = module
        else:
            self._open_cache()
            self._lap("cache_load")
            mode = None if settings.compile_mode == "default" else settings.compile_mode
            self.forward = torch.compile(module, mode=mode, fullgraph=settings.fullgraph, dynamic=settings.dynamic)
            if settings.compile_optimizer:
                self.opt_step = torch.compile(self.optimizer.step, fullgraph=False)
            self._lap("compile_wrapper")
        self.peak = peak_tflops(self._device_name(), settings.precision, settings.peak_tflops)
        self._host = [torch.zeros(2 + ctx.world_size, pin_memory=device.type == "cuda") for _ in range(2)]
        self._last_local_seconds = math.nan

    def _lap(self, name: str) -> None:
        now = self.clock()
        self.setup_breakdown[name] = now - self._t_setup - sum(self.setup_breakdown.values())

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
        self.cache = CompileCache(s.compile_cache_dir, self.cache_key(), shared=s.compile_cache_shared_dir)
        self.cache_load = self.cache.load()

    def _resume(self) -> None:
        directory = self.settings.checkpoint_dir
        if directory is None:
            return
        found = resume.resume(directory, self.model, self.optimizer, self.scaler, self.ctx.device)
        if found is None:
            log.info("no checkpoint to resume from under %s: starting at step 0", directory)
            return
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
            if path is not None:
                log.info("checkpoint written: %s", path)
        if self.ctx.distributed:
            dist.barrier()

    def _batch(self, step_index: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        b, w = self.batch_size, self.ctx.world_size
        start = (step_index * self.settings.grad_accum_steps + micro) * b * w + self.ctx.rank * b
        x, y = self.workload.batch(start, b)
        dev = self.ctx.device
        if dev.type == "cuda":
            # Pinned, so the copies queue behind the running step instead of stalling the host.
            x, y = x.pin_memory(), y.pin_memory()
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
                with self.autocast(), self.attention():
                    loss = self.forward(x, y)
                if micro == accum - 1:
                    local.mark()
                scaled = loss / accum
                if self.scaler is not None:
                    self.scaler.scale(scaled).backward()
                else:
                    with self.attention():
                        scaled.backward()
            total = total + loss.detach().float()
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.opt_step()
        self.optimizer.zero_grad(set_to_none=True)
        return total / accum, local.seconds

    def _launch(self, step_index: int) -> _InFlight:
        """Queue one step and the copy of its [mean loss over ranks, any-rank stop flag, each rank's local
        seconds of the latest step already read back] to the host (see StepRecord.rank_seconds)."""
        t0 = self.clock()
        loss, local = self._train_step(step_index)
        flag = torch.full((), 1.0 if self.stop.is_set() else 0.0, device=loss.device)
        mine = torch.zeros(self.ctx.world_size, device=loss.device)
        mine[self.ctx.rank] = self._last_local_seconds
        both = torch.cat([torch.stack([loss, flag]), mine])
        if self.ctx.distributed:
            dist.all_reduce(both)
            both = torch.cat([both[:1] / self.ctx.world_size, both[1:]])
        host = self._host[step_index % 2]
        done: torch.cuda.Event | None = None
        if self.ctx.device.type == "cuda":
            host.copy_(both, non_blocking=True)
            done = torch.cuda.Event()
            done.record()
        else:
            host.copy_(both)
        return _InFlight(step_index + 1, host, done, t0, local)

    def _done(self, step: int) -> str | None:
        s = self.settings
        limit = s.max_steps or self.workload.max_steps  # the job's spec first, else the entrypoint's own
        if limit and step >= limit:
            return "max_steps"
        if s.max_tokens and self.tokens_per_step and step * self.tokens_per_step >= s.max_tokens:
            return "max_tokens"
        return None

    def _save_cache_if_new(self, before: dynamo_stats.CompileStats, after: dynamo_stats.CompileStats) -> None:
        """Save artifacts after steps that really compiled, unless they came from the cache. A loaded
        cache none of whose graphs matched (real artifacts of another device or torch filed under this
        key: measured on an H200, bench/compile_cache_devices.py) is reported as unused and replaced.
        Every rank decides the report (each pod's local rank 0 writes its own stats); rank 0 saves."""
        if self.cache is None:
            return
        if self.cache_load is not None and self.cache_load.hit:
            if not unused_load(before, after):
                return
            self.cache_load = CacheLoad(
                hit=False,
                reason=f"{self.cache_load.reason}, but none of its graphs matched: replaced with this process's",
                status="unused",
            )
            log.warning("compile cache unused: %s", self.cache_load.reason)
        if not self.ctx.is_main:
            return
        if after.fx_cache_misses == before.fx_cache_misses and after.unique_graphs == before.unique_graphs:
            return
        self.cache.save({"workload": self.workload.name, "torch": torch.__version__})

    def run(
        self,
        stats: StatsWriter | None = None,
        profiler: ProfileService | StepWindowProfiler | None = None,
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
        launched = self.start_step
        result.setup_seconds = self.clock() - self._t_setup
        result.setup_breakdown = dict(self.setup_breakdown)
        result.notes = list(self.notes)
        if self.ctx.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.ctx.device)
        # One step stays in flight: step k+1 is queued before step k's loss is read, so the
        # host's work between steps (batch, launch) overlaps the device's. The first step is
        # read at once, so its time is its own (compilation included).
        in_flight: _InFlight | None = None
        last_read: float | None = None
        stop = False

        def finish(p: _InFlight) -> None:
            nonlocal counters, saved_counters, last_read, stop
            loss, stop_flag, rank_seconds = p.wait()
            # The step has completed on the device, so its local timer reads without a stall.
            self._last_local_seconds = p.local_seconds()
            stop = stop or stop_flag
            now_t = self.clock()
            seconds = now_t - (last_read if last_read is not None else p.launched_at)
            last_read = now_t
            now = dynamo_stats.read()
            compiled_now = now.compiled_since(counters)
            counters = now
            result.losses.append(loss)
            result.step_seconds.append(seconds)
            result.end_step = p.step
            if compiled_now or p.step == self.start_step + 1:
                self._save_cache_if_new(saved_counters, now)
                result.cache = self.cache_load
                saved_counters = now
            if stats is not None:
                stats.write(self._record(p.step, seconds, loss, now, rank_seconds))

        while True:
            if profiler is not None:
                profiler.before_step()
            new = self._launch(launched)
            launched += 1
            if profiler is not None:
                profiler.after_step()
            if in_flight is not None:
                finish(in_flight)
            in_flight = new
            if launched == self.start_step + 1:
                finish(in_flight)
                in_flight = None
            # Ranks agree through the reduced flag; a single process may stop on its own at once.
            local_stop = not self.ctx.distributed and self.stop.is_set()
            reason = "signal" if stop or local_stop else self._done(launched)
            checkpoint_now = bool(s.checkpoint_every and launched % s.checkpoint_every == 0)
            if reason is not None or checkpoint_now:
                if in_flight is not None:
                    finish(in_flight)
                    in_flight = None
                self.save_checkpoint(launched)
            if reason is not None:
                result.stopped_by = reason
                break
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
            cache_status=self.cache_load.status if self.cache_load is not None else "off",
            graph_breaks=counts.graph_breaks,
            recompiles=counts.recompiles,
            mfu=mfu(self.workload.flops_per_sample, samples_per_s, self.peak, self.ctx.world_size),
            rank=self.ctx.rank,
            world_size=self.ctx.world_size,
            time=self.wall_clock(),
            rank_seconds=rank_seconds,
            settings=self.settings.label(self.batch_size),
            settings_by="autotune" if self.settings.autotune else "spec",
            autotune_speedup=self.settings.autotune_speedup,
        )
