"""status.cost accumulation: decimal strings, derived running totals, projection."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from statictrain.cost import JobCost
from statictrain_operator.cost.status import accumulate

NOW = datetime(2026, 3, 1, 0, 0, 30, tzinfo=UTC)


def inc(usd: str, tokens: float = 0.0, steps: int = 0) -> JobCost:
    return JobCost(
        "ns",
        "j",
        usd=Decimal(usd),
        gpu_seconds=Decimal(usd) * 900,
        idle_usd=Decimal(usd) / 4,
        tokens=tokens,
        steps=steps,
    )


def test_first_increment() -> None:
    c = accumulate(None, inc("2", tokens=1_000_000, steps=100), now=NOW)
    assert c["usd"] == "2.000000000000"
    assert c["gpuHours"] == "0.500000000"
    assert c["idleUSD"] == "0.500000000000"
    assert c["usdPer1MTokens"] == "2.000000000"
    assert c["usdPerStep"] == "0.020000000"
    assert c["projectedUSD"] == ""  # no maxSteps or maxTokens: no end to project to
    assert c["projectedBasis"] == "no maxSteps or maxTokens: the end is unknown"
    assert c["updated"] == "2026-03-01T00:00:30Z"
    assert c["readable"] == {"usd": "$2.00", "projectedUSD": "", "usdPer1MTokens": "$2.00"}
    readable = c.pop("readable")
    assert all(isinstance(v, str) for v in [*c.values(), *readable.values()])


def test_energy_and_carbon_add_up_as_decimal_strings_in_kwh_and_kg() -> None:
    first = JobCost("ns", "j", usd=Decimal("0.039417388156"), energy_j=1.8e6, carbon_g=250.0)
    c1 = accumulate(None, first, now=NOW)
    c2 = accumulate(c1, JobCost("ns", "j", energy_j=3.6e6, carbon_g=500.0), now=NOW)
    assert (c1["gpuEnergyKWh"], c1["carbonKgCO2e"]) == ("0.500000000000", "0.250000000000")
    assert (c2["gpuEnergyKWh"], c2["carbonKgCO2e"]) == ("1.500000000000", "0.750000000000")
    assert c2["readable"]["usd"] == "$0.0394" and c2["usd"] == "0.039417388156"
    assert accumulate(c2, None, now=NOW)["gpuEnergyKWh"] == "1.500000000000"  # a window without the job


def test_running_totals_survive_through_status_only() -> None:
    c1 = accumulate(None, inc("2", tokens=1_000_000, steps=100), now=NOW)
    c2 = accumulate(c1, inc("1", tokens=2_000_000, steps=50), now=NOW)
    assert c2["usd"] == "3.000000000000"
    assert c2["usdPer1MTokens"] == "1.000000000"  # 3 USD / 3M tokens
    assert c2["usdPerStep"] == "0.020000000"  # 3 USD / 150 steps


def test_counted_steps_and_projection_to_total_steps() -> None:
    c = accumulate(None, inc("10", steps=250), now=NOW, training={"maxSteps": 1000}, progress={"stepSeconds": "0.5"})
    assert c["usdPerStep"] == "0.040000000"
    assert c["projectedUSD"] == "40.000000000"  # no steady window yet: the mean cost per step so far
    assert c["projectedBasis"] == (
        "750 steps left to maxSteps 1000 x 0.040000 USD/step (mean so far incl. compile and start-up);"
        " ETA 375 s at 0.500 s/step"
    )


def test_projection_uses_the_latest_steady_window_and_keeps_it_through_unsteady_ones() -> None:
    steady = JobCost(
        "ns", "j", usd=Decimal(6), steps=100, executed_steps=100, steady=True, steady_usd=Decimal(2), step_mark=300
    )
    prev = {"usd": "4", "steps": "200", "stepMark": "200", "updated": "2026-03-01T00:00:00Z"}
    c1 = accumulate(prev, steady, now=NOW, training={"maxSteps": 1000})
    assert c1["steadyUSDPerStep"] == "0.020000000"
    assert c1["projectedUSD"] == "24.000000000"  # 10 USD so far + 700 steps x 0.02
    stall = JobCost("ns", "j", usd=Decimal(1), steps=0, executed_steps=0, step_mark=300)
    c2 = accumulate(c1, stall, now=NOW, training={"maxSteps": 1000})
    assert c2["steadyUSDPerStep"] == "0.020000000"
    assert c2["projectedUSD"] == "25.000000000"  # the stall's dollar is spent; the rest still at 0.02
    done = accumulate(c2, None, now=NOW, training={"maxSteps": 1000}, finished=True)
    assert (done["projectedUSD"], done["usd"]) == ("11.000000000", "11.000000000000")  # finished: what it cost


def test_projection_to_max_tokens_uses_the_measured_tokens_per_step() -> None:
    c = accumulate(None, inc("1", tokens=100_000, steps=100), now=NOW, training={"maxTokens": 1_000_000})
    assert c["projectedUSD"] == "10.000000000"  # 1000 steps in all at 1000 tokens/step, 0.01 USD/step
    both = accumulate(
        None, inc("1", tokens=100_000, steps=100), now=NOW, training={"maxTokens": 10**6, "maxSteps": 500}
    )
    assert both["projectedUSD"] == "5.000000000"  # maxSteps comes first


def test_no_increment_moves_only_updated_and_no_tokens_leaves_blank() -> None:
    c = accumulate({"usd": "5", "updated": "2026-01-01T00:00:00Z"}, None, now=NOW)
    assert c["usd"] == "5.000000000000" and c["updated"] == "2026-03-01T00:00:30Z"
    assert c["usdPer1MTokens"] == "" and c["usdPerStep"] == ""


def test_garbage_in_previous_status_is_treated_as_zero() -> None:
    c = accumulate({"usd": "-3", "idleUSD": "abc"}, inc("1"), now=NOW)
    assert c["usd"] == "1.000000000000" and c["idleUSD"] == "0.250000000000"


def test_token_and_step_totals_are_kept_in_status() -> None:
    c1 = accumulate(None, inc("2", tokens=1_000_000, steps=100), now=NOW)
    assert (c1["tokens"], c1["steps"]) == ("1000000", "100")
    c2 = accumulate(c1, inc("1", tokens=3, steps=1), now=NOW)
    assert (c2["tokens"], c2["steps"]) == ("1000003", "101")


def test_lost_work_is_priced_from_the_status_history() -> None:
    steady = JobCost(
        "ns", "j", usd=Decimal(4), steps=100, executed_steps=100, steady=True, steady_usd=Decimal(4), step_mark=100
    )
    c1 = accumulate(None, steady, now=NOW)
    assert (c1["steadyUSD"], c1["steadySteps"], c1["stepMark"]) == ("4.000000000000", "100.000", "100.000")
    restart = JobCost("ns", "j", usd=Decimal(1), steps=-20, executed_steps=10, step_mark=80)
    c2 = accumulate(c1, restart, now=NOW)
    assert (c2["lostSteps"], c2["lostWorkUSD"], c2["steps"], c2["stepsExecuted"]) == (
        "30.000",
        "1.200000000000",
        "80",
        "110.000",
    )


def test_half_steps_of_ddp_progress_are_kept_not_counted_as_lost() -> None:
    # two ranks one step apart at the window's end: progress (mean over ranks) is 100.5, all of it executed
    w1 = JobCost("ns", "j", usd=Decimal(1), steps=100.5, executed_steps=100.5, step_mark=100.5)
    c1 = accumulate(None, w1, now=NOW)
    assert (c1["steps"], c1["progressSteps"], c1["lostSteps"]) == ("100", "100.500", "0.000")
    w2 = JobCost("ns", "j", usd=Decimal(1), steps=99.5, executed_steps=99.5, step_mark=200)
    c2 = accumulate(c1, w2, now=NOW)
    assert (c2["steps"], c2["progressSteps"]) == ("200", "200.000")
    assert (c2["lostSteps"], c2["lostWorkUSD"]) == ("0.000", "0.000000000000")  # nothing was lost


def test_cost_data_flags_are_counted_by_name_in_status() -> None:
    w1 = JobCost("ns", "j", usd=Decimal(1), flags={"utilization-gaps"})
    c1 = accumulate(None, w1, now=NOW)
    assert c1["flags"] == {"utilization-gaps": "1"}
    c2 = accumulate(c1, JobCost("ns", "j", usd=Decimal(1), flags={"utilization-gaps", "counter-reset"}), now=NOW)
    assert c2["flags"] == {"counter-reset": "1", "utilization-gaps": "2"}
    assert accumulate(c2, None, now=NOW)["flags"] == c2["flags"]  # a window without cost keeps them
    assert "flags" not in accumulate(None, JobCost("ns", "j", usd=Decimal(1)), now=NOW)


def test_before_a_steady_window_this_windows_cost_per_step_without_compile_stands_in() -> None:
    compiling = JobCost(
        "ns", "j", usd=Decimal(5), compile_usd=Decimal(1), steps=100, executed_steps=100, step_mark=100
    )
    c = accumulate(None, compiling, now=NOW, training={"maxSteps": 1000})
    assert c["steadyUSDPerStep"] == ""  # nothing to keep: the window was not steady
    assert c["projectedUSD"] == "41.000000000"  # 5 + 900 x (5 - 1) / 100
    assert "(latest window, compile excluded, not steady)" in c["projectedBasis"]
    all_compile = JobCost("ns", "j", usd=Decimal(5), compile_usd=Decimal(5), steps=1, executed_steps=1, step_mark=1)
    assert "(mean so far" in accumulate(None, all_compile, now=NOW, training={"maxSteps": 10})["projectedBasis"]


def test_money_totals_are_the_exact_sum_of_their_windows() -> None:
    """A steady pod costs the same every window; rounding the running total each window repeats the same
    error (at 1e-9: 2,880 windows of this one drifted by -3.5e-7 $, -1.5e-6 of it: a false invariant failure)."""
    per_window = Decimal("0.000082549123")  # what the cost model gives: a multiple of its 1e-12 quantum
    inc = JobCost("ns", "j", usd=per_window, gpu_usd=per_window, idle_usd=per_window)
    c: dict[str, object] = {}
    for _ in range(2880):  # one day of 30 s windows
        c = accumulate(c, inc, now=NOW)
    want = per_window * 2880
    assert (Decimal(str(c["usd"])), Decimal(str(c["gpuUSD"])), Decimal(str(c["idleUSD"]))) == (want, want, want)
