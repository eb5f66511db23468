"""Node price annotator: labels -> annotations, idempotent patches, flagged fallbacks."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from statictrain import labels
from statictrain.pricing import parse_catalog, parse_custom_prices, shipped_catalog_text
from statictrain_operator.cost.annotator import PRICE_NOTES, node_facts, plan_node_patches

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CATALOG = parse_catalog(shipped_catalog_text())


def node(
    name: str,
    it: str | None,
    *,
    region: str = "us-east-1",
    cap: str = "on-demand",
    gpus: int | None = 8,
    product: str = "NVIDIA-H100-80GB-HBM3",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    lab = {labels.REGION: region, labels.CAPACITY_TYPE: cap, labels.GPU_PRODUCT: product}
    if it:
        lab[labels.INSTANCE_TYPE] = it
    status: dict[str, Any] = {"capacity": {"cpu": "96"}}
    if gpus is not None:
        status["capacity"][labels.GPU_RESOURCE] = str(gpus)
    return {"metadata": {"name": name, "labels": lab, "annotations": annotations or {}}, "status": status}


def test_known_node_gets_catalog_price_and_all_keys() -> None:
    patches = plan_node_patches([node("a", "p5.48xlarge")], CATALOG, now=NOW)
    p = patches["a"]
    assert p[labels.HOURLY_COST] == "98.320000"
    assert p[labels.GPU_HOURLY_COST] == "12.290000"
    assert p[labels.PRICE_CAPACITY_TYPE] == "on-demand"
    assert p[labels.PRICE_SOURCE] == "catalog"
    assert p[labels.PRICE_UPDATED] == "2026-03-01T12:00:00Z"


def test_spot_label_gives_spot_price() -> None:
    p = plan_node_patches([node("a", "p4d.24xlarge", cap="spot", product="NVIDIA-A100-SXM4-40GB")], CATALOG, now=NOW)[
        "a"
    ]
    entry = CATALOG.get("p4d.24xlarge", "us-east-1")
    assert entry is not None and entry.spot is not None
    assert p[labels.PRICE_CAPACITY_TYPE] == "spot"
    assert p[labels.HOURLY_COST] == f"{entry.spot:.6f}"


def test_unknown_instance_is_flagged_fallback_never_zero() -> None:
    p = plan_node_patches([node("x", "weird.metal", gpus=4)], CATALOG, now=NOW)["x"]
    assert p[labels.PRICE_SOURCE] == "fallback"
    assert float(p[labels.HOURLY_COST] or 0) > 0
    assert "unknown instance type" in (p[PRICE_NOTES] or "")


def test_already_annotated_node_is_not_patched_again() -> None:
    first = plan_node_patches([node("a", "p5.48xlarge")], CATALOG, now=NOW)["a"]
    done = {k: v for k, v in first.items() if v is not None}
    again = plan_node_patches([node("a", "p5.48xlarge", annotations=done)], CATALOG, now=NOW)
    assert again == {}


def test_custom_price_change_repatches_and_clears_notes() -> None:
    first = plan_node_patches([node("a", "p5.48xlarge")], CATALOG, now=NOW)["a"]
    done = {k: v for k, v in first.items() if v is not None}
    custom = parse_custom_prices("instance_type,region,capacity_type,hourly_usd\np5.48xlarge,*,*,60\n")
    p = plan_node_patches([node("a", "p5.48xlarge", annotations=done)], CATALOG, now=NOW, custom=custom)["a"]
    assert p[labels.HOURLY_COST] == "60.000000" and p[labels.PRICE_SOURCE] == "custom"
    assert PRICE_NOTES in p and p[PRICE_NOTES] is None


@pytest.mark.parametrize("gpus", [None, 0], ids=["no-gpu-resource", "zero-gpus"])
def test_cpu_nodes_are_priced_at_default_rates_and_flagged(gpus: int | None) -> None:
    p = plan_node_patches([node("cpu", "m5.large", gpus=gpus)], CATALOG, now=NOW)["cpu"]
    assert p[labels.HOURLY_COST] == "3.034656"  # 96 cores x 0.031611 (no memory reported)
    assert p[labels.PRICE_SOURCE] == "fallback" and "CPU-only node" in (p[PRICE_NOTES] or "")
    assert labels.GPU_HOURLY_COST not in p


def test_facts_from_labels() -> None:
    f = node_facts(node("a", "g5.xlarge", cap="SPOT", gpus=1, product="NVIDIA-A10G"))
    assert (f.instance_type, f.region, f.capacity_type, f.gpu_product, f.gpu_count) == (
        "g5.xlarge",
        "us-east-1",
        "spot",
        "NVIDIA-A10G",
        1,
    )
