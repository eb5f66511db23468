"""A tiny regression MLP for CPU tests: learns a fixed random linear map, so its loss falls."""

from __future__ import annotations

import torch
from torch import nn

from ..workload import Workload

IN_FEATURES = 16
OUT_FEATURES = 4


def _teacher() -> torch.Tensor:
    g = torch.Generator()
    g.manual_seed(1234)
    return torch.randn(IN_FEATURES, OUT_FEATURES, generator=g)


class TinyMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(IN_FEATURES, 32), nn.Tanh(), nn.Linear(32, OUT_FEATURES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(x)
        return out


def build() -> Workload:
    """The tiny workload (8 samples per micro-batch, learning rate 1e-2)."""
    teacher = _teacher()

    def batch(start: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        xs = []
        for i in range(start, start + count):
            g = torch.Generator()
            g.manual_seed(i)
            xs.append(torch.randn(IN_FEATURES, generator=g))
        x = torch.stack(xs)
        return x, x @ teacher

    model = TinyMLP()
    params = sum(p.numel() for p in model.parameters())
    return Workload(
        model=model,
        batch=batch,
        loss=nn.functional.mse_loss,
        batch_size=8,
        flops_per_sample=6.0 * params,
        learning_rate=1e-2,
        name="tiny-mlp",
    )
