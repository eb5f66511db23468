"""Budgets (pure): compare status.cost.usd with spec.budget.limitUSD and decide one action.

``onExceeded``: ``Notify`` (alias ``Alert``) emits a Warning Event; ``Suspend``
sets spec.suspend (the CRD allows only these two). This is the operator's one
budget enforcer: the anomaly part reports OverBudget but does not act on it.
The action runs once per limit: the limit it ran for is recorded in the
annotation ``statictrain.io/budget-exceeded``; raising the limit above the cost re-arms it. Every decision also yields a
``BudgetExceeded`` condition and an Event.

``BudgetWarning`` comes before that: True while the projected total cost
(status.cost.projectedUSD, cost.projection) exceeds the limit, so a team hears of an
overrun while the spend is still below the limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from statictrain import api, labels
from statictrain.conditions import BUDGET_WARNING, Reason
from statictrain.money import format_usd, parse_usd

__all__ = ["BUDGET_ACTED", "CONDITION", "Action", "BudgetDecision", "decide"]

BUDGET_ACTED = labels.BUDGET_EXCEEDED
"""Annotation on the job: the limitUSD the budget action ran for (to move into statictrain.labels)."""
CONDITION = "BudgetExceeded"
CENT = Decimal("0.01")

Action = Literal["none", "notify", "suspend", "rearm", "invalid"]


@dataclass(frozen=True)
class BudgetDecision:
    action: Action
    reason: str = ""
    message: str = ""
    spec_patch: Mapping[str, Any] = field(default_factory=dict)
    annotations: Mapping[str, str | None] = field(default_factory=dict)
    condition: Mapping[str, Any] | None = None


def _condition(
    status: str, reason: str, message: str, generation: int | None, now: datetime
) -> dict[str, Any]:
    cond: dict[str, Any] = {
        "type": CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if generation is not None:
        cond["observedGeneration"] = generation
    return cond


def decide(job: Mapping[str, Any], cost_usd: Decimal, now: datetime) -> BudgetDecision:
    spec = job.get("spec") or {}
    meta = job.get("metadata") or {}
    budget = spec.get("budget")
    acted = (meta.get("annotations") or {}).get(BUDGET_ACTED)
    gen = meta.get("generation")
    if not budget or not budget.get("limitUSD"):
        return BudgetDecision("none")
    try:
        limit = parse_usd(str(budget["limitUSD"]), what="spec.budget.limitUSD")
    except ValueError as e:
        return BudgetDecision(
            "invalid",
            "InvalidBudget",
            str(e),
            condition=_condition("Unknown", "InvalidBudget", str(e), gen, now),
        )
    limit_s = format_usd(limit)
    if cost_usd < limit:
        if acted is not None:
            msg = f"cost {format_usd(cost_usd)} USD is below the limit {limit_s} USD again; budget re-armed"
            return BudgetDecision(
                "rearm",
                "WithinBudget",
                msg,
                annotations={BUDGET_ACTED: None},
                condition=_condition("False", "WithinBudget", msg, gen, now),
            )
        return BudgetDecision("none")
    if acted == limit_s:
        return BudgetDecision("none")  # already acted for this limit
    on = budget.get("onExceeded") or "Notify"
    msg = f"cost {format_usd(cost_usd)} USD reached the budget limit {limit_s} USD"
    ann = {BUDGET_ACTED: limit_s}
    if on == "Suspend":
        if spec.get("suspend") is True:
            return BudgetDecision(
                "notify",
                "BudgetExceededAlreadySuspended",
                msg + "; job already suspended",
                annotations=ann,
                condition=_condition("True", "AlreadySuspended", msg, gen, now),
            )
        return BudgetDecision(
            "suspend",
            "BudgetExceededSuspended",
            msg + "; suspending the job",
            spec_patch={"suspend": True},
            annotations=ann,
            condition=_condition("True", "Suspended", msg, gen, now),
        )
    return BudgetDecision(
        "notify",
        "BudgetExceeded",
        msg,
        annotations=ann,
        condition=_condition("True", "Notified", msg, gen, now),
    )


def warning(job: Mapping[str, Any], cost: Mapping[str, Any], *, had: bool) -> api.Condition | None:
    """The BudgetWarning condition for the job's new status.cost, None when there is nothing to say.

    ``had``: the job holds a BudgetWarning condition now (a removed budget then clears it).
    An invalid limit is BudgetExceeded's to report (InvalidBudget); no warning then.
    """
    gen = (job.get("metadata") or {}).get("generation")
    limit_text = ((job.get("spec") or {}).get("budget") or {}).get("limitUSD")

    def cond(status: api.ConditionStatus, reason: str, message: str) -> api.Condition:
        out: api.Condition = {"type": BUDGET_WARNING, "status": status, "reason": reason, "message": message}
        if isinstance(gen, int):
            out["observedGeneration"] = gen
        return out

    if not limit_text:
        return cond("False", Reason.NO_BUDGET, "no spec.budget.limitUSD") if had else None
    try:
        limit = parse_usd(str(limit_text), what="spec.budget.limitUSD")
    except ValueError:
        return None
    basis = str(cost.get("projectedBasis") or "")
    projected_text = cost.get("projectedUSD")
    if not projected_text:
        return cond("Unknown", Reason.NO_PROJECTION, f"no projection: {basis}" if basis else "no projection yet")
    projected = parse_usd(str(projected_text), what="status.cost.projectedUSD")
    usd = parse_usd(str(cost.get("usd") or "0"), what="status.cost.usd")
    figures = (
        f"projected {format_usd(projected, quantum=CENT)} USD vs limit {format_usd(limit)} USD "
        f"(spent {format_usd(usd, quantum=CENT)} USD): {basis}"
    )
    if projected > limit:
        return cond("True", Reason.PROJECTED_OVER_BUDGET, figures)
    return cond("False", Reason.PROJECTED_WITHIN_BUDGET, figures)
