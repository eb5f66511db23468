"""Forward + backward time of torch's SDPA backends on the example models' attention shapes (one GPU).

    python bench/sdpa_backends.py            # prints one JSON line per (shape, backend)

Shapes: GPT-2-124M (batch 16, 12 heads, T 1024, head 64) and the Llama-style example (batch 16, 16 query /
8 key-value heads, T 2048, head 128, GQA), bf16, causal. Each backend alone (sdpa_kernel with one
backend); "auto" is torch's own choice. A backend that refuses the shape prints its error. Timed with CUDA
events over 20 iterations after 5 warm-up ones; TFLOP/s counts the causal half of QK^T and PV, forward
and backward (2.5x the forward).
"""

from __future__ import annotations

import contextlib
import json

import torch
from torch.nn import functional
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = {"gpt2": (16, 12, 12, 1024, 64), "llama": (16, 16, 8, 2048, 128)}
BACKENDS = {"auto": None, "flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}  # fmt: skip


def time_one(shape: tuple[int, int, int, int, int], backend: SDPBackend | None, iters: int = 20) -> float:
    b, h, kv, t, d = shape
    q = torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(b, kv, t, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(b, kv, t, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16)

    def step() -> None:
        with contextlib.nullcontext() if backend is None else sdpa_kernel([backend]):
            out = functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != h)
        out.backward(grad)

    for _ in range(5):
        step()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        step()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / iters


def main() -> None:
    for model, shape in SHAPES.items():
        b, h, _, t, d = shape
        flop = 2.5 * 4 * b * h * t * t * d / 2
        for name, backend in BACKENDS.items():
            try:
                ms = time_one(shape, backend)
                row = {"model": model, "backend": name, "ms": round(ms, 3), "tflops": round(flop / ms / 1e9, 1)}
            except RuntimeError as e:
                row = {"model": model, "backend": name, "error": str(e).splitlines()[0][:160]}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
