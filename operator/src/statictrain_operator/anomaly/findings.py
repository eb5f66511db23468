"""From judged series to findings the remediation policy acts on. Pure.

| finding | evidence |
|---|---|
| ThroughputRegression | the running commit worse per unit of work than the last good one (``commits.py``), |
|   | else tokens/s anomalously low (severity >= Warning), or step time high where tokens/s is not measured |
| Stalled | no training step for ``max(stall_min_s, stall_factor x expected step time)`` (uncorroborated fallback) |
| IdleGPU, Stalled (hang), Straggler, MemoryLeak, LossDiverged, DataStarvation | ``faults.detect`` (passed in) |
| OverBudget | status.cost.usd >= spec.budget.limitUSD (decimal strings, compared exactly) |
| CostSpike | cost rate anomalously high (reported, no action) |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation

from statictrain_operator.anomaly.commits import CommitRegression
from statictrain_operator.anomaly.detector import Assessment, Method, Severity
from statictrain_operator.anomaly.remediation import Finding, FindingKind

__all__ = [
    "COST_USD_PER_HOUR",
    "GPU_UTILIZATION",
    "SECONDS_SINCE_LAST_STEP",
    "STEP_SECONDS",
    "TOKENS_PER_SECOND",
    "USD_PER_1M_TOKENS",
    "FindingSettings",
    "classify",
    "money",
]

STEP_SECONDS = "step_seconds"
TOKENS_PER_SECOND = "tokens_per_second"
GPU_UTILIZATION = "gpu_utilization"
COST_USD_PER_HOUR = "cost_usd_per_hour"
USD_PER_1M_TOKENS = "usd_per_1m_tokens"
SECONDS_SINCE_LAST_STEP = "seconds_since_last_step"


@dataclass(frozen=True)
class FindingSettings:
    """Thresholds that turn judged series into findings."""

    stall_min_s: float = 300.0
    """Shortest time without a step that counts as stalled."""
    stall_factor: float = 20.0
    """Stalled after this many expected step times without a step (if longer than stall_min_s)."""


def _serious(a: Assessment | None) -> bool:
    return a is not None and a.severity in (Severity.WARNING, Severity.CRITICAL)


def money(text: str | None) -> Decimal | None:
    """A decimal money string, or None when absent or unreadable."""
    if not text:
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def classify(
    assessments: Mapping[str, Assessment],
    *,
    now: datetime,
    commit: CommitRegression | None,
    seconds_since_last_step: float | None,
    cost_usd: str | None,
    budget_usd: str | None,
    settings: FindingSettings,
    training: Sequence[Finding] = (),
) -> list[Finding]:
    """Findings for one job; ``training``: the training-fault findings of ``faults.detect``."""
    out: list[Finding] = []
    step, tps = assessments.get(STEP_SECONDS), assessments.get(TOKENS_PER_SECOND)
    # Work per second decides when it is measured: longer steps of a larger batch are no regression.
    by_work = tps is not None and tps.method is not Method.INSUFFICIENT
    if commit is not None:
        out.append(
            Finding(
                FindingKind.THROUGHPUT_REGRESSION,
                f"commit:{commit.commit}",
                datetime.fromtimestamp(commit.since, tz=now.tzinfo),
                commit.message,
            )
        )
    elif by_work and tps is not None and _serious(tps) and tps.z < 0:
        out.append(Finding(FindingKind.THROUGHPUT_REGRESSION, TOKENS_PER_SECOND, tps.since or now, tps.message))
    elif not by_work and step is not None and _serious(step) and step.z > 0:
        out.append(Finding(FindingKind.THROUGHPUT_REGRESSION, STEP_SECONDS, step.since or now, step.message))
    out.extend(training)
    if seconds_since_last_step is not None and not any(f.kind is FindingKind.STALLED for f in training):
        expected = step.expected if step is not None and step.method is not Method.INSUFFICIENT else 0.0
        limit = max(settings.stall_min_s, settings.stall_factor * expected)
        if seconds_since_last_step >= limit:
            out.append(
                Finding(
                    FindingKind.STALLED,
                    SECONDS_SINCE_LAST_STEP,  # remediation.UNCORROBORATED_STALL_METRIC
                    now - timedelta(seconds=seconds_since_last_step),  # the episode: since the last step
                    f"no step for {seconds_since_last_step:.0f} s (limit {limit:.0f} s)",
                )
            )
    spent, limit_usd = money(cost_usd), money(budget_usd)
    if spent is not None and limit_usd is not None and spent >= limit_usd:
        out.append(Finding(FindingKind.OVER_BUDGET, "cost_usd", now, f"spent ${spent} of ${limit_usd} budget"))
    cost = assessments.get(COST_USD_PER_HOUR)
    if cost is not None and _serious(cost) and cost.z > 0:
        out.append(Finding(FindingKind.COST_SPIKE, COST_USD_PER_HOUR, cost.since or now, cost.message))
    return out
