"""One accounting run: API server + Prometheus -> allocation -> status.cost, metrics, budgets.

Runs on a timer (see handlers.py). Each run accounts ``[previous end, now)``
(ends on whole seconds) for the whole cluster, nodes and jobs alike, so windows
tile time. After an operator outage the run starts where the newest
``status.cost.updated`` says the previous operator stopped and catches up in
full, nodes and jobs alike, in windows of at most ``max_catchup_s``. A job whose
``status.cost.updated`` lags behind or is ahead is accounted over exactly its
own missing time. Counters come from raw samples (statictrain.counters). If
Prometheus is down, cost is still accounted from the API server (allocated
time) and the missing usage is flagged; nothing is ever negative. The
invariants (statictrain.invariants) are checked in every window and exported.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Protocol

from statictrain import api, invariants
from statictrain.conditions import BUDGET_WARNING
from statictrain.cost import Allocation, JobCost, JobKey, NodeInfo, PodInfo, PodUsage, Window, allocate
from statictrain.counters import Sample
from statictrain.money import ZERO, parse_usd
from statictrain.pricing import Catalog, FallbackPolicy, NodeFacts, price_node

from statictrain_operator.children import commit_and_team
from statictrain_operator.cost import budgets
from statictrain_operator.cost.exporter import CostMetrics, LabelValues
from statictrain_operator.cost.inputs import (
    DCGM_UTIL,
    build_usage,
    counters_missing_prev,
    dcgm_utilization,
    node_info,
    parse_time,
    pod_info,
    prev_query,
    series_key,
    usage_queries,
)
from statictrain_operator.cost.ledger import CostState, Ledger
from statictrain_operator.cost.settings import CostSettings
from statictrain_operator.cost.status import accumulate, step_mark
from statictrain_operator.prom import PrometheusQueryError, PrometheusUnavailableError, PromReader

__all__ = ["Accountant", "CostKube", "RunResult", "windows"]

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

    def read_state(self) -> str | None:
        """The saved cost state (statictrain_operator.cost.ledger.CostState), None when there is none."""

    def write_state(self, text: str) -> bool:
        """Save the cost state; False when it could not be saved (logged by the caller)."""


@dataclass
class RunResult:
    window: Window
    allocation: Allocation
    job_costs: dict[JobKey, JobCost]
    orphans: dict[JobKey, JobCost] = field(default_factory=dict)
    """Cost of pods labelled with a job that no longer exists (metrics only)."""
    budget_actions: list[tuple[JobKey, str]] = field(default_factory=list)
    usage_error: str = ""
    checks: tuple[invariants.Check, ...] = ()
    patched: set[JobKey] = field(default_factory=set)
    """Jobs whose status.cost this run updated."""
    windows: int = 1
    """Accounting windows of this run (more than one when catching up after an outage)."""


class _DeferredError(RuntimeError):
    """Usage data is unavailable and the outage is still within the grace period: account later, exactly."""


def windows(start: float, end: float, longest: float) -> list[Window]:
    """``[start, end)`` cut into consecutive windows of at most ``longest`` seconds."""
    out: list[Window] = []
    t = start
    while t < end:
        nxt = min(end, t + longest)
        out.append(Window(t, nxt))
        t = nxt
    return out


def _label_values(job: Mapping[str, Any]) -> LabelValues:
    """(job_name, namespace, commit, team) of a job's metrics, from the job alone (as its pods are labelled,
    children.commit_and_team): the same in every window, whether its pods run, have finished or are gone.
    Its counters are its status.cost totals, so a label set that changed between windows would start a
    second series holding the whole total, and a report would count the job twice."""
    meta = job.get("metadata") or {}
    commit, team = commit_and_team(meta.get("labels") or {})
    return (meta.get("name", ""), meta.get("namespace", ""), commit, team)


def _orphan_label_values(inc: JobCost) -> LabelValues:
    """Label values of a job whose object is gone: its pods' (copied from the job when they were created)."""
    return (inc.job, inc.namespace, inc.commit, inc.team)


def _key(job: Mapping[str, Any]) -> JobKey:
    meta = job.get("metadata") or {}
    return (meta.get("namespace", ""), meta.get("name", ""))


@dataclass
class Accountant:
    kube: CostKube
    prom: PromReader
    catalog: Catalog
    settings: CostSettings
    metrics: CostMetrics
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    last_end: float | None = None
    ledger: Ledger = field(default_factory=Ledger)
    state: CostState | None = None
    """Node totals and how far they are accounted, saved after every window (None: not loaded yet)."""
    _usage_down_since: float | None = None

    def _price_now(self, facts: NodeFacts) -> Decimal:
        policy = FallbackPolicy(default_gpu_hourly_usd=self.settings.default_gpu_price)
        return price_node(facts, self.catalog, now=self.clock(), policy=policy).hourly_usd

    def _usage(self, window: Window, pods: Sequence[PodInfo]) -> tuple[dict[str, PodUsage], str]:
        """Raw samples of the window (and its lookback) per pod UID; ("", error) when Prometheus fails."""
        lookback = max(self.settings.counter_lookback_s, self.settings.max_gap_s)
        try:
            below = self.settings.idle_threshold
            gpu = self.settings.dcgm
            queries = usage_queries(window, lookback, below, gpu)
            series = {k: self.prom.query(q, at) for k, (q, at) in queries.items()}
            started = {p.uid: p.started for p in pods}
            prevs: dict[str, dict[str, float]] = {}
            for key, uids in counters_missing_prev(window, series, started, lookback).items():
                oldest = min(t for u in uids if (t := started.get(u)) is not None)
                q, at = prev_query(key, uids, window, window.start - oldest + 60.0, below)
                prevs[key] = {series_key(s.labels): s.samples[-1].v for s in self.prom.query(q, at) if s.samples}
        except (PrometheusUnavailableError, PrometheusQueryError) as e:
            return {}, str(e)
        pod_uids = {(p.namespace, p.name): p.uid for p in pods}
        dcgm_util: dict[str, dict[str, list[Sample]]] = {}
        if DCGM_UTIL in series:
            dcgm_util, ignored = dcgm_utilization(window, series[DCGM_UTIL], pods, gpu)
            self.metrics.add_dcgm_ignored(ignored)
            if ignored:
                log.debug("dcgm-exporter series left out of window %s: %s", window, ignored)
        return build_usage(window, series, pod_uids, prevs, dcgm_util), ""

    def _load_state(self) -> CostState:
        if self.state is None:
            text = self.kube.read_state()
            try:
                self.state = CostState.from_json(text) if text else CostState()
            except ValueError as e:
                log.error("%s", e)
                self.state = CostState()
        return self.state

    def _start(self, jobs: Sequence[Mapping[str, Any]], end: float) -> float | None:
        """Start of this run: the previous run's end; after a restart, where the saved cost state says the
        previous operator stopped (else the newest status.cost.updated), however long ago: the outage is
        caught up in full, nodes and jobs alike. None when that is not before ``end`` (nothing new)."""
        if self.last_end is None:
            self.last_end = self._load_state().accounted_to
        if self.last_end is not None:
            return self.last_end if self.last_end < end else None
        marks = [m for j in jobs if (m := parse_time(((j.get("status") or {}).get("cost") or {}).get("updated")))]
        if marks:
            return max(marks) if max(marks) < end else None
        return end - self.settings.interval_s

    def _allocate(self, window: Window, nodes: Sequence[NodeInfo], pods: Sequence[PodInfo],
                  marks: Mapping[JobKey, float]) -> tuple[Allocation, str]:  # fmt: skip
        usage, error = self._usage(window, pods)
        alloc = allocate(
            window,
            nodes,
            pods,
            usage,
            idle_threshold=self.settings.idle_threshold,
            max_gap=self.settings.max_gap_s,
            step_marks=marks,
            pue=self.settings.pue,
        )
        return alloc, error

    def run_once(self) -> RunResult:
        now = self.clock()
        end = float(int(now.timestamp()))  # whole seconds: status.cost.updated holds exactly this end
        jobs = {_key(j): j for j in self.kube.list_jobs()}
        start = self._start(list(jobs.values()), end)
        carbon = self.settings.carbon
        listed_nodes = [node_info(x, self._price_now, self.settings.weights, carbon) for x in self.kube.list_nodes()]
        listed_pods = [p for p in (pod_info(x) for x in self.kube.list_worker_pods()) if p is not None]
        pods, nodes, vanished = self.ledger.merge(listed_pods, listed_nodes, now.timestamp())
        if vanished:
            log.info("accounting what vanished since the last run, up to when it was last seen: %s", vanished)
        costs = {k: dict((j.get("status") or {}).get("cost") or {}) for k, j in jobs.items()}
        if start is None:  # already accounted up to now (a second run within the same second)
            return RunResult(Window(end - 1.0, end), allocate(Window(end - 1.0, end), [], []), {}, windows=0)
        cuts = windows(start, end, self.settings.max_catchup_s)
        result: RunResult | None = None
        done = 0
        for window in cuts:
            try:
                result = self._run_window(window, jobs=jobs, costs=costs, nodes=nodes, pods=pods, previous=result)
            except _DeferredError as e:  # Prometheus briefly away: this window waits for it (nothing is lost)
                log.warning("cost accounting from %s deferred: %s", window.start, e)
                if result is None:
                    empty = allocate(Window(end - 1.0, end), [], [])
                    return RunResult(Window(end - 1.0, end), empty, {}, usage_error=str(e), windows=0)
                result.usage_error = str(e)
                break
            done += 1
        assert result is not None
        result.windows = done
        self.last_end = cuts[done - 1].end
        self.ledger.prune(self.last_end, {p.uid for p in listed_pods}, {n.name for n in listed_nodes})
        state = self._load_state()
        for gone in set(state.nodes) - set(self.ledger.nodes):
            del state.nodes[gone]  # accounted to its end: its series ends
        for key, job in jobs.items():
            if key in result.patched:
                self._after_window(job, costs[key], now, result, key)
        return result

    def _check_usage(self, usage_error: str) -> None:
        """Raise _DeferredError while usage data has been missing for less than the grace period."""
        now = self.clock().timestamp()
        if not usage_error:
            self._usage_down_since = None
            return
        self._usage_down_since = self._usage_down_since or now
        if now - self._usage_down_since < self.settings.usage_grace_s:
            raise _DeferredError(usage_error)
        log.warning("cost accounting without usage data (flagged): %s", usage_error)

    def _run_window(
        self,
        window: Window,
        *,
        jobs: Mapping[JobKey, Mapping[str, Any]],
        costs: dict[JobKey, dict[str, Any]],
        nodes: Sequence[NodeInfo],
        pods: Sequence[PodInfo],
        previous: RunResult | None,
    ) -> RunResult:
        marks = {k: m for k, c in costs.items() if (m := step_mark(c)) is not None}
        alloc, usage_error = self._allocate(window, nodes, pods, marks)
        self._check_usage(usage_error)
        checks = invariants.check(alloc)
        for c in checks:
            if not c.ok:
                log.warning("cost invariant %s failed: %s", c.name, "; ".join(c.failures)[:2000])
        result = RunResult(window, alloc, {}, usage_error=usage_error, checks=checks)
        if previous is not None:
            result.job_costs = previous.job_costs
            result.patched = previous.patched
            result.window = Window(previous.window.start, window.end)
        at = datetime.fromtimestamp(window.end, UTC)
        window_costs: list[tuple[LabelValues, JobCost]] = []
        for key in jobs:
            prev = costs[key]
            since = parse_time(prev.get("updated"))
            if since is None:  # never accounted: from this window on, like the nodes
                since = window.start
            if since >= window.end:
                continue
            inc: JobCost | None
            if abs(since - window.start) > 0.0005:
                # lagging (a patch failed) or ahead (a run failed after patching it): exactly its missing time
                own = [p for p in pods if (p.namespace, p.job) == key]
                own_alloc, own_error = self._allocate(Window(since, window.end), nodes, own, marks)
                self._check_usage(own_error)
                inc = own_alloc.jobs.get(key)
            else:
                inc = alloc.jobs.get(key)
            status = jobs[key].get("status") or {}
            new_cost = accumulate(  # sets inc.lost_*
                prev,
                inc,
                now=at,
                progress=status.get("progress"),
                training=(jobs[key].get("spec") or {}).get("training"),
                finished=status.get("phase") in api.FINISHED_PHASES,
            )
            if inc is not None:  # in the metrics even when the job was deleted since it was listed
                window_costs.append((_label_values(jobs[key]), inc))
                result.job_costs[key] = _add(result.job_costs.get(key), inc)
            patch: dict[str, Any] = {"cost": new_cost}
            warn = budgets.warning(jobs[key], new_cost, had=_condition(jobs[key], BUDGET_WARNING) is not None)
            if warn is not None:
                patch["conditions"] = [warn]
            if self.kube.patch_job_status(key[0], key[1], patch):
                costs[key] = new_cost
                result.patched.add(key)
        # pods whose job object is gone still used the nodes: count them in the metrics (no status to patch)
        orphans = {k: v for k, v in alloc.jobs.items() if k not in jobs}
        result.orphans = {**(previous.orphans if previous else {}), **orphans}
        state = self._load_state()
        state.add(window.end, alloc.nodes)
        if not self.kube.write_state(state.to_json()):
            log.warning("cost state not saved; a restarted operator would account nodes again from an older mark")
        totals: dict[LabelValues, Mapping[str, Any]] = {
            _label_values(jobs[k]): c for k, c in costs.items() if c.get("usd")
        }
        window_costs += [(_orphan_label_values(inc), inc) for inc in orphans.values()]
        self.metrics.add_run(window_costs, alloc, checks, totals=totals, node_totals=state.floats())
        return result

    def _after_window(self, job: Mapping[str, Any], new_cost: Mapping[str, Any], now: datetime,
                      result: RunResult, key: JobKey) -> None:  # fmt: skip
        labels_v = _label_values(job)
        limit = ((job.get("spec") or {}).get("budget") or {}).get("limitUSD")
        budget_f: float | None = None
        if limit:
            with contextlib.suppress(ValueError):
                budget_f = float(parse_usd(str(limit)))
        per_1m = float(new_cost["usdPer1MTokens"]) if new_cost.get("usdPer1MTokens") else None
        projected = float(new_cost["projectedUSD"]) if new_cost.get("projectedUSD") else None
        self.metrics.set_job_gauges(labels_v, usd_per_1m=per_1m, budget=budget_f, projected=projected)
        self._budget(job, parse_usd(new_cost["usd"]) if new_cost.get("usd") else ZERO, now, result, key)
        self._warn(job, new_cost, key)

    def _warn(self, job: Mapping[str, Any], new_cost: Mapping[str, Any], key: JobKey) -> None:
        """A Warning Event when BudgetWarning turns True (the condition itself went with status.cost)."""
        before = _condition(job, BUDGET_WARNING)
        warn = budgets.warning(job, new_cost, had=before is not None)
        if warn is None or warn["status"] != "True" or (before or {}).get("status") == "True":
            return
        try:
            self.kube.emit_event(job, BUDGET_WARNING, warn.get("message", ""), "Warning")
        except Exception as e:  # e.g. its namespace is terminating: one job's Event must not end the run
            log.warning("could not post event %s about %s/%s: %s", BUDGET_WARNING, key[0], key[1], e)

    def _budget(self, job: Mapping[str, Any], usd: Decimal, now: datetime, result: RunResult, key: JobKey) -> None:
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


def _condition(job: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The job's condition of type ``kind`` as listed, None when it has none."""
    return next((c for c in (job.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _add(total: JobCost | None, inc: JobCost) -> JobCost:
    """Two windows of one job, summed (for the run's result)."""
    if total is None:
        return inc
    out = JobCost(inc.namespace, inc.job, inc.commit, inc.team)
    for name in ("usd", "gpu_usd", "cpu_usd", "memory_usd", "gpu_seconds", "idle_usd", "compile_usd", "lost_usd"):
        setattr(out, name, getattr(total, name) + getattr(inc, name))
    for name in ("tokens", "steps", "executed_steps", "lost_steps", "energy_j", "carbon_g"):
        setattr(out, name, getattr(total, name) + getattr(inc, name))
    out.step_mark = inc.step_mark
    out.pods = total.pods | inc.pods
    out.flags = total.flags | inc.flags
    return out
