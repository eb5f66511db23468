"""GPU model names: one family key per GPU product or model name.

Node labels name GPUs the way the NVIDIA GPU feature discovery does
(``nvidia.com/gpu.product``: ``NVIDIA-H100-80GB-HBM3``, ``Tesla-T4``, ...);
jobs name them shortly (``H100``, ``A100``). :func:`gpu_family` maps both to one
short family key, which is what placement policies and the throughput table
(:mod:`.throughput`) use.
"""

from __future__ import annotations

from statictrain import gpus

__all__ = ["gpu_family"]


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
