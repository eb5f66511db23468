"""Azure Retail Prices parsing, paging, on-disk fallback and staleness."""

from __future__ import annotations

import io
import json
import urllib.parse
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from statictrain.pricing import FallbackPolicy, NodeFacts, parse_catalog, price_node, shipped_catalog_text
from statictrain_operator.cost.live_prices import RefreshSchedule, azure_query_url, parse_azure_items, refresh_azure

NOW = datetime(2026, 3, 1, tzinfo=UTC)
SKU = "Standard_ND96asr_v4"


def item(sku_name: str, price: float, **kw: Any) -> dict[str, Any]:
    base = {
        "currencyCode": "USD",
        "retailPrice": price,
        "armRegionName": "eastus",
        "armSkuName": SKU,
        "skuName": sku_name,
        "productName": "Virtual Machines NDasrA100v4 Series",
        "type": "Consumption",
        "unitOfMeasure": "1 Hour",
    }
    return base | kw


def test_parse_keeps_linux_payg_hourly_meters() -> None:
    got = parse_azure_items(
        [
            item("ND96asr v4", 27.197),
            item("ND96asr v4 Spot", 3.5),
            item("ND96asr v4 Low Priority", 5.4),
            item("ND96asr v4", 30.0, productName="Virtual Machines ... Windows"),
            item("ND96asr v4", 1.0, type="Reservation"),
            item("ND96asr v4", 0.0, armSkuName="zero"),
        ]
    )
    assert got == {(SKU, "eastus", "on-demand"): Decimal("27.197"), (SKU, "eastus", "spot"): Decimal("3.5")}


def test_query_url_filters_regions_and_skus() -> None:
    flt = urllib.parse.parse_qs(urllib.parse.urlparse(azure_query_url(["eastus"], [SKU, "Bad'Sku"])).query)["$filter"][
        0
    ]
    assert "armRegionName eq 'eastus'" in flt and f"armSkuName eq '{SKU}'" in flt and "'Bad'Sku'" not in flt


def test_paging_cache_and_stale_fallback(tmp_path: Path) -> None:
    pages = {
        "p1": {"Items": [item("ND96asr v4", 27.197)], "NextPageLink": "p2"},
        "p2": {"Items": [item("ND96asr v4 Spot", 3.5)], "NextPageLink": None},
    }
    calls: list[str] = []

    def urlopen(url: str) -> IO[bytes]:
        key = "p1" if url.startswith("https://") else url
        calls.append(key)
        return io.BytesIO(json.dumps(pages[key]).encode())

    fresh, ok = refresh_azure(urlopen, ["eastus"], [SKU], NOW, tmp_path)
    assert ok and fresh is not None and calls == ["p1", "p2"] and len(fresh.prices) == 2

    def down(url: str) -> IO[bytes]:
        raise OSError("network unreachable")

    later = NOW + timedelta(days=3)
    cached, ok = refresh_azure(down, ["eastus"], [SKU], later, tmp_path)
    assert not ok and cached is not None and cached.fetched_at == NOW and cached.prices == fresh.prices
    node = NodeFacts("az", SKU, "eastus", "on-demand", "NVIDIA-A100-SXM4-40GB", 8)
    p = price_node(node, parse_catalog(shipped_catalog_text()), now=later, live=[cached], policy=FallbackPolicy())
    assert p.source == "live:azure" and p.hourly_usd == Decimal("27.197") and "stale" in p.notes[0]
    assert refresh_azure(down, ["eastus"], [SKU], later, tmp_path / "empty") == (None, False)


def test_failed_refresh_is_retried_with_backoff_not_after_the_full_interval() -> None:
    s = RefreshSchedule(every_s=21600, first_retry_s=60)
    assert s.due(NOW)
    waits = []
    t = NOW
    for _ in range(10):
        s = s.after(False, t)
        assert s.next_at is not None
        waits.append((s.next_at - t).total_seconds())
        t = s.next_at
    assert waits[:4] == [60, 120, 240, 480] and max(waits) == 21600
    s = s.after(True, t)
    assert s.failures == 0 and s.next_at == t + timedelta(hours=6)
