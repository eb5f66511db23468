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
    assert c["usd"] == "2.000000000"
    assert c["gpuHours"] == "0.500000000"
    assert c["idleUSD"] == "0.500000000"
    assert c["usdPer1MTokens"] == "2.000000000"
    assert c["usdPerStep"] == "0.020000000"
    assert c["projectedUSD"] == "2.000000000"
    assert c["updated"] == "2026-03-01T00:00:30Z"
    assert all(isinstance(v, str) for v in c.values())


def test_running_totals_survive_through_status_only() -> None:
    c1 = accumulate(None, inc("2", tokens=1_000_000, steps=100), now=NOW)
    c2 = accumulate(c1, inc("1", tokens=2_000_000, steps=50), now=NOW)
    assert c2["usd"] == "3.000000000"
    assert c2["usdPer1MTokens"] == "1.000000000"  # 3 USD / 3M tokens
    assert c2["usdPerStep"] == "0.020000000"  # 3 USD / 150 steps


def test_counted_steps_and_projection_to_total_steps() -> None:
    c = accumulate(None, inc("10", steps=250), now=NOW, progress={"step": 7, "totalSteps": 1000})
    assert c["usdPerStep"] == "0.040000000"
    assert c["projectedUSD"] == "40.000000000"


def test_no_increment_moves_only_updated_and_no_tokens_leaves_blank() -> None:
    c = accumulate({"usd": "5", "updated": "2026-01-01T00:00:00Z"}, None, now=NOW)
    assert c["usd"] == "5.000000000" and c["updated"] == "2026-03-01T00:00:30Z"
    assert c["usdPer1MTokens"] == "" and c["usdPerStep"] == ""


def test_garbage_in_previous_status_is_treated_as_zero() -> None:
    c = accumulate({"usd": "-3", "idleUSD": "abc"}, inc("1"), now=NOW)
    assert c["usd"] == "1.000000000" and c["idleUSD"] == "0.250000000"


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
    assert (c1["steadyUSD"], c1["steadySteps"], c1["stepMark"]) == ("4.000000000", "100.000", "100.000")
    restart = JobCost("ns", "j", usd=Decimal(1), steps=-20, executed_steps=10, step_mark=80)
    c2 = accumulate(c1, restart, now=NOW)
    assert (c2["lostSteps"], c2["lostWorkUSD"], c2["steps"], c2["stepsExecuted"]) == (
        "30.000",
        "1.200000000",
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
    assert (c2["lostSteps"], c2["lostWorkUSD"]) == ("0.000", "0.000000000")  # nothing was lost


def test_cost_data_flags_are_counted_by_name_in_status() -> None:
    w1 = JobCost("ns", "j", usd=Decimal(1), flags={"utilization-gaps"})
    c1 = accumulate(None, w1, now=NOW)
    assert c1["flags"] == {"utilization-gaps": "1"}
    c2 = accumulate(c1, JobCost("ns", "j", usd=Decimal(1), flags={"utilization-gaps", "counter-reset"}), now=NOW)
    assert c2["flags"] == {"counter-reset": "1", "utilization-gaps": "2"}
    assert accumulate(c2, None, now=NOW)["flags"] == c2["flags"]  # a window without cost keeps them
    assert "flags" not in accumulate(None, JobCost("ns", "j", usd=Decimal(1)), now=NOW)
