"""The PromQL the detector runs, built in one function from statictrain.promql.selector.

Everything the anomaly loop asks Prometheus is in :func:`job_queries`, so a
metric or aggregation change happens in one place. A job's series are the ones
of its worker pods (``workerpods.JobSeries``: job_name, namespace and a pod_uid
among the UIDs the API server lists; why, in statictrain_operator.workerpods).
Only the operator's own cost series (reported, never acted on) are selected by
job_name and namespace alone: no pod exports them.

The GPU series (:data:`GPU_FIGURES`) come from the sidecars, aggregated here in PromQL, unless the
settings (``statictrain.dcgm.DcgmSettings``, ``STATICTRAIN_DCGM_SOURCE``) say dcgm-exporter: then
:func:`gpu_queries` selects its raw series by the job's pods' namespace and names (and the sidecars'
raw series in ``auto``), which ``anomaly/gpu.py`` attributes by pod lifetime and aggregates.
"""

from __future__ import annotations

from dataclasses import dataclass

from statictrain import dcgm, metrics
from statictrain.promql import mean_step_seconds, range_duration, selector

from statictrain_operator.anomaly import faults
from statictrain_operator.anomaly import findings as f
from statictrain_operator.workerpods import POD_UID, JobSeries

__all__ = [
    "GPU_FIGURES",
    "PER_POD_METRICS",
    "GpuQuery",
    "claimants_query",
    "commit_query",
    "fault_queries",
    "gpu_queries",
    "job_queries",
    "namespace_cost_query",
]

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

SIDECARS = dcgm.DcgmSettings()
"""The default GPU source: the sidecars' series."""

GPU_FIGURES = {
    faults.GPU_UTILIZATION: (metrics.GPU_UTILIZATION_RATIO, "avg"),
    faults.GPU_POWER_WATTS: (metrics.GPU_POWER_WATTS, "avg"),
    faults.GPU_MEMORY_USED_BYTES: (metrics.GPU_MEMORY_USED_BYTES, "max"),
    faults.GPU_MEMORY_TOTAL_BYTES: (metrics.GPU_MEMORY_TOTAL_BYTES, "max"),
}
"""Series name -> (the sidecar's metric, how the job's GPUs are aggregated: avg or max). The job-level
detector's gpu_utilization (findings.GPU_UTILIZATION) is the fault detectors' one."""


def _own(who: JobSeries, metric: str) -> str:
    return selector(metric, who.labels, any_of=who.any_of)


def _sidecar_gpu(who: JobSeries, names: tuple[str, ...], gpu: dcgm.DcgmSettings) -> dict[str, str]:
    """The GPU series aggregated in PromQL: the sidecars' (none when dcgm-exporter's are read: gpu_queries)."""
    if gpu.reads_dcgm:
        return {}
    return {n: f"{GPU_FIGURES[n][1]}({_own(who, GPU_FIGURES[n][0])})" for n in names}


def job_queries(who: JobSeries, rate_window_s: float, gpu: dcgm.DcgmSettings = SIDECARS) -> dict[str, str]:
    """Series name -> PromQL for one job (label values are escaped by ``selector``)."""
    sel, pods = who.labels, who.any_of
    w = range_duration(rate_window_s)

    def own(metric: str) -> str:
        return _own(who, metric)

    return {
        f.STEP_SECONDS: mean_step_seconds(rate_window_s, match=sel, any_of=pods),
        f.TOKENS_PER_SECOND: f"sum({own(metrics.TRAIN_TOKENS_PER_SECOND)})",
        **_sidecar_gpu(who, (f.GPU_UTILIZATION,), gpu),
        f.COST_USD_PER_HOUR: f"3600 * sum(rate({selector(metrics.JOB_COST_USD_TOTAL, sel)}[{w}]))",
        f.USD_PER_1M_TOKENS: f"max({selector(metrics.JOB_USD_PER_1M_TOKENS, sel)})",
        f.SECONDS_SINCE_LAST_STEP: f"max({own(metrics.TRAIN_SECONDS_SINCE_LAST_STEP)})",
    }


def fault_queries(who: JobSeries, gpu: dcgm.DcgmSettings = SIDECARS) -> dict[str, str]:
    """Series name -> PromQL of the training-fault detectors (``faults.py``); per-rank series come by rank."""

    def own(metric: str) -> str:
        return _own(who, metric)

    return {
        faults.TRAIN_STEP: f"max({own(metrics.TRAIN_STEP)})",
        faults.SECONDS_SINCE_LAST_STEP: f"max({own(metrics.TRAIN_SECONDS_SINCE_LAST_STEP)})",
        **_sidecar_gpu(who, tuple(GPU_FIGURES), gpu),
        faults.LOSS: f"max({own(metrics.TRAIN_LOSS)})",
        faults.STEP_SECONDS: (
            f"sum(rate({own(metrics.TRAIN_STEP_SECONDS + '_sum')}[2m])) / "
            f"sum(rate({own(metrics.TRAIN_STEP_SECONDS + '_count')}[2m]))"
        ),
        faults.RANK_STEP_SECONDS: f"max by (rank) ({own(metrics.TRAIN_RANK_STEP_SECONDS)})",
    }


@dataclass(frozen=True)
class GpuQuery:
    """One GPU series read from raw series (anomaly/gpu.py combines them)."""

    aggregate: str
    """avg | max over the job's GPUs."""
    sidecar: str
    """The sidecars' raw series (empty: not read)."""
    dcgm: str
    """dcgm-exporter's raw series of the job's pods by namespace and name (empty: not read, or it has none)."""
    scale: float = 1.0
    """dcgm-exporter's unit to the series' (percent -> ratio, MiB -> bytes)."""


def _dcgm_field(name: str, gpu: dcgm.DcgmSettings) -> tuple[str, float]:
    """dcgm-exporter's series for a GPU series, and its factor; ("", 1.0) where it has none (the memory total:
    dcgm-exporter's default fields give the free and used framebuffer, not the card's size)."""
    return {
        faults.GPU_UTILIZATION: (gpu.utilization_metric, gpu.utilization_factor),
        faults.GPU_POWER_WATTS: (dcgm.POWER_METRIC, 1.0),
        faults.GPU_MEMORY_USED_BYTES: (dcgm.FB_USED_METRIC, dcgm.FB_USED_FACTOR),
    }.get(name, ("", 1.0))


def gpu_queries(who: JobSeries, gpu: dcgm.DcgmSettings) -> dict[str, GpuQuery]:
    """Series name -> the raw reads of a GPU series when dcgm-exporter's series are read (else none: the sidecars'
    are aggregated in job_queries and fault_queries). dcgm-exporter's are selected by the namespace and pod labels
    (``gpu.namespace_label``, ``gpu.pod_label``) of the job's listed pods, and by ``gpu.scrape_job``; without
    named pods (``who.pods``) none is read."""
    if not gpu.reads_dcgm:
        return {}
    out: dict[str, GpuQuery] = {}
    names = sorted({p.name for p in who.pods})
    only = {gpu.namespace_label: who.namespace, **({"job": gpu.scrape_job} if gpu.scrape_job else {})}
    for name, (metric, aggregate) in GPU_FIGURES.items():
        field, scale = _dcgm_field(name, gpu)
        side = _own(who, metric) if gpu.reads_sidecar_gpu else ""
        theirs = selector(field, only, any_of={gpu.pod_label: names}) if field and names else ""
        if side or theirs:
            out[name] = GpuQuery(aggregate, side, theirs, scale)
    return out


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
