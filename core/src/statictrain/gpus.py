"""GPU identity: one mapping from every name a GPU goes by to a GPU family.

A GPU is named differently by each layer that sees it:

- NVML (the sidecar's ``gpu_model`` metric label): ``NVIDIA H100 80GB HBM3``,
  ``NVIDIA A100-SXM4-80GB``, ``Tesla T4``;
- NVIDIA GPU feature discovery (node label ``nvidia.com/gpu.product``):
  ``NVIDIA-H100-80GB-HBM3``, ``Tesla-T4``, ``NVIDIA-A100-SXM4-40GB-MIG-1g.5gb``;
- GKE (``cloud.google.com/gke-accelerator``): ``nvidia-tesla-t4``, ``nvidia-h100-mega-80gb``;
- Karpenter on AWS (``karpenter.k8s.aws/instance-gpu-name``): ``h100``, ``a10g``;
- the price catalog and job specs: ``H100-80GB``, ``A100``;
- cloud instance types: ``p5.48xlarge``, ``a3-highgpu-8g``, ``Standard_NC24ads_A100_v4``.

:func:`from_name`, :func:`from_instance_type` and :func:`from_node_labels` map
each to a :class:`Gpu` whose :attr:`Gpu.family` is one of :data:`FAMILIES`, or
:data:`UNKNOWN`. Unknown is an explicit result that callers flag by the name
they read (:attr:`Gpu.source`); nothing here guesses a default family.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "FAMILIES",
    "UNKNOWN",
    "Gpu",
    "from_instance_type",
    "from_name",
    "from_node_labels",
]

UNKNOWN = "Unknown"
"""Family of a GPU whose name is not recognised (never a default family)."""

# Family -> (memory in GB when the family has one size, else None).
_FAMILY_MEMORY: Mapping[str, int | None] = {
    "GB200": 186,
    "B200": 180,
    "GH200": None,  # 96 GB or 144 GB HBM
    "H200": 141,
    "H100": None,  # 80 GB (SXM, PCIe) or 94 GB (NVL)
    "A100": None,  # 40 GB or 80 GB
    "L40S": 48,
    "L40": 48,
    "L4": 24,
    "A10G": 24,
    "A10": 24,
    "T4": 16,
    "V100": None,  # 16 GB or 32 GB
    "P100": 16,
}
FAMILIES: tuple[str, ...] = tuple(_FAMILY_MEMORY)
"""Every family this module recognises."""

# Tokens naming a family other than by its family key.
_ALIASES: Mapping[str, tuple[str, int | None]] = {"V100S": ("V100", 32)}

# Well-known memory sizes when the name carries none but the form does.
_FORM_MEMORY: Mapping[tuple[str, str], int] = {("H100", "NVL"): 94, ("H100", "SXM"): 80, ("H100", "PCIe"): 80}

# Default memory for a bare family name in the naming schemes that use one SKU
# per name: GKE's ``nvidia-tesla-a100`` and ``nvidia-tesla-v100`` are 40 GB and 16 GB.
_GKE_MEMORY: Mapping[str, int] = {"A100": 40, "V100": 16, "H100": 80}

_MEM = re.compile(r"^(\d+)(GB|G)$")


@dataclass(frozen=True, slots=True)
class Gpu:
    """What a name says about a GPU."""

    family: str
    """One of :data:`FAMILIES`, or :data:`UNKNOWN`."""
    memory_gb: int | None
    """GPU memory in GB when the name (or the family) determines it, else None."""
    form: str
    """``SXM``, ``PCIe``, ``NVL`` when the name says so, else ""."""
    source: str
    """The name this was read from, verbatim (for flags and messages)."""

    @property
    def known(self) -> bool:
        return self.family != UNKNOWN

    @property
    def model(self) -> str | None:
        """Catalog model key (``H100-80GB``, ``H100-NVL-94GB``); None when family or memory is unknown."""
        if not self.known or self.memory_gb is None:
            return None
        nvl = "-NVL" if self.form == "NVL" and self.family == "H100" else ""
        return f"{self.family}{nvl}-{self.memory_gb}GB"


def _unknown(source: str) -> Gpu:
    return Gpu(UNKNOWN, None, "", source)


def _tokens(name: str) -> list[str]:
    upper = name.strip().upper()
    upper = re.sub(r"[\s_]+", "-", upper)
    return [t for t in upper.split("-") if t]


def _form(tokens: list[str]) -> str:
    for t in tokens:
        if t.startswith("SXM"):
            return "SXM"
        if t in ("PCIE", "PCI"):
            return "PCIe"
        if t == "NVL":
            return "NVL"
        if t.startswith("HBM"):  # NVML names the SXM H100 "NVIDIA H100 80GB HBM3"
            return "SXM"
    return ""


def _memory(tokens: list[str], family: str) -> int | None:
    if family in ("GH200", "GB200"):
        # GH200's and GB200's names carry the superchip's total memory (e.g. "480GB");
        # the GPU's own HBM is 96/144 GB (GH200) and 186 GB (GB200).
        for t in tokens:
            if t in ("144G", "144GB"):
                return 144
        return _FAMILY_MEMORY[family]
    for t in tokens:
        m = _MEM.match(t)
        if m:
            return int(m.group(1))
    return _FAMILY_MEMORY[family]


def from_name(name: str) -> Gpu:
    """Identify a GPU from a product or model name of any scheme in the module docstring.

    The family is the first token that is exactly a family key (after dropping the
    ``NVIDIA``/``Tesla`` prefixes), so ``A100`` is never read as ``A10`` and a token
    such as ``V100M32`` (not a real product name) stays unknown.
    """
    tokens = _tokens(name)
    if tokens[:1] == ["NVIDIA"]:
        tokens = tokens[1:]
    gke = bool(tokens) and tokens[0] == "TESLA" and name.strip().islower()
    tokens = [t for t in tokens if t not in ("NVIDIA", "TESLA", "MEGA")]
    for i, t in enumerate(tokens):
        family, memory = _ALIASES.get(t, (t, None))
        if family not in _FAMILY_MEMORY:
            continue
        rest = tokens[:i] + tokens[i + 1 :]
        if "MIG" in rest:
            rest = rest[: rest.index("MIG")]  # "...-MIG-1g.5gb": the slice's size is not the GPU's
        form = _form(rest)
        mem = memory or _memory(rest, family) or _FORM_MEMORY.get((family, form))
        if mem is None and gke:
            mem = _GKE_MEMORY.get(family)
        return Gpu(family, mem, form, name)
    return _unknown(name)


# Instance-type families -> (GPU family, memory GB, form). Matched on the part before the
# size (AWS "p4d.24xlarge" -> "p4d"; GCP "a2-ultragpu-8g" -> "a2-ultragpu").
_AWS: Mapping[str, tuple[str, int, str]] = {
    "p3": ("V100", 16, "SXM"),
    "p3dn": ("V100", 32, "SXM"),
    "p4d": ("A100", 40, "SXM"),
    "p4de": ("A100", 80, "SXM"),
    "p5": ("H100", 80, "SXM"),
    "p5e": ("H200", 141, "SXM"),
    "p5en": ("H200", 141, "SXM"),
    "p6-b200": ("B200", 180, "SXM"),
    "g4dn": ("T4", 16, ""),
    "g5": ("A10G", 24, ""),
    "g6": ("L4", 24, ""),
    "gr6": ("L4", 24, ""),
    "g6e": ("L40S", 48, ""),
}
_GCP: Mapping[str, tuple[str, int, str]] = {
    "a2-highgpu": ("A100", 40, "SXM"),
    "a2-megagpu": ("A100", 40, "SXM"),
    "a2-ultragpu": ("A100", 80, "SXM"),
    "a3-highgpu": ("H100", 80, "SXM"),
    "a3-megagpu": ("H100", 80, "SXM"),
    "a3-edgegpu": ("H100", 80, "SXM"),
    "a3-ultragpu": ("H200", 141, "SXM"),
    "a4-highgpu": ("B200", 180, "SXM"),
    "a4x-highgpu": ("GB200", 186, ""),
    "g2-standard": ("L4", 24, ""),
}
# Azure sizes whose name does not spell the GPU.
_AZURE: Mapping[str, tuple[str, int, str]] = {
    "STANDARD_ND96ASR_V4": ("A100", 40, "SXM"),
    "STANDARD_ND40RS_V2": ("V100", 32, "SXM"),
    "STANDARD_NC6S_V3": ("V100", 16, "PCIe"),
    "STANDARD_NC12S_V3": ("V100", 16, "PCIe"),
    "STANDARD_NC24S_V3": ("V100", 16, "PCIe"),
    "STANDARD_NC24RS_V3": ("V100", 16, "PCIe"),
}
# Azure sizes that spell the GPU (Standard_NC24ads_A100_v4): memory and form by family and series.
_AZURE_SPELLED: Mapping[tuple[str, str], tuple[int, str]] = {
    ("A100", "NC"): (80, "PCIe"),
    ("A100", "ND"): (80, "SXM"),
    ("H100", "NC"): (94, "NVL"),
    ("H100", "ND"): (80, "SXM"),
}

_AWS_RE = re.compile(r"^([a-z0-9-]+?)\.(?:\d*x?large|metal[\w-]*|\w+)$")
_GCP_RE = re.compile(r"^([a-z0-9]+-[a-z]+)-\d+g?$")
_GCP_ATTACHED_RE = re.compile(r"^n1-[a-z]+-\d+\+\d+x(.+)$")  # SkyPilot's "n1-standard-8+1xT4"


def from_instance_type(instance_type: str) -> Gpu:
    """Identify the GPU of a cloud instance type (AWS, GCP, Azure); Unknown for CPU-only or unlisted types."""
    it = instance_type.strip()
    m = _AWS_RE.match(it)
    if m and m.group(1) in _AWS:
        family, mem, form = _AWS[m.group(1)]
        return Gpu(family, mem, form, instance_type)
    m = _GCP_RE.match(it)
    if m and m.group(1) in _GCP:
        family, mem, form = _GCP[m.group(1)]
        return Gpu(family, mem, form, instance_type)
    m = _GCP_ATTACHED_RE.match(it)
    if m:
        g = from_name(m.group(1))
        if g.family == "V100" and g.memory_gb is None:
            g = Gpu("V100", 16, "", instance_type)  # GCP attaches the 16 GB V100 only
        return Gpu(g.family, g.memory_gb, g.form, instance_type) if g.known else _unknown(instance_type)
    upper = it.upper()
    if upper in _AZURE:
        family, mem, form = _AZURE[upper]
        return Gpu(family, mem, form, instance_type)
    if upper.startswith("STANDARD_"):
        parts = upper.split("_")
        for part in parts[2:]:
            g = from_name(part)
            if g.known:
                series = parts[1][:2]
                mem, form = _AZURE_SPELLED.get((g.family, series), (g.memory_gb or 0, g.form))
                return Gpu(g.family, mem or None, form, instance_type)
    return _unknown(instance_type)


# Node labels read, in order: the GPU operator's product name is the most specific.
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"  # MiB, set by GPU feature discovery
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
KARPENTER_GPU_NAME_LABEL = "karpenter.k8s.aws/instance-gpu-name"
KARPENTER_GPU_MEMORY_LABEL = "karpenter.k8s.aws/instance-gpu-memory"  # MiB
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")


def _with_memory_mib(g: Gpu, mib: str | None) -> Gpu:
    if g.memory_gb is not None or not mib or not mib.strip().isdigit():
        return g
    gb = round(int(mib) / 1024)
    return Gpu(g.family, gb, _FORM_MEMORY_FORM.get((g.family, gb), g.form), g.source)


_FORM_MEMORY_FORM: Mapping[tuple[str, int], str] = {("H100", 94): "NVL"}


def from_node_labels(labels: Mapping[str, str]) -> Gpu:
    """Identify a node's GPU from its labels: GPU product, GKE accelerator, Karpenter GPU name, instance type.

    The first label that names a known GPU wins; a memory label fills in memory the
    name leaves open. A node whose labels name no known GPU (CPU-only, or a GPU this
    module does not list) is Unknown with ``source`` = the first GPU-naming label value
    found, else the instance type, else "".
    """
    tried: list[str] = []
    named = (
        (labels.get(GPU_PRODUCT_LABEL), labels.get(GPU_MEMORY_LABEL)),
        (labels.get(GKE_ACCELERATOR_LABEL), None),
        (labels.get(KARPENTER_GPU_NAME_LABEL), labels.get(KARPENTER_GPU_MEMORY_LABEL)),
    )
    for value, mib in named:
        if value:
            tried.append(value)
            g = from_name(value)
            if g.known:
                return _with_memory_mib(g, mib)
    for key in INSTANCE_TYPE_LABELS:
        value = labels.get(key)
        if value:
            tried.append(value)
            g = from_instance_type(value)
            if g.known:
                return g
    return _unknown(tried[0] if tried else "")
