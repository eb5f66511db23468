"""The PromQL the detector runs, built in one function from statictrain.promql.selector.

Everything the anomaly loop asks Prometheus is in :func:`job_queries`, so a
metric or aggregation change happens in one place.
"""

from __future__ import annotations

from statictrain import metrics
from statictrain.promql import mean_step_seconds, range_duration, selector

from statictrain_operator.anomaly import findings as f


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


def commit_query(job: str, namespace: str, rate_window_s: float) -> str:
    """Mean step time per commit label of one job (for per-commit baselines)."""
    return mean_step_seconds(rate_window_s, by=("commit",), match={"job_name": job, "namespace": namespace})


def namespace_cost_query(namespace: str, rate_window_s: float) -> str:
    """Cost rate of all jobs of a namespace, in USD per hour."""
    sel = {"namespace": namespace}
    return f"3600 * sum(rate({selector(metrics.JOB_COST_USD_TOTAL, sel)}[{range_duration(rate_window_s)}]))"
