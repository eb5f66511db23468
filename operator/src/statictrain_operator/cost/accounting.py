"""One accounting run: API server + Prometheus -> allocation -> status.cost, metrics, budgets.

Runs on a timer (see handlers.py). Each run accounts ``[previous end, now)``
for the whole cluster, so node cost = job cost + idle cost holds per run. A
job whose ``status.cost.updated`` lags behind (new job, operator restart) is
accounted from that time instead, so nothing is counted twice or skipped.
If Prometheus is down, cost is still accounted from the API server (allocated
GPU time) and the missing usage is flagged; nothing is ever negative.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Protocol

from statictrain import labels
from statictrain.cost import Allocation, JobCost, JobKey, NodeInfo, PodInfo, Window, allocate
from statictrain.money import ZERO, parse_usd
from statictrain.pricing import Catalog, FallbackPolicy, NodeFacts, price_node

from statictrain_operator.cost import budgets
from statictrain_operator.cost.exporter import CostMetrics
from statictrain_operator.cost.inputs import (
    build_job_steps,
    build_usage,
    node_info,
    parse_time,
    pod_info,
    usage_queries,
)
from statictrain_operator.cost.settings import CostSettings
from statictrain_operator.cost.status import accumulate
from statictrain_operator.prom import PrometheusQueryError, PrometheusUnavailableError, PromReader

log = logging.getLogger(__name__)


class CostKube(Protocol):
    """The API calls accounting needs (cost/cluster.py implements them over the Kube port)."""

    def list_nodes(self) -> list[dict[str, Any]]: ...
    def list_worker_pods(self) -> list[dict[str, Any]]: ...
    def list_jobs(self) -> list[dict[str, Any]]: ...
    def patch_job_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> bool:
        """False when the job no longer exists."""

    def patch_job(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        """False when the job no longer exists."""

    def emit_event(self, job: Mapping[str, Any], reason: str, message: str, event_type: str) -> None: ...


@dataclass
class RunResult:
    window: Window
    allocation: Allocation
    job_costs: dict[JobKey, JobCost]
    orphans: dict[JobKey, JobCost] = field(default_factory=dict)
    """Cost of pods labelled with a job that no longer exists (metrics only)."""
    budget_actions: list[tuple[JobKey, str]] = field(default_factory=list)
    usage_error: str = ""


@dataclass(frozen=True)
class _RunContext:
    window: Window
    alloc: Allocation
    nodes: Sequence[NodeInfo]
    pods: Sequence[PodInfo]
    usage: Mapping[str, Any]
    kwargs: Mapping[str, Any]
    now: datetime


@dataclass
class Accountant:
    kube: CostKube
    prom: PromReader
    catalog: Catalog
    settings: CostSettings
    metrics: CostMetrics
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    last_end: float | None = None

    def _price_now(self, facts: NodeFacts) -> Decimal:
        policy = FallbackPolicy(default_gpu_hourly_usd=self.settings.default_gpu_price)
        return price_node(facts, self.catalog, now=self.clock(), policy=policy).hourly_usd

    def _usage(self, window: Window) -> tuple[dict[str, Any], dict[JobKey, Any], dict[JobKey, float], str]:
        q = usage_queries()
        step = self.settings.query_step_s
        try:
            series = {
                k: self.prom.query_range(v, window.start - step, window.end, step) for k, v in q.items()
            }
        except (PrometheusUnavailableError, PrometheusQueryError) as e:
            return {}, {}, {}, str(e)
        usage = build_usage(window, series)
        steps, baselines = build_job_steps(window, series["steps"])
        return usage, steps, baselines, ""

    def _start(self, jobs: Sequence[Mapping[str, Any]], end: float) -> float:
        """Start of this run: the previous run's end; after a restart, the newest status.cost.updated
        (where the previous operator stopped), at most max_catchup_s back."""
        if self.last_end is not None and self.last_end < end:
            return self.last_end
        marks = [parse_time(((j.get("status") or {}).get("cost") or {}).get("updated")) for j in jobs]
        known = [m for m in marks if m is not None and m < end]
        if known:
            return max(*known, end - self.settings.max_catchup_s)
        return end - self.settings.interval_s

    def run_once(self) -> RunResult:
        now = self.clock()
        end = now.timestamp()
        jobs = self.kube.list_jobs()
        window = Window(self._start(jobs, end), end)
        nodes = [n for n in (node_info(x, self._price_now) for x in self.kube.list_nodes()) if n is not None]
        pods = [p for p in (pod_info(x) for x in self.kube.list_worker_pods()) if p is not None]
        usage, steps, baselines, usage_error = self._usage(window)
        if usage_error:
            log.warning("cost accounting without usage data: %s", usage_error)
        kwargs: dict[str, Any] = {
            "idle_threshold": self.settings.idle_threshold,
            "max_gap": self.settings.max_gap_s,
            "job_steps": steps,
            "step_baselines": baselines,
        }
        alloc = allocate(window, nodes, pods, usage, **kwargs)
        result = RunResult(window, alloc, {}, usage_error=usage_error)
        for job in jobs:
            self._account_job(job, _RunContext(window, alloc, nodes, pods, usage, kwargs, now), result)
        crs = {
            ((j.get("metadata") or {}).get("namespace", ""), (j.get("metadata") or {}).get("name", ""))
            for j in jobs
        }
        # pods whose job object is gone still used the nodes: count them in the metrics (no status to patch)
        result.orphans = {k: v for k, v in alloc.jobs.items() if k not in crs}
        self.metrics.add_run([*result.job_costs.values(), *result.orphans.values()], alloc)
        self.last_end = end
        return result

    def _account_job(self, job: Mapping[str, Any], ctx: _RunContext, result: RunResult) -> None:
        window, alloc, nodes, pods, usage, kwargs, now = (
            ctx.window,
            ctx.alloc,
            ctx.nodes,
            ctx.pods,
            ctx.usage,
            ctx.kwargs,
            ctx.now,
        )
        meta = job.get("metadata") or {}
        key: JobKey = (meta.get("namespace", ""), meta.get("name", ""))
        status = job.get("status") or {}
        prev = status.get("cost") or {}
        since = parse_time(prev.get("updated"))
        if since is None:  # never accounted: from this run on, like the nodes
            since = window.start
        if since >= window.end:
            return
        inc: JobCost | None
        if abs(since - window.start) > 1.0:
            # lagging (a patch failed, or the operator was down) or ahead (a run failed after patching it):
            # account exactly the time not yet in its status
            own = [p for p in pods if (p.namespace, p.job) == key]
            inc = allocate(Window(since, window.end), nodes, own, usage, **kwargs).jobs.get(key)
        else:
            inc = alloc.jobs.get(key)
        if inc is not None:
            result.job_costs[key] = inc
        new_cost = accumulate(prev, inc, now=now, progress=status.get("progress"))
        if not self.kube.patch_job_status(key[0], key[1], {"cost": new_cost}):
            return  # deleted since it was listed: its cost stays in the metrics, no budget to enforce
        cr_labels = meta.get("labels") or {}
        labels_v = (
            key[1],
            key[0],
            inc.commit if inc else cr_labels.get(labels.COMMIT, ""),
            inc.team if inc else cr_labels.get(labels.TEAM, ""),
        )
        limit = ((job.get("spec") or {}).get("budget") or {}).get("limitUSD")
        budget_f: float | None = None
        if limit:
            with contextlib.suppress(ValueError):
                budget_f = float(parse_usd(str(limit)))
        per_1m = float(new_cost["usdPer1MTokens"]) if new_cost["usdPer1MTokens"] else None
        self.metrics.set_job_gauges(labels_v, usd_per_1m=per_1m, budget=budget_f)
        self._budget(job, parse_usd(new_cost["usd"]) if new_cost["usd"] else ZERO, now, result, key)

    def _budget(
        self, job: Mapping[str, Any], usd: Decimal, now: datetime, result: RunResult, key: JobKey
    ) -> None:
        d = budgets.decide(job, usd, now)
        if d.action == "none":
            return
        ns, name = key
        patch: dict[str, Any] = {}
        if d.annotations:
            patch["metadata"] = {"annotations": dict(d.annotations)}
        if d.spec_patch:
            patch["spec"] = dict(d.spec_patch)
        if patch and not self.kube.patch_job(ns, name, patch):
            return
        event_type = "Normal" if d.action == "rearm" else "Warning"
        try:
            self.kube.emit_event(job, d.reason, d.message, event_type)
        except Exception as e:  # e.g. its namespace is terminating: one job's Event must not end the run
            log.warning("could not post event %s about %s/%s: %s", d.reason, ns, name, e)
        if d.condition is not None:  # its own condition only: the API server merges conditions by type
            try:
                self.kube.patch_job_status(ns, name, {"conditions": [dict(d.condition)]})
            except Exception as e:  # the CRD may not list the condition type yet
                log.warning("could not record condition %s on %s/%s: %s", budgets.CONDITION, ns, name, e)
        result.budget_actions.append((key, d.action))
