"""Render a report as a text table, CSV or JSON (deterministic: same report, same bytes).

CSV and JSON keep full precision (money to 1e-6 USD, energy to 1e-9 kWh); the text table (and the HTML
report's table) shows money as people read it: three significant digits and a ``$`` sign.
"""

from __future__ import annotations

import csv
import io
import json
import math
from decimal import Decimal
from typing import Any

from statictrain.cost import JOULES_PER_KWH
from statictrain.money import readable, readable_usd
from statictrain_cli.report.model import GROUP_LABELS, Report, Row, fmt_time, money

__all__ = ["COLUMNS", "MONEY_COLUMNS", "row_values", "to_csv", "to_json", "to_table", "usd_for_people"]

COLUMNS = (
    "usd",
    "gpu_usd",
    "cpu_usd",
    "memory_usd",
    "idle_usd",
    "compile_usd",
    "lost_usd",
    "lost_steps",
    "gpu_hours",
    "tokens",
    "steps",
    "usd_per_1m_tokens",
    "usd_per_step",
    "gpu_energy_kwh",
    "carbon_kg",
    "flags",
)
MONEY_COLUMNS = frozenset(
    {"usd", "gpu_usd", "cpu_usd", "memory_usd", "idle_usd", "compile_usd", "lost_usd", "usd_per_1m_tokens",
     "usd_per_step"}
)  # fmt: skip


def usd_for_people(value: float) -> str:
    """A float total as people read dollars: ``$0.0394`` (see statictrain.money.readable_usd)."""
    return readable_usd(Decimal(repr(value))) if math.isfinite(value) else ""


def _people(value: str) -> str:
    """A full-precision decimal string (or "") to three significant digits."""
    return readable(Decimal(value)) if value else ""


def _key_names(report: Report) -> tuple[str, ...]:
    return GROUP_LABELS[report.group_by]


def row_values(row: Row, *, for_people: bool = False) -> dict[str, str]:
    """The row's figures as strings: full precision, or (``for_people``) money as ``$0.0394`` and the other
    decimals to three significant digits."""
    vals = _exact_values(row)
    if for_people:
        for name in ("lost_steps", "gpu_hours", "gpu_energy_kwh", "carbon_kg"):
            vals[name] = _people(vals[name])
        for name in MONEY_COLUMNS:
            vals[name] = readable_usd(Decimal(vals[name])) if vals[name] else ""
    return vals


def _exact_values(row: Row) -> dict[str, str]:
    return {
        "usd": money(row.usd),
        "gpu_usd": money(row.gpu_usd),
        "cpu_usd": money(row.cpu_usd),
        "memory_usd": money(row.memory_usd),
        "idle_usd": money(row.idle_usd),
        "compile_usd": money(row.compile_usd),
        "lost_usd": money(row.lost_usd),
        "lost_steps": f"{row.lost_steps:.3f}",
        "gpu_hours": money(row.gpu_seconds / 3600),
        "tokens": f"{round(row.tokens)}",
        "steps": f"{round(row.steps)}",
        "usd_per_1m_tokens": money(row.usd_per_1m_tokens) if row.usd_per_1m_tokens is not None else "",
        "usd_per_step": money(row.usd_per_step, 9) if row.usd_per_step is not None else "",
        "gpu_energy_kwh": money(row.gpu_energy_j / JOULES_PER_KWH, 9),
        "carbon_kg": money(row.carbon_g / 1000, 9),
        "flags": "; ".join(f"{name} ({n:g} windows)" for name, n in sorted(row.flags.items())),
    }


def _summary(report: Report) -> dict[str, str]:
    """Totals, full precision."""
    ratio = report.invariant_ratio
    share = report.idle_share
    return {
        "jobs_usd": money(report.jobs_usd),
        "node_usd": money(report.node_usd),
        "node_idle_usd": money(report.node_idle_usd),
        "jobs_plus_idle_over_node_cost": f"{ratio:.6f}" if ratio is not None else "",
        "idle_share": f"{share:.6f}" if share is not None else "",
        "failed_invariants": "; ".join(report.failed_invariants()),
    }


def to_json(report: Report) -> str:
    doc: dict[str, Any] = {
        "window": {
            "start": fmt_time(report.window.start),
            "end": fmt_time(report.window.end),
            "half_open": True,
            "buckets": report.window.buckets,
        },
        "group_by": report.group_by,
        "filters": {k: list(v) for k, v in sorted(report.filters.items()) if v},
        "rows": [dict(zip(_key_names(report), r.key, strict=True)) | row_values(r) for r in report.rows],
        "summary": _summary(report),
        "cost_over_time_by_namespace": {
            "bucket_starts": [fmt_time(t) for t in report.window.bucket_starts()],
            "usd": {ns: [money(v) for v in vals] for ns, vals in report.namespace_buckets.items()},
        },
    }
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


def to_csv(report: Report) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow([*_key_names(report), *COLUMNS])
    for r in report.rows:
        vals = row_values(r)
        w.writerow([*r.key, *(vals[c] for c in COLUMNS)])
    return out.getvalue()


def to_table(report: Report) -> str:
    head = [*_key_names(report), *COLUMNS]
    body = [[*r.key, *(row_values(r, for_people=True)[c] for c in COLUMNS)] for r in report.rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    lines = [
        f"cost by {report.group_by}, window [{fmt_time(report.window.start)}, {fmt_time(report.window.end)})",
        "  ".join(h.upper().ljust(w) for h, w in zip(head, widths, strict=True)).rstrip(),
    ]
    for row in body:
        lines.append("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    s = _summary(report)
    lines.append("")
    lines.append(
        f"jobs {usd_for_people(report.jobs_usd)} + idle {usd_for_people(report.node_idle_usd)}; "
        f"nodes {usd_for_people(report.node_usd)}"
        + (
            f"; (jobs+idle)/nodes = {s['jobs_plus_idle_over_node_cost']}"
            if s["jobs_plus_idle_over_node_cost"]
            else "; filtered: nodes not comparable"
        )
    )
    if s["failed_invariants"]:
        lines.append(f"FAILED invariants: {s['failed_invariants']}")
    return "\n".join(lines) + "\n"
