"""The operator's cost metrics: one custom collector whose ``collect()`` yields a consistent snapshot.

An accounting run adds to job and node totals under a lock, and ``collect()``
copies them under the same lock, so a scrape never sees half a run: the
invariant node cost = job cost + idle cost holds between any two scrapes.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from statictrain import labels, metrics
from statictrain.cost import Allocation, JobCost
from statictrain.invariants import INVARIANTS, Check

JOB_LABELS = list(labels.METRIC_LABELS)
START_LABEL = "exporter_start"
"""Label of the cost counters: when the exporting operator process started (see CostMetrics)."""
LabelValues = tuple[str, ...]

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
}
_NODE_COUNTERS = {
    metrics.NODE_COST_USD_TOTAL: "Node cost in USD",
    metrics.NODE_IDLE_COST_USD_TOTAL: "Node cost no pod was allocated, USD",
}


class CostMetrics:
    """Totals since the operator started; register with ``registry.register`` (done in __init__)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, started: float | None = None) -> None:
        """``started``: this exporter's start (Unix seconds; default now), the ``exporter_start`` label of
        every cost counter, so an operator restart begins new series instead of resetting old ones: a
        report then counts the new series from 0 even when its first value exceeds the old one's last
        (a catch-up after an outage), where reset detection would miss it."""
        self._start = f"{started if started is not None else time.time():.3f}"
        self._lock = threading.Lock()
        self._counters: dict[str, dict[LabelValues, float]] = defaultdict(lambda: defaultdict(float))
        self._per_1m: dict[LabelValues, float] = {}
        self._budget: dict[LabelValues, float] = {}
        self._hourly: dict[LabelValues, float] = {}
        self._runs: dict[str, float] = defaultdict(float)
        self._flags: dict[tuple[str, ...], float] = defaultdict(float)
        self._invariant_ok: dict[str, float] = {}
        self._invariant_failures: dict[str, float] = dict.fromkeys(INVARIANTS, 0.0)
        self._unpriced: set[tuple[str, str]] = set()
        if registry is not None:
            registry.register(self)

    def add_run(self, jobs: list[JobCost], alloc: Allocation, checks: tuple[Check, ...] = ()) -> None:
        """Add one accounting window's job and node costs and its invariant checks atomically."""
        with self._lock:
            for chk in checks:
                self._invariant_ok[chk.name] = 1.0 if chk.ok else 0.0
                self._invariant_failures[chk.name] += 0.0 if chk.ok else 1.0
            self._unpriced = {(p.split("/", 1)[0], p.split("/", 1)[-1]) for p in alloc.unpriced_pods}
            for job in jobs:
                lv = (job.job, job.namespace, job.commit, job.team)
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
                for flag in job.flags:
                    self._flags[(*lv, flag)] += 1
            for n in alloc.nodes:
                self._counters[metrics.NODE_COST_USD_TOTAL][(n.name,)] += float(n.usd)
                self._counters[metrics.NODE_IDLE_COST_USD_TOTAL][(n.name,)] += float(n.idle_usd)
            self._runs["ok"] += 1

    def run_failed(self) -> None:
        with self._lock:
            self._runs["error"] += 1

    def set_job_gauges(self, lv: LabelValues, *, usd_per_1m: float | None, budget: float | None) -> None:
        with self._lock:
            if usd_per_1m is not None:
                self._per_1m[lv] = usd_per_1m
            if budget is not None:
                self._budget[lv] = budget

    def set_node_hourly(self, node: str, instance_type: str, capacity_type: str, source: str, usd: float) -> None:
        with self._lock:
            for key in [k for k in self._hourly if k[0] == node]:
                del self._hourly[key]
            self._hourly[(node, instance_type, capacity_type, source)] = usd

    def value(self, metric: str, label_values: LabelValues) -> float:
        with self._lock:
            return self._counters[metric].get(label_values, 0.0)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            counters = {m: dict(v) for m, v in self._counters.items()}
            per_1m, budget, hourly, runs = (
                dict(self._per_1m),
                dict(self._budget),
                dict(self._hourly),
                dict(self._runs),
            )
            flags = dict(self._flags)
            inv_ok, inv_fail, unpriced = dict(self._invariant_ok), dict(self._invariant_failures), set(self._unpriced)
        for name, doc in _JOB_COUNTERS.items():
            fam = CounterMetricFamily(name.removesuffix("_total"), doc, labels=[*JOB_LABELS, START_LABEL])
            for lv, v in sorted(counters.get(name, {}).items()):
                fam.add_metric([*lv, self._start], v)
            yield fam
        for name, doc in _NODE_COUNTERS.items():
            fam = CounterMetricFamily(name.removesuffix("_total"), doc, labels=["node", START_LABEL])
            for lv, v in sorted(counters.get(name, {}).items()):
                fam.add_metric([*lv, self._start], v)
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
            metrics.NODE_HOURLY_COST_USD,
            "Hourly price of the node",
            labels=["node", "instance_type", "capacity_type", "price_source"],
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
            labels=["invariant", START_LABEL],
        )
        for name, v in sorted(inv_fail.items()):
            inv.add_metric([name, self._start], v)
        yield inv
        g = GaugeMetricFamily(
            metrics.COST_UNPRICED_PODS, "Running worker pods whose node has no price", labels=["namespace", "pod"]
        )
        for ns, pod in sorted(unpriced):
            g.add_metric([ns, pod], 1.0)
        yield g
        runs_fam = CounterMetricFamily(
            metrics.COST_ACCOUNTING_RUNS_TOTAL.removesuffix("_total"), "Accounting runs", labels=["outcome"]
        )
        for outcome, v in sorted(runs.items()):
            runs_fam.add_metric([outcome], v)
        yield runs_fam
