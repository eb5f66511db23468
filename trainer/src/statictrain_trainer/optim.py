"""The optimizer: AdamW, fused where the device supports it; decay only on matrices."""

from __future__ import annotations

import logging

import torch
from torch import nn

log = logging.getLogger(__name__)


def adamw(
    model: nn.Module, lr: float, weight_decay: float, device: torch.device, *, fused: bool = True
) -> torch.optim.Optimizer:
    """AdamW; ``fused=False`` gives the foreach version (what torch.compile of the step traces best)."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if not fused:
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), foreach=True)
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), fused=True)
    except (RuntimeError, TypeError) as e:
        log.info("fused AdamW unavailable on %s (%s); using foreach", device, e)
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), foreach=True)
