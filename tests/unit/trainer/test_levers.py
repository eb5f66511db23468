"""Which levers apply where (pure), and FP8 on a machine that cannot run it: a note, never a crash."""

from __future__ import annotations

import pytest
import torch
from statictrain_trainer import levers
from statictrain_trainer.levers import Support, fp8_unsupported, version_tuple
from statictrain_trainer.settings import TrainerSettings

H200 = Support(cuda=True, capability=(9, 0), torchao=True, torchao_version="0.18.0", torch_version="2.11.0+cu130")


@pytest.mark.parametrize(
    ("support", "recipe", "precision", "reason"),
    [
        pytest.param(H200, "tensorwise", "bf16", None, id="h200-tensorwise"),
        pytest.param(H200, "rowwise", "bf16", None, id="h200-rowwise"),
        pytest.param(Support(False, (0, 0), False), "tensorwise", "bf16",
                     "compute capability >= 8.9 (tensorwise scaling), have (0, 0)", id="cpu"),
        pytest.param(Support(True, (8, 0), True, "0.18.0"), "tensorwise", "bf16", ">= 8.9", id="a100"),
        pytest.param(Support(True, (8, 9), True, "0.18.0"), "tensorwise", "bf16", None, id="l40s-tensorwise"),
        pytest.param(Support(True, (8, 9), True, "0.18.0"), "rowwise", "bf16", ">= 9.0 (rowwise", id="l40s-rowwise"),
        pytest.param(Support(True, (9, 0), False), "tensorwise", "bf16", "torchao is not installed", id="no-torchao"),
        pytest.param(Support(True, (9, 0), True, "0.8.0"), "tensorwise", "bf16", "torchao 0.8.0 is older", id="old-ao"),
        pytest.param(Support(True, (9, 0), True, "0.18.0", "2.4.1"), "tensorwise", "bf16", "torch 2.4.1", id="torch"),
        pytest.param(H200, "tensorwise", "fp16", "bf16 autocast only, precision is fp16", id="fp16"),
    ],
)  # fmt: skip
def test_fp8_support_table(support: Support, recipe: levers.Fp8Recipe, precision: str, reason: str | None) -> None:
    got = fp8_unsupported(support, recipe, precision)
    if reason is None:
        assert got is None
    else:
        assert got is not None and got.startswith("fp8 skipped: ") and reason in got and "\n" not in got


def test_version_tuple() -> None:
    assert version_tuple("2.11.0+cu130") == (2, 11, 0)
    assert version_tuple("0.18.0.dev20261201") == (0, 18, 0)
    assert version_tuple("2.5") == (2, 5)
    assert version_tuple("unknown") == ()


def test_fp8_asked_for_on_this_cpu_is_switched_off_with_one_note() -> None:
    support = levers.probe(torch.device("cpu"), hidden_and_head=False)
    settings, notes = levers.resolve(TrainerSettings(entrypoint="m:f", fp8=True, fp8_recipe="rowwise"), support)
    assert settings.fp8 is False
    assert notes == ["fp8 skipped: needs a CUDA GPU of compute capability >= 9.0 (rowwise scaling), have (0, 0)"]


def test_a_failing_float8_conversion_is_a_note_and_the_model_is_kept() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 16))
    try:
        import torchao  # noqa: F401, PLC0415 (only to know which failure to expect)
    except ImportError:
        kept, note = levers.apply_fp8(model, "tensorwise")
        assert kept is model
        assert note is not None and note.startswith("fp8 skipped: torchao's float8 conversion failed (")
        assert "ModuleNotFoundError" in note or "ImportError" in note
    else:
        pytest.skip("torchao is installed here: its conversion is exercised on the GPU bench")


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
def test_torchao_conversion_swaps_every_linear_but_the_head(recipe: levers.Fp8Recipe) -> None:
    """Runs where torchao is importable (e.g. PYTHONPATH to the .whl/ wheel installed with --target):
    the module swap needs no GPU, only the float8 matmuls do."""
    float8 = pytest.importorskip("torchao.float8")
    from statictrain_trainer.examples import llama  # noqa: PLC0415

    model, note = levers.apply_fp8(llama.build_small().model, recipe)
    assert note is None
    linears = {n: type(m).__name__ for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert linears.pop("lm_head") == "Linear"
    assert linears and set(linears.values()) == {"Float8Linear"}
    want = float8.Float8LinearConfig.from_recipe_name(recipe)
    assert all(m.config == want for m in model.modules() if hasattr(m, "config"))
