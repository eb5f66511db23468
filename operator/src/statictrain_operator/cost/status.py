"""status.cost of a StaticTrainingJob: add one accounting increment to what it holds (pure).

All money fields are decimal strings. Running totals: ``tokens`` (integer
string), ``steps`` (progress, rounded for display), ``progressSteps``,
``stepsExecuted`` and ``lostSteps`` (decimal strings: DDP steps are means over
ranks, so progress can be a half step; lost steps compare the unrounded ones), ``steadyUSD``/``steadySteps`` (the cost
per step that prices lost work) and ``stepMark`` (the job's step at ``updated``,
where the next window starts). ``projectedUSD``, ``projectedBasis`` and
``steadyUSDPerStep`` are the cost to finish (cost.projection).
``gpuEnergyKWh`` and ``carbonKgCO2e`` are the GPU energy and its carbon so far (decimal strings; see
statictrain.cost). ``readable`` holds the money people read in ``kubectl get stj``
(three significant digits, ``$``); the decimal strings beside it are the figures. Tokens
of a status written before they existed are recovered from ``usd`` and ``usdPer1MTokens``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from statictrain.cost import JOULES_PER_KWH, QUANTUM, JobCost, JobTotals, fold_job
from statictrain.money import ZERO, format_usd, readable_usd, to_decimal

from statictrain_operator.cost.projection import PerStep, project

__all__ = ["FINE", "HOUR", "MILLION", "TOTAL", "accumulate", "step_mark", "totals"]

FINE = Decimal("0.000000001")
"""Quantum of derived figures (ratios, projections, GPU-hours)."""
TOTAL = QUANTUM
"""Quantum of the money totals: the cost model's own (every window's amounts are multiples of it), so a total
is the exact sum of its windows. At 1e-9 each window's rounding repeated (a steady pod costs the same every
window) and drifted: 8 quarter-core pods on a 0.096 $/h node, 30 s windows, one day: -6.4e-7 of the node."""
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


def totals(prev: Mapping[str, Any] | None) -> JobTotals:
    """The job's running totals (for lost work) as its status.cost holds them."""
    prev = prev or {}
    return JobTotals(
        executed_steps=float(_dec(prev.get("stepsExecuted"))),
        steps=float(_dec(prev.get("progressSteps") or prev.get("steps"))),
        lost_steps=float(_dec(prev.get("lostSteps"))),
        steady_usd=_dec(prev.get("steadyUSD")),
        steady_steps=float(_dec(prev.get("steadySteps"))),
    )


def step_mark(prev: Mapping[str, Any] | None) -> float | None:
    """The job's step when status.cost was last updated; None before the first accounting."""
    raw = (prev or {}).get("stepMark")
    return float(_dec(raw)) if raw not in (None, "") else None


def _count(value: float) -> str:
    return format_usd(Decimal(repr(value)), quantum=Decimal("0.001"))


def accumulate(
    prev: Mapping[str, Any] | None,
    inc: JobCost | None,
    *,
    now: datetime,
    progress: Mapping[str, Any] | None = None,
    training: Mapping[str, Any] | None = None,
    finished: bool = False,
) -> dict[str, Any]:
    """The new status.cost after adding ``inc`` (None: no cost in this window, only ``updated`` moves).

    ``now`` is the end of the accounted window (the next window starts there). The
    increment is folded into the job's totals here (:func:`statictrain.cost.fold_job`),
    which sets its lost steps and lost-work cost. ``training`` (spec.training) and
    ``progress`` (status.progress) feed the projection (cost.projection).
    """
    prev = prev or {}
    progress = progress or {}
    t = fold_job(totals(prev), inc) if inc is not None else totals(prev)
    usd0 = _dec(prev.get("usd"))
    tokens0 = (
        _dec(prev["tokens"]) if prev.get("tokens") else _derived_count(usd0, _dec(prev.get("usdPer1MTokens")), MILLION)
    )
    usd = usd0 + (inc.usd if inc else ZERO)

    def add(name: str, value: Decimal) -> str:
        return format_usd(_dec(prev.get(name)) + (value if inc else ZERO), quantum=TOTAL)

    gpu_hours = _dec(prev.get("gpuHours")) + ((inc.gpu_seconds / HOUR) if inc else ZERO)
    kwh = _dec(prev.get("gpuEnergyKWh")) + (to_decimal(inc.energy_j / JOULES_PER_KWH) if inc else ZERO)
    carbon_kg = _dec(prev.get("carbonKgCO2e")) + (to_decimal(inc.carbon_g / 1000.0) if inc else ZERO)
    tokens = tokens0 + (Decimal(repr(inc.tokens)) if inc else ZERO)
    steps = Decimal(repr(t.steps))
    mark = inc.step_mark if inc is not None and inc.step_mark is not None else step_mark(prev)
    out: dict[str, Any] = {
        "usd": format_usd(usd, quantum=TOTAL),
        "gpuUSD": add("gpuUSD", inc.gpu_usd if inc else ZERO),
        "cpuUSD": add("cpuUSD", inc.cpu_usd if inc else ZERO),
        "memoryUSD": add("memoryUSD", inc.memory_usd if inc else ZERO),
        "gpuHours": format_usd(gpu_hours, quantum=FINE),
        "idleUSD": add("idleUSD", inc.idle_usd if inc else ZERO),
        "compileUSD": add("compileUSD", inc.compile_usd if inc else ZERO),
        "lostWorkUSD": add("lostWorkUSD", inc.lost_usd if inc else ZERO),
        "usdPerStep": format_usd(usd / steps, quantum=FINE) if steps > 0 else "",
        "usdPer1MTokens": format_usd(usd / tokens * MILLION, quantum=FINE) if tokens > 0 else "",
        **_projection(
            prev,
            inc,
            usd=usd,
            steps=steps,
            tokens=tokens,
            mark=mark,
            progress=progress,
            training=training or {},
            finished=finished,
        ),
        "tokens": str(int(tokens.to_integral_value())),
        "steps": str(int(steps.to_integral_value())),
        "progressSteps": _count(t.steps),
        "stepsExecuted": _count(t.executed_steps),
        "lostSteps": _count(t.lost_steps),
        "gpuEnergyKWh": format_usd(kwh, quantum=TOTAL),  # running totals: at 1e-9 each window's rounding adds up
        "carbonKgCO2e": format_usd(carbon_kg, quantum=TOTAL),
        "steadyUSD": format_usd(t.steady_usd, quantum=TOTAL),
        "steadySteps": _count(t.steady_steps),
        "stepMark": _count(mark) if mark is not None else "",
        "updated": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    out["readable"] = _readable(out)
    flags = _flags(prev.get("flags"), inc.flags if inc is not None else set())
    if flags:
        out["flags"] = flags
    return out


def _readable(cost: Mapping[str, str]) -> dict[str, str]:
    """The money of ``cost`` for people (printer columns): ``$0.0394``; "" where the figure is ""."""
    return {
        name: readable_usd(Decimal(cost[name])) if cost.get(name) else ""
        for name in ("usd", "projectedUSD", "usdPer1MTokens")
    }


def _flags(prev: object, raised: set[str]) -> dict[str, str]:
    """The job's cost-data flags -> windows that raised them, with this window's added (bad entries dropped)."""
    counts = {str(k): int(v) for k, v in (prev.items() if isinstance(prev, Mapping) else ()) if str(v).isdigit()}
    for flag in raised:
        counts[flag] = counts.get(flag, 0) + 1
    return {k: str(v) for k, v in sorted(counts.items())}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _projection(
    prev: Mapping[str, Any],
    inc: JobCost | None,
    *,
    usd: Decimal,
    steps: Decimal,
    tokens: Decimal,
    mark: float | None,
    progress: Mapping[str, Any],
    training: Mapping[str, Any],
    finished: bool,
) -> dict[str, str]:
    """projectedUSD, projectedBasis and steadyUSDPerStep (the latest steady window's cost per step, kept)."""
    steady = _dec(prev.get("steadyUSDPerStep"))
    if inc is not None and inc.steady and inc.executed_steps > 0:
        steady = inc.steady_usd / to_decimal(inc.executed_steps)
    per_step = PerStep(steady, "steady") if steady > 0 else None
    if per_step is None and inc is not None and inc.executed_steps >= 1 and inc.usd > inc.compile_usd:
        per_step = PerStep((inc.usd - inc.compile_usd) / to_decimal(inc.executed_steps), "window")
    if per_step is None and steps > 0 and usd > 0:
        per_step = PerStep(usd / steps, "mean")
    step_s = _dec(progress.get("stepSeconds"))
    p = project(
        usd,
        per_step=per_step,
        step=mark if mark is not None else float(steps),
        max_steps=_int(training.get("maxSteps")),
        max_tokens=_int(training.get("maxTokens")),
        tokens_per_step=float(tokens / steps) if steps > 0 and tokens > 0 else None,
        step_seconds=float(step_s) if step_s > 0 else None,
        finished=finished,
    )
    return {
        "projectedUSD": format_usd(p.usd, quantum=FINE) if p.usd is not None else "",
        "projectedBasis": p.basis,
        "steadyUSDPerStep": format_usd(steady, quantum=FINE) if steady > 0 else "",
    }
