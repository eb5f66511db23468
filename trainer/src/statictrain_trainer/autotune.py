"""Autotune: try the settings that matter on the real model within a time budget, keep the fastest.

The search: the largest batch that fits and still pays (doubling from the
workload's batch while throughput rises by more than MIN_GAIN), then, at that
batch, the other compile modes, which also switches CUDA graphs on and off
(reduce-overhead and max-autotune use them; default and
max-autotune-no-cudagraphs do not). Each candidate runs in its own process, so
one that crashes (an illegal memory access poisons the CUDA context) is
skipped and reported and the job goes on. The bucket size is not searched:
single-process trials cannot measure it; the job keeps its own.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from statictrain import envvars

from .settings import CompileMode, TrainerSettings

log = logging.getLogger(__name__)

MIN_GAIN = 0.03
"""A larger batch must be this much faster (relative samples/s) to keep doubling."""
GPU_MODES: tuple[CompileMode, ...] = ("reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")


@dataclass(frozen=True)
class Candidate:
    """One point of the search."""

    compile_mode: CompileMode
    """torch.compile mode."""
    batch_size: int
    """Per-rank micro-batch."""

    @property
    def label(self) -> str:
        return f"{self.compile_mode}@{self.batch_size}"


@dataclass(frozen=True)
class Outcome:
    """What one trial gave."""

    candidate: Candidate
    """What was tried."""
    ok: bool
    """It ran to the end."""
    samples_per_s: float = math.nan
    """Steady throughput (median step), per rank."""
    tokens_per_s: float = math.nan
    """The same in tokens (NaN for non-token models)."""
    mfu: float = math.nan
    """MFU of the trial, when known."""
    seconds: float = 0.0
    """Wall seconds the trial took, compile included."""
    error: str = ""
    """Why it failed: crash, out of memory, timed out, or skipped for budget."""


@dataclass(frozen=True)
class Report:
    """The autotuner's answer."""

    chosen: Candidate
    """The settings the job will use."""
    reason: str
    """Why, in one paragraph."""
    outcomes: tuple[Outcome, ...]
    """Every trial, in order."""

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (NaN written as null)."""

        def clean(d: dict[str, Any]) -> dict[str, Any]:
            return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in d.items()}

        return {
            "chosen": asdict(self.chosen),
            "reason": self.reason,
            "outcomes": [clean({**asdict(o), "candidate": o.candidate.label}) for o in self.outcomes],
        }


TrialRunner = Callable[[Candidate, float], Outcome]
"""Runs one candidate with at most the given seconds; never raises."""


def doubling(start: int, limit: int) -> list[int]:
    """start, 2·start, … up to limit (pure)."""
    sizes = []
    b = start
    while b <= limit:
        sizes.append(b)
        b *= 2
    return sizes or [start]


def choose(outcomes: list[Outcome], fallback: Candidate) -> tuple[Candidate, str]:
    """The fastest successful candidate and an explanation (pure)."""
    good = sorted((o for o in outcomes if o.ok), key=lambda o: o.samples_per_s, reverse=True)
    failed = [o for o in outcomes if not o.ok]
    failed_text = "; ".join(f"{o.candidate.label}: {o.error}" for o in failed)
    if not good:
        return fallback, f"no candidate finished, keeping {fallback.label}" + (
            f" (failed: {failed_text})" if failed else ""
        )
    best = good[0]
    text = f"picked {best.candidate.label}: {best.samples_per_s:.1f} samples/s"
    if best.tokens_per_s > 0:
        text += f" ({best.tokens_per_s:,.0f} tokens/s)"
    if not math.isnan(best.mfu):
        text += f", MFU {best.mfu:.3f}"
    if len(good) > 1:
        second = good[1]
        text += f"; {best.samples_per_s / second.samples_per_s:.3f}x the runner-up {second.candidate.label}"
    if failed:
        text += f"; skipped: {failed_text}"
    return best.candidate, text


class Autotuner:
    """Runs the search with an injected trial runner and clock."""

    def __init__(
        self,
        base: Candidate,
        *,
        max_batch: int,
        budget_s: float,
        runner: TrialRunner,
        clock: Callable[[], float],
        gpu: bool,
        stop: threading.Event | None = None,
    ) -> None:
        self.base = base
        self.max_batch = max(max_batch, base.batch_size)
        self.budget_s = budget_s
        self.runner = runner
        self.clock = clock
        self.gpu = gpu
        self.stop = stop or threading.Event()
        self.outcomes: list[Outcome] = []
        self._t0 = 0.0

    def _left(self) -> float:
        return self.budget_s - (self.clock() - self._t0)

    def _try(self, candidate: Candidate) -> Outcome:
        left = self._left()
        if left <= 0 or self.stop.is_set():
            outcome = Outcome(candidate, ok=False, error="skipped: budget spent" if left <= 0 else "skipped: stop")
        else:
            outcome = self.runner(candidate, left)
        self.outcomes.append(outcome)
        log.info(
            "autotune %s: %s",
            candidate.label,
            f"{outcome.samples_per_s:.1f} samples/s in {outcome.seconds:.1f} s" if outcome.ok else outcome.error,
        )
        return outcome

    def tune(self) -> Report:
        self._t0 = self.clock()
        sweep_mode: CompileMode = "default" if self.gpu or self.base.compile_mode != "none" else "none"
        best: Outcome | None = None
        for b in doubling(self.base.batch_size, self.max_batch):
            outcome = self._try(Candidate(sweep_mode, b))
            if not outcome.ok:
                break
            if best is not None and outcome.samples_per_s < best.samples_per_s * (1 + MIN_GAIN):
                if outcome.samples_per_s > best.samples_per_s:
                    best = outcome
                break
            best = outcome
        if best is not None and self.gpu:
            for mode in GPU_MODES:
                self._try(Candidate(mode, best.candidate.batch_size))
        chosen, reason = choose(self.outcomes, self.base)
        return Report(chosen=chosen, reason=reason, outcomes=tuple(self.outcomes))


def error_from_stderr(stderr: str, returncode: int) -> str:
    """One line saying why a trial process failed, from the last error line it printed (pure)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    last = next((ln for ln in reversed(lines) if "Error" in ln or "error" in ln), lines[-1] if lines else "")
    if "OutOfMemoryError" in last or "CUDA out of memory" in last:
        return f"out of memory (exit {returncode}): {last[:300]}"
    return f"crashed (exit {returncode}): {last[:300] or 'no output'}"


def _keep_log(log_dir: Path | None, candidate: Candidate, stderr: str) -> None:
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / f"{candidate.label.replace('@', '-b')}.log").write_text(stderr)


def subprocess_runner(
    env: Mapping[str, str],
    local_rank: int,
    clock: Callable[[], float],
    *,
    steps: int = 10,
    warmup: int = 4,
    log_dir: Path | None = None,
) -> TrialRunner:
    """A TrialRunner that runs ``python -m statictrain_trainer.trial`` for each candidate.

    Each trial's stderr goes to ``<log_dir>/<candidate>.log`` when log_dir is given.
    """

    def run(candidate: Candidate, timeout_s: float) -> Outcome:
        with tempfile.TemporaryDirectory(prefix="statictrain-trial-") as tmp:
            result_path = Path(tmp) / "result.json"
            child_env = dict(env)
            child_env.update(
                {
                    envvars.COMPILE_MODE: candidate.compile_mode,
                    envvars.BATCH_SIZE: str(candidate.batch_size),
                    envvars.WORLD_SIZE: "1",
                    "RANK": "0",
                    "LOCAL_RANK": str(local_rank),
                    envvars.AUTOTUNE: "off",
                }
            )
            for name in (envvars.CHECKPOINT_DIR, envvars.STATS_DIR):
                child_env.pop(name, None)
            cmd = [
                sys.executable, "-m", "statictrain_trainer.trial",
                "--result", str(result_path), "--steps", str(steps), "--warmup", str(warmup),
            ]  # fmt: skip
            t0 = clock()
            # Own process group, so a timeout also ends the trial's compile workers.
            with subprocess.Popen(
                cmd,
                env=child_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            ) as proc:
                try:
                    _stdout, stderr = proc.communicate(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    _stdout, stderr = proc.communicate()
                    _keep_log(log_dir, candidate, stderr)
                    return Outcome(
                        candidate, ok=False, seconds=clock() - t0, error=f"timed out after {timeout_s:.0f} s"
                    )
            seconds = clock() - t0
            _keep_log(log_dir, candidate, stderr)
            if proc.returncode != 0 or not result_path.is_file():
                error = error_from_stderr(stderr, proc.returncode)
                return Outcome(candidate, ok=False, seconds=seconds, error=error)
            data = json.loads(result_path.read_text())
            return Outcome(
                candidate,
                ok=True,
                samples_per_s=float(data["samples_per_s"]),
                tokens_per_s=float(data["tokens_per_s"]) if data["tokens_per_s"] is not None else math.nan,
                mfu=float(data["mfu"]) if data["mfu"] is not None else math.nan,
                seconds=seconds,
            )

    return run


def tune_settings(
    settings: TrainerSettings,
    *,
    workload_batch: int,
    workload_max_batch: int,
    gpu: bool,
    clock: Callable[[], float],
    stop: threading.Event | None = None,
    env: Mapping[str, str] | None = None,
) -> Report:
    """Run the autotuner for this rank's device with the job's settings as the starting point."""
    base = Candidate(settings.compile_mode, settings.batch_size or workload_batch)
    log_dir = settings.stats_dir / "autotune-logs" if settings.stats_dir is not None else None
    runner = subprocess_runner(os.environ if env is None else env, settings.local_rank, clock, log_dir=log_dir)
    tuner = Autotuner(
        base,
        max_batch=workload_max_batch or 8 * base.batch_size,
        budget_s=settings.autotune_budget_s,
        runner=runner,
        clock=clock,
        gpu=gpu,
        stop=stop,
    )
    return tuner.tune()
