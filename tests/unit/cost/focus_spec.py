"""A validator of FOCUS 1.2 cost and usage datasets (CSV), written from the specification, not from our writer.

Source: the FOCUS specification 1.2 (FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec, tag ``v1.2``, ratified
2025-05-29): the "Content constraints" table and the requirement list of every column in
``specification/columns/*.md``, and the attributes in ``specification/attributes/`` (column handling,
numeric, date/time, currency, key-value, null handling). The table below is transcribed from there by hand:
column ID -> feature level, nulls allowed, data type, allowed values. Later versions (1.3, December 2025;
1.4, June 2026) add columns and rules that this validator does not know.

What is checked, per the spec:

* column handling: every Mandatory column present; column IDs of FOCUS columns are the spec's (a column
  that is not the spec's must start with ``x_``); custom columns come after the FOCUS columns;
* per value: Decimal columns in Numeric Format (integer, decimal or E notation; no sign for positives, no
  commas, units or currency symbols); Date/Time in ``YYYY-MM-DDTHH:mm:ssZ``; currency columns a three-letter
  ISO 4217 code; JSON columns in Key-Value Format (an object, unique keys, values number / string / true /
  false / null, never an object or array); allowed values where the column has them (ServiceSubcategory
  with its one parent ServiceCategory);
* nulls: "Allows nulls: False" columns never null; null is the empty field, never a placeholder such as
  "N/A", "null" or a blank string; the conditional nullability rules of ChargeClass, PricingQuantity,
  PricingUnit, ConsumedQuantity/ConsumedUnit, ResourceName/ResourceType, RegionName, SubAccountName and
  SubAccountType, BillingAccountType;
* cross-column rules: ChargePeriodStart before ChargePeriodEnd, inside the billing period (start inclusive,
  end exclusive); ChargeFrequency not "Usage-Based" for purchases; PricingQuantity x a non-null unit price
  equals its cost (not for corrections).

Not checkable from a file (and not checked): "when the provider supports ..." conditions for presence,
identifiers' uniqueness across providers and billing periods, and invoice totals.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

__all__ = ["COLUMNS", "Column", "validate"]


@dataclass(frozen=True)
class Column:
    level: str  # Mandatory | Conditional | Recommended
    nulls: bool
    kind: str  # String | Decimal | DateTime | JSON
    allowed: tuple[str, ...] = ()
    currency: bool = False


S, D, T, J = "String", "Decimal", "DateTime", "JSON"
SERVICE_CATEGORIES = (
    "AI and Machine Learning", "Analytics", "Business Applications", "Compute", "Databases", "Developer Tools",
    "Multicloud", "Identity", "Integration", "Internet of Things", "Management and Governance", "Media",
    "Migration", "Mobile", "Networking", "Security", "Storage", "Web", "Other",
)  # fmt: skip
SUBCATEGORIES = {
    "AI and Machine Learning": ("AI Platforms", "Bots", "Generative AI", "Machine Learning",
                                "Natural Language Processing", "Other (AI and Machine Learning)"),
    "Analytics": ("Analytics Platforms", "Business Intelligence", "Data Processing", "Search", "Streaming Analytics",
                  "Other (Analytics)"),
    "Business Applications": ("Productivity and Collaboration", "Other (Business Applications)"),
    "Compute": ("Containers", "End User Computing", "Quantum Compute", "Serverless Compute", "Virtual Machines",
                "Other (Compute)"),
    "Databases": ("Caching", "Data Warehouses", "Ledger Databases", "NoSQL Databases", "Relational Databases",
                  "Time Series Databases", "Other (Databases)"),
    "Developer Tools": ("Developer Platforms", "Continuous Integration and Deployment", "Development Environments",
                        "Source Code Management", "Quality Assurance", "Other (Developer Tools)"),
    "Identity": ("Identity and Access Management", "Other (Identity)"),
    "Integration": ("API Management", "Messaging", "Workflow Orchestration", "Other (Integration)"),
    "Internet of Things": ("IoT Analytics", "IoT Platforms", "Other (Internet of Things)"),
    "Management and Governance": ("Architecture", "Compliance", "Cost Management", "Data Governance",
                                  "Disaster Recovery", "Endpoint Management", "Observability", "Support",
                                  "Other (Management and Governance)"),
    "Media": ("Content Creation", "Gaming", "Media Streaming", "Mixed Reality", "Other (Media)"),
    "Migration": ("Data Migration", "Resource Migration", "Other (Migration)"),
    "Mobile": ("Other (Mobile)",),
    "Multicloud": ("Multicloud Integration", "Other (Multicloud)"),
    "Networking": ("Application Networking", "Content Delivery", "Network Connectivity", "Network Infrastructure",
                   "Network Routing", "Network Security", "Other (Networking)"),
    "Security": ("Secret Management", "Security Posture Management", "Threat Detection and Response",
                 "Other (Security)"),
    "Storage": ("Backup Storage", "Block Storage", "File Storage", "Object Storage", "Storage Platforms",
                "Other (Storage)"),
    "Web": ("Application Platforms", "Other (Web)"),
    "Other": ("Other (Other)",),
}  # fmt: skip
COLUMNS: Mapping[str, Column] = {
    "AvailabilityZone": Column("Recommended", True, S),
    "BilledCost": Column("Mandatory", False, D),
    "BillingAccountId": Column("Mandatory", False, S),
    "BillingAccountName": Column("Mandatory", True, S),
    "BillingAccountType": Column("Conditional", True, S),  # null exactly when BillingAccountId is null
    "BillingCurrency": Column("Mandatory", False, S, currency=True),
    "BillingPeriodEnd": Column("Mandatory", False, T),
    "BillingPeriodStart": Column("Mandatory", False, T),
    "CapacityReservationId": Column("Conditional", True, S),
    "CapacityReservationStatus": Column("Conditional", True, S, ("Used", "Unused")),
    "ChargeCategory": Column("Mandatory", False, S, ("Usage", "Purchase", "Tax", "Credit", "Adjustment")),
    "ChargeClass": Column("Mandatory", True, S, ("Correction",)),
    "ChargeDescription": Column("Mandatory", True, S),
    "ChargeFrequency": Column("Recommended", False, S, ("One-Time", "Recurring", "Usage-Based")),
    "ChargePeriodEnd": Column("Mandatory", False, T),
    "ChargePeriodStart": Column("Mandatory", False, T),
    "CommitmentDiscountCategory": Column("Conditional", True, S, ("Spend", "Usage")),
    "CommitmentDiscountId": Column("Conditional", True, S),
    "CommitmentDiscountName": Column("Conditional", True, S),
    "CommitmentDiscountQuantity": Column("Conditional", True, D),
    "CommitmentDiscountStatus": Column("Conditional", True, S, ("Used", "Unused")),
    "CommitmentDiscountType": Column("Conditional", True, S),
    "CommitmentDiscountUnit": Column("Conditional", True, S),
    "ConsumedQuantity": Column("Conditional", True, D),
    "ConsumedUnit": Column("Conditional", True, S),
    "ContractedCost": Column("Mandatory", False, D),
    "ContractedUnitPrice": Column("Conditional", True, D),
    "EffectiveCost": Column("Mandatory", False, D),
    "InvoiceId": Column("Recommended", True, S),
    "InvoiceIssuerName": Column("Mandatory", False, S),
    "ListCost": Column("Mandatory", False, D),
    "ListUnitPrice": Column("Conditional", True, D),
    "PricingCategory": Column("Conditional", True, S, ("Standard", "Dynamic", "Committed", "Other")),
    "PricingCurrency": Column("Conditional", True, S, currency=True),
    "PricingCurrencyContractedUnitPrice": Column("Conditional", True, D),
    "PricingCurrencyEffectiveCost": Column("Conditional", True, D),
    "PricingCurrencyListUnitPrice": Column("Conditional", True, D),
    "PricingQuantity": Column("Mandatory", True, D),
    "PricingUnit": Column("Mandatory", True, S),
    "ProviderName": Column("Mandatory", False, S),
    "PublisherName": Column("Mandatory", False, S),
    "RegionId": Column("Conditional", True, S),
    "RegionName": Column("Conditional", True, S),
    "ResourceId": Column("Conditional", True, S),
    "ResourceName": Column("Conditional", True, S),
    "ResourceType": Column("Conditional", True, S),
    "ServiceCategory": Column("Mandatory", False, S, SERVICE_CATEGORIES),
    "ServiceName": Column("Mandatory", False, S),
    "ServiceSubcategory": Column("Recommended", False, S, tuple(s for v in SUBCATEGORIES.values() for s in v)),
    "SkuId": Column("Conditional", True, S),
    "SkuMeter": Column("Conditional", True, S),
    "SkuPriceDetails": Column("Conditional", True, J),
    "SkuPriceId": Column("Conditional", True, S),
    "SubAccountId": Column("Conditional", True, S),
    "SubAccountName": Column("Conditional", True, S),
    "SubAccountType": Column("Conditional", True, S),
    "Tags": Column("Conditional", True, J),
}
# Numeric Format: an integer, a decimal, or "mEn" E notation; a sign only for negatives (and negative exponents)
NUMERIC = re.compile(r"-?(\d+(\.\d+)?|\.\d+)(E-?\d+)?")
DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
CURRENCY = re.compile(r"[A-Z]{3}")
PLACEHOLDERS = {"null", "none", "n/a", "na", "not applicable", "-"}
CUSTOM = re.compile(r"x_[A-Za-z0-9]+")
UNIT_PRICES = (("ListUnitPrice", "ListCost"), ("ContractedUnitPrice", "ContractedCost"))


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate keys")
    return dict(pairs)


def _value_problem(name: str, col: Column, v: str) -> str | None:
    if col.kind == D and not NUMERIC.fullmatch(v):
        return f"{name} {v!r} is not in Numeric Format"
    if col.kind == T:
        if not DATETIME.fullmatch(v):
            return f"{name} {v!r} is not YYYY-MM-DDTHH:mm:ssZ"
        try:
            datetime.strptime(v, "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            return f"{name} {v!r} is not a real date and time"
    if col.kind == J:
        try:
            obj = json.loads(v, object_pairs_hook=_no_duplicate_keys)
        except ValueError as e:
            return f"{name} is not a JSON object with unique keys ({e})"
        if not isinstance(obj, dict) or any(isinstance(x, dict | list) for x in obj.values()):
            return f"{name} must be a JSON object whose values are numbers, strings, true, false or null"
    if col.currency and not CURRENCY.fullmatch(v):
        return f"{name} {v!r} is not a three-letter ISO 4217 code"
    if col.allowed and v not in col.allowed:
        return f"{name} {v!r} is not an allowed value"
    return None


def _row_problems(r: Mapping[str, str | None]) -> list[str]:
    out: list[str] = []

    def null(name: str) -> bool:
        return r.get(name) is None

    present = set(r)
    for name in present & set(COLUMNS):
        col, v = COLUMNS[name], r[name]
        if v is None:
            if not col.nulls:
                out.append(f"{name} must not be null")
            continue
        if v.strip() == "" or v.strip().lower() in PLACEHOLDERS:
            out.append(f"{name} {v!r} stands for a null: leave the field empty")
            continue
        problem = _value_problem(name, col, v)
        if problem:
            out.append(problem)
    category, klass = r.get("ChargeCategory"), r.get("ChargeClass")
    correction = klass == "Correction"
    if category == "Tax" and not null("PricingQuantity"):
        out.append("PricingQuantity must be null when ChargeCategory is Tax")
    if category in ("Usage", "Purchase") and not correction and null("PricingQuantity"):
        out.append("PricingQuantity must not be null for Usage and Purchase charges that are not corrections")
    for dependent, on in (
        ("PricingUnit", "PricingQuantity"),
        ("ConsumedUnit", "ConsumedQuantity"),
        ("ResourceType", "ResourceId"),
        ("RegionName", "RegionId"),
        ("SubAccountName", "SubAccountId"),
        ("SubAccountType", "SubAccountId"),
        ("BillingAccountType", "BillingAccountId"),
    ):
        if dependent in present and on in present and null(dependent) != null(on):
            out.append(f"{dependent} must be null exactly when {on} is null")
    if "ResourceName" in present and null("ResourceId") and not null("ResourceName"):
        out.append("ResourceName must be null when ResourceId is null")
    if "ConsumedQuantity" in present and category != "Usage" and not null("ConsumedQuantity"):
        out.append("ConsumedQuantity must be null when ChargeCategory is not Usage")
    if category == "Purchase" and r.get("ChargeFrequency") == "Usage-Based":
        out.append("ChargeFrequency must not be Usage-Based for a Purchase")
    sub, cat = r.get("ServiceSubcategory"), r.get("ServiceCategory")
    if sub and cat in SUBCATEGORIES and sub in COLUMNS["ServiceSubcategory"].allowed and sub not in SUBCATEGORIES[cat]:
        out.append(f"ServiceSubcategory {sub!r} is not a subcategory of ServiceCategory {cat!r}")
    times = {k: r.get(k) for k in ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd")}
    if all(v and DATETIME.fullmatch(v) for v in times.values()):
        bs, be, cs, ce = (str(times[k]) for k in times)  # the same format sorts as the times do
        if not cs < ce:
            out.append("ChargePeriodStart must be before ChargePeriodEnd")
        if not bs <= cs or not ce <= be:
            out.append("the charge period must lie inside the billing period")
    for price, cost in UNIT_PRICES:
        p, q, c = r.get(price), r.get("PricingQuantity"), r.get(cost)
        numbers = p and q and c and all(NUMERIC.fullmatch(x) for x in (p, q, c))
        if numbers and not correction and Decimal(str(p)) * Decimal(str(q)) != Decimal(str(c)):
            out.append(f"{price} x PricingQuantity must equal {cost}")
    return out


def validate(text: str) -> list[str]:
    """Every FOCUS 1.2 rule the CSV breaks (empty: none), per row kind, with the first line it is on."""
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        return ["the file is empty: a FOCUS dataset needs a header"]
    problems: dict[str, int] = {}
    if len(header) != len(set(header)):
        problems["column IDs must be unique"] = 1
    for name, col in COLUMNS.items():
        if col.level == "Mandatory" and name not in header:
            problems[f"Mandatory column {name} is missing"] = 1
    for name in header:
        if name not in COLUMNS and not CUSTOM.fullmatch(name):
            problems[f"column {name!r} is not a FOCUS 1.2 column and not a custom x_ column"] = 1
    kinds = ["custom" if n.startswith("x_") else "focus" for n in header]
    if "custom" in kinds and "focus" in kinds[kinds.index("custom") :]:
        problems["custom columns must come after all FOCUS columns"] = 1
    for line, values in enumerate(reader, start=2):
        if len(values) != len(header):
            problems.setdefault(f"a row has {len(values)} fields for {len(header)} columns", line)
            continue
        row = {h: (v if v != "" else None) for h, v in zip(header, values, strict=True)}
        for p in _row_problems(row):
            problems.setdefault(p, line)
    return [f"{p} (line {line})" for p, line in problems.items()]
