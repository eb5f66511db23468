from __future__ import annotations

import pytest
import torch
from statictrain_trainer.fused_loss import chunked_linear_cross_entropy
from torch.nn import functional as F  # noqa: N812


def reference(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The plain path in float64: full logits, then cross-entropy."""
    logits = hidden.double() @ weight.double().t()
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 10_000])
def test_matches_plain_loss_and_gradients(chunk_rows: int) -> None:
    g = torch.Generator().manual_seed(chunk_rows)
    hidden = torch.randn(3, 21, 16, generator=g, requires_grad=True)
    weight = torch.randn(50, 16, generator=g, requires_grad=True)
    targets = torch.randint(0, 50, (3, 21), generator=g)
    h64 = hidden.detach().double().requires_grad_()
    w64 = weight.detach().double().requires_grad_()
    ref = reference(h64, w64, targets)
    ref.backward()
    out = chunked_linear_cross_entropy(hidden, weight, targets, chunk_rows=chunk_rows)
    (out * 2.0).backward()  # a non-unit upstream gradient must scale both gradients
    assert abs(out.item() - ref.item()) / ref.item() < 1e-5
    assert h64.grad is not None and w64.grad is not None
    assert hidden.grad is not None and weight.grad is not None
    for got, want in ((hidden.grad, h64.grad), (weight.grad, w64.grad)):
        rel = (got.double() - 2.0 * want).norm() / (2.0 * want).norm()
        assert rel < 1e-5
    assert hidden.grad.dtype == torch.float32 and weight.grad.dtype == torch.float32


def test_bf16_matmuls_stay_close() -> None:
    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(256, 32, generator=g, requires_grad=True)
    weight = (0.1 * torch.randn(300, 32, generator=g)).requires_grad_()
    targets = torch.randint(0, 300, (256,), generator=g)
    ref = reference(hidden, weight, targets)
    out = chunked_linear_cross_entropy(hidden, weight, targets, dtype=torch.bfloat16, chunk_rows=100)
    assert abs(out.item() - ref.item()) / ref.item() < 1e-2


def test_bad_shapes_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="hidden width 8 does not match weight"):
        chunked_linear_cross_entropy(torch.zeros(2, 8), torch.zeros(5, 4), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="chunk_rows must be >= 1"):
        targets = torch.zeros(2, dtype=torch.long)
        chunked_linear_cross_entropy(torch.zeros(2, 4), torch.zeros(5, 4), targets, chunk_rows=0)
