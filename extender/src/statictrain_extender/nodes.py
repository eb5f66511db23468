"""What the extender knows about a node, read from the Node object (pure).

Prices come from the annotations the price annotator writes
(``statictrain.io/gpu-hourly-cost-usd``, ``statictrain.io/hourly-cost-usd``);
they are strings with decimals and are parsed with :class:`decimal.Decimal`.
A node without a usable price has ``gpu_hourly_usd = None``: it is never
treated as free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from statictrain import labels
from statictrain.pricing import SPOT_LABELS, capacity_type_from_labels

from .gpus import gpu_family

__all__ = [
    "GPU_MILLI_RESOURCE",
    "NodeInfo",
    "as_mapping",
    "as_text",
    "gpu_milli_of_requests",
    "node_from_object",
    "parse_price",
    "parse_quantity_int",
]

# Extended resource for GPU sharing (a fraction of a GPU in milli-GPU), used by
# the trace replay; one whole nvidia.com/gpu counts as 1000.
GPU_MILLI_RESOURCE = "statictrain.io/gpu-milli"


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """One node as the extender scores it."""

    name: str
    """Node name."""
    gpu_family: str
    """Short GPU family (``H100``, ``A100``, ...); "" for nodes without GPUs."""
    gpus: int
    """Allocatable ``nvidia.com/gpu``."""
    capacity_type: str
    """``spot`` or ``on-demand``: the annotator's annotation, else the provisioners' spot labels
    (:data:`statictrain.pricing.SPOT_LABELS`); "" if neither is there."""
    hourly_usd: float | None
    """Whole-node price per hour, None when unknown or unparsable."""
    gpu_hourly_usd: float | None
    """Price per GPU-hour: the annotation, else hourly / gpus; None when unknown."""


def as_mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one: any field of a request or of an API
    object may hold any JSON, and a wrongly typed one reads as absent."""
    return value if isinstance(value, dict) else {}


def as_text(value: object) -> str:
    """``value`` when it is a string, else ""."""
    return value if isinstance(value, str) else ""


MAX_QUANTITY_DIGITS = 15
"""Quantities with more integer digits are not counts of anything (and "1e999999" would take
minutes to turn into an int): parsed as 0 like any other unusable value."""


def parse_quantity_int(value: object) -> int:
    """Parse an integer Kubernetes quantity ("8", "8k", 8); 0 for anything else."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value if 0 <= value < 10**MAX_QUANTITY_DIGITS else 0
    if not isinstance(value, str):
        return 0
    text = value.strip()
    scale = 1
    if text.endswith("k"):
        text, scale = text[:-1], 1000
    try:
        number = Decimal(text)
    except InvalidOperation:
        return 0
    if not number.is_finite() or number.adjusted() >= MAX_QUANTITY_DIGITS:
        return 0
    return max(int(number * scale), 0)


def parse_price(value: object) -> float | None:
    """A positive decimal string ("12.50") as a float; None for anything else, also for decimals
    that are no positive finite float ("1e400" would be inf, "1e-400" 0.0)."""
    if not isinstance(value, str):
        return None
    try:
        price = float(Decimal(value.strip()))
    except InvalidOperation:
        return None
    return price if 0 < price < math.inf else None


def node_from_object(obj: Mapping[str, Any]) -> NodeInfo:
    """Build a :class:`NodeInfo` from a Node as the API server returns it (camelCase JSON); a field of
    another type than the API's reads as absent."""
    meta = as_mapping(obj.get("metadata"))
    node_labels = {k: v for k, v in as_mapping(meta.get("labels")).items() if isinstance(v, str)}
    annotations = as_mapping(meta.get("annotations"))
    status = as_mapping(obj.get("status"))
    allocatable = as_mapping(status.get("allocatable")) or as_mapping(status.get("capacity"))
    gpus = parse_quantity_int(allocatable.get(labels.GPU_RESOURCE, 0))
    hourly = parse_price(annotations.get(labels.HOURLY_COST))
    gpu_hourly = parse_price(annotations.get(labels.GPU_HOURLY_COST))
    if gpu_hourly is None and hourly is not None and gpus > 0:
        gpu_hourly = hourly / gpus
    capacity_type = as_text(annotations.get(labels.PRICE_CAPACITY_TYPE))
    if not capacity_type and any(k in node_labels for k, _ in SPOT_LABELS):
        capacity_type = capacity_type_from_labels(node_labels)
    return NodeInfo(
        name=as_text(meta.get("name")),
        gpu_family=gpu_family(node_labels.get(labels.GPU_PRODUCT, "")),
        gpus=gpus,
        capacity_type=capacity_type.strip().lower(),
        hourly_usd=hourly,
        gpu_hourly_usd=gpu_hourly,
    )


def gpu_milli_of_requests(requests: Mapping[str, Any]) -> int:
    """GPU demand of one container's requests (or limits) in milli-GPU."""
    whole = parse_quantity_int(requests.get(labels.GPU_RESOURCE, 0))
    shared = parse_quantity_int(requests.get(GPU_MILLI_RESOURCE, 0))
    return whole * 1000 + shared
