"""Prices for the trace's nodes, from statictrain's price catalog by GPU model (pure).

The trace names GPU models, not cloud instances, so each model is mapped to a
catalog GPU model and priced at the median per-GPU on-demand price over the
catalog's unflagged rows for that model; a node costs that times its GPU
count (the host's CPU and memory are inside the instance prices the median is
taken over). The mapping, and why:

==========  =============  =====================================================
trace       catalog model  why
==========  =============  =====================================================
T4          T4-16GB        same GPU
V100M16     V100-16GB      same GPU
V100M32     V100-32GB      same GPU
A10         A10G-24GB      AWS's A10 variant; the catalog has no plain A10
P100        T4-16GB        no P100 in the catalog; T4 is the nearest in price
                           class (both the cheapest previous-generation parts)
G2          A100-40GB      undisclosed 8-GPU model; assumed current-generation
G3          A100-80GB      undisclosed 8-GPU model; assumed current-generation
==========  =============  =====================================================

Nodes are labelled (``nvidia.com/gpu.product``) with the product name NVIDIA's GPU
feature discovery gives the GPU each trace model stands for (:data:`GPU_PRODUCT`),
so the extender reads their family like any real node's: P100 is a P100 there
(only its price borrows T4's), and G2/G3 are A100s (an assumption, as above).

CPU-only nodes (the all-node list) cost ``cpu_usd_per_core_hour`` per core.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from statictrain.pricing import ON_DEMAND, Catalog

from .trace import TraceError, TraceNode

__all__ = ["CATALOG_MODEL", "GPU_PRODUCT", "NodePrice", "gpu_product", "price_nodes"]

CATALOG_MODEL: Mapping[str, str] = {
    "T4": "T4-16GB",
    "V100M16": "V100-16GB",
    "V100M32": "V100-32GB",
    "A10": "A10G-24GB",
    "P100": "T4-16GB",
    "G2": "A100-40GB",
    "G3": "A100-80GB",
}

GPU_PRODUCT: Mapping[str, str] = {
    "T4": "Tesla-T4",
    "P100": "Tesla-P100-PCIE-16GB",
    "V100M16": "Tesla-V100-SXM2-16GB",
    "V100M32": "Tesla-V100-SXM2-32GB",
    "A10": "NVIDIA-A10",
    "G2": "NVIDIA-A100-SXM4-40GB",
    "G3": "NVIDIA-A100-SXM4-80GB",
}


def gpu_product(model: str) -> str:
    """The ``nvidia.com/gpu.product`` label for a trace model; unknown models keep their own name."""
    return GPU_PRODUCT.get(model, model)


# m6i-class on-demand price per vCPU-hour (us-east-1 m6i.xlarge 0.192 $/h for 4 vCPU).
DEFAULT_CPU_USD_PER_CORE_HOUR = Decimal("0.048")


@dataclass(frozen=True, slots=True)
class NodePrice:
    """A trace node's price."""

    hourly_usd: Decimal
    """Whole node per hour."""
    gpu_hourly_usd: Decimal | None
    """Per GPU-hour; None for CPU-only nodes."""
    catalog_model: str
    """Catalog GPU model it was priced as ("" for CPU-only nodes)."""


def price_nodes(
    nodes: Iterable[TraceNode],
    catalog: Catalog,
    mapping: Mapping[str, str] = CATALOG_MODEL,
    cpu_usd_per_core_hour: Decimal = DEFAULT_CPU_USD_PER_CORE_HOUR,
) -> dict[str, NodePrice]:
    """Price every node; an unmapped or unpriced GPU model is an error naming the fix."""
    per_gpu: dict[str, Decimal] = {}
    out: dict[str, NodePrice] = {}
    for node in nodes:
        if node.gpus == 0:
            cores = Decimal(node.cpu_milli) / 1000
            out[node.name] = NodePrice(cores * cpu_usd_per_core_hour, None, "")
            continue
        model = mapping.get(node.model)
        if model is None:
            raise TraceError(
                f"node {node.name}: GPU model {node.model!r} has no catalog mapping; "
                f"add it to the mapping (known: {', '.join(sorted(mapping))})"
            )
        if model not in per_gpu:
            prices = catalog.gpu_prices(model, ON_DEMAND)
            if not prices:
                raise TraceError(f"catalog has no unflagged on-demand price for {model} (trace model {node.model})")
            per_gpu[model] = Decimal(statistics.median(prices))
        gpu_price = per_gpu[model]
        out[node.name] = NodePrice(gpu_price * node.gpus, gpu_price, model)
    return out
