"""GPU model names and the default relative-throughput table.

Node labels name GPUs the way the NVIDIA GPU feature discovery does
(``nvidia.com/gpu.product``: ``NVIDIA-H100-80GB-HBM3``, ``Tesla-T4``, ...);
jobs name them shortly (``H100``, ``A100``). :func:`gpu_family` maps both to one
short family key, which is what placement policies and throughput tables use.
"""

from __future__ import annotations

from collections.abc import Mapping

from statictrain import gpus

__all__ = ["DEFAULT_RELATIVE_THROUGHPUT", "gpu_family"]

# Relative training throughput per GPU for a typical mixed-precision transformer
# step, A100 = 1.0. Used only when the job has no measured step times of its own
# on that model. Figures are round numbers from public per-GPU training
# benchmarks (MLPerf Training, vendor whitepapers) and deliberately coarse.
DEFAULT_RELATIVE_THROUGHPUT: Mapping[str, float] = {
    "B200": 4.0,
    "GH200": 3.0,
    "H200": 2.8,
    "H100": 2.5,
    "A100": 1.0,
    "L40S": 0.9,
    "L40": 0.7,
    "A10G": 0.35,
    "A10": 0.4,
    "L4": 0.3,
    "V100": 0.45,
    "V100M32": 0.45,
    "V100M16": 0.45,
    "T4": 0.15,
    "P100": 0.2,
    # Undisclosed models of the Alibaba GPU trace (8 GPUs per node); treated as
    # A100-class in the trace replay (see replay/README.md).
    "G2": 1.0,
    "G3": 1.0,
}


def gpu_family(name: str) -> str:
    """Short family key for a GPU product or model name; "" when empty.

    Known GPUs map through :func:`statictrain.gpus.from_name` (NVML names such as
    ``NVIDIA H200`` included). Unknown names come back upper-cased and unchanged,
    so a job that lists an exotic model (or a trace's ``V100M32``) still matches a
    node labelled with the same name; such a family has no default throughput.
    """
    upper = name.strip().upper().replace("_", "-")
    if not upper:
        return ""
    gpu = gpus.from_name(name)
    return gpu.family if gpu.known else upper
