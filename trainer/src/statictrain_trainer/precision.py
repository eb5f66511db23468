"""Autocast and gradient scaling for a precision setting."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager

import torch

from .settings import Precision

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
"""Autocast dtype of each reduced precision."""


def autocast_factory(precision: Precision, device: torch.device) -> Callable[[], AbstractContextManager[object]]:
    """A function that returns a fresh autocast context (a no-op for fp32)."""
    dtype = DTYPES.get(precision)
    if dtype is None:
        return contextlib.nullcontext
    return lambda: torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(precision: Precision, device: torch.device) -> torch.amp.GradScaler | None:
    """A GradScaler for fp16, else None."""
    if precision != "fp16":
        return None
    return torch.amp.GradScaler(device.type)
