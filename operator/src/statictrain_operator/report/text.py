"""Render a report as a text table, CSV or JSON (deterministic: same report, same bytes)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from statictrain_operator.report.model import GROUP_LABELS, Report, Row, fmt_time, money

__all__ = ["COLUMNS", "to_csv", "to_json", "to_table"]

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
    "flags",
)


def _key_names(report: Report) -> tuple[str, ...]:
    return GROUP_LABELS[report.group_by]


def _row_values(row: Row) -> dict[str, str]:
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
        "flags": "; ".join(f"{name} ({n:g} windows)" for name, n in sorted(row.flags.items())),
    }


def _summary(report: Report) -> dict[str, str]:
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
        "rows": [dict(zip(_key_names(report), r.key, strict=True)) | _row_values(r) for r in report.rows],
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
        vals = _row_values(r)
        w.writerow([*r.key, *(vals[c] for c in COLUMNS)])
    return out.getvalue()


def to_table(report: Report) -> str:
    head = [*_key_names(report), *COLUMNS]
    body = [[*r.key, *_row_values(r).values()] for r in report.rows]
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
        f"jobs {s['jobs_usd']} USD + idle {s['node_idle_usd']} USD; nodes {s['node_usd']} USD"
        + (
            f"; (jobs+idle)/nodes = {s['jobs_plus_idle_over_node_cost']}"
            if s["jobs_plus_idle_over_node_cost"]
            else "; filtered: nodes not comparable"
        )
    )
    if s["failed_invariants"]:
        lines.append(f"FAILED invariants: {s['failed_invariants']}")
    return "\n".join(lines) + "\n"
