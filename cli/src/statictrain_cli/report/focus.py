"""A report as a FOCUS dataset: FinOps Open Cost and Usage Specification 1.2, cost and usage rows (CSV).

One row per job and charge period (a report bucket) with what the job's pods were allocated, and one row
per node and charge period with the node's unallocated (idle) cost (unfiltered reports only), so that the
rows add up to the nodes' cost. statictrain is the provider, publisher and invoice issuer of this dataset (an internal
chargeback of the cluster): BilledCost = EffectiveCost = ContractedCost = ListCost = the allocated cost
(no discounts, commitments or price list of its own). Namespaces are sub accounts; a job
(``namespace/name``) or a node is the resource. Tags hold the job's namespace, name, commit and team under
the provider prefix ``statictrain.io/`` and, in reports from job statuses, the job's own labels.
PricingQuantity is 1 per row (one job's, or one node's idle, allocation over the charge period), with no
unit price; what FOCUS has no column for is in ``x_`` columns. Charge periods lie on whole seconds, as
FOCUS date/times do. Null is an empty field.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from datetime import timedelta

from statictrain.cost import JOULES_PER_KWH
from statictrain_cli.report.model import Report, fixed, fmt_time

__all__ = ["COLUMNS", "CURRENCY", "FOCUS_VERSION", "PROVIDER", "TAG_PREFIX", "focus_rows", "to_focus"]

FOCUS_VERSION = "1.2"
PROVIDER = "statictrain"
CURRENCY = "USD"
TAG_PREFIX = "statictrain.io/"
JOB_SERVICE = ("statictrain training jobs", "AI and Machine Learning", "Machine Learning")
IDLE_SERVICE = ("Kubernetes node capacity, unallocated", "Compute", "Containers")
FOCUS_COLUMNS = (
    "BilledCost", "BillingAccountId", "BillingAccountName", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargeClass", "ChargeDescription", "ChargeFrequency",
    "ChargePeriodEnd", "ChargePeriodStart", "ContractedCost", "EffectiveCost", "InvoiceIssuerName", "ListCost",
    "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "ResourceId", "ResourceName",
    "ResourceType", "ServiceCategory", "ServiceName", "ServiceSubcategory", "SubAccountId", "SubAccountName",
    "Tags",
)  # fmt: skip
CUSTOM_COLUMNS = (
    "x_GpuHours", "x_Tokens", "x_Steps", "x_UsdPer1MTokens", "x_IdleGpuCost", "x_GpuEnergyKWh", "x_CarbonKgCO2e",
)  # fmt: skip
COLUMNS = FOCUS_COLUMNS + CUSTOM_COLUMNS
Row = dict[str, str | None]


def _decimal(value: float) -> str:
    """A plain decimal string (no exponent, no sign for zero) at 1e-12."""
    q = fixed(value, 12)
    return f"{abs(q) if q == 0 else q:f}"


def _charge_periods(report: Report) -> list[tuple[str, str]]:
    w = report.window
    step = w.step_s
    if step != int(step) or w.start.microsecond:
        raise ValueError(
            f"FOCUS charge periods are whole seconds, and {w.buckets} buckets of "
            f"[{fmt_time(w.start)}, {fmt_time(w.end)}) are {step:g} s: choose --buckets so that they divide the "
            "window into whole seconds (e.g. 24 for a day: hours)"
        )
    starts = [w.start + timedelta(seconds=i * step) for i in range(w.buckets)]
    return [(fmt_time(a), fmt_time(a + timedelta(seconds=step))) for a in starts]


def _common(report: Report, period: tuple[str, str], cost: float) -> Row:
    money = _decimal(cost)
    return {
        "BilledCost": money,
        "BillingAccountId": PROVIDER,
        "BillingAccountName": "statictrain cluster chargeback",
        "BillingCurrency": CURRENCY,
        "BillingPeriodEnd": fmt_time(report.window.end),
        "BillingPeriodStart": fmt_time(report.window.start),
        "ChargeCategory": "Usage",
        "ChargeClass": None,
        "ChargeFrequency": "Usage-Based",
        "ChargePeriodEnd": period[1],
        "ChargePeriodStart": period[0],
        "ContractedCost": money,
        "EffectiveCost": money,
        "InvoiceIssuerName": PROVIDER,
        "ListCost": money,
        "PricingQuantity": "1",
        "ProviderName": PROVIDER,
        "PublisherName": PROVIDER,
    }


def _tags(values: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(values.items())), sort_keys=True, separators=(",", ":"))


def _job_row(report: Report, key: tuple[str, str], period: tuple[str, str], f: Mapping[str, float]) -> Row:
    ns, job = key
    lab = report.job_labels.get(key, {})
    tags = {k: v for k, v in lab.items() if k not in ("commit", "team")}
    tags |= {f"{TAG_PREFIX}namespace": ns, f"{TAG_PREFIX}job": job, f"{TAG_PREFIX}commit": lab.get("commit", ""),
             f"{TAG_PREFIX}team": lab.get("team", "")}  # fmt: skip
    steps = f["executed_steps"] - f["lost_steps"]
    usd, tokens = f["usd"], f["tokens"]
    name, category, subcategory = JOB_SERVICE
    return _common(report, period, usd) | {
        "ChargeDescription": f"Pods of StaticTrainingJob {ns}/{job}: GPUs, CPU and memory at their nodes' prices",
        "PricingUnit": "Jobs",
        "ResourceId": f"{ns}/{job}",
        "ResourceName": job,
        "ResourceType": "StaticTrainingJob",
        "ServiceCategory": category,
        "ServiceName": name,
        "ServiceSubcategory": subcategory,
        "SubAccountId": ns,
        "SubAccountName": ns,
        "Tags": _tags(tags),
        "x_GpuHours": _decimal(f["gpu_seconds"] / 3600),
        "x_Tokens": str(round(tokens)),
        "x_Steps": _decimal(steps),
        "x_UsdPer1MTokens": _decimal(usd / tokens * 1e6) if tokens > 0 else None,
        "x_IdleGpuCost": _decimal(f["idle_usd"]),
        "x_GpuEnergyKWh": _decimal(f["gpu_energy_j"] / JOULES_PER_KWH),
        "x_CarbonKgCO2e": _decimal(f["carbon_g"] / 1000),
    }


def _idle_row(report: Report, node: str, period: tuple[str, str], idle: float) -> Row:
    name, category, subcategory = IDLE_SERVICE
    return (
        _common(report, period, idle)
        | {
            "ChargeDescription": f"Capacity of node {node} that no pod was allocated (GPUs, CPU, memory)",
            "PricingUnit": "Nodes",
            "ResourceId": node,
            "ResourceName": node,
            "ResourceType": "Kubernetes Node",
            "ServiceCategory": category,
            "ServiceName": name,
            "ServiceSubcategory": subcategory,
            "SubAccountId": None,
            "SubAccountName": None,
            "Tags": _tags({f"{TAG_PREFIX}node": node, f"{TAG_PREFIX}allocation": "idle"}),
        }
        | dict.fromkeys(CUSTOM_COLUMNS)
    )


def focus_rows(report: Report) -> list[Row]:
    """Job rows then idle rows, per charge period in time order; ValueError when buckets are not whole seconds.

    A job or node with nothing in a period (no cost, energy, tokens or steps) has no row there. A filtered
    report (``--namespace`` ...) has no idle rows: unallocated capacity is the cluster's, not the selection's."""
    periods = _charge_periods(report)
    out: list[Row] = []
    for i, period in enumerate(periods):
        for key, fields in report.job_fields.items():
            f = {name: values[i] for name, values in fields.items()}
            f = {name: f.get(name, 0.0) for name in
                 ("usd", "gpu_seconds", "tokens", "executed_steps", "lost_steps", "idle_usd", "gpu_energy_j",
                  "carbon_g")}  # fmt: skip
            if any(f.values()):
                out.append(_job_row(report, key, period, f))
        for node, fields in report.nodes.items() if not any(report.filters.values()) else ():
            idle = fields.get("node_idle_usd", [0.0] * len(periods))[i]
            if idle > 0:
                out.append(_idle_row(report, node, period, idle))
    return out


def to_focus(report: Report) -> str:
    """The FOCUS rows as CSV: FOCUS columns first (alphabetical), then the ``x_`` columns; null is empty."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for row in focus_rows(report):
        w.writerow(["" if row[c] is None else row[c] for c in COLUMNS])
    return out.getvalue()
