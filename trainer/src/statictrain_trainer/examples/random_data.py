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


def chain_tokens(
    start: int, count: int, seq_len: int, vocab: int, *, follow: float = 0.9, stride: int = 7919
) -> tuple[torch.Tensor, torch.Tensor]:
    """Learnable sequences: each token is the previous one plus ``stride`` (mod vocab) with
    probability ``follow``, else a fresh random token. A model that learns the rule reaches
    about ``(1 - follow) * ln(vocab) + H(follow)`` nats, so loss curves separate implementations
    that compute different functions (random tokens stay at ln(vocab) whatever the model does)."""
    g = _generator(start, 3 + count)
    fresh = torch.randint(0, vocab, (count, seq_len + 1), generator=g)
    keep = torch.rand((count, seq_len + 1), generator=g) < follow
    keep[:, 0] = False
    pos = torch.arange(seq_len + 1).expand(count, -1)
    last = torch.cummax(torch.where(keep, torch.zeros_like(pos), pos), dim=1).values
    data = (fresh.gather(1, last) + (pos - last) * stride) % vocab
    return data[:, :-1].contiguous(), data[:, 1:].contiguous()
