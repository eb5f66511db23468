"""status.progress and status.compile of every job, refreshed from Prometheus once per accounting run.

The pure part (queries, figures -> status) is statictrain_operator.progress; this
module only runs the queries and writes the patches. It runs just before the
accounting pass, which then projects cost from the fresh progress.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

from statictrain_operator import progress
from statictrain_operator.cost.prom import PromReader

log = logging.getLogger(__name__)


class JobStatusApi(Protocol):
    def list_jobs(self) -> list[dict[str, Any]]: ...

    def patch_job_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> bool: ...


class ProgressSync:
    """Reads the workers' training figures and writes what changed into each job's status."""

    def __init__(
        self, kube: JobStatusApi, prom: PromReader, rate_window_s: float, clock: Callable[[], datetime]
    ) -> None:
        self.kube, self.prom, self.clock = kube, prom, clock
        self.queries = progress.queries(rate_window_s)

    def figures(self, at: float) -> dict[str, dict[progress.JobKey, float]]:
        out: dict[str, dict[progress.JobKey, float]] = {}
        for name, query in self.queries.items():
            out[name] = {
                (s.labels.get("namespace", ""), s.labels.get("job_name", "")): s.samples[-1].v
                for s in self.prom.query(query, at)
                if s.samples
            }
        return out

    def run_once(self) -> int:
        """Patch every job whose progress or compile figures changed; returns how many were patched."""
        now = self.clock()
        jobs = self.kube.list_jobs()
        if not jobs:
            return 0
        figures = self.figures(now.timestamp())
        patched = 0
        for job in jobs:
            patch = progress.status_patch(job, figures, now)
            if patch is None:
                continue
            meta = job.get("metadata") or {}
            if self.kube.patch_job_status(meta.get("namespace", ""), meta.get("name", ""), patch):
                patched += 1
        return patched
