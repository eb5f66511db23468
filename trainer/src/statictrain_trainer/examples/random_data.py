"""Deterministic random batches: sample i is always the same tensor."""

from __future__ import annotations

import torch


def _generator(start: int, salt: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(start * 1_000_003 + salt)
    return g


def random_tokens(start: int, count: int, seq_len: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token sequences; targets are the inputs shifted by one."""
    rows = [torch.randint(0, vocab, (seq_len + 1,), generator=_generator(start + i, 1)) for i in range(count)]
    data = torch.stack(rows)
    return data[:, :-1].contiguous(), data[:, 1:].contiguous()


def random_tokens_fast(start: int, count: int, seq_len: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Like random_tokens but one draw per batch (deterministic in start and count only)."""
    data = torch.randint(0, vocab, (count, seq_len + 1), generator=_generator(start, 2 + count))
    return data[:, :-1].contiguous(), data[:, 1:].contiguous()
