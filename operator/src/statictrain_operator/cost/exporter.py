"""The operator's cost metrics (prometheus_client), registered on an injected registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge
from statictrain import labels, metrics
from statictrain.cost import Allocation, JobCost

JOB_LABELS = list(labels.METRIC_LABELS)


class CostMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def job_counter(name: str, doc: str) -> Counter:
            return Counter(name.removesuffix("_total"), doc, JOB_LABELS, registry=registry)

        self.cost = job_counter(metrics.JOB_COST_USD_TOTAL, "Allocated GPU cost of the job in USD")
        self.idle = job_counter(
            metrics.JOB_IDLE_COST_USD_TOTAL, "Cost of the job's allocated GPUs at ~0 utilization"
        )
        self.compile = job_counter(metrics.JOB_COMPILE_COST_USD_TOTAL, "Cost of the job's compile time")
        self.lost = job_counter(
            metrics.JOB_LOST_WORK_COST_USD_TOTAL, "Cost of steps computed again after restarts"
        )
        self.gpu_seconds = job_counter(metrics.JOB_GPU_SECONDS_TOTAL, "Allocated GPU-seconds of the job")
        self.tokens = job_counter(metrics.JOB_TOKENS_TOTAL, "Tokens attributed to the job by cost accounting")
        self.steps = job_counter(
            metrics.JOB_STEPS_TOTAL, "Optimizer steps attributed to the job by cost accounting"
        )
        self.per_1m = Gauge(
            metrics.JOB_USD_PER_1M_TOKENS, "USD per million tokens so far", JOB_LABELS, registry=registry
        )
        self.budget = Gauge(
            metrics.JOB_BUDGET_USD, "spec.budget.limitUSD of the job", JOB_LABELS, registry=registry
        )
        self.node_cost = Counter(
            metrics.NODE_COST_USD_TOTAL.removesuffix("_total"),
            "Node cost in USD",
            ["node"],
            registry=registry,
        )
        self.node_idle = Counter(
            metrics.NODE_IDLE_COST_USD_TOTAL.removesuffix("_total"),
            "Node cost no pod was allocated, in USD",
            ["node"],
            registry=registry,
        )
        self.node_hourly = Gauge(
            metrics.NODE_HOURLY_COST_USD,
            "Hourly price of the node",
            ["node", "instance_type", "capacity_type", "price_source"],
            registry=registry,
        )
        self.runs = Counter(
            metrics.COST_ACCOUNTING_RUNS_TOTAL.removesuffix("_total"),
            "Accounting runs",
            ["outcome"],
            registry=registry,
        )

    def add_job(self, job: JobCost) -> None:
        lv = (job.job, job.namespace, job.commit, job.team)
        self.cost.labels(*lv).inc(float(job.usd))
        self.idle.labels(*lv).inc(float(job.idle_usd))
        self.compile.labels(*lv).inc(float(job.compile_usd))
        self.lost.labels(*lv).inc(float(job.lost_usd))
        self.gpu_seconds.labels(*lv).inc(float(job.gpu_seconds))
        self.tokens.labels(*lv).inc(job.tokens)
        self.steps.labels(*lv).inc(job.steps)

    def add_nodes(self, alloc: Allocation) -> None:
        for n in alloc.nodes:
            self.node_cost.labels(n.name).inc(float(n.usd))
            self.node_idle.labels(n.name).inc(float(n.idle_usd))
