"""Throughput levers beyond the compile mode: which apply here, and how.

Each lever is a setting (settings.py) that the autotuner may switch on. One
that this device, torch or workload cannot use is switched off with a note
(logged, and written in the trial result and the autotune report), never an
error: FP8 before compute capability 8.9 or without torchao, the chunked loss
for a workload without ``hidden_and_head``, a compiled optimizer step in eager
mode or with fp16's gradient scaler.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from .settings import Attention, TrainerSettings

log = logging.getLogger(__name__)

FP8_MIN_CAPABILITY = (8, 9)


@dataclass(frozen=True)
class Support:
    """What the process can use (gathered once; pure data so the decision is testable)."""

    cuda: bool
    """The device is a CUDA GPU."""
    capability: tuple[int, int]
    """Its compute capability ((0, 0) on CPU)."""
    torchao: bool
    """torchao is importable."""
    hidden_and_head: bool
    """The workload declares how to split its model for the chunked loss."""


def probe(device: torch.device, hidden_and_head: bool) -> Support:
    cuda = device.type == "cuda"
    return Support(
        cuda=cuda,
        capability=torch.cuda.get_device_capability(device) if cuda else (0, 0),
        torchao=importlib.util.find_spec("torchao") is not None,
        hidden_and_head=hidden_and_head,
    )


def resolve(settings: TrainerSettings, support: Support) -> tuple[TrainerSettings, list[str]]:
    """The settings with every unusable lever switched off, and one note per lever dropped (pure)."""
    notes: list[str] = []
    changes: dict[str, object] = {}
    if settings.fp8:
        if not support.cuda or support.capability < FP8_MIN_CAPABILITY:
            notes.append(f"fp8 skipped: needs a CUDA GPU of compute capability >= 8.9, have {support.capability}")
            changes["fp8"] = False
        elif not support.torchao:
            notes.append("fp8 skipped: torchao is not installed in this image (pip install torchao)")
            changes["fp8"] = False
        elif settings.precision != "bf16":
            notes.append(f"fp8 skipped: runs with bf16 autocast only, precision is {settings.precision}")
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


def to_fp8(model: nn.Module) -> nn.Module:
    """Swap Linear layers for torchao's float8 training layers (dims divisible by 16, not the head)."""
    from torchao.float8 import (  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415 (optional)
        convert_to_float8_training,
    )

    def wanted(module: nn.Module, fqn: str) -> bool:
        if not isinstance(module, nn.Linear):
            return True
        return module.in_features % 16 == 0 and module.out_features % 16 == 0 and "head" not in fqn

    converted: nn.Module = convert_to_float8_training(model, module_filter_fn=wanted)
    return converted
