"""A GPT-2-small-shaped decoder (12 layers, d=768, 12 heads, vocab 50304, T=1024) on random tokens.

``build`` is the 124M model of ../shared/PERFORMANCE.md; ``build_small`` the same
code at a size a CPU trains in seconds (tests, dry runs of the benchmark).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from ..workload import Workload
from .lm import token_workload


@dataclass(frozen=True)
class GPTConfig:
    """Model shape."""

    n_layer: int = 12
    """Transformer blocks."""
    n_head: int = 12
    """Attention heads."""
    n_embd: int = 768
    """Model width."""
    vocab_size: int = 50304
    """Vocabulary (GPT-2's 50257 rounded up to a multiple of 64)."""
    block_size: int = 1024
    """Sequence length."""


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out: torch.Tensor = self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return out


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.fc_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        out: torch.Tensor = x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return out


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def features(self, idx: torch.Tensor) -> torch.Tensor:
        """The hidden states the head reads (after the final LayerNorm)."""
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        out: torch.Tensor = self.ln_f(x)
        return out

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.lm_head(self.features(idx))
        return logits


def hidden_and_head(model: nn.Module, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For the chunked-loss lever: final hidden states and the (tied) head weight."""
    assert isinstance(model, GPT)
    return model.features(idx), model.lm_head.weight



def flops_per_token(model: GPT) -> float:
    """Training FLOPs per token: 6N (N without position embeddings) + 12·L·d·T (PaLM appendix B)."""
    cfg = model.cfg
    n = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    return 6.0 * n + 12.0 * cfg.n_layer * cfg.n_embd * cfg.block_size


def workload(cfg: GPTConfig, batch_size: int, name: str, learnable: bool = False) -> Workload:
    """A Workload for a GPT of this shape on random tokens (or learnable chains, see chain_tokens)."""
    model = GPT(cfg)
    return token_workload(
        model,
        block_size=cfg.block_size,
        vocab_size=cfg.vocab_size,
        batch_size=batch_size,
        name=name,
        learnable=learnable,
        flops_per_token=flops_per_token(model),
        learning_rate=6e-4,
        max_batch_size=128,
        hidden_and_head=hidden_and_head,
    )


def build() -> Workload:
    """GPT-2 124M shape, T=1024, batch 16 per rank."""
    return workload(GPTConfig(), 16, "gpt2-124m")


def build_small() -> Workload:
    """2 layers, d=64, vocab 256, T=64: the same code at CPU size."""
    return workload(GPTConfig(n_layer=2, n_head=2, n_embd=64, vocab_size=256, block_size=64), 4, "gpt2-small-cpu")


def build_chain() -> Workload:
    """GPT-2 124M on learnable token chains: for loss-parity checks of the throughput levers."""
    return workload(GPTConfig(), 16, "gpt2-124m-chain", learnable=True)


def build_small_chain() -> Workload:
    """build_small on learnable token chains (CPU tests of loss parity)."""
    cfg = GPTConfig(n_layer=2, n_head=2, n_embd=64, vocab_size=256, block_size=64)
    return workload(cfg, 4, "gpt2-small-cpu-chain", learnable=True)
