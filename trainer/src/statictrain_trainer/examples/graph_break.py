"""A tiny MLP whose forward branches on a tensor's value (``.item()``): torch.compile breaks the graph there.

The pre-flight check's negative example: with ``compile.fullgraph`` it must fail
and name this file and the line of the ``.item()`` call.
"""

from __future__ import annotations

import torch
from torch import nn

from ..workload import Workload
from . import tiny


class BranchyMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = tiny.TinyMLP()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.abs().max().item() > 100.0:  # data-dependent Python branch: a graph break
            x = x / 100.0
        out: torch.Tensor = self.net(x)
        return out


def build() -> Workload:
    """The tiny workload with the branching model."""
    w = tiny.build()
    w.model = BranchyMLP()
    w.name = "graph-break-mlp"
    return w
