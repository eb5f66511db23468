"""status.cost of a StaticTrainingJob: add one accounting increment to what it holds (pure).

All money fields are decimal strings. Running token and step totals are kept
in ``tokens`` and ``steps`` (integer strings); for a status written before they
existed they are recovered from the previous ``usd`` and ``usdPer1MTokens`` /
``usdPerStep`` (exact enough at 1e-9 USD resolution). status.progress.step,
when set, gives the step count directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from statictrain.cost import JobCost
from statictrain.money import ZERO, format_usd

FINE = Decimal("0.000000001")
HOUR = Decimal(3600)
MILLION = Decimal(1_000_000)


def _dec(value: object) -> Decimal:
    if value is None or value == "":
        return ZERO
    try:
        d = Decimal(str(value))
    except InvalidOperation:
        return ZERO
    return d if d.is_finite() and d >= 0 else ZERO


def _derived_count(usd: Decimal, per_unit: Decimal, unit: Decimal = Decimal(1)) -> Decimal:
    return (usd / per_unit * unit) if per_unit > 0 else ZERO


def accumulate(
    prev: Mapping[str, Any] | None,
    inc: JobCost | None,
    *,
    now: datetime,
    progress: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The new status.cost after adding ``inc`` (None: no cost in this run, only ``updated`` moves)."""
    prev = prev or {}
    progress = progress or {}
    usd0 = _dec(prev.get("usd"))
    tokens0 = (
        _dec(prev["tokens"]) if prev.get("tokens") else _derived_count(usd0, _dec(prev.get("usdPer1MTokens")), MILLION)
    )
    steps0 = _dec(prev["steps"]) if prev.get("steps") else _derived_count(usd0, _dec(prev.get("usdPerStep")))
    usd = usd0 + (inc.usd if inc else ZERO)
    gpu_hours = _dec(prev.get("gpuHours")) + ((inc.gpu_seconds / HOUR) if inc else ZERO)
    idle = _dec(prev.get("idleUSD")) + (inc.idle_usd if inc else ZERO)
    comp = _dec(prev.get("compileUSD")) + (inc.compile_usd if inc else ZERO)
    lost = _dec(prev.get("lostWorkUSD")) + (inc.lost_usd if inc else ZERO)
    tokens = tokens0 + (Decimal(repr(inc.tokens)) if inc else ZERO)
    step_now = progress.get("step")
    steps = (
        Decimal(int(step_now))
        if isinstance(step_now, int) and step_now > 0
        else steps0 + (inc.steps if inc else 0)
    )
    out: dict[str, str] = {
        "usd": format_usd(usd, quantum=FINE),
        "gpuHours": format_usd(gpu_hours, quantum=FINE),
        "idleUSD": format_usd(idle, quantum=FINE),
        "compileUSD": format_usd(comp, quantum=FINE),
        "lostWorkUSD": format_usd(lost, quantum=FINE),
        "usdPerStep": format_usd(usd / steps, quantum=FINE) if steps > 0 else "",
        "usdPer1MTokens": format_usd(usd / tokens * MILLION, quantum=FINE) if tokens > 0 else "",
        "projectedUSD": format_usd(_projected(usd, steps, progress), quantum=FINE),
        "tokens": str(int(tokens.to_integral_value())),
        "steps": str(int(steps.to_integral_value())),
        "updated": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return out


def _projected(usd: Decimal, steps: Decimal, progress: Mapping[str, Any]) -> Decimal:
    total = progress.get("totalSteps")
    if isinstance(total, int) and total > 0 and steps > 0 and total > steps:
        return usd + (Decimal(total) - steps) * usd / steps
    return usd
