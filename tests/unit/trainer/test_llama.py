"""The Llama-style example: its size, FLOPs formula, rotary embeddings, GQA, chunked-loss split, training on CPU."""

from __future__ import annotations

import dataclasses
import math
import statistics

import torch
from statictrain import envvars
from statictrain_trainer.distributed import DistContext, pick_device
from statictrain_trainer.examples import llama
from statictrain_trainer.fused_loss import chunked_linear_cross_entropy
from statictrain_trainer.loop import Trainer
from statictrain_trainer.settings import settings_from_env
from statictrain_trainer.workload import load_entrypoint

CPU = DistContext(rank=0, local_rank=0, world_size=1, device=pick_device(0))


def _shape_count(cfg: llama.LlamaConfig) -> tuple[int, int]:
    """(all parameters, input embedding) counted from the shapes the docstring names."""
    d, kv = cfg.n_embd, cfg.n_kv_head * cfg.head_dim
    per_layer = d * (d + 2 * kv) + d * d + d * 2 * cfg.ffn_hidden + cfg.ffn_hidden * d + 2 * d
    emb = cfg.vocab_size * d
    return cfg.n_layer * per_layer + d + 2 * emb, emb


def test_full_size_is_about_a_billion_parameters_and_the_flops_follow_the_shapes() -> None:
    with torch.device("meta"):
        model = llama.Llama(llama.FULL)
    n = sum(p.numel() for p in model.parameters())
    total, emb = _shape_count(llama.FULL)
    assert n == total
    assert 0.8e9 <= n <= 1.0e9
    cfg = llama.FULL
    assert llama.flops_per_token(model) == 6.0 * (total - emb) + 12.0 * cfg.n_layer * cfg.n_embd * cfg.block_size


def test_rotary_scores_depend_only_on_the_distance() -> None:
    cfg = dataclasses.replace(llama.SMALL, block_size=16)
    cos, sin = llama.rope_tables(cfg)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(cfg.head_dim, generator=g, dtype=torch.float64)
    k = torch.randn(cfg.head_dim, generator=g, dtype=torch.float64)

    def at(x: torch.Tensor, pos: int) -> torch.Tensor:
        seq = torch.zeros(1, 1, cfg.block_size, cfg.head_dim, dtype=torch.float64)
        seq[0, 0, pos] = x
        return llama.apply_rope(seq, cos.double(), sin.double())[0, 0, pos]

    score = {(m, n): float(at(q, m) @ at(k, n)) for m, n in ((3, 1), (9, 7), (5, 5), (12, 12))}
    assert math.isclose(score[(3, 1)], score[(9, 7)], rel_tol=1e-6)  # fp32 tables
    assert math.isclose(score[(5, 5)], score[(12, 12)], rel_tol=1e-6)
    assert not math.isclose(score[(3, 1)], score[(5, 5)], rel_tol=1e-3)
    assert math.isclose(float(at(q, 6).norm()), float(q.norm()), rel_tol=1e-6)  # a rotation


def test_grouped_query_attention_matches_repeated_heads() -> None:
    torch.manual_seed(0)
    attn = llama.Attention(llama.SMALL)
    cos, sin = llama.rope_tables(llama.SMALL)
    x = torch.randn(2, 10, llama.SMALL.n_embd)
    got = attn(x, cos, sin)
    cfg = llama.SMALL
    kv = cfg.n_kv_head * cfg.head_dim
    q, k, v = attn.wqkv(x).split((cfg.n_embd, kv, kv), dim=2)
    q = llama.apply_rope(q.view(2, 10, cfg.n_head, cfg.head_dim).transpose(1, 2), cos, sin)
    k = llama.apply_rope(k.view(2, 10, cfg.n_kv_head, cfg.head_dim).transpose(1, 2), cos, sin)
    v = v.view(2, 10, cfg.n_kv_head, cfg.head_dim).transpose(1, 2)
    rep = cfg.n_head // cfg.n_kv_head
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    want = attn.wo(y.transpose(1, 2).reshape(2, 10, cfg.n_embd))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_chunked_loss_of_hidden_and_head_matches_the_plain_loss() -> None:
    w = load_entrypoint("statictrain_trainer.examples.llama:build_small")
    x, y = w.batch(0, 2)
    assert w.hidden_and_head is not None
    with torch.no_grad():
        plain = w.loss(w.model(x), y).item()
        hidden, head = w.hidden_and_head(w.model, x)
        chunked = chunked_linear_cross_entropy(hidden, head, y, chunk_rows=37).item()
    assert math.isclose(plain, chunked, rel_tol=1e-5)
    assert abs(plain - math.log(llama.SMALL.vocab_size)) < 0.2  # random init: about ln(vocab)


def test_small_chain_trains_on_cpu_and_fp8_is_skipped_with_its_reason() -> None:
    settings = settings_from_env(
        {
            envvars.ENTRYPOINT: "statictrain_trainer.examples.llama:build_small_chain",
            envvars.COMPILE_MODE: "none",
            envvars.PRECISION: "fp32",
            envvars.FP8: "true",
            envvars.MAX_STEPS: "20",
        }
    )
    torch.manual_seed(0)
    trainer = Trainer(settings, dataclasses.replace(llama.build_small_chain(), learning_rate=3e-3), CPU)
    assert trainer.settings.fp8 is False
    assert any(n.startswith("fp8 skipped: needs a CUDA GPU of compute capability >= 8.9") for n in trainer.notes)
    result = trainer.run()
    assert result.end_step == 20
    assert statistics.mean(result.losses[-5:]) < 0.8 * statistics.mean(result.losses[:3]), result.losses
