"""What the example language models share: next-token loss and a Workload on generated tokens."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from ..workload import Workload
from .random_data import chain_tokens, random_tokens_fast


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Next-token cross entropy."""
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def token_workload(
    model: nn.Module,
    *,
    block_size: int,
    vocab_size: int,
    batch_size: int,
    name: str,
    learnable: bool,
    flops_per_token: float,
    learning_rate: float,
    max_batch_size: int,
    hidden_and_head: Callable[[nn.Module, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
) -> Workload:
    """A Workload for ``model`` on random tokens (or learnable chains, see chain_tokens)."""
    make = chain_tokens if learnable else random_tokens_fast

    def batch(start: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        return make(start, count, block_size, vocab_size)

    return Workload(
        model=model,
        batch=batch,
        loss=lm_loss,
        batch_size=batch_size,
        tokens_per_sample=block_size,
        flops_per_sample=flops_per_token * block_size,
        learning_rate=learning_rate,
        weight_decay=0.1,
        max_batch_size=max_batch_size,
        name=name,
        hidden_and_head=hidden_and_head,
    )
