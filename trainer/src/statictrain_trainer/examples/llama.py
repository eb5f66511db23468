"""A Llama-style decoder (RMSNorm, SwiGLU, rotary embeddings, grouped-query attention) on random tokens.

``build`` is about 0.89 B parameters: d=2048, 16 layers, 16 query / 8 key-value
heads, SwiGLU width 5632, vocab 32000, T=2048, untied head (the second model
family of the H200 benchmark, beside examples/gpt2.py); ``build_small`` the same
code at a size a CPU trains in seconds. The query/key/value projections and the
SwiGLU gate/up projections are each one Linear (larger matmuls, which is where
float8 pays).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from ..workload import Workload
from .lm import token_workload


@dataclass(frozen=True)
class LlamaConfig:
    """Model shape."""

    n_layer: int = 16
    """Transformer blocks."""
    n_head: int = 16
    """Query heads."""
    n_kv_head: int = 8
    """Key/value heads (grouped-query attention: n_head / n_kv_head queries share one)."""
    n_embd: int = 2048
    """Model width."""
    ffn_hidden: int = 5632
    """SwiGLU inner width (about 8/3 · d, a multiple of 256)."""
    vocab_size: int = 32000
    """Vocabulary (Llama 2's)."""
    block_size: int = 2048
    """Sequence length."""
    rope_theta: float = 10000.0
    """Rotary embedding base."""
    norm_eps: float = 1e-5
    """RMSNorm epsilon."""

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def rope_tables(cfg: LlamaConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of each position and frequency, ``[T, head_dim/2]`` each (float32)."""
    half = cfg.head_dim // 2
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(half, dtype=torch.float32) / half))
    angles = torch.outer(torch.arange(cfg.block_size, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the two halves of each head's features of ``x`` ``[b, h, t, hd]`` by the position's angle."""
    t = x.shape[-2]
    c, s = cos[:t].to(x.dtype), sin[:t].to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        if cfg.n_embd % cfg.n_head or cfg.n_head % cfg.n_kv_head:
            raise ValueError(f"n_embd {cfg.n_embd}, n_head {cfg.n_head}, n_kv_head {cfg.n_kv_head} do not divide")
        self.n_head, self.n_kv_head, self.head_dim = cfg.n_head, cfg.n_kv_head, cfg.head_dim
        kv = cfg.n_kv_head * cfg.head_dim
        self.wqkv = nn.Linear(cfg.n_embd, cfg.n_embd + 2 * kv, bias=False)
        self.wo = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        kv = self.n_kv_head * self.head_dim
        q, k, v = self.wqkv(x).split((c, kv, kv), dim=2)
        q = apply_rope(q.view(b, t, self.n_head, self.head_dim).transpose(1, 2), cos, sin)
        k = apply_rope(k.view(b, t, self.n_kv_head, self.head_dim).transpose(1, 2), cos, sin)
        v = v.view(b, t, self.n_kv_head, self.head_dim).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.n_kv_head != self.n_head)
        out: torch.Tensor = self.wo(y.transpose(1, 2).contiguous().view(b, t, c))
        return out


class SwiGLU(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.hidden = cfg.ffn_hidden
        self.w13 = nn.Linear(cfg.n_embd, 2 * cfg.ffn_hidden, bias=False)
        self.w2 = nn.Linear(cfg.ffn_hidden, cfg.n_embd, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.w13(x).split(self.hidden, dim=-1)
        out: torch.Tensor = self.w2(F.silu(gate) * up)
        return out


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.norm1 = nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
        self.attn = Attention(cfg)
        self.norm2 = nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
        self.mlp = SwiGLU(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cos, sin)
        out: torch.Tensor = x + self.mlp(self.norm2(x))
        return out


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        cos, sin = rope_tables(cfg)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def features(self, idx: torch.Tensor) -> torch.Tensor:
        """The hidden states the head reads (after the final RMSNorm)."""
        x = self.tok(idx)
        cos, sin = self.rope_cos, self.rope_sin
        for block in self.blocks:
            x = block(x, cos, sin)
        out: torch.Tensor = self.norm(x)
        return out

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.lm_head(self.features(idx))
        return logits


def hidden_and_head(model: nn.Module, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For the chunked-loss lever: final hidden states and the head weight."""
    assert isinstance(model, Llama)
    return model.features(idx), model.lm_head.weight



def flops_per_token(model: Llama) -> float:
    """Training FLOPs per token in bf16 terms: 6N (N without the input embedding, a lookup; the head
    counted) + 12·L·d·T for the attention scores and values (PaLM appendix B; GQA shares keys and values,
    not the score matmuls, so its term is the same). Float8 runs are counted in the same terms."""
    cfg = model.cfg
    n = sum(p.numel() for p in model.parameters()) - model.tok.weight.numel()
    return 6.0 * n + 12.0 * cfg.n_layer * cfg.n_embd * cfg.block_size


def workload(cfg: LlamaConfig, batch_size: int, name: str, learnable: bool = False) -> Workload:
    """A Workload for a Llama of this shape on random tokens (or learnable chains, see chain_tokens)."""
    model = Llama(cfg)
    return token_workload(
        model,
        block_size=cfg.block_size,
        vocab_size=cfg.vocab_size,
        batch_size=batch_size,
        name=name,
        learnable=learnable,
        flops_per_token=flops_per_token(model),
        learning_rate=3e-4,
        max_batch_size=32,
        hidden_and_head=hidden_and_head,
    )


FULL = LlamaConfig()
SMALL = LlamaConfig(n_layer=2, n_head=4, n_kv_head=2, n_embd=64, ffn_hidden=96, vocab_size=256, block_size=64)
"""2 layers, d=64, 4/2 heads, vocab 256, T=64: the CPU size."""


def build() -> Workload:
    """About 0.89 B parameters, T=2048, batch 8 per rank."""
    return workload(FULL, 8, "llama-0.9b")


def build_small() -> Workload:
    """The same code at CPU size (SMALL)."""
    return workload(SMALL, 4, "llama-small-cpu")


def build_chain() -> Workload:
    """build on learnable token chains: for loss-parity checks of the throughput levers."""
    return workload(FULL, 8, "llama-0.9b-chain", learnable=True)


def build_small_chain() -> Workload:
    """build_small on learnable token chains (CPU tests of loss parity)."""
    return workload(SMALL, 4, "llama-small-cpu-chain", learnable=True)
