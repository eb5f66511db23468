"""A small residual CNN on random 3x32x32 images, 10 classes."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from ..workload import Workload

CLASSES = 10


class ResBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class SmallCNN(nn.Module):
    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.stage1 = ResBlock(width)
        self.down = nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=False)
        self.stage2 = ResBlock(2 * width)
        self.head = nn.Linear(2 * width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stage2(F.relu(self.down(self.stage1(self.stem(x)))))
        out: torch.Tensor = self.head(x.mean(dim=(2, 3)))
        return out


def build() -> Workload:
    """SmallCNN(64) with batch 128 per rank; labels depend on the image, so it can learn."""

    def batch(start: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator()
        g.manual_seed(start * 7919 + count)
        x = torch.randn(count, 3, 32, 32, generator=g)
        y = (x[:, 0].mean(dim=(1, 2)) > 0).long() + 2 * (x[:, 1].mean(dim=(1, 2)) > 0).long()
        return x, y

    return Workload(
        model=SmallCNN(),
        batch=batch,
        loss=F.cross_entropy,
        batch_size=128,
        learning_rate=1e-3,
        max_batch_size=2048,
        name="small-cnn",
    )
