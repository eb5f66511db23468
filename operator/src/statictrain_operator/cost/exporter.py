"""The operator's cost metrics: one custom collector whose ``collect()`` yields a consistent snapshot.

The cost counters are totals kept outside the process: a job's are its
``status.cost`` figures, a node's come from the cost ledger (a ConfigMap, see
``ledger``). An operator restart therefore neither resets them nor loses what
was accounted but not yet scraped: the next process exports the same totals. Jobs
whose StaticTrainingJob is gone (orphan pods) and a cluster without a ledger
ConfigMap fall back to totals since this process started. An accounting window
updates everything under a lock, and ``collect()`` copies under the same lock, so
a scrape never sees half a window.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from statictrain import labels, metrics
from statictrain.cost import JOULES_PER_KWH, Allocation, JobCost
from statictrain.invariants import INVARIANTS, Check

__all__ = ["JOB_LABELS", "STATUS_FIELDS", "CostMetrics", "LabelValues"]

JOB_LABELS = list(labels.METRIC_LABELS)
LabelValues = tuple[str, ...]

STATUS_FIELDS: dict[str, tuple[str, float]] = {
    metrics.JOB_COST_USD_TOTAL: ("usd", 1.0),
    metrics.JOB_GPU_COST_USD_TOTAL: ("gpuUSD", 1.0),
    metrics.JOB_CPU_COST_USD_TOTAL: ("cpuUSD", 1.0),
    metrics.JOB_MEMORY_COST_USD_TOTAL: ("memoryUSD", 1.0),
    metrics.JOB_LOST_STEPS_TOTAL: ("lostSteps", 1.0),
    metrics.JOB_IDLE_COST_USD_TOTAL: ("idleUSD", 1.0),
    metrics.JOB_COMPILE_COST_USD_TOTAL: ("compileUSD", 1.0),
    metrics.JOB_LOST_WORK_COST_USD_TOTAL: ("lostWorkUSD", 1.0),
    metrics.JOB_GPU_SECONDS_TOTAL: ("gpuHours", 3600.0),
    metrics.JOB_TOKENS_TOTAL: ("tokens", 1.0),
    metrics.JOB_STEPS_TOTAL: ("stepsExecuted", 1.0),
    metrics.JOB_GPU_ENERGY_JOULES_TOTAL: ("gpuEnergyKWh", JOULES_PER_KWH),
    metrics.JOB_CARBON_GRAMS_TOTAL: ("carbonKgCO2e", 1000.0),
}
"""Job counter -> (status.cost field, scale): the counters are the status figures."""


def _number(value: object) -> float:
    try:
        return max(float(str(value)), 0.0) if value not in (None, "") else 0.0
    except ValueError:
        return 0.0


_JOB_COUNTERS = {
    metrics.JOB_COST_USD_TOTAL: "Allocated cost of the job's pods (GPU, CPU, memory) in USD",
    metrics.JOB_GPU_COST_USD_TOTAL: "GPU part of the job's cost, USD",
    metrics.JOB_CPU_COST_USD_TOTAL: "CPU part of the job's cost, USD",
    metrics.JOB_MEMORY_COST_USD_TOTAL: "Memory part of the job's cost, USD",
    metrics.JOB_LOST_STEPS_TOTAL: "Steps computed again after restarts",
    metrics.JOB_IDLE_COST_USD_TOTAL: "Cost of the job's allocated GPUs at ~0 utilization, USD",
    metrics.JOB_COMPILE_COST_USD_TOTAL: "Cost of the job's compile time, USD",
    metrics.JOB_LOST_WORK_COST_USD_TOTAL: "Cost of steps computed again after restarts, USD",
    metrics.JOB_GPU_SECONDS_TOTAL: "Allocated GPU-seconds of the job",
    metrics.JOB_TOKENS_TOTAL: "Tokens attributed to the job by cost accounting",
    metrics.JOB_STEPS_TOTAL: "Optimizer steps the job executed (mean over ranks), recomputed ones included",
    metrics.JOB_GPU_ENERGY_JOULES_TOTAL: "GPU energy of the job's pods (NVML energy counters), joules",
    metrics.JOB_CARBON_GRAMS_TOTAL: "Carbon of the job's GPU energy (x PUE x grid intensity), gCO2e",
}
_NODE_COUNTERS = {
    metrics.NODE_COST_USD_TOTAL: "Node cost in USD",
    metrics.NODE_IDLE_COST_USD_TOTAL: "Node cost no pod was allocated, USD",
    metrics.NODE_ALLOCATED_COST_USD_TOTAL: "Cost of the pods on the node (their allocations), USD",
}


class CostMetrics:
    """Cost totals (see the module docstring); registered with ``registry`` in __init__."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[LabelValues, float]] = defaultdict(lambda: defaultdict(float))
        self._per_1m: dict[LabelValues, float] = {}
        self._budget: dict[LabelValues, float] = {}
        self._projected: dict[LabelValues, float] = {}
        self._hourly: dict[LabelValues, float] = {}
        self._runs: dict[str, float] = defaultdict(float)
        self._flags: dict[tuple[str, ...], float] = defaultdict(float)
        self._invariant_ok: dict[str, float] = {}
        self._invariant_failures: dict[str, float] = dict.fromkeys(INVARIANTS, 0.0)
        self._unpriced: set[tuple[str, str]] = set()
        self._dcgm_ignored: dict[str, float] = defaultdict(float)
        if registry is not None:
            registry.register(self)

    def add_run(
        self,
        jobs: Sequence[tuple[LabelValues, JobCost]],
        alloc: Allocation,
        checks: tuple[Check, ...] = (),
        *,
        totals: Mapping[LabelValues, Mapping[str, Any]] | None = None,
        node_totals: Mapping[str, tuple[float, float, float]] | None = None,
    ) -> None:
        """One accounting window, atomically: job flags; job totals set from ``totals`` (status.cost by
        label values), the other ``jobs`` (label values, increment) added as increments; node totals set
        from ``node_totals`` (the ledger: usd, idle, allocated), else ``alloc``'s node costs added; the invariant
        checks."""
        totals = totals or {}
        with self._lock:
            for lv, cost in totals.items():
                for metric, (name, scale) in STATUS_FIELDS.items():
                    self._counters[metric][lv] = _number(cost.get(name)) * scale
            for chk in checks:
                self._invariant_ok[chk.name] = 1.0 if chk.ok else 0.0
                self._invariant_failures[chk.name] += 0.0 if chk.ok else 1.0
            self._unpriced = {(p.split("/", 1)[0], p.split("/", 1)[-1]) for p in alloc.unpriced_pods}
            for lv, job in jobs:
                for flag in job.flags:
                    self._flags[(*lv, flag)] += 1
                if lv in totals:
                    continue
                c = self._counters
                c[metrics.JOB_COST_USD_TOTAL][lv] += float(job.usd)
                c[metrics.JOB_GPU_COST_USD_TOTAL][lv] += float(job.gpu_usd)
                c[metrics.JOB_CPU_COST_USD_TOTAL][lv] += float(job.cpu_usd)
                c[metrics.JOB_MEMORY_COST_USD_TOTAL][lv] += float(job.memory_usd)
                c[metrics.JOB_LOST_STEPS_TOTAL][lv] += job.lost_steps
                c[metrics.JOB_IDLE_COST_USD_TOTAL][lv] += float(job.idle_usd)
                c[metrics.JOB_COMPILE_COST_USD_TOTAL][lv] += float(job.compile_usd)
                c[metrics.JOB_LOST_WORK_COST_USD_TOTAL][lv] += float(job.lost_usd)
                c[metrics.JOB_GPU_SECONDS_TOTAL][lv] += float(job.gpu_seconds)
                c[metrics.JOB_TOKENS_TOTAL][lv] += job.tokens
                c[metrics.JOB_STEPS_TOTAL][lv] += job.executed_steps
                c[metrics.JOB_GPU_ENERGY_JOULES_TOTAL][lv] += job.energy_j
                c[metrics.JOB_CARBON_GRAMS_TOTAL][lv] += job.carbon_g
            node_metrics = (
                metrics.NODE_COST_USD_TOTAL,
                metrics.NODE_IDLE_COST_USD_TOTAL,
                metrics.NODE_ALLOCATED_COST_USD_TOTAL,
            )
            if node_totals is not None:
                for m in node_metrics:
                    self._counters[m].clear()
                for name, values in node_totals.items():
                    for m, v in zip(node_metrics, values, strict=True):
                        self._counters[m][(name,)] = v
            else:
                for n in alloc.nodes:
                    for m, d in zip(node_metrics, (n.usd, n.idle_usd, n.allocated_usd), strict=True):
                        self._counters[m][(n.name,)] += float(d)
            self._runs["ok"] += 1

    def add_dcgm_ignored(self, counts: Mapping[str, int]) -> None:
        """dcgm-exporter series one accounting window left out, by reason."""
        with self._lock:
            for reason, n in counts.items():
                self._dcgm_ignored[reason] += n

    def run_failed(self) -> None:
        with self._lock:
            self._runs["error"] += 1

    def set_job_gauges(
        self, lv: LabelValues, *, usd_per_1m: float | None, budget: float | None, projected: float | None = None
    ) -> None:
        """The job's gauges; a None ``projected`` (no projection now) ends its projected-cost series."""
        with self._lock:
            if usd_per_1m is not None:
                self._per_1m[lv] = usd_per_1m
            if budget is not None:
                self._budget[lv] = budget
            if projected is None:
                self._projected.pop(lv, None)
            else:
                self._projected[lv] = projected

    def set_node_hourly(
        self, node: str, instance_type: str, capacity_type: str, source: str, usd: float, *, provider_id: str = ""
    ) -> None:
        """The node's price; ``provider_id`` (its spec.providerID) lets a bill's resource IDs find the node."""
        with self._lock:
            for key in [k for k in self._hourly if k[0] == node]:
                del self._hourly[key]
            self._hourly[(node, instance_type, capacity_type, source, provider_id)] = usd

    def value(self, metric: str, label_values: LabelValues) -> float:
        with self._lock:
            return self._counters[metric].get(label_values, 0.0)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            counters = {m: dict(v) for m, v in self._counters.items()}
            per_1m, budget, projected, hourly, runs = (
                dict(self._per_1m),
                dict(self._budget),
                dict(self._projected),
                dict(self._hourly),
                dict(self._runs),
            )
            flags, dcgm_ignored = dict(self._flags), dict(self._dcgm_ignored)
            inv_ok, inv_fail, unpriced = dict(self._invariant_ok), dict(self._invariant_failures), set(self._unpriced)
        for name, doc in _JOB_COUNTERS.items():
            fam = CounterMetricFamily(name.removesuffix("_total"), doc, labels=JOB_LABELS)
            for lv, v in sorted(counters.get(name, {}).items()):
                fam.add_metric(list(lv), v)
            yield fam
        for name, doc in _NODE_COUNTERS.items():
            fam = CounterMetricFamily(name.removesuffix("_total"), doc, labels=["node"])
            for lv, v in sorted(counters.get(name, {}).items()):
                fam.add_metric(list(lv), v)
            yield fam
        g = GaugeMetricFamily(metrics.JOB_USD_PER_1M_TOKENS, "USD per million tokens so far", labels=JOB_LABELS)
        for lv, v in sorted(per_1m.items()):
            g.add_metric(list(lv), v)
        yield g
        g = GaugeMetricFamily(metrics.JOB_BUDGET_USD, "spec.budget.limitUSD of the job", labels=JOB_LABELS)
        for lv, v in sorted(budget.items()):
            g.add_metric(list(lv), v)
        yield g
        g = GaugeMetricFamily(
            metrics.JOB_PROJECTED_COST_USD,
            "status.cost.projectedUSD: the job's cost so far plus its steps left at the current cost per step",
            labels=JOB_LABELS,
        )
        for lv, v in sorted(projected.items()):
            g.add_metric(list(lv), v)
        yield g
        g = GaugeMetricFamily(
            metrics.NODE_HOURLY_COST_USD,
            "Hourly price of the node",
            labels=["node", "instance_type", "capacity_type", "price_source", "provider_id"],
        )
        for lv, v in sorted(hourly.items()):
            g.add_metric(list(lv), v)
        yield g
        flag_fam = CounterMetricFamily(
            metrics.JOB_COST_FLAGS_TOTAL.removesuffix("_total"),
            "Accounting runs in which the job's cost data had this problem (gaps, resets, unpriced usage)",
            labels=[*JOB_LABELS, "flag"],
        )
        for lv, v in sorted(flags.items()):
            flag_fam.add_metric(list(lv), v)
        yield flag_fam
        g = GaugeMetricFamily(
            metrics.COST_INVARIANT_OK, "1 when the last accounting window held the invariant", labels=["invariant"]
        )
        for name, v in sorted(inv_ok.items()):
            g.add_metric([name], v)
        yield g
        inv = CounterMetricFamily(
            metrics.COST_INVARIANT_FAILURES_TOTAL.removesuffix("_total"),
            "Accounting windows in which the invariant failed",
            labels=["invariant"],
        )
        for name, v in sorted(inv_fail.items()):
            inv.add_metric([name], v)
        yield inv
        g = GaugeMetricFamily(
            metrics.COST_UNPRICED_PODS, "Running worker pods whose node has no price", labels=["namespace", "pod"]
        )
        for ns, pod in sorted(unpriced):
            g.add_metric([ns, pod], 1.0)
        yield g
        ign = CounterMetricFamily(
            metrics.DCGM_SERIES_IGNORED_TOTAL.removesuffix("_total"),
            "dcgm-exporter series an accounting window left out (no pod labels, not a worker pod, no GPU label, "
            "outside the pod's lifetime), one per series and window",
            labels=["reason"],
        )
        for reason, v in sorted(dcgm_ignored.items()):
            ign.add_metric([reason], v)
        yield ign
        runs_fam = CounterMetricFamily(
            metrics.COST_ACCOUNTING_RUNS_TOTAL.removesuffix("_total"), "Accounting runs", labels=["outcome"]
        )
        for outcome, v in sorted(runs.items()):
            runs_fam.add_metric([outcome], v)
        yield runs_fam
