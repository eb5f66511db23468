"""The PromQL the detector runs, built in one function from statictrain.promql.selector.

Everything the anomaly loop asks Prometheus is in :func:`job_queries`, so a
metric or aggregation change happens in one place. A job's series are the ones
of its worker pods (``workerpods.JobSeries``: job_name, namespace and a pod_uid
among the UIDs the API server lists; why, in statictrain_operator.workerpods).
Only the operator's own cost series (reported, never acted on) are selected by
job_name and namespace alone: no pod exports them.
"""

from __future__ import annotations

from statictrain import metrics
from statictrain.promql import mean_step_seconds, range_duration, selector

from statictrain_operator.anomaly import faults
from statictrain_operator.anomaly import findings as f
from statictrain_operator.workerpods import POD_UID, JobSeries

__all__ = ["PER_POD_METRICS", "claimants_query", "commit_query", "fault_queries", "job_queries", "namespace_cost_query"]

PER_POD_METRICS = (
    metrics.TRAIN_STEP_SECONDS + "_count",
    metrics.TRAIN_TOKENS_PER_SECOND,
    metrics.TRAIN_TOKENS_TOTAL,
    metrics.TRAIN_SECONDS_SINCE_LAST_STEP,
    metrics.TRAIN_STEP,
    metrics.TRAIN_LOSS,
    metrics.TRAIN_RANK_STEP_SECONDS,
    metrics.GPU_UTILIZATION_RATIO,
    metrics.GPU_POWER_WATTS,
    metrics.GPU_MEMORY_USED_BYTES,
)
"""The workers' metrics the anomaly loop judges (one name per histogram)."""


def job_queries(who: JobSeries, rate_window_s: float) -> dict[str, str]:
    """Series name -> PromQL for one job (label values are escaped by ``selector``)."""
    sel, pods = who.labels, who.any_of
    w = range_duration(rate_window_s)

    def own(metric: str) -> str:
        return selector(metric, sel, any_of=pods)

    return {
        f.STEP_SECONDS: mean_step_seconds(rate_window_s, match=sel, any_of=pods),
        f.TOKENS_PER_SECOND: f"sum({own(metrics.TRAIN_TOKENS_PER_SECOND)})",
        f.GPU_UTILIZATION: f"avg({own(metrics.GPU_UTILIZATION_RATIO)})",
        f.COST_USD_PER_HOUR: f"3600 * sum(rate({selector(metrics.JOB_COST_USD_TOTAL, sel)}[{w}]))",
        f.USD_PER_1M_TOKENS: f"max({selector(metrics.JOB_USD_PER_1M_TOKENS, sel)})",
        f.SECONDS_SINCE_LAST_STEP: f"max({own(metrics.TRAIN_SECONDS_SINCE_LAST_STEP)})",
    }


def fault_queries(who: JobSeries) -> dict[str, str]:
    """Series name -> PromQL of the training-fault detectors (``faults.py``); per-rank series come by rank."""
    sel, pods = who.labels, who.any_of

    def own(metric: str) -> str:
        return selector(metric, sel, any_of=pods)

    return {
        faults.TRAIN_STEP: f"max({own(metrics.TRAIN_STEP)})",
        faults.SECONDS_SINCE_LAST_STEP: f"max({own(metrics.TRAIN_SECONDS_SINCE_LAST_STEP)})",
        faults.GPU_UTILIZATION: f"avg({own(metrics.GPU_UTILIZATION_RATIO)})",
        faults.GPU_POWER_WATTS: f"avg({own(metrics.GPU_POWER_WATTS)})",
        faults.GPU_MEMORY_USED_BYTES: f"max({own(metrics.GPU_MEMORY_USED_BYTES)})",
        faults.GPU_MEMORY_TOTAL_BYTES: f"max({own(metrics.GPU_MEMORY_TOTAL_BYTES)})",
        faults.LOSS: f"max({own(metrics.TRAIN_LOSS)})",
        faults.STEP_SECONDS: (
            f"sum(rate({own(metrics.TRAIN_STEP_SECONDS + '_sum')}[2m])) / "
            f"sum(rate({own(metrics.TRAIN_STEP_SECONDS + '_count')}[2m]))"
        ),
        faults.RANK_STEP_SECONDS: f"max by (rank) ({own(metrics.TRAIN_RANK_STEP_SECONDS)})",
    }


def commit_query(who: JobSeries, rate_window_s: float) -> str:
    """Tokens per second per commit label of one job: work per dollar at the job's one price, so a drop
    is a rise in $ per unit of work (the per-commit baseline; a batch-size change alone is no regression)."""
    w = range_duration(rate_window_s)
    return f"sum by (commit) (rate({selector(metrics.TRAIN_TOKENS_TOTAL, who.labels, any_of=who.any_of)}[{w}]))"


def claimants_query(job: str, namespace: str) -> str:
    """The pod UIDs of every series that claims the job (job_name and namespace) in a worker metric the loop
    reads, whatever its pod: the ones not among the job's pods are ignored and logged."""
    sel = {"job_name": job, "namespace": namespace}
    return f"group by ({POD_UID}) ({' or '.join(selector(m, sel) for m in PER_POD_METRICS)})"


def namespace_cost_query(namespace: str, rate_window_s: float) -> str:
    """Cost rate of all jobs of a namespace, in USD per hour."""
    sel = {"namespace": namespace}
    return f"3600 * sum(rate({selector(metrics.JOB_COST_USD_TOTAL, sel)}[{range_duration(rate_window_s)}]))"
