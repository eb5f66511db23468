"""Node price annotator (pure part): node labels -> price -> annotations to patch.

Writes ``statictrain.io/hourly-cost-usd``, ``gpu-hourly-cost-usd``,
``capacity-type``, ``price-source`` (catalog | custom | live:<provider> |
fallback) and ``price-updated`` (only when the price changes). Why a price
is not a plain quote (fallback reason, staleness, flagged row) goes in
``price-notes``. Unknown instance types get a flagged fallback, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from statictrain import labels
from statictrain.money import format_usd
from statictrain.pricing import (
    Catalog,
    CustomPrice,
    FallbackPolicy,
    LiveQuotes,
    NodeFacts,
    NodePrice,
    capacity_type_from_labels,
    price_node,
)
from statictrain.quantities import parse_quantity

__all__ = ["PRICE_NOTES", "annotation_patch", "is_gpu_node", "node_facts", "plan_node_patches", "price_annotations"]

PRICE_NOTES = labels.PRICE_NOTES
"""Annotation explaining a flagged price (to move into statictrain.labels)."""

def _gpu_count(node: Mapping[str, Any]) -> int:
    status = node.get("status") or {}
    for key in ("capacity", "allocatable"):
        raw = (status.get(key) or {}).get(labels.GPU_RESOURCE)
        if raw is not None:
            try:
                return int(str(raw))
            except ValueError:
                continue
    raw_label = (node.get("metadata", {}).get("labels") or {}).get(labels.GPU_COUNT)
    return int(raw_label) if raw_label and raw_label.isdigit() else 0


def _allocatable(node: Mapping[str, Any], resource: str) -> float:
    """Allocatable (else capacity) of a resource; 0 when absent or unreadable (the price is then flagged)."""
    status = node.get("status") or {}
    raw = (status.get("allocatable") or {}).get(resource) or (status.get("capacity") or {}).get(resource)
    try:
        return parse_quantity(raw, what=f"node {resource}") if raw is not None else 0.0
    except ValueError:
        return 0.0


def node_facts(node: Mapping[str, Any]) -> NodeFacts:
    meta = node.get("metadata") or {}
    lab = meta.get("labels") or {}
    return NodeFacts(
        name=meta.get("name", ""),
        instance_type=lab.get(labels.INSTANCE_TYPE) or lab.get("beta.kubernetes.io/instance-type"),
        region=lab.get(labels.REGION) or lab.get("failure-domain.beta.kubernetes.io/region"),
        capacity_type=capacity_type_from_labels(lab),
        gpu_product=lab.get(labels.GPU_PRODUCT),
        gpu_count=_gpu_count(node),
        provider_id=(node.get("spec") or {}).get("providerID") or "",
        cpu=_allocatable(node, "cpu"),
        memory_gib=_allocatable(node, "memory") / 2**30,
    )


def is_gpu_node(node: Mapping[str, Any]) -> bool:
    return _gpu_count(node) > 0


def price_annotations(price: NodePrice, gpus: int = 1) -> dict[str, str]:
    return {
        labels.HOURLY_COST: format_usd(price.hourly_usd),
        labels.GPU_HOURLY_COST: format_usd(price.gpu_hourly_usd) if gpus > 0 else "",
        labels.PRICE_CAPACITY_TYPE: price.capacity_type,
        labels.PRICE_SOURCE: price.source,
        PRICE_NOTES: "; ".join(price.notes)[:1024],
    }


def annotation_patch(
    node: Mapping[str, Any], price: NodePrice, now: datetime
) -> dict[str, str | None] | None:
    """The annotations to merge-patch, or None when the node already carries this price."""
    current = (node.get("metadata") or {}).get("annotations") or {}
    patch: dict[str, str | None] = {}
    for key, value in price_annotations(price, _gpu_count(node)).items():
        if key in (PRICE_NOTES, labels.GPU_HOURLY_COST) and not value:
            if key in current:
                patch[key] = None  # the price is no longer flagged
            continue
        if current.get(key) != value:
            patch[key] = value
    if not patch:
        return None
    patch[labels.PRICE_UPDATED] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return patch


def plan_node_patches(
    nodes: Sequence[Mapping[str, Any]],
    catalog: Catalog,
    *,
    now: datetime,
    custom: Sequence[CustomPrice] = (),
    live: Sequence[LiveQuotes] = (),
    policy: FallbackPolicy | None = None,
) -> dict[str, dict[str, str | None]]:
    """Node name -> annotation patch, for nodes (GPU and CPU-only) whose price annotations are missing or
    out of date."""
    out: dict[str, dict[str, str | None]] = {}
    for node in nodes:
        facts = node_facts(node)
        price = price_node(facts, catalog, now=now, custom=custom, live=live, policy=policy)
        patch = annotation_patch(node, price, now)
        if patch is not None:
            out[facts.name] = patch
    return out
