"""Reconcile a cloud provider's FOCUS bill with what statictrain allocated (pure): per node, billed vs jobs + idle.

The bill is a FOCUS (1.0-1.2) cost and usage CSV. A row is a node's when its ``ResourceId``, or its last
``/`` part (an ARN, an Azure resource path), is the node's name or the last part of the node's
``spec.providerID`` (``aws:///us-east-1a/i-0abc`` -> ``i-0abc``), letter case aside; its ``BilledCost``
counts for that node over its charge period. Every row is counted in exactly one kind, and every kind but
``matched`` is listed with its totals: nothing is dropped silently.

* ``matched``: a node statictrain accounted in the period;
* ``unknown resource``: a ResourceId that is no node statictrain saw (another service, a node it never
  accounted);
* ``no resource``: no ResourceId (taxes, support, credits), totalled per ChargeCategory;
* ``other currency``: a BillingCurrency other than the report's (USD), totalled per currency;
* ``malformed``: a BilledCost or charge period that is not FOCUS (Numeric, Date/Time format), by line.

Columns that are neither FOCUS columns nor custom ``x_`` columns are named (and not read). A node whose bill
and allocation differ by more than ``tolerance`` is explained: the hours its rows cover, the billed rate over
them, and the rate statictrain's allocation amounts to over the same hours.
"""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

from statictrain import metrics
from statictrain.money import readable_usd
from statictrain.promql import range_duration, selector
from statictrain_cli.report.model import Report, fmt_time

__all__ = [
    "KINDS",
    "REQUIRED",
    "SETTLE_S",
    "TOLERANCE",
    "Bill",
    "NodeLine",
    "Reconciliation",
    "aliases",
    "provider_ids_query",
    "read_bill",
    "reconcile",
    "to_text",
]

REQUIRED = ("BilledCost", "BillingCurrency", "ChargeCategory", "ChargePeriodStart", "ChargePeriodEnd", "ResourceId")
SETTLE_S = 60.0
"""statictrain's figures for time up to the bill's end are read this much later: the operator publishes a window's
counters after it (every 30 s by default), so read at the end itself they would lack the last window. Bound:
at most this many seconds of node cost after the bill's end are counted too (1e-5 of a monthly bill)."""
TOLERANCE = Decimal("0.01")
"""Relative difference between billed and allocated above which a node is explained."""
CURRENCY = "USD"
KINDS = ("matched", "unknown resource", "no resource", "other currency", "malformed")
FOCUS_COLUMNS = frozenset(
    {
        "AvailabilityZone", "BilledCost", "BillingAccountId", "BillingAccountName", "BillingAccountType",
        "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart", "CapacityReservationId",
        "CapacityReservationStatus", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency",
        "ChargePeriodEnd", "ChargePeriodStart", "CommitmentDiscountCategory", "CommitmentDiscountId",
        "CommitmentDiscountName", "CommitmentDiscountQuantity", "CommitmentDiscountStatus", "CommitmentDiscountType",
        "CommitmentDiscountUnit", "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice",
        "EffectiveCost", "InvoiceId", "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory",
        "PricingCurrency", "PricingCurrencyContractedUnitPrice", "PricingCurrencyEffectiveCost",
        "PricingCurrencyListUnitPrice", "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "RegionId",
        "RegionName", "ResourceId", "ResourceName", "ResourceType", "ServiceCategory", "ServiceName",
        "ServiceSubcategory", "SkuId", "SkuMeter", "SkuPriceDetails", "SkuPriceId", "SubAccountId", "SubAccountName",
        "SubAccountType", "Tags",
    }
)  # fmt: skip
"""Column IDs of FOCUS 1.0, 1.1 and 1.2."""
NUMERIC = re.compile(r"-?(\d+(\.\d+)?|\.\d+)(E-?\d+)?")


def provider_ids_query(window_s: float) -> str:
    """PromQL for the node price gauge over the window, whose ``provider_id`` label names each node's instance."""
    return f"last_over_time({selector(metrics.NODE_HOURLY_COST_USD)}[{range_duration(max(window_s, 1.0))}])"


def _time(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


@dataclass(frozen=True)
class BillRow:
    line: int
    resource: str
    category: str
    currency: str
    cost: Decimal
    start: datetime
    end: datetime


@dataclass
class Bill:
    rows: list[BillRow] = field(default_factory=list)
    malformed: list[tuple[int, str]] = field(default_factory=list)
    """(line, what is wrong) of rows that could not be read."""
    unknown_columns: list[str] = field(default_factory=list)

    @property
    def period(self) -> tuple[datetime, datetime]:
        """From the earliest charge period start to the latest end."""
        return min(r.start for r in self.rows), max(r.end for r in self.rows)


def read_bill(text: str) -> Bill:
    """Parse a FOCUS bill; ValueError (what to fix) when it has no header, misses a column needed here, or has
    no readable row."""
    try:
        return _read(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise ValueError(f"the bill is not a readable CSV file ({e})") from None


def _read(reader: csv.DictReader[str]) -> Bill:
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ValueError(
            f"the bill lacks the FOCUS column(s) {', '.join(missing)}; export it in FOCUS format "
            "(cost and usage, with resource IDs)"
        )
    bill = Bill(unknown_columns=[c for c in header if c not in FOCUS_COLUMNS and not c.startswith("x_")])
    for line, raw in enumerate(reader, start=2):
        vals = {c: (raw.get(c) or "").strip() for c in REQUIRED}
        start, end = _time(vals["ChargePeriodStart"]), _time(vals["ChargePeriodEnd"])
        if not NUMERIC.fullmatch(vals["BilledCost"]):
            bill.malformed.append((line, f"BilledCost {vals['BilledCost']!r} is not a FOCUS decimal"))
        elif start is None or end is None or not start < end:
            bill.malformed.append((line, "ChargePeriodStart/End are not YYYY-MM-DDTHH:mm:ssZ with start before end"))
        else:
            bill.rows.append(BillRow(line, vals["ResourceId"], vals["ChargeCategory"] or "(none)",
                                     vals["BillingCurrency"], Decimal(vals["BilledCost"]), start, end))  # fmt: skip
    if not bill.rows:
        raise ValueError(f"the bill has no readable row ({len(bill.malformed)} malformed); nothing to reconcile")
    return bill


@dataclass(frozen=True)
class NodeLine:
    node: str
    billed: Decimal
    jobs: Decimal
    idle: Decimal
    billed_hours: Decimal
    """Hours the node's bill rows cover (their charge periods, overlaps counted once)."""

    @property
    def allocated(self) -> Decimal:
        return self.jobs + self.idle

    @property
    def difference(self) -> Decimal:
        return self.billed - self.allocated

    @property
    def relative(self) -> Decimal | None:
        return self.difference / self.allocated if self.allocated else None


@dataclass
class Reconciliation:
    period: tuple[datetime, datetime]
    nodes: list[NodeLine]
    counts: dict[str, int]
    """Rows per kind (KINDS)."""
    listed: dict[str, dict[str, tuple[int, Decimal]]]
    """kind -> name (resource, category, currency) -> (rows, billed total), for every kind but matched."""
    malformed: list[tuple[int, str]]
    unknown_columns: list[str]
    tolerance: Decimal = TOLERANCE


def _hours(periods: list[tuple[datetime, datetime]]) -> Decimal:
    total, end = 0.0, None
    for a, b in sorted(periods):
        lo = a if end is None else max(a, end)
        if b > lo:
            total += (b - lo).total_seconds()
        end = b if end is None else max(end, b)
    return Decimal(repr(total)) / 3600


def _tail(text: str) -> str:
    return text.rstrip("/").rsplit("/", 1)[-1].lower()


def aliases(nodes: Iterable[str], provider_ids: Mapping[str, str]) -> dict[str, str]:
    """What a bill's resource ID may call each node -> the node: its name, its provider ID's last part."""
    nodes = set(nodes)
    out = {n.lower(): n for n in nodes}
    out |= {_tail(pid): node for node, pid in provider_ids.items() if pid and node in nodes}
    return out


def reconcile(
    bill: Bill, report: Report, provider_ids: Mapping[str, str] | None = None, tolerance: Decimal = TOLERANCE
) -> Reconciliation:
    """Billed vs allocated per node over the report's window (the bill's period); ``provider_ids``: node ->
    its spec.providerID, as the operator's node price gauge carries it."""
    known = aliases(report.nodes, provider_ids or {})
    billed: dict[str, Decimal] = defaultdict(Decimal)
    periods: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    counts = dict.fromkeys(KINDS, 0)
    counts["malformed"] = len(bill.malformed)
    listed: dict[str, dict[str, tuple[int, Decimal]]] = {k: {} for k in KINDS if k not in ("matched", "malformed")}

    def note(kind: str, name: str, cost: Decimal) -> None:
        n, total = listed[kind].get(name, (0, Decimal(0)))
        listed[kind][name] = (n + 1, total + cost)
        counts[kind] += 1

    for r in bill.rows:
        node = (known.get(r.resource.lower()) or known.get(_tail(r.resource))) if r.resource else None
        if r.currency != CURRENCY:
            note("other currency", r.currency or "(none)", r.cost)
        elif not r.resource:
            note("no resource", r.category, r.cost)
        elif node is None:
            note("unknown resource", r.resource, r.cost)
        else:
            counts["matched"] += 1
            billed[node] += r.cost
            periods[node].append((r.start, r.end))
    lines = [
        NodeLine(
            node,
            billed.get(node, Decimal(0)),
            Decimal(repr(sum(f.get("node_allocated_usd", [0.0])))),
            Decimal(repr(sum(f.get("node_idle_usd", [0.0])))),
            _hours(periods.get(node, [])),
        )
        for node, f in sorted(report.nodes.items())
    ]
    return Reconciliation(bill.period, lines, counts, listed, bill.malformed, bill.unknown_columns, tolerance)


def _explain(n: NodeLine, tolerance: Decimal) -> str | None:
    rel = n.relative
    if n.billed == 0 and n.allocated > 0:
        return f"{n.node}: allocated {readable_usd(n.allocated)} but not on the bill (no row with its ResourceId)"
    if rel is None or abs(rel) <= tolerance:
        return None
    more = "more" if rel > 0 else "less"
    text = f"{n.node}: billed {abs(rel) * 100:.2f} % {more} than allocated ({readable_usd(n.difference)})"
    if n.billed_hours > 0:
        text += (
            f": the bill's rows cover {n.billed_hours:.2f} h at {readable_usd(n.billed / n.billed_hours)}/h; "
            f"statictrain's allocation over the same hours is {readable_usd(n.allocated / n.billed_hours)}/h "
            "(its price annotation or catalog price differs from the bill, or the node ran other hours)"
        )
    return text


def to_text(rec: Reconciliation) -> str:
    """Per node: billed, allocated (jobs + idle), difference; then every row kind with its totals."""
    head = ("NODE", "BILLED", "ALLOCATED", "JOBS", "IDLE", "DIFFERENCE", "DIFF %")
    body = [
        (n.node, readable_usd(n.billed), readable_usd(n.allocated), readable_usd(n.jobs), readable_usd(n.idle),
         readable_usd(n.difference), f"{n.relative * 100:+.2f}" if n.relative is not None else "")
        for n in rec.nodes
    ]  # fmt: skip
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    lines = [
        f"bill vs statictrain's allocation, [{fmt_time(rec.period[0])}, {fmt_time(rec.period[1])}) "
        f"(statictrain's counters read up to {SETTLE_S:g} s after its end: they are published after each window)",
        "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip(),
        *("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in body),
    ]
    billed = sum((n.billed for n in rec.nodes), Decimal(0))
    allocated = sum((n.allocated for n in rec.nodes), Decimal(0))
    lines += ["", f"nodes: billed {readable_usd(billed)}, allocated {readable_usd(allocated)}, "
              f"difference {readable_usd(billed - allocated)}"]  # fmt: skip
    explained = [e for n in rec.nodes if (e := _explain(n, rec.tolerance))]
    if explained:
        lines += ["", f"nodes off by more than {rec.tolerance * 100:g} %:", *(f"  {e}" for e in explained)]
    total = sum(rec.counts.values())
    kinds = ", ".join(f"{rec.counts[k]} {k}" for k in KINDS)
    lines += ["", f"bill rows: {total} read = {kinds}"]
    for kind, names in rec.listed.items():
        for name, (n, cost) in sorted(names.items()):
            money = (
                f"{cost:f} {name} (not compared: the report is in {CURRENCY})"
                if kind == "other currency"
                else (f"{cost:f} {CURRENCY}")
            )
            lines.append(f"  {kind}: {name}: {n} rows, billed {money}")
    for line, what in rec.malformed:
        lines.append(f"  malformed: line {line}: {what}")
    if rec.unknown_columns:
        lines.append(f"columns that are not FOCUS columns (not read): {', '.join(rec.unknown_columns)}")
    return "\n".join(lines) + "\n"
