"""Cost to finish (cost.projection) and the BudgetWarning it raises (cost.budgets.warning), table-driven."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from statictrain.conditions import BUDGET_WARNING, Reason
from statictrain_operator.cost.budgets import warning
from statictrain_operator.cost.projection import PerStep, project, remaining_steps

STEADY = PerStep(Decimal("0.02"), "steady")


@pytest.mark.parametrize(
    ("step", "max_steps", "max_tokens", "tokens_per_step", "want"),
    [
        (200, 1000, None, None, (800.0, "maxSteps 1000")),
        (200, None, 1_000_000, 1000.0, (800.0, "maxTokens 1000000")),
        (200, None, 1_000_500, 1000.0, (801.0, "maxTokens 1000500")),  # the trainer stops at the step that passes
        (200, 500, 1_000_000, 1000.0, (300.0, "maxSteps 500")),  # the earlier end wins
        (1200, 1000, None, None, (0.0, "maxSteps 1000")),  # past the end: nothing left, never negative
        (200, None, 1_000_000, None, None),  # tokens per step not measured yet
        (200, None, None, 1000.0, None),  # no end at all
    ],
)
def test_remaining_steps(
    step: float, max_steps: int | None, max_tokens: int | None, tokens_per_step: float | None, want: Any
) -> None:
    got = remaining_steps(step, max_steps=max_steps, max_tokens=max_tokens, tokens_per_step=tokens_per_step)
    assert got == want


def run(**kw: Any) -> Any:
    args: dict[str, Any] = {
        "per_step": STEADY,
        "step": 200.0,
        "max_steps": 1000,
        "max_tokens": None,
        "tokens_per_step": None,
        "step_seconds": 0.25,
        "finished": False,
    }
    return project(Decimal(10), **{**args, **kw})


def test_projection_is_cost_so_far_plus_steps_left_times_cost_per_step() -> None:
    p = run()
    assert p.usd == Decimal("26.00")  # 10 + 800 x 0.02
    assert p.eta_s == 200.0  # 800 x 0.25 s
    assert p.basis == (
        "800 steps left to maxSteps 1000 x 0.020000 USD/step (latest steady window); ETA 200 s at 0.250 s/step"
    )


@pytest.mark.parametrize(
    ("kw", "usd", "basis_has"),
    [
        ({"finished": True}, Decimal(10), "finished"),
        ({"step": 1000.0}, Decimal(10), "at the end (maxSteps 1000)"),
        ({"per_step": None}, None, "800 steps left to maxSteps 1000; no cost per step measured yet"),
        ({"max_steps": None}, None, "no maxSteps or maxTokens"),
        ({"max_steps": None, "max_tokens": 10**6}, None, "no tokens per step measured yet"),
        ({"per_step": PerStep(Decimal("0.03"), "mean")}, Decimal("34.00"), "mean so far incl. compile"),
        ({"step_seconds": None}, Decimal("26.00"), "(latest steady window)"),
    ],
)
def test_projection_edges(kw: dict[str, Any], usd: Decimal | None, basis_has: str) -> None:
    p = run(**kw)
    assert p.usd == usd
    assert basis_has in p.basis
    assert len(p.basis) <= 256  # the CRD's maxLength


def job(limit: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"budget": {"limitUSD": limit}} if limit is not None else {}
    return {"metadata": {"name": "j", "namespace": "ns", "generation": 4}, "spec": spec}


COST = {"usd": "10.5", "projectedUSD": "26", "projectedBasis": "800 steps left"}


@pytest.mark.parametrize(
    ("limit", "cost", "had", "want"),
    [
        ("20", COST, False, ("True", Reason.PROJECTED_OVER_BUDGET)),  # spent 10.50 < 20, heading for 26
        ("26", COST, False, ("False", Reason.PROJECTED_WITHIN_BUDGET)),  # exactly the limit is within it
        ("30", COST, True, ("False", Reason.PROJECTED_WITHIN_BUDGET)),
        ("20", {"usd": "1", "projectedUSD": "", "projectedBasis": "no maxSteps"}, False, ("Unknown", "NoProjection")),
        (None, COST, False, None),  # no budget, nothing to say
        (None, COST, True, ("False", Reason.NO_BUDGET)),  # the budget was removed: clear the old warning
        ("ten", COST, False, None),  # an invalid limit is BudgetExceeded's InvalidBudget
    ],
)
def test_budget_warning(limit: str | None, cost: dict[str, str], had: bool, want: tuple[str, str] | None) -> None:
    got = warning(job(limit), cost, had=had)
    if want is None:
        assert got is None
        return
    assert got is not None
    assert (got["type"], got["status"], got["reason"]) == (BUDGET_WARNING, *want)
    assert got.get("observedGeneration") == 4


def test_warning_message_names_the_figures() -> None:
    got = warning(job("20"), COST, had=False)
    assert got is not None
    assert got.get("message") == "projected 26.00 USD vs limit 20.000000 USD (spent 10.50 USD): 800 steps left"
