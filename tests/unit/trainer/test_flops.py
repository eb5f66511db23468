from __future__ import annotations

import math

import pytest
from statictrain_trainer.flops import mfu, peak_tflops


@pytest.mark.parametrize(
    ("name", "precision", "override", "want"),
    [
        pytest.param("NVIDIA H200", "bf16", 0.0, 989.0, id="h200"),
        pytest.param("NVIDIA H100 80GB HBM3", "fp16", 0.0, 989.0, id="h100-fp16"),
        pytest.param("NVIDIA A100-SXM4-40GB", "bf16", 0.0, 312.0, id="a100"),
        pytest.param("NVIDIA L4", "bf16", 0.0, 121.0, id="l4"),
        pytest.param("cpu", "bf16", 0.0, math.nan, id="unknown"),
        pytest.param("NVIDIA H200", "fp32", 0.0, math.nan, id="fp32-unknown"),
        pytest.param("cpu", "fp32", 2.5, 2.5, id="override"),
    ],
)
def test_peak(name: str, precision: str, override: float, want: float) -> None:
    got = peak_tflops(name, precision, override)
    assert (math.isnan(got) and math.isnan(want)) or got == want


def test_mfu_is_achieved_over_peak() -> None:
    # 1e12 FLOPs per sample at 100 samples/s on 2 devices of 100 TFLOP/s = 0.5
    assert mfu(1e12, 100.0, 100.0, 2) == pytest.approx(0.5)


def test_mfu_unknown_when_flops_or_peak_unknown() -> None:
    assert math.isnan(mfu(0.0, 100.0, 100.0, 1))
    assert math.isnan(mfu(1e9, 100.0, math.nan, 1))
