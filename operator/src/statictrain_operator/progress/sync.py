"""The progress part's pass: status.progress and status.compile of every running job from Prometheus.

The pure part (queries, figures -> status) is statictrain_operator.progress; this
module runs the queries (in a thread: the reader is synchronous) and writes
what changed with the part's own field manager (writer.PROGRESS). Only the
series of each job's worker pods, listed from the API server each pass, count
(statictrain_operator.workerpods says why); others that claim a job are logged
once and ignored. Each pass also checks how the listed pods' sidecars were scraped
(workerpods.ScrapeCheck: a warning once per kind of wrong scrape config, and
statictrain_scrape_tenancy_pods). Progress no longer depends on the cost part:
switching cost off keeps step, ETA and the Compiling phase.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

import prometheus_client
from statictrain import labels, metrics

from statictrain_operator import progress, workerpods, writer
from statictrain_operator.kube import port
from statictrain_operator.prom import PrometheusQueryError, PrometheusUnavailableError, PromReader

__all__ = ["SCRAPE_TENANCY_PODS", "ProgressSync"]

log = logging.getLogger(__name__)

SCRAPE_TENANCY_PODS = prometheus_client.Gauge(
    metrics.SCRAPE_TENANCY_PODS,
    "Worker pods of the watched jobs by where their sidecar series' pod_uid came from in the last progress pass: "
    "from_discovery (Prometheus), from_exporter (the sidecar's own, kept: any exporter can speak for a job), "
    "missing (none: the job's series are not seen)",
    ["verdict"],
)


class ProgressSync:
    """Reads the workers' training figures and writes what changed into each job's status."""

    def __init__(
        self,
        kube: port.Kube,
        prom: PromReader,
        rate_window_s: float,
        jobs: Callable[[], list[dict[str, Any]]],
        clock: Callable[[], datetime],
    ) -> None:
        self.kube, self.prom, self.jobs, self.clock = kube, prom, jobs, clock
        self.writer = writer.StatusWriter(kube, writer.PROGRESS)
        self.queries = progress.queries(rate_window_s)
        self.ignored = workerpods.Ignored("progress")
        self.scrape = workerpods.ScrapeCheck("progress")

    def pod_figures(self, at: float) -> dict[str, dict[progress.SeriesKey, float]]:
        out: dict[str, dict[progress.SeriesKey, float]] = {}
        for name, query in self.queries.items():
            out[name] = {
                (s.labels.get("namespace", ""), s.labels.get("job_name", ""), s.labels.get(workerpods.POD_UID, "")): (
                    s.samples[-1].v
                )
                for s in self.prom.query(query, at)
                if s.samples
            }
        return out

    def figures(
        self, at: float, uids: dict[progress.JobKey, frozenset[str]], keys: set[progress.JobKey]
    ) -> progress.Figures:
        """The jobs' figures from their own pods' series; strangers claiming one of ``keys`` are logged once."""
        figures, strangers = progress.job_figures(self.pod_figures(at), uids)
        for key, claimed in strangers.items():
            if key in keys:
                self.ignored.note(key, claimed, uids.get(key, frozenset()))
        return figures

    def settings(
        self, at: float, uids: dict[progress.JobKey, frozenset[str]]
    ) -> dict[progress.JobKey, progress.Settings]:
        """What each job's own pods run with (compile mode@batch+levers, and who chose it)."""
        pods = {
            (s.labels.get("namespace", ""), s.labels.get("job_name", ""), s.labels.get(workerpods.POD_UID, "")): (
                s.labels.get("settings", ""),
                s.labels.get("chosen_by", ""),
            )
            for s in self.prom.query(progress.SETTINGS_QUERY, at)
            if s.samples
        }
        return progress.job_settings(pods, uids)

    def check_scrape(self, at: float, uids: dict[progress.JobKey, frozenset[str]], keys: set[progress.JobKey]) -> None:
        """How the jobs' listed pods' sidecars were scraped: warn once per kind of problem, set the gauge.

        Prometheus trouble skips the check this pass (the figures' own queries report it)."""
        try:
            series = [s.labels for s in self.prom.query(workerpods.SCRAPE_CHECK_QUERY, at)]
        except (PrometheusUnavailableError, PrometheusQueryError):
            return
        verdicts = {key: workerpods.scrape_verdicts(series, uids[key]) for key in keys if key in uids}
        for verdict, pods in self.scrape.note(verdicts).items():
            SCRAPE_TENANCY_PODS.labels(verdict=verdict).set(pods)

    async def run_once(self) -> int:
        """Write every job whose progress or compile figures changed; returns how many were written."""
        now = self.clock()
        jobs = self.jobs()
        self.writer.retain(j["metadata"].get("uid", "") for j in jobs)
        if not jobs:
            return 0
        keys = {(j["metadata"].get("namespace", ""), j["metadata"].get("name", "")) for j in jobs}
        # per namespace of the jobs: a Role per watched namespace is enough (no cluster-wide pod list)
        listed = await asyncio.gather(
            *(self.kube.list(port.PODS, ns, label_selector=labels.JOB) for ns in sorted({k[0] for k in keys}))
        )
        uids = workerpods.worker_uids(pod for pods in listed for pod in pods)
        figures = await asyncio.to_thread(self.figures, now.timestamp(), uids, keys)
        settings = await asyncio.to_thread(self.settings, now.timestamp(), uids)
        await asyncio.to_thread(self.check_scrape, now.timestamp(), uids, keys)
        written = 0
        for job in jobs:
            patch = progress.status_patch(job, figures, now, settings)
            if patch is not None and await self.writer.write(job, patch, now=now):
                written += 1
        return written
