"""Process group and device for this rank (torchrun sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_*)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from .settings import TrainerSettings


@dataclass(frozen=True)
class DistContext:
    """Where this process runs."""

    rank: int
    """Global rank."""
    local_rank: int
    """Rank on this node."""
    world_size: int
    """Ranks in the job."""
    device: torch.device
    """cuda:<local_rank> when CUDA is there, else cpu."""

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def pick_device(local_rank: int) -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def init(settings: TrainerSettings, timeout_s: float = 600.0) -> DistContext:
    """Join the process group when WORLD_SIZE > 1 (nccl on GPUs, gloo on CPU)."""
    device = pick_device(settings.local_rank)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if settings.world_size > 1 and not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(
            backend=backend,
            rank=settings.rank,
            world_size=settings.world_size,
            timeout=timedelta(seconds=timeout_s),
            device_id=device if device.type == "cuda" else None,
        )
    return DistContext(settings.rank, settings.local_rank, settings.world_size, device)


def shutdown(ctx: DistContext) -> None:
    if ctx.distributed and dist.is_initialized():
        dist.destroy_process_group()
