"""A self-contained HTML report with inline SVG charts (no JavaScript, no external files).

Charts: cost over time per namespace (stacked bars), $/1M tokens per commit
(bars), idle share (one bar split into job work, job idle and unallocated).
Deterministic: the same report renders to the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from statictrain_operator.report.model import Report, fmt_time, money
from statictrain_operator.report.text import COLUMNS, _key_names, _row_values, _summary

__all__ = ["PALETTE", "to_html"]

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
W, H, PAD = 720, 260, 40


def _stacked_time_chart(report: Report) -> str:
    series = report.namespace_buckets
    n = report.window.buckets
    totals = [sum(vals[i] for vals in series.values()) for i in range(n)]
    top = max(totals, default=0.0) or 1.0
    bw = (W - 2 * PAD) / n
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H + 20 * len(series)}" role="img" '
        'aria-label="cost over time per namespace">'
    ]
    for i in range(n):
        y = float(H - PAD)
        for j, (ns, vals) in enumerate(series.items()):
            h = (H - 2 * PAD) * vals[i] / top
            y -= h
            parts.append(
                f'<rect x="{PAD + i * bw:.2f}" y="{y:.2f}" width="{max(bw - 1, 0.5):.2f}" height="{h:.2f}" '
                f'fill="{PALETTE[j % len(PALETTE)]}"><title>{escape(ns)}: {money(vals[i])} USD</title></rect>'
            )
    parts.append(f'<text x="{PAD}" y="{PAD - 10}" font-size="11">max {money(top)} USD per bucket</text>')
    parts.append(f'<text x="{PAD}" y="{H - PAD + 15}" font-size="11">{fmt_time(report.window.start)}</text>')
    parts.append(
        f'<text x="{W - PAD}" y="{H - PAD + 15}" font-size="11" text-anchor="end">'
        f"{fmt_time(report.window.end)}</text>"
    )
    for j, ns in enumerate(series):
        y = H + 20 * j
        parts.append(
            f'<rect x="{PAD}" y="{y - 10}" width="10" height="10" fill="{PALETTE[j % len(PALETTE)]}"/>'
            f'<text x="{PAD + 15}" y="{y}" font-size="12">{escape(ns or "(none)")}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _bars(labels: Sequence[str], values: Sequence[float], unit: str, aria: str) -> str:
    if not values:
        return "<p>no data</p>"
    top = max(values) or 1.0
    row_h = 22
    height = row_h * len(values) + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" role="img" '
        f'aria-label="{escape(aria)}">'
    ]
    for i, (label, v) in enumerate(zip(labels, values, strict=True)):
        w = (W - 300) * v / top
        y = 5 + i * row_h
        parts.append(
            f'<text x="150" y="{y + 14}" font-size="12" text-anchor="end">{escape((label or "(none)")[:24])}'
            f'</text><rect x="160" y="{y}" width="{w:.2f}" height="{row_h - 6}" fill="{PALETTE[0]}"/>'
            f'<text x="{165 + w:.2f}" y="{y + 14}" font-size="12">{money(v, 4)} {unit}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _idle_chart(report: Report) -> str:
    if report.node_usd <= 0:
        return "<p>no node cost in the window</p>"
    job_idle = sum(r.idle_usd for r in report.rows)
    work = max(report.jobs_usd - job_idle, 0.0)
    parts_v = [
        ("useful work", work, PALETTE[4]),
        ("idle allocated GPUs", job_idle, PALETTE[1]),
        ("unallocated node capacity", report.node_idle_usd, PALETTE[2]),
    ]
    total = sum(v for _, v, _ in parts_v) or 1.0
    x = float(PAD)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="90" role="img" aria-label="idle share">'
    ]
    for i, (label, v, color) in enumerate(parts_v):
        w = (W - 2 * PAD) * v / total
        out.append(
            f'<rect x="{x:.2f}" y="10" width="{w:.2f}" height="30" fill="{color}">'
            f"<title>{label}: {money(v)} USD</title></rect>"
        )
        out.append(
            f'<rect x="{PAD + 230 * i}" y="55" width="10" height="10" fill="{color}"/>'
            f'<text x="{PAD + 230 * i + 15}" y="65" font-size="12">{label} {100 * v / total:.1f}%</text>'
        )
        x += w
    out.append("</svg>")
    return "".join(out)


def to_html(report: Report) -> str:
    s = _summary(report)
    window = f"[{fmt_time(report.window.start)}, {fmt_time(report.window.end)})"
    head = [*_key_names(report), *COLUMNS]
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in [*r.key, *_row_values(r).values()]) + "</tr>"
        for r in report.rows
    )
    commits = [(c, usd / tok * 1e6) for c, (usd, tok) in report.commit_tokens.items() if tok > 0]
    filters = ", ".join(f"{k}={'|'.join(v)}" for k, v in sorted(report.filters.items()) if v) or "none"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>statictrain cost report {escape(window)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:right}}
td:first-child{{text-align:left}}</style>
</head><body>
<h1>statictrain cost by {escape(report.group_by)}</h1>
<p>Window {escape(window)} UTC (half-open), filters: {escape(filters)}.</p>
<p>Jobs {s["jobs_usd"]} USD + unallocated {s["node_idle_usd"]} USD; nodes {s["node_usd"]} USD;
(jobs+idle)/nodes = {s["jobs_plus_idle_over_node_cost"] or "n/a (filtered)"};
idle share {s["idle_share"] or "n/a"}.</p>
<h2>Cost over time per namespace</h2>
{_stacked_time_chart(report)}
<h2>USD per 1M tokens per commit</h2>
{_bars([c for c, _ in commits], [v for _, v in commits], "USD/1M tokens", "USD per 1M tokens per commit")}
<h2>Idle share</h2>
{_idle_chart(report)}
<h2>Table</h2>
<table><tr>{"".join(f"<th>{escape(h)}</th>" for h in head)}</tr>{rows}</table>
</body></html>
"""
