"""The comparison report of two replay runs (pure)."""

from __future__ import annotations

from dataclasses import asdict
from decimal import Decimal
from typing import Any

from statictrain.money import format_usd

from .accounting import RunSummary

__all__ = ["compare", "markdown"]


def _ratio(new: float, old: float) -> float | None:
    return new / old if old > 0 else None


def _summary_json(summary: RunSummary) -> dict[str, Any]:
    out = asdict(summary)
    out["cost_usd"] = format_usd(summary.cost_usd)
    out["node_hours"] = format_usd(summary.node_hours, quantum=Decimal("0.001"))
    return out


def compare(default: RunSummary, statictrain: RunSummary) -> dict[str, Any]:
    """Both runs and the ratios statictrain / default (None where the default figure is 0)."""
    return {
        "default": _summary_json(default),
        "statictrain": _summary_json(statictrain),
        "cost_ratio": _ratio(float(statictrain.cost_usd), float(default.cost_usd)),
        "pending_ratio": _ratio(statictrain.pending_mean_s, default.pending_mean_s),
        "fragmentation_ratio": _ratio(statictrain.gpu_fragmentation, default.gpu_fragmentation),
        "node_hours_ratio": _ratio(float(statictrain.node_hours), float(default.node_hours)),
    }


def markdown(report: dict[str, Any]) -> str:
    """A short human-readable table of a :func:`compare` result."""
    rows = [
        ("cost (USD)", "cost_usd"),
        ("node-hours", "node_hours"),
        ("nodes used", "nodes_used"),
        ("pods", "pods"),
        ("unscheduled pods", "unscheduled"),
        ("mean pending (trace s)", "pending_mean_s"),
        ("p99 pending (trace s)", "pending_p99_s"),
        ("mean pending (wall s)", "pending_mean_wall_s"),
        ("GPU fragmentation", "gpu_fragmentation"),
    ]
    lines = ["| figure | default | statictrain |", "|---|---|---|"]
    for label, key in rows:
        a, b = report["default"][key], report["statictrain"][key]
        fmt = (lambda v: f"{v:.4g}") if isinstance(a, float) else str
        lines.append(f"| {label} | {fmt(a)} | {fmt(b)} |")
    for key in ("cost_ratio", "pending_ratio", "fragmentation_ratio", "node_hours_ratio"):
        value = report[key]
        lines.append(f"| {key} | | {'n/a' if value is None else f'{value:.3f}'} |")
    return "\n".join(lines) + "\n"
