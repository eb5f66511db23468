"""Peak throughput per device and the MFU estimate (pure)."""

from __future__ import annotations

import math

# Dense bf16/fp16 tensor-core TFLOP/s from the vendors' datasheets (SXM parts where
# there are several). Matched by substring of torch.cuda.get_device_name().
_PEAK_BF16_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H200", 989.0),
    ("H100", 989.0),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("L4", 121.0),
    ("A10G", 70.0),
    ("A10", 125.0),
    ("V100", 125.0),
)


def peak_tflops(device_name: str, precision: str, override: float = 0.0) -> float:
    """Peak dense TFLOP/s of one device for this precision; NaN when unknown (fp32 or unlisted)."""
    if override > 0:
        return override
    if precision not in ("bf16", "fp16"):
        return math.nan
    for key, value in _PEAK_BF16_TFLOPS:
        if key in device_name:
            return value
    return math.nan


def mfu(flops_per_sample: float, samples_per_second: float, peak_tflops_per_device: float, devices: int) -> float:
    """Model FLOPs utilisation: achieved training FLOP/s over the devices' peak; NaN when unknown."""
    if flops_per_sample <= 0 or not math.isfinite(peak_tflops_per_device) or peak_tflops_per_device <= 0:
        return math.nan
    return flops_per_sample * samples_per_second / (peak_tflops_per_device * 1e12 * devices)
