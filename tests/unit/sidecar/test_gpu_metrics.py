"""GPU metrics through a fake NVML module: every metric, units, labels, unsupported fields, no GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from statictrain import metrics

NOT_SUPPORTED = 3
GPU_IS_LOST = 15
DRIVER_NOT_LOADED = 9

G0 = {"gpu": "0", "gpu_uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000000", "gpu_model": "NVIDIA H200"}
G1 = {"gpu": "1", "gpu_uuid": "GPU-bbbbbbbb-1111-1111-1111-111111111111", "gpu_model": "NVIDIA H200"}

CASES = [
    # id, sample name, extra labels, GPU 0 value, GPU 1 value (fake: see conftest two_gpus)
    ("utilization", metrics.GPU_UTILIZATION_RATIO, {}, 0.87, 0.10),
    ("memory-utilization", metrics.GPU_MEMORY_UTILIZATION_RATIO, {}, 0.41, 0.41),
    ("memory-used", metrics.GPU_MEMORY_USED_BYTES, {}, 60 * 2**30, 60 * 2**30),
    ("memory-total", metrics.GPU_MEMORY_TOTAL_BYTES, {}, 141 * 2**30, 141 * 2**30),
    ("power", metrics.GPU_POWER_WATTS, {}, 612.5, 100.0),
    ("energy", metrics.GPU_ENERGY_JOULES_TOTAL, {}, 9876.543, 9876.543),
    ("temperature", metrics.GPU_TEMPERATURE_CELSIUS, {}, 64, 40),
    ("sm-clock", metrics.GPU_SM_CLOCK_HERTZ, {}, 1.98e9, 1.98e9),
    ("ecc-corrected", metrics.GPU_ECC_ERRORS_TOTAL, {"type": "corrected"}, 2, 2),
    ("ecc-uncorrected", metrics.GPU_ECC_ERRORS_TOTAL, {"type": "uncorrected"}, 0, 0),
    ("pcie-tx", metrics.GPU_PCIE_BYTES_TOTAL, {"direction": "tx"}, 5_000_000, 5_000_000),
    ("pcie-rx", metrics.GPU_PCIE_BYTES_TOTAL, {"direction": "rx"}, 7_000_000, 7_000_000),
    ("nvlink-tx", metrics.GPU_NVLINK_BYTES_TOTAL, {"direction": "tx"}, 300 * 1024, 300 * 1024),
    ("nvlink-rx", metrics.GPU_NVLINK_BYTES_TOTAL, {"direction": "rx"}, 500 * 1024, 500 * 1024),
    ("xid", metrics.GPU_XID_ERRORS_TOTAL, {}, 0, 0),
    ("busy", metrics.GPU_BUSY_SECONDS_TOTAL, {}, 0, 0),
]


@pytest.mark.parametrize(("name", "extra", "v0", "v1"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_gpu_metric_in_base_units_with_gpu_labels(
    rig: Any, fake_nvml: Any, *, name: Any, extra: Any, v0: Any, v1: Any
) -> None:
    r = rig(fake_nvml())
    assert r.value(name, **G0, **extra) == pytest.approx(v0)
    assert r.value(name, **G1, **extra) == pytest.approx(v1)


def test_gpu_available_and_info(rig: Any, fake_nvml: Any) -> None:
    r = rig(fake_nvml())
    assert r.value(metrics.GPU_AVAILABLE, reason="ok") == 1
    assert r.value(metrics.SIDECAR_INFO, version="test", driver_version="580.159.04") == 1


def test_values_are_read_fresh_at_each_scrape(rig: Any, fake_nvml: Any) -> None:
    nvml = fake_nvml()
    r = rig(nvml)
    assert r.value(metrics.GPU_POWER_WATTS, **G0) == 612.5
    nvml.gpus[0].power_mw = 700_000
    assert r.value(metrics.GPU_POWER_WATTS, **G0) == 700.0


def test_unsupported_query_loses_that_field_only_and_is_not_asked_again(
    rig: Any, fake_nvml: Any, gpu: Any
) -> None:
    g = gpu(0, "GPU-x", fail={"nvmlDeviceGetPowerUsage": NOT_SUPPORTED})
    nvml = fake_nvml([g])
    r = rig(nvml)
    labels = {"gpu": "0", "gpu_uuid": "GPU-x", "gpu_model": "NVIDIA H200"}
    assert r.value(metrics.GPU_POWER_WATTS, **labels) is None
    assert r.value(metrics.GPU_TEMPERATURE_CELSIUS, **labels) == 64
    assert r.value(metrics.GPU_ENERGY_JOULES_TOTAL, **labels) == pytest.approx(9876.543)
    r.names()  # a fourth scrape
    assert nvml.calls["nvmlDeviceGetPowerUsage"] == 1
    assert nvml.calls["nvmlDeviceGetTemperature"] == 4  # four scrapes, one query each
    assert r.value(metrics.GPU_QUERY_ERRORS_TOTAL, **labels, query="power") is None
    assert r.sampler.unsupported(0) == {"power"}


def test_unsupported_field_value_drops_that_field_only(rig: Any, fake_nvml: Any, gpu: Any) -> None:
    g = gpu(0, "GPU-x", fail={"138": NOT_SUPPORTED, "139": NOT_SUPPORTED})
    nvml = fake_nvml([g])
    r = rig(nvml)
    labels = {"gpu": "0", "gpu_uuid": "GPU-x", "gpu_model": "NVIDIA H200"}
    assert r.value(metrics.GPU_NVLINK_BYTES_TOTAL, **labels, direction="tx") is None
    assert r.value(metrics.GPU_PCIE_BYTES_TOTAL, **labels, direction="tx") == 5_000_000
    assert metrics.GPU_NVLINK_BYTES_TOTAL not in r.names()


def test_other_nvml_error_loses_one_sample_is_counted_and_retried(rig: Any, fake_nvml: Any, gpu: Any) -> None:
    g = gpu(0, "GPU-x", fail={"nvmlDeviceGetTemperature": GPU_IS_LOST})
    nvml = fake_nvml([g])
    r = rig(nvml)
    labels = {"gpu": "0", "gpu_uuid": "GPU-x", "gpu_model": "NVIDIA H200"}
    assert r.value(metrics.GPU_TEMPERATURE_CELSIUS, **labels) is None
    assert r.value(metrics.GPU_QUERY_ERRORS_TOTAL, **labels, query="temperature") == 2  # two scrapes so far
    g.fail.clear()
    assert r.value(metrics.GPU_TEMPERATURE_CELSIUS, **labels) == 64


def test_never_asks_the_expensive_per_process_queries(rig: Any, fake_nvml: Any) -> None:
    nvml = fake_nvml()
    r = rig(nvml)
    for _ in range(3):
        r.names()
        r.sampler.tick(0.0)
    assert nvml.calls["nvmlDeviceGetComputeRunningProcesses"] == 0
    cheap = {
        "nvmlInit",
        "nvmlDeviceGetUtilizationRates",
        "nvmlDeviceGetMemoryInfo",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlDeviceGetFieldValues",
        "nvmlEventSetCreate",
        "nvmlDeviceRegisterEvents",
        "nvmlEventSetWait",
    }
    assert set(nvml.calls) <= cheap


def test_xid_events_counted_per_gpu(rig: Any, fake_nvml: Any) -> None:
    nvml = fake_nvml()
    r = rig(nvml)
    nvml.events += [(G1["gpu_uuid"], 79), (G1["gpu_uuid"], 48), (G0["gpu_uuid"], 13)]
    r.sampler.tick(1.0)
    assert r.value(metrics.GPU_XID_ERRORS_TOTAL, **G0) == 1
    assert r.value(metrics.GPU_XID_ERRORS_TOTAL, **G1) == 2


def test_xid_events_unavailable_drop_only_the_xid_counter(rig: Any, fake_nvml: Any) -> None:
    r = rig(fake_nvml(events_error=NOT_SUPPORTED))
    assert r.value(metrics.GPU_XID_ERRORS_TOTAL, **G0) is None
    assert r.value(metrics.GPU_POWER_WATTS, **G0) == 612.5


def test_busy_seconds_integrate_utilization_between_ticks(rig: Any, fake_nvml: Any) -> None:
    nvml = fake_nvml()
    r = rig(nvml)
    r.sampler.tick(10.0)  # first tick only starts the clock
    r.sampler.tick(12.0)  # 2 s at 87 % and 10 %
    nvml.gpus[0].util_gpu = 50
    r.sampler.tick(13.0)  # 1 s at 50 %
    assert r.value(metrics.GPU_BUSY_SECONDS_TOTAL, **G0) == pytest.approx(2 * 0.87 + 0.5)
    assert r.value(metrics.GPU_BUSY_SECONDS_TOTAL, **G1) == pytest.approx(3 * 0.10)


def test_idle_seconds_count_ticks_below_the_threshold_summed_over_the_gpus(rig: Any, fake_nvml: Any) -> None:
    nvml = fake_nvml()  # GPU 0 at 87 %, GPU 1 at 10 %
    r = rig(nvml)
    r.sampler.tick(10.0)  # first tick only starts the clock
    assert r.value(metrics.GPU_IDLE_SECONDS_TOTAL, below="0.05") == 0
    nvml.gpus[1].util_gpu = 4
    r.sampler.tick(12.0)  # 2 s: GPU 1 below 5 %
    nvml.gpus[0].util_gpu = 0
    r.sampler.tick(12.5)  # 0.5 s: both
    nvml.gpus[0].util_gpu = 5  # at the threshold: not below it
    r.sampler.tick(13.0)  # 0.5 s: GPU 1 only
    assert r.value(metrics.GPU_IDLE_SECONDS_TOTAL, below="0.05") == pytest.approx(2 + 2 * 0.5 + 0.5)
    assert r.value(metrics.GPU_IDLE_SECONDS_TOTAL, **G0, below="0.05") is None  # per pod, no GPU labels


def test_idle_seconds_are_absent_when_a_gpus_utilization_is_not_supported(
    rig: Any, fake_nvml: Any, gpu: Any
) -> None:
    r = rig(fake_nvml([gpu(0, "GPU-x", fail={"nvmlDeviceGetUtilizationRates": NOT_SUPPORTED})]))
    r.sampler.tick(1.0)
    r.sampler.tick(2.0)
    assert metrics.GPU_IDLE_SECONDS_TOTAL not in r.names()  # idle unknown, not 0


def test_select_by_index_or_uuid(rig: Any, fake_nvml: Any) -> None:
    r = rig(fake_nvml(), select=[G1["gpu_uuid"]])
    assert r.value(metrics.GPU_POWER_WATTS, **G1) == 100.0
    assert r.value(metrics.GPU_POWER_WATTS, **G0) is None
    r = rig(fake_nvml(), select=["0"])
    assert r.value(metrics.GPU_POWER_WATTS, **G0) == 612.5
    assert r.value(metrics.GPU_POWER_WATTS, **G1) is None


NO_GPU = [
    ("module-missing", None, {}, (), True, "nvml_missing"),
    ("driver-not-loaded", "fake", {"init_error": DRIVER_NOT_LOADED}, (), True, "nvml_init_failed"),
    ("zero-devices", "fake", {"gpus": []}, (), True, "no_devices"),
    ("disabled", "fake", {}, (), False, "disabled"),
    ("selected-gpu-absent", "fake", {}, ("GPU-nope",), True, "gpu_not_found"),
]


@pytest.mark.parametrize(
    ("nvml", "kwargs", "select", "enabled", "reason"), [c[1:] for c in NO_GPU], ids=[c[0] for c in NO_GPU]
)
def test_no_gpu_says_so_and_keeps_serving_training_metrics(
    rig: Any,
    fake_nvml: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    *,
    nvml: Any,
    kwargs: Any,
    select: Any,
    enabled: Any,
    reason: Any,
) -> None:
    module = fake_nvml(**kwargs) if nvml == "fake" else None
    (tmp_path / "steps.jsonl").write_text('{"v":1,"step":7,"step_seconds":0.5,"tokens":64}\n')
    with caplog.at_level("WARNING"):
        r = rig(module, stats_dir=tmp_path, select=select, enabled=enabled)
    assert r.value(metrics.GPU_AVAILABLE, reason=reason) == 0
    assert [rec for rec in caplog.records if "no GPU metrics" in rec.getMessage()], "one plain log line"
    names = r.names()
    assert not {n for n in names if n.startswith("statictrain_gpu_") and n != metrics.GPU_AVAILABLE}
    assert r.value(metrics.TRAIN_STEP) == 7
    assert r.value(metrics.TRAIN_TOKENS_TOTAL) == 64
    r.sampler.tick(1.0)  # the background loop keeps running without NVML
    r.sampler.close()


def test_a_binding_without_a_call_loses_that_field_only(rig: Any, fake_nvml: Any) -> None:
    nvml = fake_nvml()

    def missing(handle: Any) -> int:
        raise AttributeError("module 'pynvml' has no attribute 'nvmlDeviceGetTotalEnergyConsumption'")

    nvml.nvmlDeviceGetTotalEnergyConsumption = missing
    r = rig(nvml)
    assert r.value(metrics.GPU_ENERGY_JOULES_TOTAL, **G0) is None
    assert r.value(metrics.GPU_POWER_WATTS, **G0) == 612.5
    assert r.value(metrics.GPU_QUERY_ERRORS_TOTAL, **G0, query="energy") == 3  # three scrapes so far
