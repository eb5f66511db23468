"""A workload with a wide layer (~16.8 M parameters, a ~200 MB checkpoint with its optimizer state), so a
checkpoint takes long enough to write that a test can kill the trainer in the middle of it."""

from __future__ import annotations

import torch
from statictrain_trainer.workload import Workload
from torch import nn

WIDTH = 4096


def build() -> Workload:
    def batch(start: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator()
        g.manual_seed(start)
        x = torch.randn(count, WIDTH, generator=g)
        return x, x

    model = nn.Linear(WIDTH, WIDTH)
    return Workload(
        model=model,
        batch=batch,
        loss=nn.functional.mse_loss,
        batch_size=2,
        flops_per_sample=6.0 * WIDTH * WIDTH,
        learning_rate=1e-4,
        name="wide-linear",
    )
