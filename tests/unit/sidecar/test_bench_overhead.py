"""The pure parts of bench/sidecar_overhead.py: which steps count for which phase, and the ratios."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from statictrain.channel import StepRecord

BENCH = Path(__file__).resolve().parents[3] / "bench" / "sidecar_overhead.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sidecar_overhead_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def step(end: float, seconds: float) -> StepRecord:
    return StepRecord(step=1, step_seconds=seconds, time=end)


def test_only_steps_wholly_inside_a_phase_count(bench: ModuleType) -> None:
    phases = [bench.Phase(None, 0, 100.0, 110.0), bench.Phase(1.0, 0, 112.0, 122.0)]
    records = [
        step(100.5, 1.0),  # began before the first phase
        step(101.0, 0.5),
        step(110.0, 0.2),
        step(111.0, 0.5),  # between phases
        step(112.5, 1.0),  # straddles the second start
        step(121.0, 0.3),
        step(122.5, 0.2),  # ends after the second phase
    ]
    bench.assign_steps(records, phases)
    assert phases[0].steps == [0.5, 0.2]
    assert phases[1].steps == [0.3]


def test_ratios_compare_medians_per_configuration_and_per_round(bench: ModuleType) -> None:
    phases = [
        bench.Phase(None, 0, 0, 10, steps=[1.0, 1.0, 5.0]),
        bench.Phase(1.0, 0, 10, 20, sidecar_cpu_s=0.05, steps=[1.01, 1.01, 1.01]),
        bench.Phase(0.1, 0, 20, 30, sidecar_cpu_s=0.2, steps=[1.1, 1.1]),
        bench.Phase(None, 1, 30, 40, steps=[2.0]),
        bench.Phase(1.0, 1, 40, 50, sidecar_cpu_s=0.15, steps=[2.0]),
        bench.Phase(0.1, 1, 50, 60, sidecar_cpu_s=0.4, steps=[2.2]),
    ]
    summary = bench.summarize(phases)
    assert summary["none"]["median_step_ms"] == pytest.approx(1500.0)
    assert summary["1000ms"]["sidecar_cpu_pct"] == pytest.approx(100 * 0.2 / 20)
    assert summary["100ms"]["steps"] == 3
    assert bench.per_round_ratios(phases, 1.0) == pytest.approx([1.01, 1.0])
    assert bench.per_round_ratios(phases, 0.1) == pytest.approx([1.1, 1.1])
