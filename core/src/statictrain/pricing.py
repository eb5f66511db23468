"""Node prices: the shipped catalog, custom prices, live quotes and flagged fallbacks.

Resolution order for one node (first match wins):

1. custom prices (a CSV in a ConfigMap, in the spirit of OpenCost's custom
   pricing CSV): exact instance type, region ``*`` and capacity type ``*`` allowed;
2. live quotes from a configured cloud pricing API (``live:<provider>``),
   flagged stale when older than the allowed age;
3. the shipped catalog (``core/src/statictrain/data/prices.csv``, built by
   ``tools/build_price_catalog.py`` from SkyPilot catalog snapshots);
4. a fallback, flagged as such and never zero: the same instance type in other
   regions, else the median per-GPU catalog price of the node's GPU model, else
   a configured default per-GPU price.

Everything here is pure: the catalog text, custom CSV and live quotes are
passed in; :func:`shipped_catalog_text` is the only reader of package data.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from importlib import resources
from typing import Literal

from statictrain import gpus
from statictrain.money import parse_usd, to_decimal

__all__ = [
    "ON_DEMAND",
    "SPOT",
    "SPOT_LABELS",
    "Catalog",
    "CatalogEntry",
    "CustomPrice",
    "FallbackPolicy",
    "LiveQuotes",
    "NodeFacts",
    "NodePrice",
    "capacity_type_from_labels",
    "node_gpu",
    "parse_catalog",
    "parse_custom_prices",
    "price_node",
    "shipped_catalog_text",
]

CapacityType = Literal["spot", "on-demand"]
SPOT: CapacityType = "spot"
ON_DEMAND: CapacityType = "on-demand"


def capacity_type(value: str | None) -> CapacityType:
    """Normalise a capacity-type label; unknown or missing means on-demand."""
    v = (value or "").strip().lower()
    return SPOT if v in ("spot", "preemptible", "preemptable", "lowpriority") else ON_DEMAND


SPOT_LABELS: tuple[tuple[str, frozenset[str]], ...] = (
    ("karpenter.sh/capacity-type", frozenset({"spot"})),  # Karpenter (AWS, Azure)
    ("eks.amazonaws.com/capacityType", frozenset({"spot"})),  # EKS managed node groups: SPOT | ON_DEMAND
    ("cloud.google.com/gke-spot", frozenset({"true"})),  # GKE Spot VMs
    ("cloud.google.com/gke-preemptible", frozenset({"true"})),  # GKE preemptible VMs
    ("cloud.google.com/gke-provisioning", frozenset({"spot", "preemptible"})),  # GKE (newer versions)
    ("kubernetes.azure.com/scalesetpriority", frozenset({"spot"})),  # AKS spot node pools: spot | regular
    ("node.kubernetes.io/lifecycle", frozenset({"spot", "preemptible"})),  # kops and others
)
"""Node labels that mark spot capacity, per provisioner; a value in the set (any case) means spot."""


def capacity_type_from_labels(node_labels: Mapping[str, str]) -> CapacityType:
    """Spot when any provisioner's label says so (:data:`SPOT_LABELS`), else on-demand."""
    for key, spot_values in SPOT_LABELS:
        if (node_labels.get(key) or "").strip().lower() in spot_values:
            return SPOT
    return ON_DEMAND


@dataclass(frozen=True)
class CatalogEntry:
    cloud: str
    instance_type: str
    region: str
    gpu_model: str
    gpu_count: int
    on_demand: Decimal | None
    """On-demand USD per instance-hour; None when the source has no price."""
    spot: Decimal | None
    flagged: bool
    """True when the source marks the row as a suspected data error."""
    source: str
    as_of: str = ""
    """When the row's source snapshot was current (the catalog's ``as_of`` column)."""

    def price(self, cap: CapacityType) -> Decimal | None:
        return self.spot if cap == SPOT else self.on_demand


@dataclass(frozen=True)
class Catalog:
    entries: tuple[CatalogEntry, ...]
    as_of: str
    """When the prices were current, from the rows' ``as_of`` column (distinct values joined by ``; ``)."""
    _index: Mapping[tuple[str, str], CatalogEntry] = field(default_factory=dict, compare=False, repr=False)

    def get(self, instance_type: str, region: str) -> CatalogEntry | None:
        return self._index.get((instance_type, region))

    def regions_of(self, instance_type: str) -> list[CatalogEntry]:
        return [e for e in self.entries if e.instance_type == instance_type]

    def family_prices(self, family: str, cap: CapacityType) -> list[Decimal]:
        """Per-GPU hourly prices of every unflagged catalog row whose GPU model is of this family."""
        models = {e.gpu_model for e in self.entries if gpus.from_name(e.gpu_model).family == family}
        return [p for m in sorted(models) for p in self.gpu_prices(m, cap)]

    def gpu_prices(self, gpu_model: str, cap: CapacityType) -> list[Decimal]:
        """Per-GPU hourly prices of every unflagged catalog row with this GPU model."""
        out: list[Decimal] = []
        for e in self.entries:
            p = e.price(cap)
            if e.gpu_model == gpu_model and p is not None and not e.flagged:
                out.append(p / e.gpu_count)
        return out


def _opt_price(text: str, what: str) -> Decimal | None:
    return parse_usd(text, what=what, allow_zero=False) if text.strip() else None


def parse_catalog(text: str, *, as_of: str = "unknown") -> Catalog:
    """Parse the shipped catalog CSV (columns as written by tools/build_price_catalog.py).

    Each row's ``as_of`` column says when its prices were current; ``as_of`` here is
    only the value for rows without one (a catalog written before the column existed).
    """
    reader = csv.DictReader(io.StringIO(text))
    entries: list[CatalogEntry] = []
    for n, row in enumerate(reader, start=2):
        try:
            entries.append(
                CatalogEntry(
                    cloud=row["cloud"],
                    instance_type=row["instance_type"],
                    region=row["region"],
                    gpu_model=row["gpu_model"],
                    gpu_count=int(row["gpu_count"]),
                    on_demand=_opt_price(row["on_demand_usd_per_hour"], "on_demand_usd_per_hour"),
                    spot=_opt_price(row["spot_usd_per_hour"], "spot_usd_per_hour"),
                    flagged=row["flagged"] == "1",
                    source=row["source"],
                    as_of=(row.get("as_of") or "").strip() or as_of,
                )
            )
        except (KeyError, ValueError) as e:
            raise ValueError(f"price catalog line {n}: {e}") from None
    index = {(e.instance_type, e.region): e for e in entries}
    dates = "; ".join(sorted({e.as_of for e in entries})) or as_of
    return Catalog(entries=tuple(entries), as_of=dates, _index=index)


def shipped_catalog_text() -> str:
    """The catalog CSV shipped inside the package."""
    return resources.files("statictrain").joinpath("data/prices.csv").read_text(encoding="utf-8")


@dataclass(frozen=True)
class CustomPrice:
    instance_type: str
    region: str
    """Region or ``*``."""
    capacity_type: str
    """``spot``, ``on-demand`` or ``*``."""
    hourly_usd: Decimal
    gpu_count: int | None
    """GPUs on the instance; None means use the node's capacity."""
    node_id: str = ""
    """When set, the row prices only the node whose name or spec.providerID is this (Kubecost CSV)."""


CUSTOM_COLUMNS = ("instance_type", "region", "capacity_type", "hourly_usd")
KUBECOST_COLUMNS = ("InstanceID", "Region", "AssetClass", "InstanceIDField", "InstanceType", "MarketPriceHourly")


def _parse_kubecost_rows(reader: csv.DictReader[str]) -> list[CustomPrice]:
    """Kubecost/OpenCost CSV pricing rows of AssetClass ``node`` (other classes are not priced here).

    A row matches one node by InstanceID (with InstanceIDField ``metadata.name`` or
    ``spec.providerID``), else every node of its InstanceType in its Region (empty: any).
    """
    out: list[CustomPrice] = []
    for n, row in enumerate(reader, start=2):
        where = f"custom prices row {n}"
        if (row.get("AssetClass") or "").strip().lower() != "node":
            continue
        hourly = parse_usd(row.get("MarketPriceHourly") or "", what=f"{where}: MarketPriceHourly", allow_zero=False)
        field_name = (row.get("InstanceIDField") or "").strip()
        node_id = (row.get("InstanceID") or "").strip() if field_name in ("metadata.name", "spec.providerID") else ""
        it = (row.get("InstanceType") or "").strip()
        if not node_id and not it:
            raise ValueError(
                f"{where}: give InstanceType, or InstanceID with InstanceIDField metadata.name or spec.providerID"
            )
        out.append(CustomPrice(it, (row.get("Region") or "").strip() or "*", "*", hourly, None, node_id))
    return out


def parse_custom_prices(text: str) -> list[CustomPrice]:
    """Parse custom prices: CSV with columns instance_type,region,capacity_type,hourly_usd[,gpu_count],
    or Kubecost/OpenCost's CSV pricing format (InstanceID, Region, AssetClass, InstanceIDField,
    InstanceType, MarketPriceHourly; node rows).

    Lines starting with ``#`` are comments. Errors name the line and the fix.
    """
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        return []
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    if all(c in (reader.fieldnames or []) for c in KUBECOST_COLUMNS):
        return _parse_kubecost_rows(reader)
    missing = [c for c in CUSTOM_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(
            f"custom prices CSV lacks column(s) {', '.join(missing)}; the header must be "
            "instance_type,region,capacity_type,hourly_usd[,gpu_count]"
        )
    out: list[CustomPrice] = []
    for n, row in enumerate(reader, start=2):
        where = f"custom prices row {n}"
        it = (row["instance_type"] or "").strip()
        if not it:
            raise ValueError(f"{where}: instance_type is empty")
        cap = (row["capacity_type"] or "").strip() or "*"
        if cap not in ("spot", "on-demand", "*"):
            raise ValueError(f"{where}: capacity_type {cap!r} must be spot, on-demand or *")
        hourly = parse_usd(row["hourly_usd"] or "", what=f"{where}: hourly_usd", allow_zero=False)
        count_text = (row.get("gpu_count") or "").strip()
        count: int | None = None
        if count_text:
            if not count_text.isdigit() or int(count_text) == 0:
                raise ValueError(f"{where}: gpu_count {count_text!r} must be a positive integer")
            count = int(count_text)
        out.append(CustomPrice(it, (row["region"] or "").strip() or "*", cap, hourly, count))
    return out


@dataclass(frozen=True)
class LiveQuotes:
    """Prices fetched from one cloud pricing API (or its on-disk copy)."""

    provider: str
    fetched_at: datetime
    prices: Mapping[tuple[str, str, str], Decimal]
    """(instance_type, region, capacity_type) -> USD per instance-hour."""


@dataclass(frozen=True)
class FallbackPolicy:
    default_gpu_hourly_usd: Decimal = Decimal("4.00")
    """Per-GPU hourly price used when nothing else is known about a node."""
    live_max_age: timedelta = timedelta(hours=24)
    """Live quotes older than this are still used but flagged stale."""
    default_cpu_hourly_usd: Decimal = Decimal("0.031611")
    """Per-core hourly price of a CPU-only node the catalog does not list (OpenCost's default), flagged."""
    default_memory_gib_hourly_usd: Decimal = Decimal("0.004237")
    """Per-GiB hourly price of a CPU-only node the catalog does not list (OpenCost's default), flagged."""


@dataclass(frozen=True)
class NodeFacts:
    """What the node's labels and capacity say about it."""

    name: str
    instance_type: str | None
    region: str | None
    capacity_type: CapacityType
    gpu_product: str | None
    gpu_count: int
    provider_id: str = ""
    """spec.providerID, e.g. ``aws:///us-east-1a/i-0abc``."""
    cpu: float = 0.0
    """Allocatable CPU cores."""
    memory_gib: float = 0.0
    """Allocatable memory, GiB."""


@dataclass(frozen=True)
class NodePrice:
    hourly_usd: Decimal
    """Price of the whole node per hour; always > 0."""
    gpu_hourly_usd: Decimal
    """hourly_usd / GPUs (the whole node price is attributed to its GPUs)."""
    capacity_type: CapacityType
    source: str
    """catalog | custom | live:<provider> | fallback"""
    notes: tuple[str, ...] = ()
    """Why a price is not plain: fallback reason, stale quote, flagged source row."""

    @property
    def is_fallback(self) -> bool:
        return self.source == "fallback"


def _custom_match(custom: Sequence[CustomPrice], node: NodeFacts) -> CustomPrice | None:
    best: tuple[int, CustomPrice] | None = None
    for c in custom:
        if c.node_id:
            if c.node_id in (node.name, node.provider_id):
                return c  # a price for exactly this node wins
            continue
        if c.instance_type != node.instance_type:
            continue
        if c.region not in ("*", node.region) or c.capacity_type not in ("*", node.capacity_type):
            continue
        score = (c.region != "*") * 2 + (c.capacity_type != "*")
        if best is None or score > best[0]:
            best = (score, c)
    return best[1] if best else None


def _make(hourly: Decimal, gpus: int, node: NodeFacts, source: str, notes: Iterable[str]) -> NodePrice:
    if hourly <= 0:
        raise ValueError(f"node {node.name}: price from {source} is not positive ({hourly})")
    gpus = max(gpus, 1)
    return NodePrice(hourly, hourly / gpus, node.capacity_type, source, tuple(notes))


def price_node(
    node: NodeFacts,
    catalog: Catalog,
    *,
    now: datetime,
    custom: Sequence[CustomPrice] = (),
    live: Sequence[LiveQuotes] = (),
    policy: FallbackPolicy | None = None,
) -> NodePrice:
    """Price one node; never returns zero, and flags every price that is not a direct quote."""
    policy = policy or FallbackPolicy()
    cap = node.capacity_type
    gpus = node.gpu_count

    c = _custom_match(custom, node)
    if c is not None:
        return _make(c.hourly_usd, c.gpu_count or gpus, node, "custom", ())

    if node.instance_type and node.region:
        for q in live:
            p = q.prices.get((node.instance_type, node.region, cap))
            if p is not None:
                stale = now - q.fetched_at > policy.live_max_age
                notes = [f"stale: fetched {q.fetched_at.isoformat()}"] if stale else []
                return _make(p, gpus, node, f"live:{q.provider}", notes)

        entry = catalog.get(node.instance_type, node.region)
        if entry is not None:
            p = entry.price(cap)
            notes = [f"catalog snapshot {entry.as_of}"]
            if entry.flagged:
                notes.append("catalog row flagged as a suspected data error")
            if p is None and cap == SPOT and entry.on_demand is not None:
                notes.append("no spot price; on-demand price used")
                return _make(entry.on_demand, gpus or entry.gpu_count, node, "catalog", notes)
            if p is not None:
                return _make(p, gpus or entry.gpu_count, node, "catalog", notes)

    if node.instance_type:
        rows = [(e.price(cap), e) for e in catalog.regions_of(node.instance_type)]
        clean = [p for p, e in rows if p is not None and not e.flagged]
        suspect = [p for p, e in rows if p is not None and e.flagged]
        if clean or suspect:
            p = Decimal(statistics.median(clean or suspect))
            notes = [f"{node.instance_type} not priced in region {node.region}; median of its other regions"]
            if not clean:
                notes.append("only catalog rows flagged as suspected data errors price it")
            return _make(p, gpus, node, "fallback", notes)

    if gpus == 0 and (node.cpu > 0 or node.memory_gib > 0):
        cpu_usd = policy.default_cpu_hourly_usd * to_decimal(node.cpu)
        hourly = cpu_usd + policy.default_memory_gib_hourly_usd * to_decimal(node.memory_gib)
        why = (
            f"CPU-only node of instance type {node.instance_type!r} not in the GPU catalog; default rates "
            f"{policy.default_cpu_hourly_usd}/core-h and {policy.default_memory_gib_hourly_usd}/GiB-h"
        )
        return _make(hourly, gpus, node, "fallback", [why])

    same_type = catalog.regions_of(node.instance_type) if node.instance_type else []
    gpu = node_gpu(node)
    per_gpu: list[Decimal] = []
    what_gpu = ""
    if gpu.model is not None:
        per_gpu = catalog.gpu_prices(gpu.model, cap) or catalog.gpu_prices(gpu.model, ON_DEMAND)
        what_gpu = gpu.model
    elif gpu.known:  # family known, memory not: every catalog model of the family
        per_gpu = catalog.family_prices(gpu.family, cap) or catalog.family_prices(gpu.family, ON_DEMAND)
        what_gpu = f"{gpu.family} (any memory size)"
    if per_gpu:
        p = Decimal(statistics.median(per_gpu)) * max(gpus, 1)
        what = "no catalog price for" if same_type else "unknown instance type"
        why = f"{what} {node.instance_type!r} ({cap}); median catalog price of {what_gpu} x {max(gpus, 1)}"
        return _make(p, gpus, node, "fallback", [why])
    gpu_why = f"GPU {gpu.family}" if gpu.known else f"unknown GPU {node.gpu_product!r}"
    why = f"unknown instance type {node.instance_type!r} and {gpu_why} not in the catalog; default per-GPU price"
    return _make(policy.default_gpu_hourly_usd * max(gpus, 1), gpus, node, "fallback", [why])


def node_gpu(node: NodeFacts) -> gpus.Gpu:
    """The node's GPU: its GPU product label, else its instance type; Unknown when neither names a known GPU."""
    if node.gpu_product:
        by_product = gpus.from_name(node.gpu_product)
        if by_product.known or not node.instance_type:
            return by_product
    return gpus.from_instance_type(node.instance_type or "")
