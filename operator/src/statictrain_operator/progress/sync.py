"""The progress part's pass: status.progress and status.compile of every running job from Prometheus.

The pure part (queries, figures -> status) is statictrain_operator.progress; this
module runs the queries (in a thread: the reader is synchronous) and writes
what changed with the part's own field manager (writer.PROGRESS). Progress no
longer depends on the cost part: switching cost off keeps step, ETA and the
Compiling phase.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from statictrain_operator import progress, writer
from statictrain_operator.kube.port import Kube
from statictrain_operator.prom import PromReader

__all__ = ["ProgressSync"]

log = logging.getLogger(__name__)


class ProgressSync:
    """Reads the workers' training figures and writes what changed into each job's status."""

    def __init__(
        self,
        kube: Kube,
        prom: PromReader,
        rate_window_s: float,
        jobs: Callable[[], list[dict[str, Any]]],
        clock: Callable[[], datetime],
    ) -> None:
        self.prom, self.jobs, self.clock = prom, jobs, clock
        self.writer = writer.StatusWriter(kube, writer.PROGRESS)
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

    async def run_once(self) -> int:
        """Write every job whose progress or compile figures changed; returns how many were written."""
        now = self.clock()
        jobs = self.jobs()
        self.writer.retain(j["metadata"].get("uid", "") for j in jobs)
        if not jobs:
            return 0
        figures = await asyncio.to_thread(self.figures, now.timestamp())
        written = 0
        for job in jobs:
            patch = progress.status_patch(job, figures, now)
            if patch is not None and await self.writer.write(job, patch, now=now):
                written += 1
        return written
