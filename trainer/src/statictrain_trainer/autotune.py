"""Autotune: try the settings that matter on the real model within a time budget, keep the fastest.

The search, in order of expected gain:

1. the batch: doubling from the workload's batch (compile mode default) while
   throughput rises by more than MIN_GAIN;
2. at that batch, the other compile modes (CUDA graphs come with reduce-overhead
   and max-autotune) and the levers whose prior gain is positive, together in
   order of PRIOR_GAIN, each on top of the best so far (FP8 with tensorwise
   scaling first where the device, torch and torchao allow it, so the likeliest
   win is measured before the budget runs out); levers measured slower are
   listed as not tried. A lever is kept only
   when it beats the candidate it was added to by more than MIN_GAIN, so FP8 is
   picked where it pays and bf16 where it does not (small matmuls).

Each candidate gets a time limit from the cold compile time the first trial
measured (COST x that time x LIMIT_FACTOR); one that cannot fit in what is
left of the budget is skipped up front instead of being started and timed
out. Each runs in its own process, so one that crashes (an illegal memory
access poisons the CUDA context) or hangs takes only itself down; it is
reported, and written to a persistent record (FailureRecord) for this
(model, torch, GPU) so later jobs do not retry it. The bucket size is not
searched here: single-process trials cannot measure it (bucket_tune.py does,
with all ranks).
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
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from statictrain import envvars

from . import dirfiles
from .errors import one_line
from .settings import COMPILE_MODES, CompileMode, Fp8Recipe, TrainerSettings, lever_names, settings_label

log = logging.getLogger(__name__)

MIN_GAIN = 0.03
"""A larger batch must be this much faster (relative samples/s) to keep doubling."""
GPU_MODES: tuple[CompileMode, ...] = ("reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")

PRIOR_GAIN: dict[str, float] = {
    # relative tokens/s over compile mode default at the same batch. Measured on GPT-2 124M,
    # batch 16, bf16, one H200, torch 2.11 (bench/results/trainer_levers.json) where noted;
    # the rest are leads until measured.
    "reduce-overhead": 0.005,  # measured +0.5 %
    "max-autotune-no-cudagraphs": 0.03,  # lead: GEMM autotuning and epilogue fusion
    "max-autotune": 0.035,  # lead: the above plus CUDA graphs
    "fp8": 0.21,  # measured +21 % (tensorwise) on a Llama-style 0.82 B model, compile default, H200 (issue 28)
    "fp8_rowwise": -0.026,  # measured -2.6 % there (rowwise scaling costs more than it saves)
    "compile_optimizer": -0.003,  # measured -0.3 %
    "chunked_loss": -0.04,  # measured -3.9 % (inductor already fuses the plain loss)
}
"""Expected gain of each mode or lever: the search order, and whether a lever is tried at all."""

COST: dict[str, float] = {
    "default": 1.0,
    "none": 0.3,
    "reduce-overhead": 1.1,
    "max-autotune-no-cudagraphs": 5.0,
    "max-autotune": 5.5,
    "fp8": 1.3,
    "fp8_rowwise": 1.3,
    "compile_optimizer": 1.3,
    "chunked_loss": 1.0,
}
"""Wall time of a trial with this mode or lever, in cold default-mode trials (leads)."""
LIMIT_FACTOR = 2.0
"""A trial may take this many times its expected time before it is stopped."""


@dataclass(frozen=True)
class Candidate:
    """One point of the search."""

    compile_mode: CompileMode
    """torch.compile mode."""
    batch_size: int
    """Per-rank micro-batch."""
    chunked_loss: bool = False
    """Chunked linear + cross-entropy lever."""
    compile_optimizer: bool = False
    """Compiled optimizer step lever."""
    fp8: bool = False
    """Float8 matmuls lever."""
    fp8_recipe: Fp8Recipe = "tensorwise"
    """Its scaling (when fp8)."""

    @property
    def levers(self) -> tuple[str, ...]:
        return lever_names(self.chunked_loss, self.compile_optimizer, self.fp8, self.fp8_recipe)

    @property
    def label(self) -> str:
        return settings_label(self.compile_mode, self.batch_size, self.levers)

    @classmethod
    def parse(cls, label: str) -> Candidate:
        """The candidate a ``label`` names (``reduce-overhead@16+fp8``, as ``label`` writes it); ValueError
        saying what is wrong (pure)."""
        head, *levers = label.split("+")
        mode, _, batch = head.partition("@")
        if mode not in COMPILE_MODES or not (batch.isascii() and batch.isdigit()) or int(batch) < 1:
            raise ValueError(f"{label!r} is not mode@batch[+lever...] with a mode of {', '.join(COMPILE_MODES)}")
        rowwise = "fp8_rowwise" in levers
        candidate = cls(
            mode,
            int(batch),
            chunked_loss="chunked_loss" in levers,
            compile_optimizer="compile_optimizer" in levers,
            fp8="fp8" in levers or rowwise,
            fp8_recipe="rowwise" if rowwise else "tensorwise",
        )
        if candidate.label != label:
            raise ValueError(
                f"{label!r}: levers must be distinct, in the order chunked_loss, compile_optimizer, fp8|fp8_rowwise"
            )
        return candidate

    def env(self) -> dict[str, str]:
        """The environment variables that select this candidate."""
        return {
            envvars.COMPILE_MODE: self.compile_mode,
            envvars.BATCH_SIZE: str(self.batch_size),
            envvars.CHUNKED_LOSS: str(self.chunked_loss).lower(),
            envvars.COMPILE_OPTIMIZER: str(self.compile_optimizer).lower(),
            envvars.FP8: str(self.fp8).lower(),
            envvars.FP8_RECIPE: self.fp8_recipe,
        }

    def expected_cost(self) -> float:
        """Expected wall time in cold default-mode trials (pure)."""
        return COST.get(self.compile_mode, 1.0) * math.prod(COST[n] for n in self.levers)


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
    """Why it failed: crash, out of memory, timed out, or skipped (budget, earlier failure)."""
    limit_s: float = 0.0
    """The time limit it ran under (0 when it did not run)."""
    cache_hit: bool = False
    """The trial found its compiled graphs in the shared compile cache (its time is not cold)."""
    kept: bool = True
    """It may be picked (False: a lever that did not beat its base by MIN_GAIN)."""

    @property
    def recordable(self) -> bool:
        """A failure of the candidate itself (crash, out of memory, timeout), not a skip."""
        return not self.ok and not self.error.startswith("skipped")


@dataclass(frozen=True)
class Report:
    """The autotuner's answer."""

    chosen: Candidate
    """The settings the job will use."""
    reason: str
    """Why, in one paragraph."""
    outcomes: tuple[Outcome, ...]
    """Every trial, in order."""
    notes: tuple[str, ...] = ()
    """Candidates not tried and why (levers measured slower, earlier failures)."""

    @property
    def speedup(self) -> float:
        """The pick's samples/s over the first trial's (the spec's batch in default mode); NaN when the
        first trial or the pick was not measured."""
        first = self.outcomes[0] if self.outcomes else None
        picked = [o.samples_per_s for o in self.outcomes if o.ok and o.kept and o.candidate == self.chosen]
        if first is None or not first.ok or not picked or not first.samples_per_s > 0:
            return math.nan
        return max(picked) / first.samples_per_s

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (NaN written as null)."""

        def clean(d: dict[str, Any]) -> dict[str, Any]:
            return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in d.items()}

        return {
            "chosen": asdict(self.chosen),
            "chosen_label": self.chosen.label,
            "reason": self.reason,
            "notes": list(self.notes),
            "outcomes": [clean({**asdict(o), "candidate": o.candidate.label}) for o in self.outcomes],
        }


class FailureRecord:
    """Candidates that crashed, ran out of memory or timed out, per (model, torch, GPU), in one JSON file.

    A recorded crash or out-of-memory is not retried; a recorded timeout is retried only with a
    limit at least RETRY_FACTOR times the one it timed out under, and forgotten once it finishes. A
    file that cannot be read (not JSON, larger than MAX_BYTES, a link or not a plain file: it may sit in
    the shared compile cache) is treated as empty (logged), never fatal; it is replaced atomically and
    never written through a link.
    """

    RETRY_FACTOR = 1.5
    FILE = "autotune-failures.json"
    MAX_BYTES = 1 << 20

    def __init__(self, directory: Path | None, key: str) -> None:
        self.directory = directory
        self.path = directory / self.FILE if directory is not None else None
        self.key = key

    def _load(self) -> dict[str, dict[str, dict[str, Any]]]:
        if self.directory is None:
            return {}
        try:
            with dirfiles.opened(self.directory) as fd:
                data = json.loads(dirfiles.read_plain(fd, self.FILE, self.MAX_BYTES))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError) as e:
            log.warning("autotune record %s unreadable (%s): ignored", self.path, one_line(e))
            return {}
        return data if isinstance(data, dict) else {}

    def known(self) -> dict[str, dict[str, Any]]:
        """Label -> {"error", "limit_s"} for this key (entries that are not objects are left out)."""
        entry = self._load().get(self.key, {})
        if not isinstance(entry, dict):
            return {}
        return {label: e for label, e in entry.items() if isinstance(e, dict)}

    def add(self, outcome: Outcome) -> None:
        """Record a failure; a candidate that finished (a timeout retried under a larger limit) is
        forgotten, so later jobs with a smaller budget try it again."""
        label = outcome.candidate.label
        if self.directory is None or not (outcome.recordable or (outcome.ok and label in self.known())):
            return
        data = self._load()
        if not isinstance(data.get(self.key), dict):
            data[self.key] = {}
        if outcome.ok:
            data[self.key].pop(label, None)
        else:
            data[self.key][label] = {"error": outcome.error, "limit_s": outcome.limit_s}
        try:
            with dirfiles.opened(self.directory, create=True) as fd, dirfiles.atomic_write(fd, self.FILE) as f:
                f.write(json.dumps(data, indent=1, sort_keys=True).encode())
        except OSError as e:
            log.warning("autotune record %s not written: %s", self.path, one_line(e))


def skip_reason(known: Mapping[str, Mapping[str, Any]], candidate: Candidate, limit_s: float) -> str | None:
    """Why a recorded failure means this candidate is not tried again, or None (pure). A recorded limit
    that is not a finite positive number counts as none (the candidate is retried)."""
    entry = known.get(candidate.label)
    if entry is None:
        return None
    error = str(entry.get("error", ""))
    if error.startswith("timed out"):
        before = _positive_seconds(entry.get("limit_s"))
        if limit_s >= FailureRecord.RETRY_FACTOR * before:
            return None
        return f"skipped: timed out before under {before:.0f} s on this model, torch and GPU; {limit_s:.0f} s now"
    return f"skipped: failed before on this model, torch and GPU ({error[:200]})"


def _positive_seconds(raw: object) -> float:
    """A recorded number of seconds, or 0.0 when it is not a finite positive number (pure)."""
    if not isinstance(raw, int | float) or isinstance(raw, bool):
        return 0.0
    try:
        value = float(raw)
    except OverflowError:  # an integer beyond float
        return 0.0
    return value if math.isfinite(value) and value > 0 else 0.0


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
    good = sorted((o for o in outcomes if o.ok and o.kept), key=lambda o: o.samples_per_s, reverse=True)
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
        text += f"; failed or skipped: {failed_text}"
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
        record: FailureRecord | None = None,
        fp8_available: bool = False,
        fp8_reason: str = "",
        unit_hint_s: float = 0.0,
    ) -> None:
        self.base = base
        self.max_batch = max(max_batch, base.batch_size)
        self.budget_s = budget_s
        self.runner = runner
        self.clock = clock
        self.gpu = gpu
        self.stop = stop or threading.Event()
        self.record = record or FailureRecord(None, "")
        self.fp8_available = fp8_available
        self.fp8_reason = fp8_reason
        self.outcomes: list[Outcome] = []
        self.notes: list[str] = []
        self._known: dict[str, dict[str, Any]] = {}
        self._unit_s = max(0.0, unit_hint_s)
        """Wall seconds of a cold default-mode trial: from unit_hint_s (a cold run measured elsewhere,
        e.g. the bench's single phase) until the first cold trial here measures it."""
        self._unit_measured = False
        self._t0 = 0.0

    def _left(self) -> float:
        return self.budget_s - (self.clock() - self._t0)

    def _limit(self, candidate: Candidate) -> tuple[float, float]:
        """(expected seconds, time limit) from the first trial's wall time; the whole rest before it.
        A hint measured elsewhere (another process, another machine's caches) predicts but never
        limits: the first cold trial here may take longer and must be allowed to finish."""
        left = self._left()
        if self._unit_s <= 0:
            return left, left
        expected = candidate.expected_cost() * self._unit_s
        return expected, min(left, LIMIT_FACTOR * expected) if self._unit_measured else left

    def _try(self, candidate: Candidate) -> Outcome:
        left = self._left()
        expected, limit = self._limit(candidate)
        skip = skip_reason(self._known, candidate, limit)
        if left <= 0 or self.stop.is_set():
            outcome = Outcome(candidate, ok=False, error="skipped: budget spent" if left <= 0 else "skipped: stop")
        elif skip is not None:
            outcome = Outcome(candidate, ok=False, error=skip)
        elif self._unit_s > 0 and expected > left:
            outcome = Outcome(
                candidate, ok=False, error=f"skipped: needs about {expected:.0f} s, {left:.0f} s of the budget left"
            )
        else:
            outcome = replace(self.runner(candidate, limit), limit_s=limit)
            if not self._unit_measured and outcome.ok and not outcome.cache_hit:
                # The first cold trial is the unit of every estimate (it replaces any hint).
                self._unit_s = outcome.seconds / candidate.expected_cost()
                self._unit_measured = True
            self.record.add(outcome)
        self.outcomes.append(outcome)
        log.info(
            "autotune %s: %s",
            candidate.label,
            f"{outcome.samples_per_s:.1f} samples/s in {outcome.seconds:.1f} s" if outcome.ok else outcome.error,
        )
        return outcome

    def _best(self) -> Outcome | None:
        good = [o for o in self.outcomes if o.ok and o.kept]
        return max(good, key=lambda o: o.samples_per_s) if good else None

    def tune(self) -> Report:
        self._t0 = self.clock()
        self._known = self.record.known()
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
            self._try_modes_and_levers()
        chosen, reason = choose(self.outcomes, self.base)
        if self.notes:
            reason += "; not tried: " + "; ".join(self.notes)
        return Report(chosen=chosen, reason=reason, outcomes=tuple(self.outcomes), notes=tuple(self.notes))

    def _try_modes_and_levers(self) -> None:
        """At the batch found, the other compile modes and the levers, one at a time on top of the
        best so far, in order of expected gain (so the likeliest win is measured before the budget
        runs out); a lever is kept only when it beats its base by more than MIN_GAIN."""
        levers = ["chunked_loss", "compile_optimizer", "fp8", "fp8_rowwise"]
        if not self.fp8_available:
            self.notes.append(self.fp8_reason or "fp8: needs compute capability >= 8.9 and torchao")
            levers = [n for n in levers if not n.startswith("fp8")]
        for lever in sorted(levers, key=lambda n: -PRIOR_GAIN[n]):
            if PRIOR_GAIN[lever] <= 0:
                self.notes.append(f"{lever}: measured {PRIOR_GAIN[lever]:+.1%} on the reference model")
        steps = [*GPU_MODES, *(n for n in levers if PRIOR_GAIN[n] > 0)]
        for step in sorted(steps, key=lambda n: -PRIOR_GAIN.get(n, 0.0)):
            best = self._best()
            if best is None:
                return
            if step in GPU_MODES:
                self._try(replace(best.candidate, compile_mode=step))  # type: ignore[arg-type]
                continue
            outcome = self._try(with_lever(best.candidate, step))
            if outcome.ok and outcome.samples_per_s <= best.samples_per_s * (1 + MIN_GAIN):
                # Not worth it (noise or a loss): keep the candidate without it.
                self.notes.append(
                    f"{step}: {outcome.samples_per_s / best.samples_per_s:.3f}x {best.candidate.label}, "
                    f"not more than {1 + MIN_GAIN:.2f}x: not kept"
                )
                self.outcomes[-1] = replace(outcome, kept=False)


def with_lever(candidate: Candidate, lever: str) -> Candidate:
    """The candidate with one more lever switched on (pure)."""
    if lever == "fp8_rowwise":
        return replace(candidate, fp8=True, fp8_recipe="rowwise")
    return replace(candidate, **{lever: True})  # type: ignore[arg-type]


def dropped_lever(candidate: Candidate, result: Mapping[str, Any]) -> str | None:
    """The trial's note when it switched off a lever the candidate asked for (it then measured
    another candidate, so its figures must not count for this one), else None (pure)."""
    ran = result.get("levers") or {}
    for lever in ("fp8", "chunked_loss", "compile_optimizer"):
        if getattr(candidate, lever) and not ran.get(lever, False):
            notes = [str(n) for n in result.get("notes") or [] if str(n).startswith(lever.split("_")[0])]
            return notes[0] if notes else f"{lever} was switched off by the trial"
    return None


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
            child_env.update(candidate.env())
            child_env.update(
                {
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
            dropped = dropped_lever(candidate, data)
            if dropped is not None:
                return Outcome(candidate, ok=False, seconds=seconds, error=f"skipped: {dropped}")
            return Outcome(
                candidate,
                ok=True,
                samples_per_s=float(data["samples_per_s"]),
                tokens_per_s=float(data["tokens_per_s"]) if data["tokens_per_s"] is not None else math.nan,
                mfu=float(data["mfu"]) if data["mfu"] is not None else math.nan,
                seconds=seconds,
                cache_hit=bool(data.get("cache_hit", False)),
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
    record_key: str = "",
    fp8_available: bool = False,
    fp8_reason: str = "",
) -> Report:
    """Run the autotuner for this rank's device with the job's settings as the starting point.

    ``record_key`` names this (model, torch, GPU) in the failure record kept under
    ``settings.autotune_record_dir`` (see record_key()).
    """
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
        record=FailureRecord(settings.autotune_record_dir, record_key),
        fp8_available=fp8_available,
        fp8_reason=fp8_reason,
    )
    return tuner.tune()


def record_key(workload: str, torch_version: str, device: str) -> str:
    """The failure record's key for one model on one torch and GPU (pure)."""
    return f"{workload}|torch-{torch_version}|{device}"
