"""Trainer settings, filled from the environment variables the operator sets.

The names live in ``statictrain.envvars``; torchrun adds RANK, LOCAL_RANK and
WORLD_SIZE. Every bad value raises UserError with the variable name and what
would be accepted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from statictrain import envvars

from .exitcodes import UserError

CompileMode = Literal["none", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
Precision = Literal["fp32", "bf16", "fp16"]
COMPILE_MODES: tuple[CompileMode, ...] = (
    "none",
    "default",
    "reduce-overhead",
    "max-autotune",
    "max-autotune-no-cudagraphs",
)
PRECISIONS: tuple[Precision, ...] = ("fp32", "bf16", "fp16")
Attention = Literal["auto", "cudnn", "flash"]
ATTENTIONS: tuple[Attention, ...] = ("auto", "cudnn", "flash")
Fp8Recipe = Literal["tensorwise", "rowwise"]
FP8_RECIPES: tuple[Fp8Recipe, ...] = ("tensorwise", "rowwise")


@dataclass(frozen=True)
class TrainerSettings:
    """Everything the runtime needs besides the user's workload."""

    entrypoint: str
    """``module:function`` that returns a Workload (see workload.py)."""
    compile_mode: CompileMode = "default"
    """torch.compile mode; ``none`` runs eagerly."""
    fullgraph: bool = False
    """Ask torch.compile for one graph (a graph break becomes an error)."""
    dynamic: bool = False
    """Let torch.compile trace with dynamic shapes."""
    compile_cache: bool = True
    """Load and save compile artifacts under compile_cache_dir."""
    compile_cache_dir: Path | None = None
    """Shared volume for compile artifacts; no cache when unset."""
    compile_cache_shared_dir: Path | None = None
    """Read-only artifacts (same layout), tried when compile_cache_dir has none for this key; never written."""
    precision: Precision = "bf16"
    """Autocast dtype (fp16 adds a gradient scaler); fp32 disables autocast."""
    attention: Attention = "auto"
    """Scaled-dot-product attention backend tried first (``auto``: torch's own order)."""
    chunked_loss: bool = False
    """Fused chunked linear + cross-entropy (never materializes the full logits); needs
    ``Workload.hidden_and_head``, else skipped with a note."""
    compile_optimizer: bool = False
    """torch.compile the optimizer step (compiled modes only; skipped with a note otherwise)."""
    fp8: bool = False
    """torchao float8 training of the Linear layers (compute capability >= 8.9 with torchao
    installed; skipped with a note otherwise)."""
    fp8_recipe: Fp8Recipe = "tensorwise"
    """torchao's float8 scaling: one scale per tensor, or per row (rowwise needs compute capability 9.0)."""
    bucket_cap_mb: int = 25
    """DDP gradient bucket size in MiB."""
    grad_accum_steps: int = 1
    """Micro-batches per optimizer step; all but the last skip the all-reduce."""
    max_steps: int = 0
    """Stop after this many optimizer steps (global, across restarts): spec.training.maxSteps. 0 (unset):
    the entrypoint decides (Workload.max_steps), as the CRD documents."""
    max_tokens: int = 0
    """Stop once this many tokens were processed (0: no token limit)."""
    batch_size: int = 0
    """Per-rank micro-batch size; 0 keeps the workload's own."""
    checkpoint_dir: Path | None = None
    """Where checkpoints go; none are written when unset."""
    checkpoint_every: int = 500
    """Write a checkpoint every this many steps (0: only at the end and on SIGTERM)."""
    checkpoint_keep: int = 3
    """Complete checkpoints kept; older ones are deleted."""
    autotune: bool = False
    """Try settings on the real model before training and keep the fastest."""
    autotune_budget_s: float = 600.0
    """Wall seconds the autotuner may spend."""
    autotune_record_dir: Path | None = None
    """Where the autotuner keeps candidates that failed or timed out, per (model, torch, GPU),
    so later jobs do not retry them; the compile cache directory when unset."""
    stats_dir: Path | None = None
    """The trainer -> sidecar channel directory; no stats when unset."""
    peak_tflops: float = 0.0
    """Peak dense TFLOP/s of one device for MFU; 0 looks it up from the GPU name."""
    seed: int = 0
    """Seed for model initialisation and data order."""
    rank: int = 0
    """Global rank (torchrun's RANK)."""
    local_rank: int = 0
    """Rank on this node (torchrun's LOCAL_RANK)."""
    world_size: int = 1
    """Number of ranks (torchrun's WORLD_SIZE)."""
    local_world_size: int = 1
    """Ranks on this node, i.e. in this pod (torchrun's LOCAL_WORLD_SIZE)."""
    autotune_speedup: float = math.nan
    """Set by the autotuner, not read from the environment: its pick's samples/s over its first trial's
    (the spec's batch in default mode); NaN when not tuned or not known."""

    def label(self, batch_size: int) -> str:
        """What runs, as the autotuner names candidates: ``reduce-overhead@16+fp8``."""
        levers = lever_names(self.chunked_loss, self.compile_optimizer, self.fp8, self.fp8_recipe)
        return settings_label(self.compile_mode, batch_size, levers)


def lever_names(chunked_loss: bool, compile_optimizer: bool, fp8: bool, fp8_recipe: str) -> tuple[str, ...]:
    """The levers on, in a fixed order, by the autotuner's names (pure)."""
    names = [n for n, on in (("chunked_loss", chunked_loss), ("compile_optimizer", compile_optimizer)) if on]
    if fp8:
        names.append("fp8" if fp8_recipe == "tensorwise" else f"fp8_{fp8_recipe}")
    return tuple(names)


def settings_label(mode: str, batch_size: int, levers: tuple[str, ...]) -> str:
    """``mode@batch+lever+...`` (pure)."""
    return f"{mode}@{batch_size}" + "".join(f"+{n}" for n in levers)


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    low = raw.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise UserError(f"{name}={raw!r} is not a boolean; use true or false")


def _int(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UserError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise UserError(f"{name}={value} must be >= {minimum}")
    return value


def _float(env: Mapping[str, str], name: str, default: float, minimum: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise UserError(f"{name}={raw!r} is not a number") from None
    if not math.isfinite(value) or value < minimum:
        raise UserError(f"{name}={raw!r} must be a finite number >= {minimum}")
    return value


def _choice(env: Mapping[str, str], name: str, default: str, allowed: tuple[str, ...]) -> str:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if raw not in allowed:
        raise UserError(f"{name}={raw!r} is not one of {', '.join(allowed)}")
    return raw


def _path(env: Mapping[str, str], name: str) -> Path | None:
    raw = env.get(name)
    return Path(raw) if raw else None


def settings_from_env(env: Mapping[str, str]) -> TrainerSettings:
    """Read and validate the settings; raise UserError naming the bad variable."""
    entrypoint = env.get(envvars.ENTRYPOINT, "")
    if ":" not in entrypoint or entrypoint.startswith(":") or entrypoint.endswith(":"):
        raise UserError(
            f"{envvars.ENTRYPOINT}={entrypoint!r} must be 'module:function', "
            "e.g. statictrain_trainer.examples.gpt2:build"
        )
    autotune = _choice(env, envvars.AUTOTUNE, "off", ("off", "on")) == "on"
    world_size = _int(env, envvars.WORLD_SIZE, 1, 1)
    rank = _int(env, "RANK", 0, 0)
    local_rank = _int(env, "LOCAL_RANK", 0, 0)
    local_world_size = min(_int(env, "LOCAL_WORLD_SIZE", 1, 1), world_size)
    if rank >= world_size:
        raise UserError(f"RANK={rank} must be < {envvars.WORLD_SIZE}={world_size}")
    return TrainerSettings(
        entrypoint=entrypoint,
        compile_mode=cast(CompileMode, _choice(env, envvars.COMPILE_MODE, "default", COMPILE_MODES)),
        fullgraph=_bool(env, envvars.COMPILE_FULLGRAPH, False),
        dynamic=_bool(env, envvars.COMPILE_DYNAMIC, False),
        compile_cache=_bool(env, envvars.COMPILE_CACHE, True),
        compile_cache_dir=_path(env, envvars.COMPILE_CACHE_DIR),
        compile_cache_shared_dir=_path(env, envvars.COMPILE_CACHE_SHARED_DIR),
        precision=cast(Precision, _choice(env, envvars.PRECISION, "bf16", PRECISIONS)),
        attention=cast(Attention, _choice(env, envvars.ATTENTION, "auto", ATTENTIONS)),
        chunked_loss=_bool(env, envvars.CHUNKED_LOSS, False),
        compile_optimizer=_bool(env, envvars.COMPILE_OPTIMIZER, False),
        fp8=_bool(env, envvars.FP8, False),
        fp8_recipe=cast(Fp8Recipe, _choice(env, envvars.FP8_RECIPE, "tensorwise", FP8_RECIPES)),
        bucket_cap_mb=_int(env, envvars.BUCKET_CAP_MB, 25, 1),
        grad_accum_steps=_int(env, envvars.GRAD_ACCUM_STEPS, 1, 1),
        max_steps=_int(env, envvars.MAX_STEPS, 0, 1),
        max_tokens=_int(env, envvars.MAX_TOKENS, 0, 0),
        batch_size=_int(env, envvars.BATCH_SIZE, 0, 0),
        checkpoint_dir=_path(env, envvars.CHECKPOINT_DIR),
        checkpoint_every=_int(env, envvars.CHECKPOINT_EVERY, 500, 0),
        checkpoint_keep=_int(env, envvars.CHECKPOINT_KEEP, 3, 1),
        autotune=autotune,
        autotune_budget_s=_float(env, envvars.AUTOTUNE_BUDGET_S, 600.0, 1.0),
        autotune_record_dir=_path(env, envvars.AUTOTUNE_RECORD_DIR) or _path(env, envvars.COMPILE_CACHE_DIR),
        stats_dir=_path(env, envvars.STATS_DIR),
        peak_tflops=_float(env, envvars.PEAK_TFLOPS, 0.0, 0.0),
        seed=_int(env, envvars.SEED, 0, 0),
        rank=rank,
        local_rank=local_rank,
        world_size=world_size,
        local_world_size=local_world_size,
    )
