"""SVG charts of the HTML report (pure, deterministic): round axis ticks with units, time axes, legends.

Every chart is ``<svg class="chart" data-chart=NAME>``; its data marks (bars, lines)
carry ``class="mark"``, so a browser test can check that each chart drew something.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from html import escape

__all__ = ["PALETTE", "WIDTH", "hbars", "lines_over_time", "nice_ticks", "num", "stacked_columns"]

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
WIDTH = 760
LEFT, RIGHT, TOP = 80, 20, 16
PLOT_H = 200
LEGEND_ROW = 18


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """0, then equal round steps (1, 2, 2.5 or 5 x 10^k) up to the first one at or above ``top``."""
    if not math.isfinite(top) or top <= 0:
        return [0.0, 1.0]
    raw = top / (count - 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-12))
    n = max(1, math.ceil(top / step - 1e-9))
    return [round(i * step, 12) for i in range(n + 1)]


def num(value: float) -> str:
    """A tick or value label: plain decimals, no exponent, no trailing zeros."""
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    d = Decimal(f"{value:.3g}")
    text = f"{d:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _open(name: str, aria: str, height: int) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{escape(name)}" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(aria)}">'
    )


def _y_axis(ticks: Sequence[float], unit: str) -> str:
    top = ticks[-1]
    out = []
    for t in ticks:
        y = TOP + PLOT_H * (1 - t / top)
        out.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.2f}" y2="{y:.2f}" stroke="#ddd"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.2f}" font-size="11" text-anchor="end">{num(t)}</text>'
        )
    mid = TOP + PLOT_H / 2
    out.append(
        f'<text x="14" y="{mid:.2f}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 14 {mid:.2f})">{escape(unit)}</text>'
        f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + PLOT_H}" stroke="#333"/>'
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + PLOT_H}" y2="{TOP + PLOT_H}" stroke="#333"/>'
    )
    return "".join(out)


def _time_label(t: datetime, span: timedelta) -> str:
    if span > timedelta(days=2):
        return t.strftime("%m-%d %H:%M")
    return t.strftime("%H:%M:%S") if span < timedelta(minutes=10) else t.strftime("%H:%M")


def _x_time_axis(start: datetime, end: datetime, ticks: int = 5) -> str:
    span = end - start
    out = []
    for i in range(ticks):
        t = start + span * i / (ticks - 1)
        x = LEFT + (WIDTH - LEFT - RIGHT) * i / (ticks - 1)
        anchor = "start" if i == 0 else "end" if i == ticks - 1 else "middle"
        out.append(
            f'<line x1="{x:.2f}" x2="{x:.2f}" y1="{TOP + PLOT_H}" y2="{TOP + PLOT_H + 4}" stroke="#333"/>'
            f'<text x="{x:.2f}" y="{TOP + PLOT_H + 16}" font-size="11" text-anchor="{anchor}">'
            f"{_time_label(t, span)}</text>"
        )
    out.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.2f}" y="{TOP + PLOT_H + 32}" font-size="11" '
        f'text-anchor="middle">time (UTC, {start.strftime("%Y-%m-%d")})</text>'
    )
    return "".join(out)


def _legend(names: Sequence[str], y0: float) -> str:
    out = []
    for j, name in enumerate(names):
        y = y0 + LEGEND_ROW * j
        out.append(
            f'<rect x="{LEFT}" y="{y:.2f}" width="10" height="10" fill="{_color(j)}"/>'
            f'<text x="{LEFT + 15}" y="{y + 9:.2f}" font-size="12">{escape(name or "(none)")}</text>'
        )
    return "".join(out)


LEGEND_Y = TOP + PLOT_H + 44
"""Where the legend of a chart over time starts, below its time axis."""


def _time_frame(name: str, ticks: Sequence[float], unit: str, series: int) -> str:
    """The opening of a chart over time with room for ``series`` legend rows, and its value axis."""
    return _open(name, f"{name} ({unit})", int(LEGEND_Y + LEGEND_ROW * series)) + _y_axis(ticks, unit)


def lines_over_time(name: str, start: datetime, end: datetime, series: Mapping[str, Sequence[float]], unit: str) -> str:
    """One line per series through (start, 0) and the value at each bucket's end (cumulative figures)."""
    n = max((len(v) for v in series.values()), default=0)
    if n == 0:
        return "<p>no data</p>"
    ticks = nice_ticks(max((max(v, default=0.0) for v in series.values()), default=0.0))
    plot_w = WIDTH - LEFT - RIGHT
    parts = [_time_frame(name, ticks, unit, len(series))]
    for j, (label, values) in enumerate(series.items()):
        pts = [(LEFT, TOP + PLOT_H)] + [
            (LEFT + plot_w * (i + 1) / n, TOP + PLOT_H * (1 - v / ticks[-1])) for i, v in enumerate(values)
        ]
        last = values[-1] if values else 0.0
        parts.append(
            f'<polyline class="mark" fill="none" stroke="{_color(j)}" stroke-width="2" '
            f'points="{" ".join(f"{x:.2f},{y:.2f}" for x, y in pts)}">'
            f"<title>{escape(label)}: {num(last)} {escape(unit)} at the end</title></polyline>"
        )
    parts += [_x_time_axis(start, end), _legend(list(series), LEGEND_Y), "</svg>"]
    return "".join(parts)


def stacked_columns(name: str, start: datetime, end: datetime, series: Mapping[str, Sequence[float]], unit: str) -> str:
    """One column per bucket, stacked by series."""
    n = max((len(v) for v in series.values()), default=0)
    if n == 0:
        return "<p>no data</p>"
    ticks = nice_ticks(max(sum(v[i] for v in series.values()) for i in range(n)))
    bw = (WIDTH - LEFT - RIGHT) / n
    parts = [_time_frame(name, ticks, unit, len(series))]
    for i in range(n):
        y = float(TOP + PLOT_H)
        for j, (label, vals) in enumerate(series.items()):
            h = PLOT_H * vals[i] / ticks[-1]
            if h <= 0:
                continue
            y -= h
            parts.append(
                f'<rect class="mark" x="{LEFT + i * bw:.2f}" y="{y:.2f}" width="{max(bw - 1, 0.5):.2f}" '
                f'height="{h:.2f}" fill="{_color(j)}"><title>{escape(label or "(none)")}: '
                f"{num(vals[i])} {escape(unit)}</title></rect>"
            )
    parts += [_x_time_axis(start, end), _legend(list(series), LEGEND_Y), "</svg>"]
    return "".join(parts)


def hbars(
    name: str, labels: Sequence[str], stacks: Sequence[Sequence[float]], parts_names: Sequence[str], unit: str
) -> str:
    """One horizontal bar per label, split into ``parts_names`` (one part: a plain bar), value printed at its end."""
    if not labels or max(sum(s) for s in stacks) <= 0:
        return "<p>no data</p>"
    row_h, label_w = 22, 170
    ticks = nice_ticks(max(sum(s) for s in stacks))
    plot_w = WIDTH - label_w - RIGHT - 90
    axis_y = TOP + row_h * len(labels)
    legend_y = axis_y + 44
    height = int(legend_y + (LEGEND_ROW * len(parts_names) if len(parts_names) > 1 else 0))
    out = [_open(name, f"{name} ({unit})", height)]
    for t in ticks:
        x = label_w + plot_w * t / ticks[-1]
        out.append(
            f'<line x1="{x:.2f}" x2="{x:.2f}" y1="{TOP}" y2="{axis_y}" stroke="#ddd"/>'
            f'<text x="{x:.2f}" y="{axis_y + 16}" font-size="11" text-anchor="middle">{num(t)}</text>'
        )
    out.append(
        f'<line x1="{label_w}" x2="{label_w + plot_w}" y1="{axis_y}" y2="{axis_y}" stroke="#333"/>'
        f'<text x="{label_w + plot_w / 2:.2f}" y="{axis_y + 32}" font-size="11" text-anchor="middle">'
        f"{escape(unit)}</text>"
    )
    for i, (label, stack) in enumerate(zip(labels, stacks, strict=True)):
        y = TOP + i * row_h + 3
        x = float(label_w)
        out.append(
            f'<text x="{label_w - 6}" y="{y + 13}" font-size="12" text-anchor="end">'
            f"{escape((label or '(none)')[:26])}</text>"
        )
        for j, v in enumerate(stack):
            w = plot_w * v / ticks[-1]
            if w <= 0:
                continue
            part = f"{parts_names[j]} " if len(parts_names) > 1 else ""
            out.append(
                f'<rect class="mark" x="{x:.2f}" y="{y}" width="{w:.2f}" height="{row_h - 6}" fill="{_color(j)}">'
                f"<title>{escape(label)}: {escape(part)}{num(v)} {escape(unit)}</title></rect>"
            )
            x += w
        out.append(f'<text x="{x + 5:.2f}" y="{y + 13}" font-size="12">{num(sum(stack))}</text>')
    if len(parts_names) > 1:
        out.append(_legend(parts_names, legend_y))
    out.append("</svg>")
    return "".join(out)
