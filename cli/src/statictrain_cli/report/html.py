"""A self-contained HTML report with inline SVG charts (no JavaScript, no external files).

At the top, three plain sentences (report.summary). Charts (report.svg), each with
axis values and units: cost so far per job over time (lines), cost per bucket per
namespace (stacked columns), the GPU / CPU / memory split of the cost per group
(whole-pod pricing), $/1M tokens per commit, the idle share, and (when the GPUs' energy
counters recorded any) GPU energy and its carbon per group. Deterministic:
the same report renders to the same bytes.
"""

from __future__ import annotations

from html import escape
from itertools import accumulate

from statictrain.cost import JOULES_PER_KWH
from statictrain.money import readable, to_decimal
from statictrain_cli.report.model import Report, fmt_time
from statictrain_cli.report.summary import sentences
from statictrain_cli.report.svg import PALETTE, WIDTH, hbars, lines_over_time, stacked_columns
from statictrain_cli.report.text import COLUMNS, _key_names, _summary, row_values, usd_for_people

__all__ = ["MAX_LINES", "PALETTE", "to_html"]

MAX_LINES = 8
"""Jobs drawn one by one in the cost-over-time chart; the rest are summed as one line."""
MAX_BARS = 15


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:.3g} s"


def _job_lines(report: Report) -> dict[str, list[float]]:
    jobs = sorted(report.job_buckets.items(), key=lambda kv: (-sum(kv[1]), kv[0]))
    out = {f"{ns}/{job}": list(accumulate(b)) for (ns, job), b in jobs[:MAX_LINES]}
    rest = [b for _, b in jobs[MAX_LINES:]]
    if rest:
        out[f"{len(rest)} other jobs"] = list(accumulate(sum(col) for col in zip(*rest, strict=True)))
    return out


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
    pad = 40
    x = float(pad)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="idle share" width="{WIDTH}" '
        f'height="124" viewBox="0 0 {WIDTH} 124" role="img" aria-label="idle share (% of node cost)">'
    ]
    for i, (label, v, color) in enumerate(parts_v):
        w = (WIDTH - 2 * pad) * v / total
        out.append(
            f'<rect class="mark" x="{x:.2f}" y="10" width="{w:.2f}" height="30" fill="{color}">'
            f"<title>{label}: {usd_for_people(v)}</title></rect>"
        )
        out.append(
            f'<rect x="{pad}" y="{66 + 18 * i}" width="10" height="10" fill="{color}"/>'
            f'<text x="{pad + 15}" y="{75 + 18 * i}" font-size="12">{label} {100 * v / total:.1f}% '
            f"({usd_for_people(v)})</text>"
        )
        x += w
    for pct in (0, 25, 50, 75, 100):
        tx = pad + (WIDTH - 2 * pad) * pct / 100
        anchor = "start" if pct == 0 else "end" if pct == 100 else "middle"
        out.append(f'<text x="{tx:.2f}" y="55" font-size="11" text-anchor="{anchor}">{pct}%</text>')
    out.append("</svg>")
    return "".join(out)


def _energy(report: Report) -> str:
    """GPU energy (kWh) and carbon (kg CO2e) per group, or why there are none."""
    rows = [r for r in report.rows if r.gpu_energy_j > 0][:MAX_BARS]
    if not rows:
        return "<p>No GPU energy recorded in the window (no sidecar energy counters, or no GPU jobs).</p>"
    names = ["/".join(r.key) for r in rows]
    total_kwh = sum(r.gpu_energy_j for r in report.rows) / JOULES_PER_KWH
    total_kg = sum(r.carbon_g for r in report.rows) / 1000
    return (
        f"<p>GPU energy {readable(to_decimal(total_kwh))} kWh, carbon {readable(to_decimal(total_kg))} kg CO2e "
        "(energy x PUE x each node's grid intensity). CPU and memory energy are not counted.</p>"
        + hbars(f"GPU energy per {report.group_by}", names, [(r.gpu_energy_j / JOULES_PER_KWH,) for r in rows],
                ("energy",), "kWh")
        + hbars(f"carbon per {report.group_by}", names, [(r.carbon_g / 1000,) for r in rows], ("carbon",),
                "kg CO2e")
    )  # fmt: skip


def to_html(report: Report) -> str:
    s = _summary(report)
    window = f"[{fmt_time(report.window.start)}, {fmt_time(report.window.end)})"
    head = [*_key_names(report), *COLUMNS]
    rows = "".join(
        "<tr>"
        + "".join(f"<td>{escape(v)}</td>" for v in [*r.key, *(row_values(r, for_people=True)[c] for c in COLUMNS)])
        + "</tr>"
        for r in report.rows
    )
    commits = [(c, usd / tok * 1e6) for c, (usd, tok) in report.commit_tokens.items() if tok > 0]
    filters = ", ".join(f"{k}={'|'.join(v)}" for k, v in sorted(report.filters.items()) if v) or "none"
    start, end = report.window.start, report.window.end
    bucket = _duration(report.window.step_s)
    split_rows = report.rows[:MAX_BARS]
    summary = "".join(f"<li>{escape(line)}</li>" for line in sentences(report))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>statictrain cost report {escape(window)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 6px;font-size:13px;text-align:right}}
td:first-child{{text-align:left}}#summary li{{margin:.3em 0}}</style>
</head><body>
<h1>statictrain cost by {escape(report.group_by)}</h1>
<ul id="summary">{summary}</ul>
<p>Window {escape(window)} UTC (half-open), filters: {escape(filters)}.
Jobs {usd_for_people(report.jobs_usd)} + unallocated {usd_for_people(report.node_idle_usd)};
nodes {usd_for_people(report.node_usd)};
(jobs+idle)/nodes = {s["jobs_plus_idle_over_node_cost"] or "n/a (filtered)"};
idle share {s["idle_share"] or "n/a"}.</p>
<h2>Cost so far per job</h2>
{lines_over_time("cost so far per job", start, end, _job_lines(report), "USD (cumulative)")}
<h2>Cost per namespace, per {bucket}</h2>
{stacked_columns("cost per namespace", start, end, report.namespace_buckets, f"USD per {bucket}")}
<h2>GPU, CPU and memory share of the cost, per {escape(report.group_by)}</h2>
<p>Each pod is priced whole: its GPUs, CPU cores and memory at its node's price.</p>
{
        hbars(
            "cost split per " + report.group_by,
            ["/".join(r.key) for r in split_rows],
            [(r.gpu_usd, r.cpu_usd, r.memory_usd) for r in split_rows],
            ("GPU", "CPU", "memory"),
            "USD",
        )
    }
<h2>USD per 1M tokens per commit</h2>
{
        hbars(
            "USD per 1M tokens per commit",
            [c for c, _ in commits],
            [(v,) for _, v in commits],
            ("cost",),
            "USD per 1M tokens",
        )
    }
<h2>Idle share of node cost</h2>
{_idle_chart(report)}
<h2>GPU energy and carbon per {escape(report.group_by)}</h2>
{_energy(report)}
<h2>Table</h2>
<table><tr>{"".join(f"<th>{escape(h)}</th>" for h in head)}</tr>{rows}</table>
</body></html>
"""
