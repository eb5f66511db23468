"""Live prices from cloud pricing APIs, with an on-disk copy used (flagged stale) when unreachable.

Implemented: the Azure Retail Prices API (public, no credentials). The AWS
Price List API needs signed (SigV4) requests and GCP's Cloud Billing Catalog
an API key; both are not implemented here, and the shipped catalog covers
those clouds.

Parsing is pure (:func:`parse_azure_items`); fetching takes an injected
``urlopen`` so tests and air-gapped clusters never touch the network.
"""

from __future__ import annotations

import json
import logging
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import IO, Any

from statictrain.pricing import ON_DEMAND, SPOT, LiveQuotes

__all__ = [
    "AZURE_URL",
    "MAX_PAGES",
    "RefreshSchedule",
    "Urlopen",
    "azure_query_url",
    "fetch_azure",
    "load",
    "parse_azure_items",
    "refresh_azure",
    "save",
]

log = logging.getLogger(__name__)

AZURE_URL = "https://prices.azure.com/api/retail/prices"
MAX_PAGES = 50

Urlopen = Callable[[str], IO[bytes]]


def parse_azure_items(items: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], Decimal]:
    """(armSkuName, armRegionName, spot|on-demand) -> USD per hour, Linux pay-as-you-go meters only."""
    out: dict[tuple[str, str, str], Decimal] = {}
    for it in items:
        if it.get("type") != "Consumption" or it.get("unitOfMeasure") != "1 Hour":
            continue
        if it.get("currencyCode", "USD") != "USD" or "Windows" in str(it.get("productName", "")):
            continue
        sku_name = str(it.get("skuName", ""))
        if "Low Priority" in sku_name:
            continue
        try:
            price = Decimal(str(it.get("retailPrice")))
        except InvalidOperation:
            continue
        if not price.is_finite() or price <= 0:
            continue
        cap = SPOT if sku_name.endswith("Spot") else ON_DEMAND
        out[(str(it.get("armSkuName", "")), str(it.get("armRegionName", "")), cap)] = price
    return out


def azure_query_url(regions: Sequence[str], skus: Sequence[str], base_url: str = AZURE_URL) -> str:
    def quote_list(field: str, values: Sequence[str]) -> str:
        return "(" + " or ".join(f"{field} eq '{v.replace(chr(39), '')}'" for v in sorted(set(values))) + ")"

    flt = (
        f"serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and "
        f"{quote_list('armRegionName', regions)} and {quote_list('armSkuName', skus)}"
    )
    return f"{base_url}?{urllib.parse.urlencode({'$filter': flt})}"


def fetch_azure(
    urlopen: Urlopen, regions: Sequence[str], skus: Sequence[str], now: datetime, *, base_url: str = AZURE_URL
) -> LiveQuotes:
    """All pages of the filtered query; raises OSError/ValueError when the API cannot be read."""
    url: str | None = azure_query_url(regions, skus, base_url)
    items: list[Mapping[str, Any]] = []
    for _ in range(MAX_PAGES):
        if not url:
            break
        with urlopen(url) as resp:
            page = json.load(resp)
        items.extend(page.get("Items") or [])
        url = page.get("NextPageLink")
    return LiveQuotes("azure", now, parse_azure_items(items))


def save(quotes: LiveQuotes, cache_dir: Path) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    doc = {
        "provider": quotes.provider,
        "fetched_at": quotes.fetched_at.isoformat(),
        "prices": [[*k, f"{v:f}"] for k, v in sorted(quotes.prices.items())],
    }
    tmp = cache_dir / f".{quotes.provider}.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(cache_dir / f"{quotes.provider}.json")


def load(provider: str, cache_dir: Path) -> LiveQuotes | None:
    path = cache_dir / f"{provider}.json"
    try:
        doc = json.loads(path.read_text())
        prices = {(a, b, c): Decimal(p) for a, b, c, p in doc["prices"]}
        return LiveQuotes(doc["provider"], datetime.fromisoformat(doc["fetched_at"]), prices)
    except (OSError, ValueError, KeyError, InvalidOperation) as e:
        log.info("no usable on-disk %s prices at %s: %s", provider, path, e)
        return None


@dataclass(frozen=True)
class RefreshSchedule:
    """When to refresh live prices next: every ``every_s`` after a success; after failures, retry with
    exponential backoff from ``first_retry_s`` (doubling, at most ``every_s``)."""

    every_s: float
    first_retry_s: float = 60.0
    failures: int = 0
    next_at: datetime | None = None
    """None: due now (nothing fetched yet)."""

    def due(self, now: datetime) -> bool:
        return self.next_at is None or now >= self.next_at

    def after(self, ok: bool, now: datetime) -> RefreshSchedule:
        if ok:
            return replace(self, failures=0, next_at=now + timedelta(seconds=self.every_s))
        wait = min(self.first_retry_s * 2**self.failures, self.every_s)
        return replace(self, failures=self.failures + 1, next_at=now + timedelta(seconds=wait))


def refresh_azure(
    urlopen: Urlopen,
    regions: Sequence[str],
    skus: Sequence[str],
    now: datetime,
    cache_dir: Path,
    *,
    base_url: str = AZURE_URL,
) -> tuple[LiveQuotes | None, bool]:
    """(quotes, fresh): fresh quotes (saved to disk), else the last saved ones (the pricer flags them
    stale by age) with fresh False, so the caller retries soon (:class:`RefreshSchedule`)."""
    try:
        quotes = fetch_azure(urlopen, regions, skus, now, base_url=base_url)
    except (OSError, ValueError) as e:
        log.warning("Azure Retail Prices API unreachable (%s); using the on-disk copy if any", e)
        return load("azure", cache_dir), False
    if not quotes.prices:
        log.warning("Azure Retail Prices API returned no usable prices; using the on-disk copy if any")
        return load("azure", cache_dir), False
    try:
        save(quotes, cache_dir)
    except OSError as e:
        log.warning("cannot save Azure prices to %s: %s", cache_dir, e)
    return quotes, True
