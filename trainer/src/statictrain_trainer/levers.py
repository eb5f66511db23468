"""Throughput levers beyond the compile mode: which apply here, and how.

Each lever is a setting (settings.py) that the autotuner may switch on. One
that this device, torch or workload cannot use is switched off with a note
(logged, and written in the trial result and the autotune report), never an
error: FP8 before compute capability 8.9 (rowwise: 9.0), without torchao or
with a torch or torchao too old for its float8 training, the chunked loss
for a workload without ``hidden_and_head``, a compiled optimizer step in eager
mode or with fp16's gradient scaler.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import logging
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from .settings import Attention, Fp8Recipe, TrainerSettings

log = logging.getLogger(__name__)

FP8_MIN_CAPABILITY: dict[Fp8Recipe, tuple[int, int]] = {"tensorwise": (8, 9), "rowwise": (9, 0)}
"""float8 tensor cores from Ada (8.9); torch's row-wise scaled matmul from Hopper (9.0)."""
FP8_MIN_TORCHAO = (0, 10)
"""Float8LinearConfig.from_recipe_name (tensorwise and rowwise recipes) came in torchao 0.10."""
FP8_MIN_TORCH = (2, 5)
"""The oldest torch whose _scaled_mm torchao's float8 training supports."""


def version_tuple(text: str) -> tuple[int, ...]:
    """(major, minor, patch) of a version string such as 2.11.0+cu130 or 0.18.0.dev1; () when none (pure)."""
    found = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g) for g in found.groups() if g is not None) if found else ()


@dataclass(frozen=True)
class Support:
    """What the process can use (gathered once; pure data so the decision is testable)."""

    cuda: bool
    """The device is a CUDA GPU."""
    capability: tuple[int, int]
    """Its compute capability ((0, 0) on CPU)."""
    torchao: bool
    """torchao is importable."""
    torchao_version: str = ""
    """Its version ("" when not installed or unknown)."""
    torch_version: str = torch.__version__
    """torch's version."""
    hidden_and_head: bool = False
    """The workload declares how to split its model for the chunked loss."""


def probe(device: torch.device, hidden_and_head: bool) -> Support:
    cuda = device.type == "cuda"
    try:
        ao_version = importlib.metadata.version("torchao")
    except importlib.metadata.PackageNotFoundError:
        ao_version = ""
    return Support(
        cuda=cuda,
        capability=torch.cuda.get_device_capability(device) if cuda else (0, 0),
        torchao=bool(ao_version),
        torchao_version=ao_version,
        torch_version=torch.__version__,
        hidden_and_head=hidden_and_head,
    )


def fp8_unsupported(support: Support, recipe: Fp8Recipe, precision: str) -> str | None:
    """Why float8 training with this recipe cannot run here (one line), or None (pure)."""
    need = FP8_MIN_CAPABILITY[recipe]
    if not support.cuda or support.capability < need:
        cc, have = f"{need[0]}.{need[1]}", support.capability
        return f"fp8 skipped: needs a CUDA GPU of compute capability >= {cc} ({recipe} scaling), have {have}"
    if not support.torchao:
        return "fp8 skipped: torchao is not installed in this image (pip install torchao, or the wheel in .whl/)"
    ao = version_tuple(support.torchao_version)
    if ao and ao < FP8_MIN_TORCHAO:
        return f"fp8 skipped: torchao {support.torchao_version} is older than 0.10 (no float8 recipes)"
    if version_tuple(support.torch_version) < FP8_MIN_TORCH:
        return f"fp8 skipped: torch {support.torch_version} is older than 2.5 (torchao float8 needs its _scaled_mm)"
    if precision != "bf16":
        return f"fp8 skipped: runs with bf16 autocast only, precision is {precision}"
    return None


def resolve(settings: TrainerSettings, support: Support) -> tuple[TrainerSettings, list[str]]:
    """The settings with every unusable lever switched off, and one note per lever dropped (pure)."""
    notes: list[str] = []
    changes: dict[str, object] = {}
    if settings.fp8:
        why = fp8_unsupported(support, settings.fp8_recipe, settings.precision)
        if why is not None:
            notes.append(why)
            changes["fp8"] = False
    if settings.chunked_loss and not support.hidden_and_head:
        notes.append("chunked loss skipped: the workload sets no Workload.hidden_and_head")
        changes["chunked_loss"] = False
    if settings.compile_optimizer:
        if settings.compile_mode == "none":
            notes.append("compiled optimizer skipped: compile mode is none")
            changes["compile_optimizer"] = False
        elif settings.precision == "fp16":
            notes.append("compiled optimizer skipped: fp16's gradient scaler steps the optimizer itself")
            changes["compile_optimizer"] = False
    if settings.attention != "auto" and not support.cuda:
        notes.append(f"attention={settings.attention} skipped: not a CUDA device")
        changes["attention"] = "auto"
    for note in notes:
        log.warning(note)
    return dataclasses.replace(settings, **changes), notes  # type: ignore[arg-type]


def attention_context(attention: Attention) -> Callable[[], AbstractContextManager[object]]:
    """A factory of the context that puts the chosen SDPA backend first (the others stay as fallbacks)."""
    if attention == "auto":
        return contextlib.nullcontext
    first = SDPBackend.CUDNN_ATTENTION if attention == "cudnn" else SDPBackend.FLASH_ATTENTION
    order = [first, *(b for b in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                                  SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH) if b != first)]  # fmt: skip
    return lambda: sdpa_kernel(order, set_priority=True)


def to_fp8(model: nn.Module, recipe: Fp8Recipe = "tensorwise") -> nn.Module:
    """Swap Linear layers for torchao's float8 training layers (dims divisible by 16, not the head)."""
    from torchao.float8 import (  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415 (optional)
        Float8LinearConfig,
        convert_to_float8_training,
    )

    def wanted(module: nn.Module, fqn: str) -> bool:
        if not isinstance(module, nn.Linear):
            return True
        return module.in_features % 16 == 0 and module.out_features % 16 == 0 and "head" not in fqn

    config = Float8LinearConfig.from_recipe_name(recipe)
    converted: nn.Module = convert_to_float8_training(model, config=config, module_filter_fn=wanted)
    return converted


def apply_fp8(model: nn.Module, recipe: Fp8Recipe) -> tuple[nn.Module, str | None]:
    """to_fp8, or the model unchanged and a one-line note when torchao's conversion fails here
    (an API this torchao lacks, a torch it was not built for): never an error."""
    try:
        return to_fp8(model, recipe), None
    except Exception as e:  # any failure of the optional library is a skip, not a crash
        note = f"fp8 skipped: torchao's float8 conversion failed ({type(e).__name__}: {str(e)[:200]})"
        log.warning(note)
        return model, note
