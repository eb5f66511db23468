"""Budgets: one action per limit, re-armed when the limit is raised."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from statictrain_operator.cost.budgets import BUDGET_ACTED, CONDITION, decide

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def job(
    limit: str | None,
    on: str = "Suspend",
    *,
    acted: str | None = None,
    replicas: int = 4,
    elastic: dict[str, int] | None = None,
    suspend: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": replicas, "suspend": suspend}
    if limit is not None:
        spec["budget"] = {"limitUSD": limit, "onExceeded": on}
    if elastic:
        spec["elastic"] = elastic
    ann = {BUDGET_ACTED: acted} if acted else {}
    return {"metadata": {"name": "j", "namespace": "ns", "generation": 3, "annotations": ann}, "spec": spec}


@pytest.mark.parametrize(
    ("body", "cost", "want_action", "want_spec"),
    [
        (job(None), "99", "none", {}),
        (job("100"), "99.99", "none", {}),
        (job("100"), "100", "suspend", {"suspend": True}),
        (job("100", acted="100.000000"), "150", "none", {}),
        (job("200", acted="100.000000"), "250", "suspend", {"suspend": True}),
        (job("200", acted="100.000000"), "150", "rearm", {}),
        (job("100", "Notify"), "101", "notify", {}),
        (job("100", "Alert"), "101", "notify", {}),
        (job("100", suspend=True), "101", "notify", {}),
        (job("ten"), "101", "invalid", {}),
    ],
    ids=[
        "no-budget",
        "below",
        "at-limit-suspends",
        "acted-once",
        "new-limit-acts-again",
        "raised-limit-rearms",
        "notify",
        "alert-alias",
        "already-suspended",
        "bad-limit",
    ],
)
def test_decide(body: dict[str, Any], cost: str, want_action: str, want_spec: dict[str, Any]) -> None:
    d = decide(body, Decimal(cost), NOW)
    assert d.action == want_action
    assert dict(d.spec_patch) == want_spec
    if want_action in ("suspend", "notify"):
        assert d.annotations[BUDGET_ACTED] == f"{Decimal(body['spec']['budget']['limitUSD']):.6f}"
        assert d.condition is not None and d.condition["type"] == CONDITION and d.condition["status"] == "True"
        assert d.condition["observedGeneration"] == 3
    if want_action == "rearm":
        assert d.annotations == {BUDGET_ACTED: None}


def test_bad_limit_message_says_how_to_fix() -> None:
    d = decide(job("ten"), Decimal(1), NOW)
    assert "12.50" in d.message
