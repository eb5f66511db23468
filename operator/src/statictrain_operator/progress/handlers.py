"""kopf registration of the progress part (imported by main when ``progress`` is among the parts).

A background task (not a kopf timer: those put finalizers on every job) refreshes
status.progress and status.compile of every job kopf's index holds, every
``STATICTRAIN_PROGRESS_INTERVAL_S`` seconds; stopped on cleanup.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from statictrain_operator import loops, runtime
from statictrain_operator.progress.settings import ProgressSettings
from statictrain_operator.progress.sync import ProgressSync
from statictrain_operator.prom import HttpPrometheus

__all__ = ["progress_cleanup", "progress_startup"]

log = logging.getLogger(__name__)


async def _tick(sync: ProgressSync) -> None:
    try:
        await sync.run_once()
    except Exception:
        log.exception("progress refresh failed; retrying next interval")


@kopf.on.startup()
async def progress_startup(memo: kopf.Memo, **_: Any) -> None:
    rt = runtime.of(memo)
    s: ProgressSettings = rt.parts["progress"]
    prom = HttpPrometheus(s.prometheus_url, s.query_timeout_s)
    sync = ProgressSync(rt.kube, prom, s.rate_window_s, rt.jobs, rt.clock)
    stop = asyncio.Event()

    async def work() -> None:
        await _tick(sync)

    loops.start_periodic(memo, "progress", loops.periodic(work, s.interval_s, stop), stop)


@kopf.on.cleanup()
async def progress_cleanup(memo: kopf.Memo, **_: Any) -> None:
    await loops.stop_periodic(memo, "progress")
