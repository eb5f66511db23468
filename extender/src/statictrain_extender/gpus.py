"""GPU model names: one family key per GPU product or model name.

Node labels name GPUs the way the NVIDIA GPU feature discovery does
(``nvidia.com/gpu.product``: ``NVIDIA-H100-80GB-HBM3``, ``Tesla-T4``, ...);
jobs name them shortly (``H100``, ``A100``). :func:`gpu_family` maps both to one
short family key, which is what placement policies and the throughput table
(:mod:`.throughput`) use.
"""

from __future__ import annotations

__all__ = ["gpu_family"]

# Families checked in this order: longer/more specific names first, so that
# "A100" is not read as "A10" and "H100-NVL" stays H100.
_FAMILIES: tuple[str, ...] = (
    "GH200",
    "B200",
    "H200",
    "H100",
    "A100",
    "L40S",
    "L40",
    "A10G",
    "A10",
    "L4",
    "V100M32",
    "V100M16",
    "V100",
    "T4",
    "P100",
    "G2",
    "G3",
)


def gpu_family(name: str) -> str:
    """Short family key for a GPU product or model name; "" when empty.

    Unknown names come back upper-cased and unchanged, so a job that lists an
    exotic model still matches a node labelled with the same name.
    """
    upper = name.strip().upper().replace("_", "-")
    if not upper:
        return ""
    tokens = upper.replace("NVIDIA-", "").replace("TESLA-", "")
    for family in _FAMILIES:
        if tokens == family or tokens.startswith(family + "-") or tokens.startswith(family + " "):
            return family
    for family in _FAMILIES:
        if family in tokens.split("-"):
            return family
    return tokens
