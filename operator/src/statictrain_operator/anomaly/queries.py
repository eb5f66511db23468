"""The PromQL the detector runs, built in one function from statictrain.promql.selector.

Everything the anomaly loop asks Prometheus is in :func:`job_queries`, so a
metric or aggregation change happens in one place.
"""

from __future__ import annotations

from statictrain import metrics
from statictrain.promql import mean_step_seconds, range_duration, selector

from statictrain_operator.anomaly import faults
from statictrain_operator.anomaly import findings as f

__all__ = ["commit_query", "fault_queries", "job_queries", "namespace_cost_query"]


def job_queries(job: str, namespace: str, rate_window_s: float) -> dict[str, str]:
    """Series name -> PromQL for one job (label values are escaped by ``selector``)."""
    sel = {"job_name": job, "namespace": namespace}
    w = range_duration(rate_window_s)

    def rate(metric: str) -> str:
        return f"sum(rate({selector(metric, sel)}[{w}]))"

    return {
        f.STEP_SECONDS: mean_step_seconds(rate_window_s, match=sel),
        f.TOKENS_PER_SECOND: f"sum({selector(metrics.TRAIN_TOKENS_PER_SECOND, sel)})",
        f.GPU_UTILIZATION: f"avg({selector(metrics.GPU_UTILIZATION_RATIO, sel)})",
        f.COST_USD_PER_HOUR: f"3600 * {rate(metrics.JOB_COST_USD_TOTAL)}",
        f.USD_PER_1M_TOKENS: f"max({selector(metrics.JOB_USD_PER_1M_TOKENS, sel)})",
        f.SECONDS_SINCE_LAST_STEP: f"max({selector(metrics.TRAIN_SECONDS_SINCE_LAST_STEP, sel)})",
    }


def fault_queries(job: str, namespace: str) -> dict[str, str]:
    """Series name -> PromQL of the training-fault detectors (``faults.py``); per-rank series come by rank."""
    sel = {"job_name": job, "namespace": namespace}
    return {
        faults.TRAIN_STEP: f"max({selector(metrics.TRAIN_STEP, sel)})",
        faults.SECONDS_SINCE_LAST_STEP: f"max({selector(metrics.TRAIN_SECONDS_SINCE_LAST_STEP, sel)})",
        faults.GPU_UTILIZATION: f"avg({selector(metrics.GPU_UTILIZATION_RATIO, sel)})",
        faults.GPU_POWER_WATTS: f"avg({selector(metrics.GPU_POWER_WATTS, sel)})",
        faults.GPU_MEMORY_USED_BYTES: f"max({selector(metrics.GPU_MEMORY_USED_BYTES, sel)})",
        faults.GPU_MEMORY_TOTAL_BYTES: f"max({selector(metrics.GPU_MEMORY_TOTAL_BYTES, sel)})",
        faults.LOSS: f"max({selector(metrics.TRAIN_LOSS, sel)})",
        faults.STEP_SECONDS: (
            f"sum(rate({selector(metrics.TRAIN_STEP_SECONDS + '_sum', sel)}[2m])) / "
            f"sum(rate({selector(metrics.TRAIN_STEP_SECONDS + '_count', sel)}[2m]))"
        ),
        faults.RANK_STEP_SECONDS: f"max by (rank) ({selector(metrics.TRAIN_RANK_STEP_SECONDS, sel)})",
    }


def commit_query(job: str, namespace: str, rate_window_s: float) -> str:
    """Tokens per second per commit label of one job: work per dollar at the job's one price, so a drop
    is a rise in $ per unit of work (the per-commit baseline; a batch-size change alone is no regression)."""
    sel = {"job_name": job, "namespace": namespace}
    w = range_duration(rate_window_s)
    return f"sum by (commit) (rate({selector(metrics.TRAIN_TOKENS_TOTAL, sel)}[{w}]))"


def namespace_cost_query(namespace: str, rate_window_s: float) -> str:
    """Cost rate of all jobs of a namespace, in USD per hour."""
    sel = {"namespace": namespace}
    return f"3600 * sum(rate({selector(metrics.JOB_COST_USD_TOTAL, sel)}[{range_duration(rate_window_s)}]))"
