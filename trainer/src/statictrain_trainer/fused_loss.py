"""Chunked linear + cross-entropy: mean CE of ``hidden @ weight.T`` without the full logits.

The plain path materializes the ``[tokens, vocab]`` logits (50,304 wide for
GPT-2: 1.6 GB in bf16 at 16k tokens, twice that once cross-entropy upcasts
them) and reads and writes them several times in forward and backward. Here
the rows go through in chunks: each chunk's logits are made, reduced to its
loss and turned into its gradient at once (softmax minus one-hot), and the
gradients of the hidden states and of the weight are accumulated during the
forward pass; backward only scales them. Peak extra memory is one chunk of
logits. The matmuls run in the autocast dtype like the plain path's, the
softmax in fp32, the weight gradient accumulates in fp32.
"""

from __future__ import annotations

from typing import Any

import torch

DEFAULT_CHUNK_ROWS = 4096
"""Rows (tokens) per chunk: 4096 x 50,304 fp32 logits is 0.8 GB."""


class _ChunkedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]  # noqa: PLR0917 (autograd passes inputs positionally)
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        targets: torch.Tensor,
        chunk_rows: int,
        dtype: torch.dtype,
    ) -> torch.Tensor:
        rows = hidden.shape[0]
        h_all = hidden.to(dtype)
        w = weight.to(dtype)
        grad_hidden = torch.empty_like(h_all)
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        for start in range(0, rows, chunk_rows):
            h = h_all[start : start + chunk_rows]
            t = targets[start : start + chunk_rows]
            logits = (h @ w.t()).float()
            lse = torch.logsumexp(logits, dim=-1)
            total = total + (lse - logits.gather(1, t.unsqueeze(1)).squeeze(1)).sum()
            grad = torch.exp(logits - lse.unsqueeze(1))
            grad.scatter_add_(1, t.unsqueeze(1), torch.full_like(lse, -1.0).unsqueeze(1))
            g = grad.to(dtype)
            grad_hidden[start : start + chunk_rows] = g @ w
            grad_weight += (g.t() @ h).float()
        scale = 1.0 / rows
        ctx.save_for_backward(grad_hidden, grad_weight)
        ctx.scale = scale
        ctx.hidden_dtype = hidden.dtype
        return total * scale

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: Any, grad_out: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, None, None, None]:
        grad_hidden, grad_weight = ctx.saved_tensors
        s = grad_out * ctx.scale
        return (grad_hidden * s.to(grad_hidden.dtype)).to(ctx.hidden_dtype), grad_weight * s, None, None, None


def chunked_linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    *,
    dtype: torch.dtype | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> torch.Tensor:
    """Mean cross-entropy of ``hidden @ weight.T`` against ``targets``.

    hidden ``[..., d]``, weight ``[vocab, d]``, targets ``[...]`` of class indices; the matmuls
    run in ``dtype`` (the autocast dtype; default: hidden's).
    """
    if hidden.shape[-1] != weight.shape[-1]:
        raise ValueError(f"hidden width {hidden.shape[-1]} does not match weight {tuple(weight.shape)}")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    flat = hidden.reshape(-1, hidden.shape[-1])
    out: torch.Tensor = _ChunkedLinearCrossEntropy.apply(
        flat, weight, targets.reshape(-1), chunk_rows, dtype or hidden.dtype
    )
    return out
