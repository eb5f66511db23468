"""One evaluation of one job: fetch series, judge them, decide, act, report.

I/O goes through two injected interfaces (``PromReader`` for Prometheus,
``JobApi`` for the Kubernetes API) and a clock, so unit tests pass fakes and
the handlers pass the real clients. Judging (Prometheus reads, the detectors'
fits, the decision) is synchronous and runs in a worker thread; the writes
that follow are awaited on the caller's loop. The order of writes makes an
operator restart safe: the intent is recorded on the job before the action,
and marked done after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from statictrain.conditions import REMEDIATION, set_condition

from statictrain_operator.anomaly import faults as flt
from statictrain_operator.anomaly import findings as fnd
from statictrain_operator.anomaly import history as hist
from statictrain_operator.anomaly.commits import commit_regression, judged, runs
from statictrain_operator.anomaly.detector import (
    Assessment,
    Method,
    Severity,
    append_bounded,
    as_status_item,
    assess,
)
from statictrain_operator.anomaly.exported import AnomalyMetrics
from statictrain_operator.anomaly.gpu import combine
from statictrain_operator.anomaly.queries import (
    GPU_FIGURES,
    claimants_query,
    commit_query,
    fault_queries,
    gpu_queries,
    job_queries,
)
from statictrain_operator.anomaly.remediation import (
    SETTINGS_FIELDS,
    Decision,
    FindingKind,
    History,
    Intent,
    JobView,
    Mode,
    decide,
)
from statictrain_operator.anomaly.settings import AnomalySettings
from statictrain_operator.prom import PrometheusQueryError, PrometheusUnavailableError, PromReader
from statictrain_operator.workerpods import POD_UID, Ignored, JobSeries, WorkerPod

__all__ = ["CONDITION_TYPE", "MAX_ANOMALIES", "Evaluator", "JobApi", "Outcome", "current_settings"]

log = logging.getLogger(__name__)

CONDITION_TYPE = REMEDIATION
"""Condition type written on the job (the anomaly part's own; statictrain.conditions)."""
MAX_ANOMALIES = 20


class JobApi(Protocol):
    """What the evaluation needs from the Kubernetes API (awaited on the operator's loop)."""

    async def read_job(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def worker_pods(self, namespace: str, name: str) -> tuple[WorkerPod, ...]:
        """The job's worker pods as the API server lists them (workerpods.worker_pods)."""
        ...

    async def set_history(self, namespace: str, name: str, value: str) -> None: ...

    async def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None: ...

    async def apply(self, namespace: str, name: str, intent: Intent) -> int | None: ...

    async def event(
        self, job: Mapping[str, Any], *, reason: str, message: str, warning: bool, now: datetime
    ) -> None: ...


@dataclass
class Outcome:
    """What one evaluation did (for logs and tests)."""

    decision: Decision | None = None
    applied: list[str] = field(default_factory=list)
    new_anomalies: list[str] = field(default_factory=list)
    data_problem: str | None = None


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)


def current_settings(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec fields RevertSettings restores."""
    return {k: spec[k] for k in SETTINGS_FIELDS if k in spec}


class Evaluator:
    """Evaluates jobs; one per operator, shared by all jobs' timers."""

    def __init__(
        self,
        settings: AnomalySettings,
        prom: PromReader,
        api: JobApi,
        metrics: AnomalyMetrics,
        clock: Callable[[], datetime],
    ) -> None:
        self.s, self.prom, self.api, self.metrics, self.clock = settings, prom, api, metrics, clock
        self.ignored = Ignored("anomaly")
        self.dcgm_ignored: set[tuple[str, str, str, frozenset[tuple[str, str]]]] = set()
        """(namespace, job, reason, labels) of the dcgm-exporter series already logged and counted."""

    def note_claimants(self, who: JobSeries, now: datetime) -> None:
        """Log (once each) the pods whose series claim the job without being its worker pods'; they are not
        read (every query selects the job's pod UIDs), this only says that they exist."""
        try:
            found = self.prom.query(claimants_query(who.job, who.namespace), now.timestamp())
        except (PrometheusUnavailableError, PrometheusQueryError):
            return  # the reads that follow report it
        claimed = [s.labels.get(POD_UID, "") for s in found]
        for _ in self.ignored.note((who.namespace, who.job), claimed, who.uids):
            self.metrics.ignored.labels(who.job, who.namespace).inc()

    def fetch_gpu(self, who: JobSeries, now: datetime, names: Iterable[str]) -> dict[str, flt.Series]:
        """The GPU series ``names`` read from raw series (queries.gpu_queries: only when dcgm-exporter's are read;
        else none, the sidecars' come aggregated with the other queries). A dcgm-exporter series naming the job's
        pods that cannot be attributed is logged and counted once. Prometheus errors propagate."""
        start, end = self.s.query_window(now.timestamp())
        out: dict[str, flt.Series] = {}
        wanted = set(names)
        for name, q in gpu_queries(who, self.s.dcgm).items():
            if name not in wanted:
                continue
            side = self.prom.query_range(q.sidecar, start, end, self.s.step_s) if q.sidecar else []
            theirs = self.prom.query_range(q.dcgm, start, end, self.s.step_s) if q.dcgm else []
            out[name], ignored = combine(q, side, theirs, who.pods, self.s.dcgm)
            for reason, of in ignored.items():
                for labels in of:
                    key = (who.namespace, who.job, reason, frozenset(labels.items()))
                    if key in self.dcgm_ignored:
                        continue
                    self.dcgm_ignored.add(key)
                    self.metrics.dcgm_ignored.labels(who.job, who.namespace, reason).inc()
                    log.warning("anomaly: ignoring dcgm-exporter series %s naming a pod of job %s/%s: %s",
                                dict(labels), who.namespace, who.job, reason)  # fmt: skip
        return out

    def fetch(
        self, who: JobSeries, now: datetime
    ) -> tuple[dict[str, tuple[list[datetime], list[float]]], list[tuple[float, str, float]], str | None]:
        """Series by name, work per second by commit (time, commit, value), and why the data cannot be trusted
        (or None)."""
        name, namespace = who.job, who.namespace
        start, end = self.s.query_window(now.timestamp())
        out: dict[str, tuple[list[datetime], list[float]]] = {}
        try:
            for series, query in job_queries(who, self.s.rate_window_s, self.s.dcgm).items():
                res = self.prom.query_range(query, start, end, self.s.step_s)
                samples = res[0].samples if res else ()
                out[series] = ([_utc(p.t) for p in samples], [p.v for p in samples])
            for series, (ts, vs) in self.fetch_gpu(who, now, [fnd.GPU_UTILIZATION]).items():
                out[series] = ([_utc(t) for t in ts], list(vs))
            commit_points: list[tuple[float, str, float]] = []
            for s in self.prom.query_range(commit_query(who, self.s.rate_window_s), start, end, self.s.step_s):
                commit_points.extend((p.t, s.labels.get("commit", ""), p.v) for p in s.samples)
        except (PrometheusUnavailableError, PrometheusQueryError) as exc:
            return {}, [], f"Prometheus query failed: {exc}"
        by_commit = sorted(commit_points)
        step_t = out.get(fnd.STEP_SECONDS, ([], []))[0]
        if not step_t:
            return (
                out,
                by_commit,
                (
                    f"no {fnd.STEP_SECONDS} samples for job {name!r} in namespace {namespace!r} "
                    f"over the last {self.s.lookback_s:g} s: is the sidecar scraped?"
                ),
            )
        age = now - step_t[-1]
        if age > timedelta(seconds=max(3 * self.s.step_s, 3 * self.s.rate_window_s)):
            return (
                out,
                by_commit,
                (f"the newest {fnd.STEP_SECONDS} sample is {age.total_seconds():.0f} s old: scrapes have stopped"),
            )
        return out, by_commit, None

    def fetch_faults(self, who: JobSeries, now: datetime) -> dict[str, flt.Series]:
        """The training-fault detectors' series (``rank_step_seconds.<rank>`` per rank); empty on a query failure."""
        start, end = self.s.query_window(now.timestamp())
        out: dict[str, flt.Series] = {}
        try:
            for series, query in fault_queries(who, self.s.dcgm).items():
                for res in self.prom.query_range(query, start, end, self.s.step_s):
                    key = f"{series}.{res.labels.get('rank', '')}" if series == flt.RANK_STEP_SECONDS else series
                    out[key] = ([p.t for p in res.samples], [p.v for p in res.samples])
            out.update(self.fetch_gpu(who, now, GPU_FIGURES))
        except (PrometheusUnavailableError, PrometheusQueryError) as exc:
            log.warning("training-fault series of %s/%s unavailable: %s", who.namespace, who.job, exc)
            return {}
        return out

    def judge(
        self, job: Mapping[str, Any], mode: Mode, now: datetime, pods: Sequence[WorkerPod]
    ) -> tuple[hist.Record, dict[str, Assessment], Decision, str | None]:
        """(history record, assessments, decision, data problem) of a job: Prometheus reads and fits, no writes.

        Only the series of the worker pods ``pods`` are read; with none there is nothing to judge (a data
        problem: no action), never a read of every series that carries the job's name."""
        meta, spec = job["metadata"], job.get("spec", {})
        status = job.get("status") or {}
        name, ns = meta["name"], meta["namespace"]
        try:
            record = hist.loads((meta.get("annotations") or {}).get(hist.ANNOTATION))
            history_problem = None
        except ValueError as exc:
            record, history_problem = hist.Record(History()), str(exc)
        who = JobSeries.of(name, ns, pods) if pods else None
        series: dict[str, tuple[list[datetime], list[float]]] = {}
        by_commit: list[tuple[float, str, float]] = []
        if who is None:
            problem: str | None = (
                f"no worker pods of job {name!r} in namespace {ns!r} are listed by the API server: "
                "no series is trusted to speak for it"
            )
        else:
            self.note_claimants(who, now)
            series, by_commit, problem = self.fetch(who, now)
        problem = problem or history_problem
        assessments: dict[str, Assessment] = {}
        if problem is None:
            for sname, (ts, ys) in series.items():
                if sname == fnd.SECONDS_SINCE_LAST_STEP or not ys:
                    continue
                a = assess(sname, ts, ys, self.s.detector())
                assessments[sname] = a
                self.metrics.score.labels(name, ns, sname, a.method.value).set(a.score)
        times, commits, work = [p[0] for p in by_commit], [p[1] for p in by_commit], [p[2] for p in by_commit]
        regression = commit_regression(times, commits, work, higher_is_worse=False) if problem is None else None
        since_last = series.get(fnd.SECONDS_SINCE_LAST_STEP, ([], []))[1]
        fault_series = self.fetch_faults(who, now) if problem is None and who is not None else {}
        changes = [r.start for r in runs(times, commits, work)[1:]]  # the commit changed
        changes += flt.restarts(fault_series, now.timestamp())  # the trainer started again (e.g. new settings)
        training = flt.detect(fault_series, now.timestamp(), self.s.faults(), changes) if fault_series else []
        found = (
            fnd.classify(
                assessments,
                now=now,
                commit=regression,
                seconds_since_last_step=since_last[-1] if since_last else None,
                cost_usd=(status.get("cost") or {}).get("usd"),
                budget_usd=(spec.get("budget") or {}).get("limitUSD"),
                settings=self.s.findings(),
                training=training,
            )
            if problem is None
            else []
        )
        step = assessments.get(fnd.STEP_SECONDS)
        healthy = (
            step is not None
            and step.method is not Method.INSUFFICIENT
            and not any(f.kind is FindingKind.THROUGHPUT_REGRESSION for f in found)
            and judged(times, commits, work)
        )
        record = hist.track_good_settings(record, current_settings(spec), healthy, now, self.s.good_settle)
        view = JobView(int(meta.get("generation", 0)), spec)
        decision = decide(
            mode=mode,
            now=now,
            findings=found,
            data_problem=problem,
            job=view,
            history=record.history,
            settings=self.s.policy(),
            changes=[_utc(c) for c in changes],
        )
        return record, assessments, decision, problem

    async def evaluate(self, job: Mapping[str, Any]) -> Outcome:
        """Evaluate one job (a StaticTrainingJob body) and apply the outcome."""
        now = self.clock()
        meta, spec = job["metadata"], job.get("spec", {})
        status = job.get("status") or {}
        name, ns = meta["name"], meta["namespace"]
        mode = Mode(spec.get("remediation", {}).get("mode", "Recommend"))
        outcome = Outcome()
        if mode is Mode.OFF:
            await self._write_condition(
                job=job,
                status=status,
                cstatus="False",
                reason="RemediationOff",
                message="spec.remediation.mode is Off",
                now=now,
            )
            return outcome
        pods = await self.api.worker_pods(ns, name)
        record, assessments, decision, problem = await asyncio.to_thread(self.judge, job, mode, now, pods)
        outcome.data_problem = problem
        outcome.decision = decision
        remediation_status: dict[str, Any] = {}
        action_text = ""
        todo = decision.complete or decision.apply
        if todo is not None:
            if decision.apply is not None:
                record = hist.with_intent(record, todo)  # intent first, so a restart completes it
                await self.api.set_history(ns, name, hist.dumps(record))
            gen_after = await self.api.apply(ns, name, todo)
            record = hist.with_intent(record, replace(todo, done=True, generation_after=gen_after))
            await self.api.set_history(ns, name, hist.dumps(record))
            reason = f"Remediation{todo.action.value}"
            await self.api.event(job, reason=reason, message=todo.reason, warning=True, now=now)
            self.metrics.remediations.labels(name, ns, todo.action.value, mode.value).inc()
            outcome.applied.append(todo.action.value)
            action_text = todo.action.value
            remediation_status = {
                "lastActionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "lastAction": todo.action.value,
                "lastReason": todo.reason[:1024],
            }
        else:
            if decision.recommend is not None and decision.recommend.id not in record.recommended:
                rec = decision.recommend
                await self.api.event(
                    job,
                    reason=f"RemediationRecommended{rec.action.value}",
                    message=f"would {rec.action.value} in Auto mode: {rec.reason}",
                    warning=True,
                    now=now,
                )
                self.metrics.remediations.labels(name, ns, rec.action.value, mode.value).inc()
                record = hist.with_recommended(record, rec.id)
                action_text = f"recommend {rec.action.value}"
            new_text = hist.dumps(record)
            if new_text != (meta.get("annotations") or {}).get(hist.ANNOTATION):
                await self.api.set_history(ns, name, new_text)
        await self._report_anomalies(
            job=job,
            status=status,
            assessments=assessments,
            action=action_text,
            remediation=remediation_status,
            now=now,
            outcome=outcome,
        )
        await self._write_condition(
            job=job,
            status=status,
            cstatus=decision.condition_status,
            reason=decision.reason,
            message=decision.message,
            now=now,
        )
        return outcome

    async def _report_anomalies(
        self,
        *,
        job: Mapping[str, Any],
        status: Mapping[str, Any],
        assessments: Mapping[str, Assessment],
        action: str,
        remediation: Mapping[str, Any],
        now: datetime,
        outcome: Outcome,
    ) -> None:
        meta = job["metadata"]
        existing = list(status.get("anomalies") or [])
        seen = {(a.get("metric"), a.get("time")) for a in existing}
        items = []
        for a in assessments.values():
            if a.severity is None or a.since is None:
                continue
            item = as_status_item(a, a.since, action)
            items.append(item)
            if (item["metric"], item["time"]) not in seen:
                outcome.new_anomalies.append(a.series)
                self.metrics.anomalies.labels(meta["name"], meta["namespace"], a.series, a.severity.value).inc()
                await self.api.event(
                    job,
                    reason="AnomalyDetected",
                    message=a.message,
                    warning=a.severity is not Severity.INFO,
                    now=now,
                )
        patch: dict[str, Any] = {}
        if items:
            patch["anomalies"] = append_bounded(existing, items, MAX_ANOMALIES)
        if remediation:
            patch["remediation"] = dict(remediation)
        if patch:
            await self.api.patch_status(meta["namespace"], meta["name"], patch)

    async def _write_condition(
        self,
        *,
        job: Mapping[str, Any],
        status: Mapping[str, Any],
        cstatus: str,
        reason: str,
        message: str,
        now: datetime,
    ) -> None:
        meta = job["metadata"]
        conditions = list(status.get("conditions") or [])
        old = next((c for c in conditions if c.get("type") == CONDITION_TYPE), None)
        if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (
            cstatus,
            reason,
            message,
        ):
            return
        new = {
            "type": CONDITION_TYPE,
            "status": cstatus,
            "reason": reason,
            "message": message[:32768],
            "observedGeneration": int(meta.get("generation", 0)),
        }
        try:
            await self.api.patch_status(
                meta["namespace"],
                meta["name"],
                {"conditions": set_condition(conditions, new, now)},  # type: ignore[arg-type]
            )
        except Exception as exc:  # the CRD may not list the condition type yet: say so, keep going
            log.warning(
                "could not write the %s condition on %s/%s: %s",
                CONDITION_TYPE,
                meta["namespace"],
                meta["name"],
                exc,
            )
